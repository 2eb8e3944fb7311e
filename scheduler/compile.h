// The one compile driver: the back end's stages for one fn, in order, shared
// by the JIT (Kernel::CompileJit, scheduler/kernel.h) and ahead-of-time builds
// (build_artifact, artifact/build.h), with one set of error messages.
//
//   typed IR of the fn                           --dump-after=ir
//   -> Halide algorithm (lower::lower_function)
//   -> stage table (lower::stage_infos)          --dump-after=stages
//   -> schedule: the given one, else the rules' default (untuned_knobs) for the profile
//   -> applied pipeline (apply_schedule, or an autoscheduler)
//                                                --dump-after=schedule, loops
//   -> JIT-compiled pipeline (compile_jit), or object file, Halide header and,
//      for CUDA profiles, PTX (compile_object)
//
// Halide-free: Halide appears only in compile.cpp (and, for the JIT's result,
// scheduler/jit_pipeline.h, internal to scheduler/).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "scheduler/schedule.h"
#include "targets/profile.h"

namespace mlk {

// Where `--dump-after=STAGE` stops to print (see docs/schedules.md, "Looking
// inside a build").
enum class DumpStage {
  kNone,
  kIr,        // the canonical typed IR of the fn and of the fns it calls
  kStages,    // the stage table: names, kinds, pure and reduction vars, extents
  kSchedule,  // the applied schedule, as the JSON `--schedule FILE` reads
  kLoops,     // Halide's loop nest of the scheduled pipeline
};

// "ir", "stages", "schedule" or "loops"; anything else is a usage error that
// lists them.
Expected<DumpStage> parse_dump_stage(const std::string& name);
const char* dump_stage_name(DumpStage s);
// "ir, stages, schedule, loops": for usage texts and errors.
const char* dump_stage_list();

struct CompileRequest {
  const ir::Module* module = nullptr;  // must outlive the call
  std::string fn;
  // Its rules make the default schedule; a CUDA profile schedules for the GPU.
  Profile profile;
  // "host" or a Halide target string; empty: the profile's halide_target.
  std::string halide_target;
  // Null: the rules' default (untuned_knobs) for `profile`, or, where Halide
  // refuses that, the naive schedule (default_knobs), with a warning: the
  // default always compiles; the result's schedule says which.
  const Schedule* schedule = nullptr;
  DimEnv dims;                         // shape estimates: stage extents, autoscheduler
  // Products read weights packed (lower::LowerOptions::pack_weights).
  bool pack_weights = false;
  // When the stage `dump_after` is reached, `dump` is called once with its
  // text; the stages then go on. A later failure still returns an error.
  DumpStage dump_after = DumpStage::kNone;
  std::function<void(const std::string&)> dump;
};

// Runs the stages up to code generation (delivering the requested dump) and
// returns the applied schedule. For dumps of a build made elsewhere, e.g. a
// tuned artifact from the cache, whose schedule is given.
Expected<Schedule> compile_until_codegen(const CompileRequest& req);

// The JIT's result: the applied, JIT-compiled pipeline (scheduler/jit_pipeline.h).
struct JitPipeline;
struct JitPipelineDeleter {
  void operator()(JitPipeline* p) const;
};
using JitPipelinePtr = std::unique_ptr<JitPipeline, JitPipelineDeleter>;

// Every stage, then Halide's JIT. CPU only: a CUDA profile or target is
// Unsupported; so is `pack_weights` (nothing in memory fills the packs).
Expected<JitPipelinePtr> compile_jit(const CompileRequest& req);

// What compile_object wrote.
struct CompiledObject {
  Schedule schedule;                       // as applied
  std::string halide_target;               // Halide's full spelling of the target
  std::string inner_entry;                 // the Halide entry point: mlk_halide_<fn>
  // Dimensions no input binds, sorted by name: the inner entry's int32
  // arguments after the inputs, before the output buffer.
  std::vector<std::string> unbound_dims;
  std::vector<std::string> files;          // written, relative to the directory
  std::string ptx;                         // CUDA profiles: the PTX text (also <fn>.ptx)
  // sha256 of the unscheduled algorithm's canonical text (scheduler/algorithm.h),
  // taken before the schedule was applied.
  std::string algorithm_hash;
  // Its code runs in AMX tiles (an `amx_tiles` directive): a process must
  // ask Linux for their state before calling it (targets/amx.h).
  bool amx_tiles = false;
  // Weights the products read packed (docs/artifacts.md, "Packed weights"):
  // the inner entry takes one BF16 buffer of pairs per pack, after the
  // inputs, which `entry` (in <fn>_pack<k>.o: every input, the unbound
  // dims, the pairs) fills from parameter `param`; of the shape
  // scheduler/packed.h's packed_shape gives for the product's K and N.
  struct PackEntry {
    int param = 0;
    Dim k, n;
    int k_quantum = 2, n_quantum = 1;
    std::string entry;
  };
  std::vector<PackEntry> packs;
};

// Whether a schedule puts a product in AMX tiles.
bool uses_amx_tiles(const Schedule& s);

// Every stage, then Halide's ahead-of-time compiler: writes <fn>.o (with the
// Halide runtime), <fn>_halide.h and, for CUDA profiles, <fn>.ptx into `dir`,
// which is created if missing (only once the schedule has been applied).
Expected<CompiledObject> compile_object(const CompileRequest& req, const std::string& dir);

}  // namespace mlk
