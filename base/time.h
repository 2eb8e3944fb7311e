// Time as mlk prints and stores it: UTC, ISO 8601, to the second.
#pragma once

#include <cstdint>
#include <string>

namespace mlk {

// "2026-12-01T09:42:45Z" for unix seconds `t`; "-" for t <= 0 (never set).
std::string iso_time(int64_t t);
// iso_time of now.
std::string now_iso();
// Unix seconds now.
int64_t unix_now();

}  // namespace mlk
