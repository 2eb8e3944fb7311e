#include "base/time.h"

#include <ctime>

namespace mlk {

std::string iso_time(int64_t t) {
  if (t <= 0) return "-";
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string now_iso() { return iso_time(unix_now()); }

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace mlk
