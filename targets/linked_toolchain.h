// The toolchain versions as the Halide library linked into this process
// reports them (Halide-linked code only: the mlk_targets library). The cache
// key uses the configure-time constants of targets/toolchain.h instead, so
// that the runtime computes keys without Halide; tests check the two agree.
#pragma once

#include <string>

namespace mlk {

// "21.1": Halide::Internal::get_llvm_version() of the linked libHalide.so,
// formatted as llvm_version() is.
std::string linked_llvm_version();

}  // namespace mlk
