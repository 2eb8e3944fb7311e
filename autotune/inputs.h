// The tuner's random inputs: how each parameter's values are drawn so that
// every candidate is run, verified and timed on data that exercises it
// honestly (floats of both signs over six decades; a gather's indices within
// its table; integers that reach arithmetic small; a Dataframe column's values
// within its rules), and how the draw is recorded in an artifact's
// verification record.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lang/bind.h"
#include "lang/frame.h"
#include "lang/ir.h"
#include "lang/tensor.h"

namespace mlk::tune {

// How the values of one parameter are drawn (recorded in the verification
// record of the manifest).
struct InputRange {
  enum class Kind { kFloat, kInt, kIndex, kBool };
  Kind kind = Kind::kFloat;
  double lo = 0, hi = 0;  // integers: [lo, hi]; floats: magnitudes [lo, hi]
  std::string why;
  // A Dataframe column's parameter: the column, whose rules (`where a >= 1`)
  // every value obeys, as the reader of a table would demand; `rules` as
  // written. Integers: [lo, hi] already within them. Floats: drawn as any float
  // until one passes (random_input), else uniformly from [alt_lo, alt_hi] (integers the
  // rules allow, from [-4, 4] or nearest to it).
  const ir::FrameColumn* column = nullptr;
  std::vector<std::string> rules;
  double alt_lo = 0, alt_hi = 0;
};

// The range of every parameter of `f` (of module `m`) at the shape `env`, in
// parameter order; `why` says what decided each.
std::vector<InputRange> input_ranges(const ir::Module& m, const ir::Function& f, const DimEnv& env);

// One input for parameter `p` at the shape `env`, drawn from `r` with `rng`.
HostTensor random_input(const ir::Param& p, const InputRange& r, const DimEnv& env, std::mt19937_64& rng);

// How `p`'s values were drawn, as the verification record stores it.
nlohmann::json range_json(const ir::Param& p, const InputRange& r);

}  // namespace mlk::tune
