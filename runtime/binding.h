// The binding of a model: which public fns of a .tl program run in what
// order, and where each parameter of each step comes from (a model input, an
// earlier step's result, a tensor of the weights file by its key, or a
// constant). It is a JSON file next to the program; the format is described
// in docs/tutorial-serve-a-model.md, "The binding file".
//
// Contract: parse_binding() checks everything that needs only the binding and
// the program (every step's fn exists and is public, every parameter is bound
// exactly once and by a source its type allows, every value is defined
// before it is used, `{i}` only in repeated steps); the weights are checked
// against it by Model::Load (runtime/model.h). Every error names the binding
// file, the step and the parameter.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/bind.h"
#include "lang/ir.h"

namespace mlk::rt {

// One input of the model, in call order.
struct ModelInput {
  std::string name;
  // "" when the input is required; otherwise it may be left out, and is then
  // zeros with the shape and dtype of the input named here.
  std::string zeros_like;
};

// One step: a public fn run `repeat` times, instance i with the weights
// whose keys are the templates with `{i}` replaced by i (0 .. repeat-1).
struct BindingStep {
  std::string fn;
  int repeat = 1;
  DimEnv dims;                                 // dims no parameter binds (`H`), for every instance
  std::map<std::string, std::string> args;     // parameter -> value: a model input or an earlier `out`
  std::map<std::string, std::string> weights;  // parameter -> key template ("encoder.layer.{i}.attention.self.query.weight")
  std::map<std::string, double> constants;     // parameter -> value, for Scalar parameters
  std::string out;                             // the name of the result, for later steps
  // "step 2 (`layer`)", for messages.
  std::string where(size_t index) const;
};

struct Binding {
  std::string file;  // where it was read, for messages
  std::vector<ModelInput> inputs;
  std::vector<BindingStep> steps;  // the model's result is the last step's result
  // Keys of the weights file that no step binds, on purpose; any other
  // unbound tensor of the file is an error.
  std::vector<std::string> unused;
  bool derived = false;  // from the program (runtime/derived_binding.h), not a file
};

// The key of instance `i` of a key template: `{i}` replaced by i.
std::string weight_key(const std::string& key_template, int i);

// Parses the binding `text` (read from `file`) and checks it against the
// program `module`. InvalidArgument naming `file`, the step and the
// parameter on any mistake; unknown JSON fields are errors.
Expected<Binding> parse_binding(const std::string& file, const std::string& text, const ir::Module& module);

}  // namespace mlk::rt
