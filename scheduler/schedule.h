// A Schedule is plain data: per stage, an ordered list of directives, each a
// Halide scheduling call by name. It serialises to JSON, hashes stably, and
// is turned into Halide calls by exactly one applier (apply_schedule.cpp).
//
// Stage names come from the lowering ("matmul0", "reduction1", "softmax_max0",
// "output", ...; see StageInfo). Variable names: a0..a{r-1} are a stage's
// pure variables by .tl axis (a0 outermost), r0.. its reduction variables;
// split/tile/fuse/rfactor introduce the names they are given.
//
// Directives: the kinds, their arguments (vars, factors, at_stage/at_var)
// and their meaning are declared once, in the directive registry
// (scheduler/directives.h); docs/schedules.md tabulates them.
// `update` >= 0 applies the directive to that update definition.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace mlk {

struct Directive {
  std::string op;
  std::vector<std::string> vars;
  std::vector<int64_t> factors;
  std::string at_stage, at_var;
  int update = -1;  // -1: the pure definition

  bool operator==(const Directive& o) const {
    return op == o.op && vars == o.vars && factors == o.factors && at_stage == o.at_stage && at_var == o.at_var &&
           update == o.update;
  }
};

struct Schedule {
  // Stage name -> directives in application order. Stages not listed are
  // left to Halide's default (inlined).
  std::map<std::string, std::vector<Directive>> stages;
  // Instead of stages: one of Halide's autoschedulers (Adams2019,
  // Mullapudi2016, Li2018; Anderson2021 for GPU profiles), run on the shape
  // estimates. Deterministic for a given pipeline, target and estimates.
  std::string autoscheduler;

  std::string to_json() const;  // canonical: keys sorted, stable across runs
  static Expected<Schedule> from_json(const std::string& text);
  std::string hash() const;     // sha256 of to_json()
  bool operator==(const Schedule& o) const { return stages == o.stages && autoscheduler == o.autoscheduler; }
};

// What a schedule may refer to, known without Halide: one entry per stage of a
// lowered function.
struct StageInfo {
  // kOperand: a matmul operand that is a view (transpose, reshape, ...), as
  // its own Func so that a schedule may materialise it in a layout the
  // matmul reads contiguously; inline unless scheduled.
  enum class Kind { kReduction, kMatmul, kSoftmaxMax, kSoftmaxExp, kSoftmaxSum, kOutput, kInput, kOperand };
  std::string name;
  Kind kind;
  int rank = 0;                     // pure variables a0..a{rank-1}
  int rvars = 0;                    // reduction variables r0..
  bool reduces_innermost = false;   // its reduction runs along the input's innermost axis
  std::vector<int64_t> extents;     // estimate of each pure extent (.tl order), 0 if unknown
  std::vector<int64_t> rextents;    // estimate of each reduction extent
  std::vector<std::string> direct_inputs;  // input stages (load_<param>) it reads directly
  std::vector<std::string> operands;       // a matmul: the stages it reads as a and b (inputs or operandN)
  std::vector<std::string> readers;        // the stages that read it (through inlined expressions), sorted
  // A product of BF16 operands in pair form (scheduler/lower.cpp, on targets
  // with a BF16 dot product): r0 is a pair of k (extent 2), r1 the pairs; it
  // reads its two `operands`, which are pair copies.
  bool pairs = false;
  // kOperand: a BF16 copy that a pair-form product reads (a's rows, or b in
  // pairs of rows); its product's rule materialises it.
  bool pair_copy = false;
  // kOperand: a product's `a` that is its value with the last two axes
  // swapped (a transpose in the IR): materialised in the product's order, it
  // is read along one axis and written along the other.
  bool transposed = false;
  // A product of BF16 operands in AMX tiles (scheduler/lower.cpp, on targets
  // with AMX-BF16): r0 is k within a tile's 32 (extent 32), r1 the tiles of
  // k; its two `operands` are pair copies (a's rows, b in VNNI pairs),
  // padded with zeros to whole tiles. Its rule materialises it through
  // `amx_tiles`; it has no knobs.
  bool amx = false;
};

// The one validator, for every schedule (read from JSON or made by a rule),
// run by apply_schedule before any Halide call: known stages, directives of
// the registry with their arguments' forms, known (or introduced) variables,
// factors in [1, 65536], GPU directives only on GPU profiles. Errors name the
// stage and the directive.
Status validate_schedule(const Schedule& s, const std::vector<StageInfo>& stages, bool gpu);

// The Halide autoschedulers mlk can run for a profile kind.
std::vector<std::string> autoschedulers_for(bool gpu);

// How Halide's autoscheduler `name` is run on a pipeline of `stages` stages
// (inputs not counted), so that its search fits a tuning machine: whether
// `mlk tune` tries it at all, and Adams2019's beam width (0: its default).
// `mlk build` with an explicit {"autoscheduler": ...} schedule runs it
// whatever the size, with the same beam.
struct AutoschedulerBudget {
  bool tried_by_tune = true;
  int beam_size = 0;
  std::string why_not;  // when !tried_by_tune: the reason, for the log
};
AutoschedulerBudget autoscheduler_budget(const std::string& name, int stages);

}  // namespace mlk
