#include "bench/suite.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "lang/bind.h"

namespace mlk::bench {

namespace fs = std::filesystem;
using nlohmann::json;

Expected<std::vector<KernelSpec>> read_suite(const std::string& path, const std::string& default_target) {
  auto text = read_file(path);  // "cannot read PATH: No such file or directory", "... Permission denied"
  if (!text.ok()) return text.status();
  json j;
  try {
    j = json::parse(*text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("kernels") || !j["kernels"].is_array() || j["kernels"].empty())
    return Status::InvalidArgument(path + ": expected an object with a non-empty array \"kernels\" (see `mlk bench --help`)");
  for (const auto& [k, v] : j.items())
    if (k != "kernels" && k != "comment")
      return Status::InvalidArgument(path + ": unknown field `" + k + "` (fields: kernels, comment)");
  const fs::path dir = fs::path(path).parent_path();
  std::vector<KernelSpec> out;
  for (size_t i = 0; i < j["kernels"].size(); ++i) {
    const json& kj = j["kernels"][i];
    KernelSpec s;
    s.where = path + ": kernels[" + std::to_string(i) + "]";
    auto bad = [&](const std::string& what) { return Status::InvalidArgument(s.where + ": " + what); };
    if (!kj.is_object()) return bad("expected an object");
    for (const auto& [k, v] : kj.items()) {
      if (k == "name" || k == "file" || k == "fn" || k == "target") {
        if (!v.is_string() || v.get<std::string>().empty()) return bad("`" + k + "` must be a non-empty string");
        std::string val = v.get<std::string>();
        if (k == "name") s.name = val;
        if (k == "file") s.file = fs::path(val).is_absolute() || dir.empty() ? val : (dir / val).lexically_normal().string();
        if (k == "fn") s.fn = val;
        if (k == "target") s.target = val;
      } else if (k == "dims") {
        if (v.is_string()) {
          auto d = parse_dim_list(v.get<std::string>());
          if (!d.ok()) return bad("dims: " + d.status().message());
          s.dims = *d;
        } else if (v.is_object()) {
          for (const auto& [d, n] : v.items()) {
            if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxExtent)
              return bad("dims: `" + d + "` needs a positive integer value, found " + n.dump());
            s.dims[d] = n.get<int64_t>();
          }
        } else {
          return bad("`dims` must be an object {\"M\": 1024, ...} or a string \"M=1024,...\"");
        }
      } else if (k != "comment") {
        return bad("unknown field `" + k + "` (fields: name, file, fn, dims, target, comment)");
      }
    }
    if (s.file.empty()) return bad("missing field `file`");
    if (s.fn.empty()) return bad("missing field `fn`");
    if (s.target.empty()) s.target = default_target;
    if (s.target.empty()) return bad("no `target`, and no --target on the command line");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace mlk::bench
