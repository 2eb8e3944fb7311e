#include "cache/sizes.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>

namespace mlk::cache {

std::string human_bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%" PRId64 " B", n);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

Expected<int64_t> parse_size(const std::string& text) {
  auto bad = [&] {
    return Status::Usage("--max-size: `" + text + "` is not a size; give bytes or a whole number with K, M or G, e.g. 512M");
  };
  size_t i = 0;
  int64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (v > (INT64_MAX - 9) / 10) return bad();
    v = v * 10 + (text[i++] - '0');
  }
  if (i == 0) return bad();
  std::string unit = text.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!unit.empty()) {
    if (unit[0] == 'K') shift = 10;
    else if (unit[0] == 'M') shift = 20;
    else if (unit[0] == 'G') shift = 30;
    else if (unit != "B") return bad();
    std::string rest = shift ? unit.substr(1) : "";
    if (!rest.empty() && rest != "B" && rest != "IB") return bad();
  }
  if (shift && v > (INT64_MAX >> shift)) return bad();
  return v << shift;
}

}  // namespace mlk::cache
