#include "base/decimal.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace mlk {

std::optional<double> parse_plain_decimal(std::string_view text, int max_points) {
  const auto digits = std::count_if(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const auto points = std::count(text.begin(), text.end(), '.');
  if (digits == 0 || digits + points != static_cast<std::ptrdiff_t>(text.size()) || points > max_points ||
      text.size() > 32)
    return std::nullopt;
  return std::strtod(std::string(text).c_str(), nullptr);
}

}  // namespace mlk
