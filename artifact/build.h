// `mlk build`: a (function, profile, schedule) turned into an artifact
// directory: a shared library with a stable C ABI entry, its header, the PTX
// for CUDA profiles, and manifest.json. See docs/artifacts.md.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/ir.h"
#include "base/status.h"
#include "scheduler/compile.h"
#include "scheduler/schedule.h"
#include "targets/profile.h"

namespace mlk {

struct BuildRequest {
  const ir::Module* module = nullptr;
  std::string fn;
  std::string source_path;         // recorded in the manifest
  Profile profile;                 // resolved (host made concrete)
  DimEnv dims;                     // shape estimates the schedule was made for
  std::optional<Schedule> schedule;  // default: the rules' default schedule
  std::string out_dir;
  // A JSON object describing how the schedule was verified (`mlk tune`:
  // autotune/tuner.h, TuneResult::verification_json), written to the
  // manifest as "verification"; empty: no such key.
  std::string verification_json = {};
  // `--dump-after`: the compile driver's dump (scheduler/compile.h) of that
  // stage goes to `dump`; the build goes on.
  DumpStage dump_after = DumpStage::kNone;
  std::function<void(const std::string&)> dump = {};
  // Products read weights packed (docs/artifacts.md, "Packed weights"); the
  // runtime asks for it for a model's kernels.
  bool pack_weights = false;
};

struct BuildResult {
  std::string dir;
  std::string library;             // path of lib<fn>.so
  std::string manifest_json;
  Schedule schedule;
  std::vector<std::string> files;  // relative to dir
  std::string ptxas_status;        // "assembled for sm_90", "skipped: ...", or "" for CPU
};

Expected<BuildResult> build_artifact(const BuildRequest& req);

// The C ABI header every artifact ships (also written as mlk_abi.h).
const char* abi_header_text();
// targets/scratch_cache.h, which every artifact's C wrapper embeds.
const char* scratch_cache_text();
// targets/omp_par_for.h, which every CPU artifact's C wrapper embeds.
const char* omp_par_for_text();

}  // namespace mlk
