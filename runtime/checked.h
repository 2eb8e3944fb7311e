// A tensor checked once against a written .tl type (the seed's scenario 1:
// `let w : Tensor[F16, [D, D], [D mod H = 0]] = check_shape_and_refinement w_q`).
//
// check_type compiles `type` with the front end (so its syntax, dimension
// arithmetic and refinements are the language's, with the language's
// diagnostics), binds its dimension names from `shape` and `given`, and
// checks the dtype, every extent and every refinement. The result is every
// dimension's value: what a typed handle carries (Python: mlk.check).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "base/status.h"
#include "lang/bind.h"

namespace mlk::rt {

struct CheckedType {
  std::string type;                      // as the language prints it ("Tensor[F16, [D, D]]")
  std::vector<std::string> refinements;  // each proven for `dims` ("D mod H = 0")
  DimEnv dims;                           // every dimension name of the type, bound
};

// Usage errors name the type, the axis and the dimension, or render the
// type's diagnostics.
Expected<CheckedType> check_type(const std::string& type, DLDataType dtype, const std::vector<int64_t>& shape,
                                 const DimEnv& given);

}  // namespace mlk::rt
