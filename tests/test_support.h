// Test helpers shared by the GoogleTest suites: the example programs, a
// small matmul program, and per-process scratch directories.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "lang/frontend.h"

namespace mlk::testing_support {

// examples/NAME, checked (a failure is a test failure, not a crash).
inline ir::Module load_example(const std::string& name) {
  auto fe = compile_file(std::string(MLK_SOURCE_DIR) + "/examples/" + name);
  EXPECT_TRUE(fe.ok() && fe->ok());
  return fe.ok() ? fe->module : ir::Module{};
}

// `public fn sgemm [M, K, N]`: one F32 matmul, checked.
inline ir::Module sgemm_module() {
  auto fe = compile_source("mm.tl",
                           "public fn sgemm [M, K, N](a: Tensor[F32, [M, K]], b: Tensor[F32, [K, N]]) -> Tensor[F32, [M, N]] =\n"
                           "  matmul(a, b)\n");
  EXPECT_TRUE(fe.ok());
  return fe.module;
}

// TMP/PREFIX_PID/NAME, removed if it exists (not created).
inline std::string scratch_dir(const std::string& prefix, const std::string& name) {
  std::filesystem::path p = std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(getpid())) / name;
  std::filesystem::remove_all(p);
  return p.string();
}

}  // namespace mlk::testing_support
