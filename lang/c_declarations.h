// The C declarations of a fn's artifact, as a user's program includes them:
// `mlk build` writes <fn>.h beside lib<fn>.so and mlk_abi.h, and
// `mlk signature` prints the same declarations for every public fn of a
// program, as a snapshot a CI job keeps and checks (docs/artifacts.md,
// "The C header"). Halide-free.
#pragma once

#include <string>
#include <vector>

#include "lang/ir.h"

namespace mlk {

struct CHeaderOptions {
  std::vector<std::string> unbound_dims;  // the `dims` array's order (manifest.json's)
  bool cuda = false;                      // also mlk_NAME_cuda
  bool packed = false;                    // also mlk_NAME_pack and mlk_NAME_packed
};

// What a caller must know of f's entries, as C comments and prototypes: the
// signature with symbolic shapes and refinements, each argument's index,
// name, dtype and shape, the results, the `dims` array's order, and the
// prototype of each entry the artifact exports. Deterministic: the same fn
// gives the same text (a snapshot compares it byte for byte).
std::string c_declarations(const ir::Function& f, const CHeaderOptions& o);

// <fn>.h: c_declarations inside an include guard, including mlk_abi.h.
std::string c_header(const ir::Function& f, const CHeaderOptions& o);

// Every public fn of m, in source order: its c_declarations (its unbound
// dims in name order, as an artifact reads them; no CUDA or packed
// entries), one block each.
std::string signature_snapshot(const ir::Module& m);

// What changed from the snapshot `before` to `now`, fn by fn, in now's
// order: "`f` changed:" with its differing lines ("  - " before, "  + "
// now), "`g` is new", "`h` was removed". "" when the two are equal.
std::string snapshot_changes(const std::string& before, const std::string& now);

}  // namespace mlk
