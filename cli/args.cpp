#include "cli/args.h"

#include "lang/bind.h"

#include <charconv>
#include <limits>
#include <sstream>

namespace mlk::cli {

Expected<std::map<std::string, int64_t>> parse_dims(const std::string& text) {
  auto d = parse_dim_list(text);
  if (!d.ok()) return Status::Usage("--dims: " + d.status().message());
  return *d;
}

Expected<int64_t> parse_int_flag(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  const std::string what = min == 1 ? "a positive integer" : "a whole number >= " + std::to_string(min);
  const std::string too_large = flag + ": `" + text + "` is too large (at most " + std::to_string(max) + ")";
  bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) return Status::Usage(flag + ": `" + text + "` is not " + what);
  int64_t v;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return Status::Usage(too_large);
  if (ec != std::errc() || p != text.data() + text.size() || v < min)
    return Status::Usage(flag + ": `" + text + "` is not " + what);
  if (v > max) return Status::Usage(too_large);
  return v;
}

Expected<int64_t> parse_count(const std::string& flag, const std::string& text) {
  return parse_int_flag(flag, text, 1, std::numeric_limits<int>::max());
}

const std::string& ArgReader::peek() { return args_[i_]; }

std::string ArgReader::next() {
  std::string a = args_[i_++];
  inline_value_.reset();
  if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      inline_value_ = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
  }
  last_flag_ = a;
  return a;
}

Expected<std::string> ArgReader::value() {
  if (inline_value_) return *inline_value_;
  if (done()) return Status::Usage(last_flag_ + " needs a value");
  return args_[i_++];
}

}  // namespace mlk::cli
