#include "base/escape.h"

namespace mlk {

std::string markup_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

bool has_control_char(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if (ch < 0x20 || ch == 0x7f) return true;
    if (ch == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9f)
      return true;
  }
  return false;
}

std::string ascii_printable(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    const auto ch = static_cast<unsigned char>(c);
    if (ch < 0x20 || ch >= 0x7f) c = '?';
  }
  return out;
}

}  // namespace mlk
