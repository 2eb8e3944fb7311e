#include "cache/hit_dir.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "base/files.h"
#include "base/json.h"

namespace mlk::cache {

Status write_hit_dir(const std::map<std::string, std::string>& files, const std::string& dir) {
  for (const auto& [name, bytes] : files)
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      return Status::InvalidArgument("the cached artifact lists file `" + name +
                                     "`, which is not a plain file name; nothing was written to " + dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create " + dir + ": " + ec.message());
  for (const auto& [name, bytes] : files) {
    if (name != "manifest.json") {
      MLK_RETURN_IF_ERROR(replace_file_in_dir(dir, name, bytes));
      continue;
    }
    nlohmann::json m = parse_json(bytes);
    if (!m.is_object()) return Status::InvalidArgument("the cached artifact's manifest.json is not a JSON object");
    const bool held = m.erase("signatures") + m.erase("verify_report") > 0;
    MLK_RETURN_IF_ERROR(replace_file_in_dir(dir, name, held ? m.dump(2) + "\n" : bytes));
  }
  return Status::Ok();
}

}  // namespace mlk::cache
