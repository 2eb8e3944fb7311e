// Printing `--dump-after` dumps; dumps for artifacts from the cache.
#include "cli/dump_after.h"

#include <nlohmann/json.hpp>
#include "base/json.h"

namespace mlk::cli {

FlagSetter store_dump_stage(DumpStage& out) {
  return [&out](const std::string&, const std::string& value) -> Status {
    auto d = parse_dump_stage(value);
    if (!d.ok()) return d.status();
    out = *d;
    return Status::Ok();
  };
}

std::function<void(const std::string&)> dump_to(std::FILE* out) {
  return [out](const std::string& text) {
    std::fputs(text.c_str(), out);
    std::fflush(out);
  };
}

Status dump_stored(const DumpRequest& r, const std::map<std::string, std::string>& files) {
  if (r.stage == DumpStage::kNone) return Status::Ok();
  auto it = files.find("manifest.json");
  if (it == files.end()) return Status::Corruption("the stored artifact of `" + r.fn + "` has no manifest.json");
  nlohmann::json manifest = parse_json(it->second);
  if (!manifest.is_object() || !manifest.contains("schedule"))
    return Status::Corruption("the manifest of the stored artifact of `" + r.fn + "` has no schedule");
  auto schedule = Schedule::from_json(manifest["schedule"].dump());
  if (!schedule.ok())
    return Status::Corruption("the schedule of the stored artifact of `" + r.fn + "`: " + schedule.status().message());
  return dump_for_schedule(r, *schedule);
}

Status dump_for_schedule(const DumpRequest& r, const Schedule& schedule) {
  if (r.stage == DumpStage::kNone) return Status::Ok();
  CompileRequest req;
  req.module = r.module;
  req.fn = r.fn;
  req.profile = r.profile;
  req.schedule = &schedule;
  req.dims = r.dims;
  req.dump_after = r.stage;
  req.dump = dump_to(r.out);
  return compile_until_codegen(req).status();
}

}  // namespace mlk::cli
