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

#include <optional>
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

// How far a shape `tuned` is from `want`: the sum over the dims of
// |log2(tuned / requested)|; nullopt when they name other dims (another
// signature) or a dim is below 1. The nearest-shape choice's measure.
std::optional<double> shape_distance(const DimEnv& tuned, const DimEnv& want);

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
  // them over its key, files and metadata (cache/signatures.h) for the
  // namespace it came from (CliCache::signature_namespaces); others are
  // passed over before anything of them is loaded or its metadata trusted
  // for the nearest-shape choice, and the NotFound reason names each one and
  // its signer. `verified` levels are then read only from a report signed
  // by one of these keys.
  std::vector<std::string> trusted = {};
  CpuInfo cpu;  // this machine (detect_cpu()): an artifact must need no feature it lacks
};

// "" when `trusted` is empty or one of its keys signed `a` for the namespace
// it came from (CliCache::signature_namespaces), else why not, naming the
// entry and its signer (stored in *signer when signed by a trusted key).
std::string unsigned_reason(const cache::Artifact& a, const std::vector<std::string>& trusted, client::CliCache& cc,
                            std::string* signer = nullptr);

// NotFound (with a one-line reason) when no artifact qualifies; other
// errors, such as a corrupt entry, are returned as they are.
Expected<Tuned> find_tuned(const FindTunedRequest& r);

// Which executable runs a call: the one decision of `mlk run`, `mlk bench`
// and the runtime (Runtime::GetKernel). The profiles are tried in order:
// one this machine cannot run is passed over; for one it can, a tuned
// artifact by find_tuned (`lookup`, its profile set to each in turn) wins.
// Without one, and when `jit_fallback` allows it, the default schedule of
// the first CPU profile that runs here, compiled by the JIT (the caller
// compiles it: Kernel::CompileJit, or the runtime's plugin). A CUDA profile
// has no default schedule.
struct ResolveRequest {
  FindTunedRequest lookup;
  std::vector<Profile> profiles;  // in preference order, `host` resolved (resolve_profile)
  CudaInfo cuda;                  // this machine's GPUs (detect_cuda())
  bool jit_fallback = true;       // false: a tuned artifact or nothing (Require kTuned, kExact)
};

struct Resolution {
  std::optional<Tuned> tuned;  // a tuned artifact, for `profile`
  bool jit = false;            // else the default schedule of `profile` by the JIT
  Profile profile;
  // One line per profile passed over: "NAME: cannot run here: ..." or
  // "NAME: no artifact of ..." (find_tuned's reason).
  std::vector<std::string> rejected;
  // Neither: nothing may run; `no_cpu_profile` says whether that is because
  // no CPU profile of the list runs here (else the request wanted a tuned
  // artifact only). The caller words the refusal with `rejected`.
  bool no_cpu_profile = false;
  bool runs() const { return tuned.has_value() || jit; }
};

// Errors of find_tuned other than NotFound are returned as they are.
Expected<Resolution> resolve_executable(const ResolveRequest& r);

}  // namespace mlk::rt
