// The inputs of the cache key (cache/key.h) of fn F of a module at shape D
// for profile P: what `mlk tune` stores an artifact under and what the
// runtime looks up (docs/cache.md, "The key"). Halide-free: the Halide and
// LLVM versions are the configure-time constants of targets/toolchain.h, so
// a runtime that links no compiler computes the same key as `mlk tune`.
#pragma once

#include <string>

#include "cache/key.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "targets/profile.h"

namespace mlk {

// `fn` must be a fn of `m`.
cache::KeyInputs key_inputs(const ir::Module& m, const std::string& fn, const DimEnv& dims, const Profile& p);

}  // namespace mlk
