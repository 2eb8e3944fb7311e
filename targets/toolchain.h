// Versions of the toolchain mlk builds with and finds at run time: mlk
// itself, Halide and its LLVM (linked in), and the CUDA toolkit (optional,
// looked up on PATH, $CUDA_HOME/bin and /usr/local/cuda/bin).
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
std::string halide_version();  // "21.0.0"
std::string llvm_version();    // "20.1"
std::optional<CudaToolkit> find_cuda_toolkit();

}  // namespace mlk
