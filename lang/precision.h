// Precision policies: an F32 program's products computed from 16-bit float
// operands (docs/numerics.md, "Precision policies"), as a pass over the typed
// IR, so that everything after it (lowering, the stage tables, the cache key,
// `mlk verify`, the interpreter that checks every tuned candidate) sees the
// policy as ordinary IR, and `--emit-ir` shows it.
//
//   f32   the program as written (the pass is the identity);
//   bf16  every F32 `matmul(a, b)` becomes matmul_f32(bf16(a), bf16(b)): its
//         operands rounded to BF16 (to nearest, ties to even), products and
//         sums in F32, an F32 result (a widening product, lang/ir.h);
//   f16   the same with F16 operands.
// Every other op, every parameter and every result keeps its dtype, so the
// fns' signatures are unchanged: a caller passes the same F32 tensors.
#pragma once

#include <string>

#include "base/status.h"
#include "lang/ir.h"

namespace mlk {

enum class Precision { kF32, kBF16, kF16 };

// "f32", "bf16" or "f16"; anything else is InvalidArgument naming the value
// and the choices.
Expected<Precision> parse_precision(const std::string& name);
const char* precision_name(Precision p);
// The flag that asks for `p` in a command line mlk suggests: "" for f32,
// else " --precision NAME".
std::string precision_flag_text(Precision p);

// `m` under policy `p`: every fn's body rewritten, shared nodes staying
// shared. Fns without an F32 product come back unchanged (the same nodes,
// so the same IR hash).
ir::Module with_precision(const ir::Module& m, Precision p);

// The policy fn `f` of `m` was made under, read off its IR: bf16 (f16) when
// its body or a fn it calls has a widening product of BF16 (F16) operands,
// which only with_precision makes; else f32, which is also right for a fn
// the policy left unchanged (its IR, and so its hash, is that of f32). An
// artifact records it (manifest.json "precision") so that its program.tl is
// checked and loaded under the same policy.
Precision precision_of(const ir::Module& m, const ir::Function& f);

// The dtype whose tolerance (docs/numerics.md §5) judges a result of dtype
// `result` of fn `f` against the reference interpreter: `result` itself,
// except that an F32 result of a fn made under bf16 (f16) is judged as BF16
// (F16). The interpreter runs the same widened IR, but where one product's
// result feeds another's operands, a different order of summation may round
// an operand to the neighbouring 16-bit value, an error of the policy's
// rounding (2^-9 for BF16) that the F32 tolerance would call wrong. Used by
// the tuner, `mlk verify` and `mlk bench`.
DType judged_dtype(const ir::Module& m, const ir::Function& f, DType result);

}  // namespace mlk
