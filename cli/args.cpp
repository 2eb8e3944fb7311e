#include "cli/args.h"

#include <charconv>
#include <sstream>

namespace mlk::cli {

Expected<std::map<std::string, int64_t>> parse_dims(const std::string& text) {
  std::map<std::string, int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::Usage("--dims: `" + item + "` is not NAME=VALUE");
    std::string name = item.substr(0, eq), val = item.substr(eq + 1);
    int64_t v;
    auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (ec != std::errc() || p != val.data() + val.size() || v < 1)
      return Status::Usage("--dims: `" + item + "` needs a positive integer value");
    if (out.count(name)) return Status::Usage("--dims: `" + name + "` is given twice");
    out[name] = v;
  }
  if (out.empty()) return Status::Usage("--dims: expected NAME=VALUE[,NAME=VALUE...]");
  return out;
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
