// Versions of the toolchain mlk builds with and finds at run time: mlk
// itself, Halide and its LLVM, and the CUDA toolkit (optional, looked up on
// PATH, $CUDA_HOME/bin and /usr/local/cuda/bin). Halide-free: the Halide and
// LLVM versions are constants recorded at configure time (generated/
// mlk_toolchain_versions.h); linked_toolchain.h asks the linked library.
#pragma once

#include <optional>
#include <string>

namespace mlk {

struct CudaToolkit {
  std::string nvcc;     // absolute path
  std::string ptxas;    // absolute path, may be empty
  std::string version;  // "13.0"
};

std::string mlk_version();
std::string halide_version();  // "21.0.0": the Halide headers mlk is built with
std::string llvm_version();    // "21.1": the LLVM linked into that libHalide.so
std::optional<CudaToolkit> find_cuda_toolkit();

}  // namespace mlk
