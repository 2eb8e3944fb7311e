// Small helpers shared by the mlk commands for parsing their flags.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace mlk::cli {

// "B=8,S=128" -> {B: 8, S: 128}. Usage errors name the bad item.
Expected<std::map<std::string, int64_t>> parse_dims(const std::string& text);

// A whole-number flag value from `min` to `max`, e.g. --repeat 10. A usage
// error names the flag and the value: not a positive integer (or, with min 0,
// not a whole number >= 0): signs, fractions, letters, or below min; or too
// large: above max, including values beyond 64 bits.
Expected<int64_t> parse_int_flag(const std::string& flag, const std::string& text, int64_t min, int64_t max);

// A positive integer flag value up to INT_MAX (what every count, seed and
// number of seconds of the commands fits in), e.g. --trials 40.
Expected<int64_t> parse_count(const std::string& flag, const std::string& text);

// Walks argv-style flags. Flags that take a value accept `--flag VALUE` and
// `--flag=VALUE`; anything not starting with `-` is positional.
class ArgReader {
 public:
  explicit ArgReader(std::vector<std::string> args) : args_(std::move(args)) {}
  bool done() const { return i_ >= args_.size(); }
  // The next raw token (flag name without its `=VALUE` part, or a positional).
  const std::string& peek();
  std::string next();
  // The value of the flag just read by next(); a usage error when missing.
  Expected<std::string> value();

 private:
  std::vector<std::string> args_;
  size_t i_ = 0;
  std::string cur_;
  std::optional<std::string> inline_value_;
  std::string last_flag_;
};

}  // namespace mlk::cli
