// What to benchmark: kernel specs from the command line or from a suite file.
//
// A suite file is JSON (docs/cli.md, "mlk bench"):
//   {"kernels": [
//     {"name": "sgemm 1024^3", "file": "../examples/mlp.tl", "fn": "sgemm",
//      "dims": {"M": 1024, "K": 1024, "N": 1024}, "target": "host"}, ...]}
// `file` is relative to the suite file's directory (or absolute); `dims` is an
// object or a "M=1024,K=1024,N=1024" string, and may be omitted for the fn's
// first `tune` declaration; `name` and `target` are optional (the target then
// comes from --target). Unknown fields are errors, so a typo is not ignored.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace mlk::bench {

struct KernelSpec {
  std::string name;  // for people; empty: the kernel id
  std::string file, fn, target;
  std::map<std::string, int64_t> dims;  // empty: the fn's first `tune` declaration
  std::string where;  // for errors: "bench/suite.json: kernels[2]", or "" on the command line
};

// Reads and checks a suite file. `default_target` (may be empty) is used for
// kernels without a "target". Errors name the file and the kernel's index.
Expected<std::vector<KernelSpec>> read_suite(const std::string& path, const std::string& default_target);

}  // namespace mlk::bench
