// A model's binding derived from its program instead of read from a binding
// file (runtime/binding.h): the program's entry fn says what runs, and its
// record parameters say where each weight is.
//
//   record Linear [I, O] { weight: Tensor[F32, [O, I]], bias: Tensor[F32, [O]] }
//   record Net [D, L] { layer: Array[Linear[D, D], L], head: Linear[D, 2] }
//   public fn step [N, D](x: Tensor[F32, [N, D]], p: Linear[D, D]) -> Tensor[F32, [N, D]] = ..
//   public fn out [N, D](x: Tensor[F32, [N, D]], p: Linear[D, 2]) -> Tensor[F32, [N, 2]] = ..
//   public fn model [N, D](x: Tensor[F32, [N, D]], net: Net[D, 4]) -> Tensor[F32, [N, 2]] =
//     out(fold(net.layer, x, step), net.head)
//
// Contract of derive_binding():
// - The entry's body is calls of public fns and nothing else: each argument
//   of each call is an entry parameter, a field of one of its records, a
//   constant (for a Scalar parameter) or another call's result. Each call is
//   one step, in the order a call's arguments come before it; the entry's
//   result is the last step's. (`fold` is unrolled by the front end, so a
//   fold over an Array of L layers is L steps of one fn: one kernel run L
//   times, each time with that layer's weights.)
// - The model's inputs are the entry's parameters that are not records, in
//   order; a Scalar parameter is refused (write the constant in the body).
// - A record leaf binds the weights file's tensor named by its path below
//   the record parameter (`layer.2.weight`; with several record parameters,
//   below the parameter's name: `enc.layer.2.weight`), after `rename`: a map
//   from a path prefix (whole components) to the key prefix the file uses
//   (`{"layer": "encoder.layer"}`, `{"model": ""}` to drop one), the longest
//   matching prefix applied. A rename that matches no path, and two fields
//   bound to one key, are refused. Keys are used as written ({i} is a
//   binding file's).
// - Calls nest at most 2048 deep.
// - A callee's dimension that the call fixes to a constant (`layer[H=12]`,
//   `fold[H=12](..)`) is the step's "dims".
// - Leaves no step reads are the binding's "unused": their keys must exist
//   in the file (a record may describe a whole checkpoint).
// Errors are InvalidArgument naming the program, the entry and the call.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "lang/ir.h"
#include "runtime/binding.h"

namespace mlk::rt {

// `entry` "" means: the program's only fn that takes a record and that no
// fn calls (the entry need not be public: it is a model, not a kernel).
// `program` is the .tl file's path, for messages (Binding::file).
Expected<Binding> derive_binding(const ir::Module& module, const std::string& program, const std::string& entry,
                                 const std::map<std::string, std::string>& rename);

// `path` with the longest prefix of `rename` (on whole `.` components)
// replaced by its value; `path` itself when none matches.
// `matched`, when given, receives the prefix applied ("" when none).
std::string renamed_key(const std::string& path, const std::map<std::string, std::string>& rename,
                        std::string* matched = nullptr);

}  // namespace mlk::rt
