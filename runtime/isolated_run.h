// An artifact's code run where nothing of the caller is: `mlk verify --sign`
// (verify/isolated.cpp) forks, enters the sandbox (base/sandbox.h) and
// execs `mlk-measure --isolated-run`, a fresh image that never held the
// verifier's memory (its cache token, its key); the request comes on the
// runner's standard input, and its answer, on standard output, is numbers
// only: one status byte, then, for kOutputs, every element of every result
// as a little-endian double. The artifact can choose those numbers (it is
// the code under test) but no words of the report.
//
// The request's bytes: one line of JSON naming the mode, fn, dims, files and
// tensors (dtype, shape, byte count), then each file's bytes and each
// tensor's bytes in that order. decode_isolated checks every count.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "lang/bind.h"
#include "lang/tensor.h"

namespace mlk::rt {

inline constexpr char kIsolatedOk = 'K', kIsolatedFailed = 'F';

struct IsolatedRequest {
  enum class Mode { kOutputs, kGuarded };
  Mode mode = Mode::kOutputs;
  std::map<std::string, std::string> files;  // the artifact's files
  std::string fn;
  DimEnv dims;
  // kOutputs: one input list per input set, the result of each is answered;
  // kGuarded: one list, called once by runtime/guarded_call.h.
  std::vector<std::vector<HostTensor>> inputs;
  std::vector<HostTensor> outputs;  // each list's result: dtype and shape
  std::vector<std::string> names;   // kGuarded: the parameters' names
};

std::string encode_isolated(const IsolatedRequest& r);
Expected<IsolatedRequest> decode_isolated(std::string_view bytes);

// The runner's side: the answer's bytes (kIsolatedFailed alone when the
// artifact cannot be loaded, fails, or a guarded check fails).
std::string run_isolated(const IsolatedRequest& r);

}  // namespace mlk::rt
