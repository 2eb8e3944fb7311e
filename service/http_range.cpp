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

RangeOutcome refuse(ApiResponse& r, RangeOutcome why, const std::string& message) {
  std::string size = std::to_string(r.body.size());
  r = error_response(416, message);
  r.headers.push_back({"Content-Range", "bytes */" + size});
  return why;
}

}  // namespace

RangeOutcome apply_range(const std::string& range, const std::string& if_range, ApiResponse& r) {
  if (range.empty() || r.status != 200) return RangeOutcome::kWhole;
  if (!if_range.empty()) {
    auto etag = std::find_if(r.headers.begin(), r.headers.end(), [](const auto& h) { return h.first == "ETag"; });
    if (etag == r.headers.end() || etag->second != if_range) return RangeOutcome::kWhole;
  }
  const std::string unit = "bytes=";
  if (range.compare(0, unit.size(), unit) != 0) return RangeOutcome::kWhole;  // another unit: ignored
  std::string spec = range.substr(unit.size());
  if (spec.find(',') != std::string::npos)
    return refuse(r, RangeOutcome::kMultiple,
                  "several ranges in one request are not served (docs/api.md, \"Limits\"); ask for one range, "
                  "or for the whole body");
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return RangeOutcome::kWhole;  // malformed: ignored, as RFC 9110 allows
  std::string first = trimmed(spec.substr(0, dash)), last = trimmed(spec.substr(dash + 1));
  const uint64_t size = r.body.size();
  uint64_t start = 0, end = 0;
  if (first.empty()) {  // bytes=-N: the last N bytes
    uint64_t n = 0;
    if (!parse_u64(last, n)) return RangeOutcome::kWhole;
    if (n == 0 || size == 0)
      return refuse(r, RangeOutcome::kUnsatisfiable, "the range asks for none of the body's " + std::to_string(size) + " bytes");
    start = size - std::min(n, size);
    end = size - 1;
  } else {
    uint64_t l = 0;
    if (!parse_u64(first, start)) return RangeOutcome::kWhole;
    if (!last.empty() && (!parse_u64(last, l) || l < start)) return RangeOutcome::kWhole;
    if (start >= size)
      return refuse(r, RangeOutcome::kUnsatisfiable,
                    "the range starts at byte " + std::to_string(start) + ", past the body's " + std::to_string(size) + " bytes");
    end = last.empty() ? size - 1 : std::min(l, size - 1);
  }
  r.headers.push_back({"Content-Range", "bytes " + std::to_string(start) + "-" + std::to_string(end) + "/" + std::to_string(size)});
  r.body = r.body.substr(start, end - start + 1);
  r.status = 206;
  return RangeOutcome::kPartial;
}

}  // namespace mlk::service
