#include "service/dashboard_html.h"

#include "base/escape.h"

#include <cstdio>

namespace mlk {
const char* dashboard_css_text();  // service/dashboard.css, embedded by targets/embed_text.cmake
}  // namespace mlk

namespace mlk::service::dashboard {

std::string html_escape(std::string_view s) { return markup_escape(s); }

std::string url_component(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string o;
  for (unsigned char c : s) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                 c == '~' || c == '-';
    if (plain) {
      o += static_cast<char>(c);
    } else {
      o += '%';
      o += hex[c >> 4];
      o += hex[c & 15];
    }
  }
  return o;
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char b[32];
  std::snprintf(b, sizeof b, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return b;
}

std::string page(const std::string& title, const std::string& who, const std::string& body) {
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += "<title>" + html_escape(title) + " - mlk</title>\n<style>\n";
  o += dashboard_css_text();
  o += "</style>\n</head>\n<body>\n<header><a href=\"/ui\">mlk serve</a><span>dashboard</span>";
  if (!who.empty())
    o += "<span class=\"who\">" + html_escape(who) +
         "</span><form method=\"post\" action=\"/ui/logout\"><button type=\"submit\">sign out</button></form>";
  o += "</header>\n<main>\n" + body + "</main>\n</body>\n</html>\n";
  return o;
}

std::string login_body(const std::string& message, const std::string& next) {
  std::string o = "<h1>Sign in</h1>\n";
  if (!message.empty()) o += "<p class=\"error\" id=\"login-error\">" + html_escape(message) + "</p>\n";
  o += "<form class=\"login\" method=\"post\" action=\"/ui/login\">\n"
       "<label for=\"token\">Token (from <code>mlk token create</code>; kept in a cookie of this site)</label>\n"
       "<input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"off\" required>\n"
       "<input type=\"hidden\" name=\"next\" value=\"" +
       html_escape(next) +
       "\">\n"
       "<button type=\"submit\">sign in</button>\n</form>\n";
  return o;
}

}  // namespace mlk::service::dashboard
