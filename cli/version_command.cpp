// `mlk version`: versions of mlk and of the toolchain it uses.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command.h"
#include "targets/toolchain.h"

namespace mlk::cli {

namespace {

struct VersionOptions {
  bool json = false;
};

CommandSpec spec(VersionOptions& o) {
  return {
      .name = "version",
      .summary = "print mlk, Halide, LLVM and CUDA toolkit versions",
      .description = "Prints the versions of mlk, Halide and its LLVM, and the CUDA toolkit found\n"
                     "on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin (or that none was found).\n"
                     "With --json, one JSON object: {\"format\": \"mlk-version-1\", \"mlk\", \"halide\",\n"
                     "\"llvm\", \"cuda\"}; \"cuda\" is null when no toolkit was found, else\n"
                     "{\"version\", \"nvcc\", \"ptxas\"} (a string, or null when unknown or not found).\n",
      .flags = {{.name = "--json", .help = "print the versions as one JSON object", .set = set_bool(o.json)}},
  };
}

// "" -> null: a version or a tool that was not found.
nlohmann::json or_null(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

void print_json(const std::optional<CudaToolkit>& cuda) {
  nlohmann::json c = nullptr;
  if (cuda) c = {{"version", or_null(cuda->version)}, {"nvcc", or_null(cuda->nvcc)}, {"ptxas", or_null(cuda->ptxas)}};
  const nlohmann::json j = {{"format", "mlk-version-1"}, {"mlk", mlk_version()}, {"halide", halide_version()},
                            {"llvm", llvm_version()},     {"cuda", c}};
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

CommandSpec version_spec() {
  static VersionOptions scratch;
  return spec(scratch);
}

int run_version(const std::vector<std::string>& args) {
  VersionOptions o;
  if (int bad = parse_or_usage_error(spec(o), args)) return bad;
  auto cuda = find_cuda_toolkit();
  if (o.json) {
    print_json(cuda);
    return 0;
  }
  std::printf("mlk %s\n", mlk_version().c_str());
  std::printf("Halide %s\n", halide_version().c_str());
  std::printf("LLVM %s (linked into Halide)\n", llvm_version().c_str());
  if (cuda)
    std::printf("CUDA toolkit %s (nvcc: %s, ptxas: %s)\n", cuda->version.empty() ? "unknown" : cuda->version.c_str(),
                cuda->nvcc.empty() ? "not found" : cuda->nvcc.c_str(),
                cuda->ptxas.empty() ? "not found" : cuda->ptxas.c_str());
  else
    std::printf("CUDA toolkit: not found (CUDA profiles can still emit PTX; nothing can assemble it)\n");
  return 0;
}

}  // namespace mlk::cli
