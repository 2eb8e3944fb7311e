// Numbers as people type them on a command line, read strictly.
#pragma once

#include <optional>
#include <string_view>

namespace mlk {

// `text` as a plain decimal: at least one digit, at most `max_points` points
// (0: a whole number), at most 32 characters; no sign, exponent, inf, nan or
// hex. nullopt for anything else.
std::optional<double> parse_plain_decimal(std::string_view text, int max_points);

}  // namespace mlk
