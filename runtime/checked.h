// A tensor checked once against a written .tl type (the seed's scenario 1:
// `let w : Tensor[F16, [D, D], [D mod H = 0]] = check_shape_and_refinement w_q`).
//
// check_type compiles `type` with the front end (so its syntax, dimension
// arithmetic and refinements are the language's, with the language's
// diagnostics), binds its dimension names from `shape` and `given`, and
// checks the dtype, every extent and every refinement. The result is every
// dimension's value: what a typed handle carries (Python: mlk.check).
//
// check makes that handle in C++ (Checked). A call given handles (CallArgs:
// the tensors for the arguments, what the handles proved for
// RunOptions::proven or check_call's `proven`) does not evaluate again a
// refinement of the fn that a handle proved, while the call binds its
// dimensions to the values the handle bound and the tensor has the dtype and
// shape it was checked with (runtime/boundary.h, the dims rule); every other
// boundary rule runs as for any tensor, and each refinement skipped is
// listed (CheckedCall::skipped, Selection::explain).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "base/status.h"
#include "lang/bind.h"
#include "runtime/boundary.h"

namespace mlk::rt {

struct CheckedType {
  std::string type;                      // as the language prints it ("Tensor[F16, [D, D]]")
  std::vector<std::string> refinements;  // each proven for `dims` ("D mod H = 0")
  DimEnv dims;                           // every dimension name of the type, bound
  DLDataType dtype{};                    // the tensor as it was checked
  std::vector<int64_t> shape;
};

// Usage errors name the type, the axis and the dimension, or render the
// type's diagnostics.
Expected<CheckedType> check_type(const std::string& type, DLDataType dtype, const std::vector<int64_t>& shape,
                                 const DimEnv& given);

// A handle: the tensor's DLTensor record (not its data: the caller keeps the
// tensor, its shape array included, alive while the handle is used) and what
// check_type proved of it.
struct Checked {
  DLTensor tensor{};
  CheckedType type;
  Proven proven(size_t arg) const;  // what it proved, as argument `arg` of a call
};

// check_type of `t`'s dtype and shape; a NULL shape of a ranked tensor is a
// usage error.
Expected<Checked> check(const DLTensor& t, const std::string& type, const DimEnv& given = {});

// A call's arguments in order, each a tensor or a handle.
struct CallArgs {
  std::vector<const DLTensor*> tensors;  // the arguments (a handle's tensor in its place)
  std::vector<Proven> proven;            // what the handles among them proved
  CallArgs& add(const DLTensor* t);
  CallArgs& add(const Checked& h);
};

}  // namespace mlk::rt
