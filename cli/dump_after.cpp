// Printing `--dump-after` dumps; dumps for artifacts from the cache.
#include "cli/dump_after.h"

#include <nlohmann/json.hpp>

namespace mlk::cli {

std::function<void(const std::string&)> dump_to(std::FILE* out) {
  return [out](const std::string& text) {
    std::fputs(text.c_str(), out);
    std::fflush(out);
  };
}

Status dump_stored(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims,
                   const std::map<std::string, std::string>& files, DumpStage stage, std::FILE* out) {
  if (stage == DumpStage::kNone) return Status::Ok();
  auto it = files.find("manifest.json");
  if (it == files.end()) return Status::Corruption("the stored artifact of `" + fn + "` has no manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(it->second, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("schedule"))
    return Status::Corruption("the manifest of the stored artifact of `" + fn + "` has no schedule");
  auto schedule = Schedule::from_json(manifest["schedule"].dump());
  if (!schedule.ok())
    return Status::Corruption("the schedule of the stored artifact of `" + fn + "`: " + schedule.status().message());
  return dump_for_schedule(m, fn, p, dims, *schedule, stage, out);
}

Status dump_for_schedule(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims,
                         const Schedule& schedule, DumpStage stage, std::FILE* out) {
  if (stage == DumpStage::kNone) return Status::Ok();
  CompileRequest req;
  req.module = &m;
  req.fn = fn;
  req.profile = p;
  req.schedule = &schedule;
  req.dims = dims;
  req.dump_after = stage;
  req.dump = dump_to(out);
  return compile_until_codegen(req).status();
}

}  // namespace mlk::cli
