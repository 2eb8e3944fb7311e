// Internal to verify/: one function per level (one file each), sharing the
// context verify_artifact builds once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/sandbox.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "lang/tensor.h"
#include "artifact/loaded.h"
#include "runtime/guarded_call.h"
#include "targets/profile.h"
#include "verify/report.h"

namespace mlk::verify {

struct Context {
  const ir::Module& m;
  const ir::Function& f;
  const std::string& fn;
  const Profile& profile;
  const DimEnv& dims;
  const std::map<std::string, std::string>& files;
  const std::string& manifest;  // manifest.json's text
  uint64_t seed = 1;
  const SandboxSpec* isolate = nullptr;  // VerifyRequest::isolate
};

// verify/isolated.cpp: where the artifact's code runs. In this process, or,
// with c.isolate, in a fresh runner in a sandbox that sends back only
// numbers; its failures then read as the fixed text kIsolatedFailure.
inline constexpr const char* kIsolatedFailure =
    "in the sandboxed run (`mlk verify --sign` keeps the artifact's words out of the report; run it without --sign "
    "to see what happened)";
// The artifact's result on each input list, in order.
Expected<std::vector<HostTensor>> artifact_outputs(const Context& c, const std::vector<std::vector<HostTensor>>& inputs,
                                                   const std::vector<HostTensor>& like);
// The memory level's check of one shape (runtime/guarded_call.h): "" when
// clean, else why.
std::string guarded_run(const Context& c, const rt::GuardedCall& call);

LevelReport check_types(const Context& c);
LevelReport check_identity(const Context& c);
LevelReport check_envelope(const Context& c);
LevelReport check_memory(const Context& c);
LevelReport check_equivalence(const Context& c);

// verify/inputs.cpp: the input sets of the running levels. `set` is one of
// input_set_names(); values suit each parameter's dtype (integers and Bool
// small and non-negative, so that gather indices stay in range).
const std::vector<std::string>& input_set_names();  // random, cancellation, large, subnormal, ties
Expected<std::vector<HostTensor>> make_inputs(const ir::Function& f, const DimEnv& dims, const std::string& set,
                                              int64_t reduction_length, uint64_t seed);

}  // namespace mlk::verify
