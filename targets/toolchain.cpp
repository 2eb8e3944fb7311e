#include "targets/toolchain.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <regex>
#include <sstream>
#include <vector>

#include "mlk_toolchain_versions.h"

#ifndef MLK_VERSION
#define MLK_VERSION "0.0.0"
#endif

namespace mlk {

std::string mlk_version() { return MLK_VERSION; }

std::string halide_version() { return MLK_HALIDE_VERSION; }

std::string llvm_version() { return MLK_LLVM_VERSION; }

namespace {

std::string find_program(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string d;
    while (std::getline(ss, d, ':'))
      if (!d.empty()) dirs.push_back(d);
  }
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  for (const auto& d : dirs) {
    std::string p = d + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::string run_capture(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  std::array<char, 256> buf;
  while (fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
  return out;
}

}  // namespace

std::optional<CudaToolkit> find_cuda_toolkit() {
  CudaToolkit tk;
  tk.nvcc = find_program("nvcc");
  tk.ptxas = find_program("ptxas");
  if (tk.nvcc.empty() && tk.ptxas.empty()) return std::nullopt;
  std::string tool = tk.nvcc.empty() ? tk.ptxas : tk.nvcc;
  std::smatch m;
  std::string out = run_capture("'" + tool + "' --version 2>/dev/null");
  static const std::regex re("release ([0-9]+\\.[0-9]+)");
  if (std::regex_search(out, m, re)) tk.version = m[1];
  return tk;
}

}  // namespace mlk
