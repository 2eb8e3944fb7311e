#include "service/ccache_layout.h"

namespace mlk::service {

namespace {

bool all_of(std::string_view s, bool (*ok)(char)) {
  for (char c : s)
    if (!ok(c)) return false;
  return true;
}

bool key_char(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); }
bool hex_char(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

Expected<std::string> ccache_store_key(std::string_view rest) {
  auto bad = [&] {
    std::string shown(rest.substr(0, 80));
    return Status::InvalidArgument(
        "`/ccache/" + shown +
        "` is not a ccache object path; expected /ccache/XX/REST (layout=subdirs), /ccache/KEY (layout=flat) "
        "or /ccache/ac/<64 hex> (layout=bazel), where a key is 20-128 characters of [0-9a-z]");
  };
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    if (rest.size() < 20 || rest.size() > 128 || !all_of(rest, key_char)) return bad();
    return "ccache/" + std::string(rest);
  }
  std::string_view head = rest.substr(0, slash), tail = rest.substr(slash + 1);
  if (tail.find('/') != std::string_view::npos) return bad();
  // bazel's /ac/ + 64 hex; a subdirs key starting "ac" has a shorter rest.
  if (head == "ac" && tail.size() == 64 && all_of(tail, hex_char)) return "ccache/ac/" + std::string(tail);
  if (head.size() != 2 || !all_of(head, key_char) || !all_of(tail, key_char)) return bad();
  size_t total = head.size() + tail.size();
  if (total < 20 || total > 128) return bad();
  return "ccache/" + std::string(head) + std::string(tail);
}

}  // namespace mlk::service
