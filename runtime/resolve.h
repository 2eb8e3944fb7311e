// The artifact resolver: which tuned artifact in an artifact cache serves a
// call of fn F for profile P at shape D. Used by the runtime (Runtime::
// GetKernel) and by `mlk run`, so both choose alike:
//
//   1. the entry under the exact cache key of (F, P, D), pulled from the
//      server when the cache is one;
//   2. unless `require` is exact: an entry of F (same program hash) tuned for
//      P at another shape, local or on the server (its query API), whose
//      required CPU features this machine has; the nearest shape wins
//      (smallest sum over the dims of |log2(tuned / requested)|), ties broken
//      by key, so the choice never depends on what was used last.
//
// What happens when nothing is found (the default schedule with the JIT, or
// a refusal under a strict policy) is the caller's decision; `Require` names
// the policies.
#pragma once

#include <string>
#include <vector>

#include "cache/store.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "base/status.h"
#include "targets/detect.h"

namespace mlk::client {
class CliCache;
}

namespace mlk::rt {

// How strict a lookup is: kAny falls back to the default schedule (JIT),
// kTuned accepts a tuned artifact at any shape, kExact only one tuned at
// exactly the requested shape.
enum class Require { kAny, kTuned, kExact };
// "any", "tuned" or "exact"; anything else is InvalidArgument naming the choices.
Expected<Require> parse_require(const std::string& text);
const char* require_name(Require r);

struct Tuned {
  std::string key;
  cache::Artifact entry;  // verified: every file re-hashed by the store
  DimEnv tuned_dims;      // the shape it was tuned at
  bool exact = false;     // tuned_dims == the requested dims
  bool pulled = false;    // downloaded from the server now
  std::string signer;     // under a signed policy: the key id of the trusted key that signed it
};

// A lookup: fn `fn` of `module` for `profile` at `dims`, in namespace `ns`
// of `cache`.
struct FindTunedRequest {
  client::CliCache* cache = nullptr;  // may be null (no cache at all)
  std::string ns;
  const ir::Module* module = nullptr;  // not null
  std::string fn;
  std::string fhash;  // ir::function_hash of `fn`
  Profile profile;
  DimEnv dims;
  Require require = Require::kAny;
  // `mlk verify` levels an artifact's stored report must pass (policy
  // "require=verified:envelope"); an entry that lacks one is passed over,
  // and the NotFound reason says so. Empty: no such condition.
  std::vector<std::string> verified = {};
  // Policy "require=signed:KEYS": Ed25519 public keys (64 hex). When not
  // empty, an entry qualifies only when it carries a signature by one of
  // them over its key, files and metadata (cache/signatures.h); others are
  // passed over before anything of them is loaded or its metadata trusted
  // for the nearest-shape choice, and the NotFound reason names each one and
  // its signer. `verified` levels are then read only from a report signed
  // by one of these keys.
  std::vector<std::string> trusted = {};
  CpuInfo cpu;  // this machine (detect_cpu()): an artifact must need no feature it lacks
};

// NotFound (with a one-line reason) when no artifact qualifies; other
// errors, such as a corrupt entry, are returned as they are.
Expected<Tuned> find_tuned(const FindTunedRequest& r);

}  // namespace mlk::rt
