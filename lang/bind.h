// Binding a function's dimension variables to concrete values at a call from
// the outside world (`mlk run`, the interpreter, the runtime), and checking
// the signature: ranks, every extent, refinements.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lang/ir.h"
#include "base/status.h"

namespace mlk {

using DimEnv = std::map<std::string, int64_t>;

// `shapes[i]` is the concrete shape of parameter i. `given` holds dimension
// values from the command line (--dims); they may bind unbound variables and
// must agree with the inputs otherwise. Errors name the parameter, axis and
// symbol, and where the symbol was bound:
//   "x.shape[2] = 1000 but D = 1024, bound by w.shape[0]".
// `skip`, when given, is asked for each refinement once every dimension is
// bound and checked; a refinement it answers true for is not evaluated (the
// runtime's checked handles proved it: runtime/boundary.h, Proven).
using SkipRefinement = std::function<bool(const Pred&, const DimEnv&)>;
Expected<DimEnv> bind_dims(const ir::Function& f, const std::vector<std::vector<int64_t>>& shapes,
                           const DimEnv& given, const SkipRefinement& skip = nullptr);

// Concrete shape of `d` under `env` (all of whose variables must be bound).
Expected<std::vector<int64_t>> concrete_shape(const Shape& s, const DimEnv& env);

// "N=4,D=8" -> {N: 4, D: 8}: positive integer values, each name once.
// InvalidArgument naming the bad item.
Expected<DimEnv> parse_dim_list(const std::string& text);

// {N: 4, D: 8} -> "D=8,N=4": the dims in name order, as parse_dim_list reads
// them ("" for none). For messages, labels and cache keys.
std::string dims_str(const DimEnv& d);

// Largest extent Halide buffers can index (int32).
constexpr int64_t kMaxExtent = 2147483647;

}  // namespace mlk
