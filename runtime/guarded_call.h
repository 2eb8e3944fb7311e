// One call of an artifact on buffers that end exactly at a guard page
// (PROT_NONE: any access past the end faults) and start after a canary zone
// (checked after the call), in a child process of its own: the memory
// level of `mlk verify` (verify/memory_level.cpp), run in the verifier or,
// under `mlk verify --sign`, in the sandboxed runner (runtime/isolated_run.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/tensor.h"

namespace mlk::rt {

struct GuardedCall {
  std::map<std::string, std::string> files;  // the artifact's files, loaded afresh in the child
  std::string fn;
  DimEnv dims;
  std::vector<HostTensor> inputs;  // one per parameter, at its shape
  HostTensor output;               // the result's dtype and shape (values unused)
  std::vector<std::string> names;  // the parameters' names, for the messages
};

// "" when the call succeeded, touched nothing past the end of any buffer,
// left the 256 bytes before each one intact and every input unchanged;
// otherwise why (naming the buffer).
std::string guarded_call(const GuardedCall& call);

}  // namespace mlk::rt
