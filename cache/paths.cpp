#include "cache/paths.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace mlk::cache {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string home_dir() {
  std::string home = env("HOME");
  if (!home.empty()) return home;
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir && *pw->pw_dir) return pw->pw_dir;
  return "";
}

}  // namespace

std::string default_store_path(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (std::string v = env("MLK_CACHE"); !v.empty()) return v;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/') return xdg + "/mlk/cache.db";
  if (std::string home = home_dir(); !home.empty()) return home + "/.cache/mlk/cache.db";
  return ".mlk-cache.db";
}

}  // namespace mlk::cache
