// The unscheduled Halide algorithm of a fn, seen from outside scheduler/
// without Halide: its canonical text and hash (what `mlk verify`'s identity
// level compares an artifact against), its buffers' types and ranks (the
// types level), and its value at a small concrete shape as symbolic terms
// (scheduler/algorithm_terms.h, the bounded-equivalence level).
//
// Contract: the text is made from the Funcs lower::lower_function builds,
// before any schedule is applied (a schedule changes evaluation order, never
// these definitions), so it is the same for every schedule of a fn, and
// stable across processes (Func, Var and RDom names are deterministic).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "lang/ir.h"

namespace mlk {

namespace lower {
struct Pipeline;
}

struct AlgorithmBuffer {
  std::string name;  // "in_x", "output"
  std::string type;  // Halide's spelling: "float32", "uint8"
  int rank = 0;
};

struct AlgorithmSummary {
  std::string text;  // every Func reachable from the outputs, by name: pure and update definitions
  std::string hash;  // sha256 hex of `text`
  std::vector<AlgorithmBuffer> inputs;  // the ImageParams, in parameter order
  AlgorithmBuffer output;                     // the first result
  std::vector<AlgorithmBuffer> more_outputs;  // a fn with several results: the others
  std::vector<std::string> dim_params;  // dimensions no input binds (sorted)
};

// Lowers `fn` of `m` (lower::lower_function) for Halide target
// `halide_target` (a profile's; "": no target's instructions assumed) and
// summarises the result.
Expected<AlgorithmSummary> summarize_algorithm(const ir::Module& m, const std::string& fn,
                                               const std::string& halide_target = "");

// The same for a pipeline just lowered, before apply_schedule (the compile
// driver records it in the artifact's manifest as "algorithm_hash").
AlgorithmSummary summarize_pipeline(const lower::Pipeline& p);

}  // namespace mlk
