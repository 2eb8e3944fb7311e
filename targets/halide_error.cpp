#include "targets/halide_error.h"

namespace mlk {

namespace {
const char* const kTag = "Requirement Failed: (false) ";
}

bool is_requirement_failure(const std::string& msg) { return msg.find(kTag) != std::string::npos; }

std::string clean_runtime_error(std::string msg) {
  const std::string tag = kTag;
  size_t p = msg.find(tag);
  if (p != std::string::npos) {
    msg = msg.substr(p + tag.size());
    msg = msg.substr(msg.find(' ') + 1);  // drop VALUE
  }
  for (size_t q; (q = msg.find(" )")) != std::string::npos;) msg.erase(q, 1);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

}  // namespace mlk
