// The IR verifier: checks typed IR against the op registry (lang/ops.def):
// each node's operand count, and its dtypes, shape and attributes against its
// op's VERIFY rule. Checked IR always passes; a failure is a bug in the pass
// that built the node, not a user error, so passes run it through
// debug_verify() (an internal check) and only tests look at the Status.
#pragma once

#include "base/status.h"
#include "lang/ir.h"

namespace mlk::ir {

// One node, not its operands: Internal naming the op and what is wrong.
Status verify_node(const Node& n);

// Every node of every function (each once), plus what needs the function or
// module: parameter indices and types, the body's dtype and rank, and calls
// (operand and dimension counts, operand dtypes, when the callee is present).
Status verify_module(const Module& m);

// Whether debug_verify() runs: in builds without NDEBUG, or with MLK_VERIFY_IR.
bool ir_verification_enabled();

// After an IR-producing step (`after`: "checking", a pass's name): when
// enabled, an internal error (MLK_CHECK, with file:line) unless m verifies.
void debug_verify(const Module& m, const char* after);

}  // namespace mlk::ir
