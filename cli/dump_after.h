// `--dump-after=STAGE` of `mlk run`, `mlk build` and `mlk tune`: where a
// dump is printed, and the dump for an artifact the command did not compile
// itself (one from the cache), made by the compile driver from its schedule.
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "base/status.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "scheduler/compile.h"
#include "targets/profile.h"

namespace mlk::cli {

// A dump sink printing each dump to `out` as it comes.
std::function<void(const std::string&)> dump_to(std::FILE* out);

// Prints the `stage` dump of `fn` compiled for `p` at `dims` with the schedule
// of a stored artifact, given by its files (the manifest's "schedule"). Runs
// the stages up to code generation only.
Status dump_stored(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims,
                   const std::map<std::string, std::string>& files, DumpStage stage, std::FILE* out);

// The same for a given schedule (`mlk tune`: the winner's).
Status dump_for_schedule(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims,
                         const Schedule& schedule, DumpStage stage, std::FILE* out);

}  // namespace mlk::cli
