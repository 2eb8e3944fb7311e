// `--dump-after=STAGE` of `mlk run`, `mlk build` and `mlk tune`: the flag's
// value, where a dump is printed, and the dump for an artifact the command
// did not compile itself (one from the cache), made by the compile driver
// from its schedule.
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "base/status.h"
#include "cli/flags.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "scheduler/compile.h"
#include "targets/profile.h"

namespace mlk::cli {

// The setter of --dump-after: parse_dump_stage (a usage error naming the
// stages) into `out`.
FlagSetter store_dump_stage(DumpStage& out);

// A dump sink printing each dump to `out` as it comes.
std::function<void(const std::string&)> dump_to(std::FILE* out);

// What to dump: stage `stage` of `fn` of `module` compiled for `profile` at
// `dims`, printed on `out`. Nothing when `stage` is kNone.
struct DumpRequest {
  const ir::Module* module = nullptr;  // not null
  std::string fn;
  Profile profile;
  DimEnv dims;
  DumpStage stage = DumpStage::kNone;
  std::FILE* out = stdout;
};

// The dump with the schedule of a stored artifact, given by its files (the
// manifest's "schedule"). Runs the stages up to code generation only.
Status dump_stored(const DumpRequest& r, const std::map<std::string, std::string>& files);

// The same for a given schedule (`mlk tune`: the winner's).
Status dump_for_schedule(const DumpRequest& r, const Schedule& schedule);

}  // namespace mlk::cli
