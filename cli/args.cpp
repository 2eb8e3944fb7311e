#include "cli/args.h"

#include "lang/bind.h"

namespace mlk::cli {

Expected<std::map<std::string, int64_t>> parse_dims(const std::string& text) {
  auto d = parse_dim_list(text);
  if (!d.ok()) return Status::Usage("--dims: " + d.status().message());
  return *d;
}

FlagSetter store_dims(std::map<std::string, int64_t>& out) {
  return [&out](const std::string&, const std::string& value) -> Status {
    auto d = parse_dims(value);
    if (!d.ok()) return d.status();
    out = *d;
    return Status::Ok();
  };
}

}  // namespace mlk::cli
