// The canonical text form of the typed IR, and content hashes built on it.
//
// The text names values by their position in a deterministic post-order walk
// (%0, %1, ...), so `let` names, comments and formatting do not appear in it;
// parameter and dimension names do, since they are the function's interface
// (`mlk run` matches inputs by parameter name, `--dims` by dimension name).
// Literals are printed in a canonical numeric form (0.50 and 5e-1 agree).
#pragma once

#include <string>

#include "lang/ir.h"

namespace mlk::ir {

std::string print_function(const Function& f);
// One line: "rmsnorm [B, S, D] (x: Tensor[F32, [B, S, D]], ..) -> Tensor[F32,
// [B, S, D]]", then " where [..]" with the refinements. For people (Python's
// __doc__, `.signature`); not hashed.
std::string print_signature(const Function& f);
// Every function (sorted by name) and every tune bucket.
std::string print_module(const Module& m);

// sha256 of the function's text and, recursively, of its callees' hashes.
std::string function_hash(const Module& m, const Function& f);
// sha256 of print_module().
std::string module_hash(const Module& m);

// The canonical spelling of a literal of dtype `t` ("0.50" -> "0.5", "007" ->
// "7"; in a floating-point dtype `2` and `2.0` both print as "2.0").
std::string canonical_literal(const std::string& text, DType t);

}  // namespace mlk::ir
