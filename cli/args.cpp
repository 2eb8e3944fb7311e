#include "cli/args.h"

#include "lang/bind.h"

#include <charconv>
#include <sstream>

namespace mlk::cli {

Expected<std::map<std::string, int64_t>> parse_dims(const std::string& text) {
  auto d = parse_dim_list(text);
  if (!d.ok()) return Status::Usage("--dims: " + d.status().message());
  return *d;
}

Expected<int64_t> parse_count(const std::string& flag, const std::string& text) {
  int64_t v;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 1)
    return Status::Usage(flag + ": `" + text + "` is not a positive integer");
  return v;
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
