// Range requests (RFC 9110, section 14) on an answer the Api built whole:
// one range is served (206), several in one request are refused (416). A
// multipart answer of overlapping ranges can be hundreds of times the size
// of the body (issue 28, finding 3), so the server never builds one.
#pragma once

#include <cstdint>
#include <string>

#include "service/api.h"

namespace mlk::service {

enum class RangeOutcome {
  kWhole,          // no usable Range (absent, another unit, malformed, If-Range not matching): r untouched
  kPartial,        // r is now 206 with the one range and Content-Range
  kUnsatisfiable,  // r is now 416: the range starts past the end
  kMultiple,       // r is now 416: several ranges were asked for
};

// A Range header read against a body of `size` bytes whose ETag is `etag`:
// kWhole (serve it all), kPartial with [start, end] (inclusive), or a
// refusal (kUnsatisfiable, kMultiple) with its message.
struct ByteRange {
  RangeOutcome outcome = RangeOutcome::kWhole;
  uint64_t start = 0, end = 0;
  std::string message;
};
ByteRange parse_range(const std::string& range, const std::string& if_range, const std::string& etag, uint64_t size);

// Makes `r` the answer for `range` of a body of `size` bytes whose bytes
// [start, end] are `part`: 206 with Content-Range, or 416. kWhole leaves r.
RangeOutcome answer_range(const ByteRange& range, uint64_t size, std::string part, ApiResponse& r);

// Applies `range` (the Range header, empty when absent) to `r`, the answer
// to a GET. Only a 200 answer is cut. `if_range` (the If-Range header):
// when given, the range applies only if it equals r's ETag.
RangeOutcome apply_range(const std::string& range, const std::string& if_range, ApiResponse& r);

}  // namespace mlk::service
