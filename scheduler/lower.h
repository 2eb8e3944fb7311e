// Internal to scheduler/: the typed IR of one function lowered to a Halide
// algorithm (Funcs with no schedule), plus the stages a schedule can refer to.
//
// This header includes Halide.h; only scheduler/ and targets/ emitters may
// include it. Everyone else goes through scheduler/kernel.h.
#pragma once

#include <Halide.h>

#include <map>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/ir.h"
#include "base/status.h"
#include "scheduler/schedule.h"

namespace mlk::lower {

// Halide's dimension 0 is the innermost; .tl axis i of a rank-r tensor is
// Halide dimension r - 1 - i throughout mlk.
inline int halide_dim(int rank, int axis) { return rank - 1 - axis; }

// Storage type of a dtype in Halide buffers (Bool is one byte, 0 or 1).
Halide::Type storage_type(DType t);

// A stage a schedule may address. Names are stable for a given function:
// "matmul0", "reduction1", "softmax_max0", ..., "output" (and "output1", ..
// for a fn with several results), and "load_<param>" for the loads of each
// input. Stages shared by several results are computed once.
struct Stage {
  using Kind = StageInfo::Kind;
  std::string name;
  Kind kind;
  Halide::Func func;
  std::vector<Halide::Var> vars;      // pure vars, Halide order (innermost first)
  std::vector<Halide::RVar> rvars;    // reduction vars of its update, if any
  bool reduces_innermost = false;     // its reduction runs along the input's innermost axis
  Shape shape;                        // pure extents, .tl order
  Shape rshape;                       // reduction extents
  std::vector<std::string> direct_inputs;  // input stages it reads directly
  std::vector<std::string> operands;       // a matmul: the stages it reads as a and b
  std::vector<Halide::Expr> extents;       // Halide order; the output (its buffer's) and matmuls only
  bool pairs = false;                      // StageInfo::pairs
  bool pair_copy = false;                  // StageInfo::pair_copy
  bool transposed = false;                 // StageInfo::transposed
  bool amx = false;                        // StageInfo::amx
};

// What the algorithm depends on besides the fn: the Halide target's
// instructions (one algorithm per target, the same for every schedule).
struct LowerOptions {
  // Products of BF16 operands in pair form, which Halide compiles to a dot
  // product of BF16 pairs into F32 (vdpbf16ps): see Lowerer::matmul. Set
  // for AMD Zen 4 and Zen 5 targets only (options_for says why).
  bool bf16_pairs = false;
  // Products of BF16 operands by a rank-2 b (a weight) in AMX tiles
  // (tdpbf16ps): see Lowerer::matmul_amx. Set for Sapphire Rapids-class
  // targets; for `host` only where cpuid says AMX-BF16 (options_for).
  bool amx_bf16 = false;
  // A product's b that is a weight read from packed pairs (Pack): asked for
  // by the runtime for a model's kernels, whose weights it packs once; every
  // other build makes the pairs from the weight within the call.
  bool pack_weights = false;
};

// The options of code for `t` (a Halide target string; "host": this machine).
LowerOptions options_for(const std::string& halide_target);
LowerOptions options_for(const Halide::Target& t);

// One result of the fn: a storage-typed Func. Stage "output" is the first;
// a fn with several results has "output1", "output2", ... after it.
struct Output {
  Halide::Func func;
  DType dtype = DType::F32;
  int rank = 0;
};

// A weight packed once (docs/artifacts.md, "Packed weights"): a product's
// b that is a function of one parameter alone (and of dims), which the
// product reads in BF16 pairs. The algorithm reads the pairs from the input
// `packed` (BF16, dense, of scheduler/packed.h's packed_shape: [t, k2, c, 2]
// in .tl order, Halide's i, c, k2, t), and `func` computes them from the
// parameter: a pipeline of its own that an artifact runs within each call,
// or that a runtime runs once per weight bound at load.
struct Pack {
  int param = 0;                 // index of the parameter it is a function of
  Halide::ImageParam packed;     // the main pipeline's input
  Halide::Func func;             // the pairs, from the inputs (and the dims)
  Dim k, n;                      // the product's K and N, in the fn's dims
  int k_quantum = 2;             // packed_shape's
  int n_quantum = 1;             // packed_shape's
};

struct Pipeline {
  std::vector<Halide::ImageParam> inputs;           // one per parameter, in order
  std::map<std::string, Halide::Param<int32_t>> dim_params;  // dims no input binds
  std::vector<Output> outputs;                       // one per result, in order
  std::vector<Stage> stages;                         // in creation order; outputs last
  std::vector<Pack> packs;                           // weights read packed, in order
  std::vector<Halide::Func> output_funcs() const;    // for Halide::Pipeline
};

// Lowers function `fn` of `m` (callees inlined). Halide errors become Status.
Expected<Pipeline> lower_function(const ir::Module& m, const std::string& fn, const LowerOptions& o = {});

// The stages as data, with extents evaluated under `env` (0 where unknown).
std::vector<StageInfo> stage_infos(const Pipeline& p, const DimEnv& env);

// Applies a validated schedule (see schedule.h). Halide's own objections
// become InvalidArgument naming the stage and directive. A schedule that
// names an autoscheduler is applied by apply_autoscheduler() instead, once
// the Halide::Pipeline exists.
Status apply_schedule(Pipeline& p, const Schedule& s, bool gpu);

// The fixed schedule of every pack's pipeline (Pack::func): pairs of 16
// columns vectorised, blocks of 16 pair rows of each tile in parallel.
void schedule_packs(Pipeline& p);

// Runs Halide autoscheduler `name` on `hp` with shape estimates from `env`
// (every dimension must have a value).
Status apply_autoscheduler(Pipeline& p, Halide::Pipeline& hp, const std::string& name, const DimEnv& env,
                           const Halide::Target& target);

}  // namespace mlk::lower
