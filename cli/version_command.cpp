// `mlk version`: versions of mlk and of the toolchain it uses.
#include <cstdio>

#include "cli/command.h"
#include "targets/toolchain.h"

namespace mlk::cli {

CommandSpec version_spec() {
  return {
      .name = "version",
      .summary = "print mlk, Halide, LLVM and CUDA toolkit versions",
      .description = "Prints the versions of mlk, Halide and its LLVM, and the CUDA toolkit found\n"
                     "on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin (or that none was found).\n",
  };
}

int run_version(const std::vector<std::string>& args) {
  if (int bad = parse_or_usage_error(version_spec(), args)) return bad;
  std::printf("mlk %s\n", mlk_version().c_str());
  std::printf("Halide %s\n", halide_version().c_str());
  std::printf("LLVM %s (linked into Halide)\n", llvm_version().c_str());
  auto cuda = find_cuda_toolkit();
  if (cuda)
    std::printf("CUDA toolkit %s (nvcc: %s, ptxas: %s)\n", cuda->version.empty() ? "unknown" : cuda->version.c_str(),
                cuda->nvcc.empty() ? "not found" : cuda->nvcc.c_str(),
                cuda->ptxas.empty() ? "not found" : cuda->ptxas.c_str());
  else
    std::printf("CUDA toolkit: not found (CUDA profiles can still emit PTX; nothing can assemble it)\n");
  return 0;
}

}  // namespace mlk::cli
