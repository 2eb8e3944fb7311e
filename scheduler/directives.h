// The directive registry: every directive a Schedule may contain, declared
// once (scheduler/directives.cpp) with its typed arguments, from which its
// validation follows, and its application (a function of apply_schedule.cpp,
// the one file that turns directives into Halide calls). validate_schedule
// and apply_schedule both dispatch through it; a Directive itself stays plain
// data (scheduler/schedule.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "scheduler/schedule.h"

namespace mlk {

// What a `vars` slot of a directive is.
enum class VarRole {
  kRead,       // a variable the stage has (a0.., r0.. or a name introduced before)
  kReduction,  // kRead, and a reduction variable (its name starts with `r`)
  kNew,        // a name the directive introduces for later directives of the stage
  kName,       // a name for a variable of an intermediate Func (not tracked)
  kOperand,    // a stage this (matmul) stage reads as an operand (StageInfo::operands)
  kStage,      // another stage of the pipeline, which the directive places
};

// One accepted shape of a directive's arguments.
struct DirectiveForm {
  std::vector<VarRole> vars;  // the slots, in order
  bool variadic = false;      // vars = one or more kRead slots (`vars` above is then empty)
  int min_factors = 0, max_factors = 0;
};

// What `at_stage` / `at_var` name.
enum class AtRole {
  kNone,         // neither is used
  kStageLoop,    // at_stage: another stage; at_var: a variable of that stage (compute_at, store_at)
  kInputShared,  // at_stage: an input stage (load_<param>); at_var: a variable of this stage (stage_shared)
};

class DirectiveApplier;  // apply_schedule.cpp: the Halide side of one schedule being applied

struct DirectiveKind {
  std::string_view op;
  std::vector<DirectiveForm> forms;  // the directive's vars select the form (by count)
  AtRole at = AtRole::kNone;
  bool gpu = false;  // GPU profiles only
  // Applied after every other directive of the schedule (placements may
  // name variables another stage's directives introduce).
  bool placement = false;
  // The Halide calls; `d` has passed validation against the pipeline's stages.
  void (*apply)(DirectiveApplier& a, const std::string& stage, const Directive& d) = nullptr;
};

// Every directive kind, in the order docs/schedules.md lists them.
const std::vector<DirectiveKind>& directive_kinds();
// The kind called `op`, or null.
const DirectiveKind* find_directive(std::string_view op);

// The appliers the registry names (defined in apply_schedule.cpp).
namespace apply {
void split(DirectiveApplier&, const std::string&, const Directive&);
void tile(DirectiveApplier&, const std::string&, const Directive&);
void fuse(DirectiveApplier&, const std::string&, const Directive&);
void reorder(DirectiveApplier&, const std::string&, const Directive&);
void vectorize(DirectiveApplier&, const std::string&, const Directive&);
void unroll(DirectiveApplier&, const std::string&, const Directive&);
void parallel(DirectiveApplier&, const std::string&, const Directive&);
void compute_root(DirectiveApplier&, const std::string&, const Directive&);
void compute_inline(DirectiveApplier&, const std::string&, const Directive&);
void store_root(DirectiveApplier&, const std::string&, const Directive&);
void compute_at(DirectiveApplier&, const std::string&, const Directive&);
void store_at(DirectiveApplier&, const std::string&, const Directive&);
void rfactor(DirectiveApplier&, const std::string&, const Directive&);
void rfactor_vector(DirectiveApplier&, const std::string&, const Directive&);
void rfactor_par(DirectiveApplier&, const std::string&, const Directive&);
void atomic(DirectiveApplier&, const std::string&, const Directive&);
void gpu_blocks(DirectiveApplier&, const std::string&, const Directive&);
void gpu_threads(DirectiveApplier&, const std::string&, const Directive&);
void gpu_single_thread(DirectiveApplier&, const std::string&, const Directive&);
void gpu_tile(DirectiveApplier&, const std::string&, const Directive&);
void stage_shared(DirectiveApplier&, const std::string&, const Directive&);
void pack(DirectiveApplier&, const std::string&, const Directive&);
void result_tiles(DirectiveApplier&, const std::string&, const Directive&);
void amx_tiles(DirectiveApplier&, const std::string&, const Directive&);
void attention_tiles(DirectiveApplier&, const std::string&, const Directive&);
}  // namespace apply

}  // namespace mlk
