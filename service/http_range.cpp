#include "service/http_range.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace mlk::service {

namespace {

// A decimal number of only digits, or nothing.
bool parse_u64(const std::string& s, uint64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

ByteRange parse_range(const std::string& range, const std::string& if_range, const std::string& etag, uint64_t size) {
  ByteRange out;
  if (range.empty()) return out;
  if (!if_range.empty() && if_range != etag) return out;
  const std::string unit = "bytes=";
  if (range.compare(0, unit.size(), unit) != 0) return out;  // another unit: ignored
  std::string spec = range.substr(unit.size());
  auto refuse = [&](RangeOutcome why, std::string message) {
    out.outcome = why;
    out.message = std::move(message);
    return out;
  };
  if (spec.find(',') != std::string::npos)
    return refuse(RangeOutcome::kMultiple,
                  "several ranges in one request are not served (docs/api.md, \"Limits\"); ask for one range, "
                  "or for the whole body");
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return out;  // malformed: ignored, as RFC 9110 allows
  std::string first = trimmed(spec.substr(0, dash)), last = trimmed(spec.substr(dash + 1));
  uint64_t start = 0, end = 0;
  if (first.empty()) {  // bytes=-N: the last N bytes
    uint64_t n = 0;
    if (!parse_u64(last, n)) return out;
    if (n == 0 || size == 0)
      return refuse(RangeOutcome::kUnsatisfiable, "the range asks for none of the body's " + std::to_string(size) + " bytes");
    start = size - std::min(n, size);
    end = size - 1;
  } else {
    uint64_t l = 0;
    if (!parse_u64(first, start)) return out;
    if (!last.empty() && (!parse_u64(last, l) || l < start)) return out;
    if (start >= size)
      return refuse(RangeOutcome::kUnsatisfiable, "the range starts at byte " + std::to_string(start) +
                                                      ", past the body's " + std::to_string(size) + " bytes");
    end = last.empty() ? size - 1 : std::min(l, size - 1);
  }
  out.outcome = RangeOutcome::kPartial;
  out.start = start;
  out.end = end;
  return out;
}

RangeOutcome answer_range(const ByteRange& range, uint64_t size, std::string part, ApiResponse& r) {
  if (range.outcome == RangeOutcome::kWhole) return range.outcome;
  if (range.outcome != RangeOutcome::kPartial) {
    r = error_response(416, range.message);
    r.headers.push_back({"Content-Range", "bytes */" + std::to_string(size)});
    return range.outcome;
  }
  r.headers.push_back({"Content-Range", "bytes " + std::to_string(range.start) + "-" + std::to_string(range.end) + "/" +
                                            std::to_string(size)});
  r.body = std::move(part);
  r.status = 206;
  return range.outcome;
}

RangeOutcome apply_range(const std::string& range, const std::string& if_range, ApiResponse& r) {
  if (range.empty() || r.status != 200) return RangeOutcome::kWhole;
  std::string etag;
  for (const auto& [k, v] : r.headers)
    if (k == "ETag") etag = v;
  if (!if_range.empty() && etag.empty()) return RangeOutcome::kWhole;
  ByteRange b = parse_range(range, if_range, etag, r.body.size());
  std::string part = b.outcome == RangeOutcome::kPartial ? r.body.substr(b.start, b.end - b.start + 1) : "";
  return answer_range(b, r.body.size(), std::move(part), r);
}

}  // namespace mlk::service
