// One kernel made ready to time: its .tl file checked, its shape resolved,
// random inputs made, and every variant compiled: `mlk` (the tuned artifact
// from the cache, else the default schedule) and the peers (the default
// schedule, Halide's autoschedulers, OpenBLAS for matrix products). Shared by
// `mlk bench` and the Google Benchmark suite (bench/mlk_bench_suite.cpp).
// Halide stays behind scheduler/kernel.h.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/suite.h"
#include "lang/bind.h"
#include "base/status.h"

namespace mlk::client {
class CliCache;
}  // namespace mlk::client

namespace mlk::bench {

// Every peer `--peers all` means, in table order.
const std::vector<std::string>& all_peer_names();

struct PrepareOptions {
  std::string store_path;          // --cache: a store path or a `mlk serve` URL; empty: do not use the cache
  std::string ns = "default";      // its namespace
  std::string namespaces;          // a server's read order (--namespaces); "" = $MLK_NAMESPACES
  std::vector<std::string> peers;  // names from all_peer_names()
  uint64_t seed = 1;               // of the random inputs
  // Non-empty: `mlk` is the artifact stored under this key (a baseline's
  // artifact, for an A/B comparison), not the one of the kernel's own key;
  // NotFound when the store lacks it.
  std::string artifact_key;
  // Non-empty (--trusted-signers): an artifact from the cache is loaded
  // only when one of these keys signed it; other hits are passed over (the
  // default schedule is timed) and a baseline's by key is refused.
  std::vector<std::string> trusted;
  // With artifact_key empty: never use the cache's artifact; `mlk` is the
  // default schedule (a baseline recorded with the default schedule).
  bool default_schedule = false;
  // A/B: also prepare baseline() on the same inputs, with its own output
  // (renewed with the rest): the artifact under this key, or with
  // baseline_default the default schedule. A baseline that cannot be had
  // leaves baseline().error set; Prepare still succeeds.
  std::string baseline_key;
  bool baseline_default = false;
  std::function<void(const std::string&)> progress;  // one line per step; may be empty
};

struct Variant {
  std::string name;   // "mlk" or a peer name
  std::string how;    // what runs, for people
  std::string error;  // set when it cannot run (then `run` is empty)
  bool same_as_mlk = false;  // the default-schedule peer when mlk is the default schedule
  std::function<Status()> run;  // one call, into the variant's own output buffer
};

class PreparedKernel {
 public:
  ~PreparedKernel();
  // Checks `spec` without compiling any kernel: the file type-checks (else
  // the rendered diagnostics are the error), the fn exists, the target is a
  // profile this machine can run, every dimension has a value (the spec's
  // dims, else the fn's first `tune` declaration) and the signature and its
  // refinements hold. Errors start with spec.where when it is set.
  static Expected<std::unique_ptr<PreparedKernel>> Resolve(const KernelSpec& spec);

  // Makes the inputs and compiles the variants. An error means `mlk` itself
  // cannot run (a non-host target with no tuned artifact, a damaged store, a
  // failed compilation); a peer that cannot run records why in its `error`
  // (not applicable, failed to compile, or a result that disagrees with mlk's).
  Status Prepare(const PrepareOptions& o);
  // Frees the compiled kernels, inputs and outputs; the identity stays.
  void Release();
  // Moves the inputs and outputs to freshly allocated copies (the previous
  // ones are freed at the next call), so that the kernel runs on other
  // physical pages: how well a kernel's data maps onto the caches differs
  // between runs of one build, and measurement rounds should see that too.
  // The variants' `run` functions stay valid. After Prepare.
  void RenewBuffers();

  const std::string& id() const { return id_; }      // "sgemm [K=64,M=64,N=64] host"
  const std::string& name() const { return name_; }  // the spec's name, else the id
  const KernelSpec& spec() const { return spec_; }
  const DimEnv& dims() const { return env_; }
  const std::string& ir_hash() const { return ir_hash_; }
  const std::string& cache_key() const { return cache_key_; }
  const std::string& variant() const { return variant_; }  // "tuned" or "default", after Prepare
  Variant& mlk() { return mlk_; }
  Variant& baseline() { return baseline_; }  // name "baseline"; no `run` unless asked for and had
  std::vector<Variant>& peers() { return peers_; }

 private:
  struct State;
  PreparedKernel() = default;
  // Prepare's steps (variants.cpp), run in this order on the inputs Prepare
  // made. PrepareMlk sets mlk_ and variant_: o.artifact_key's artifact from
  // `cc`, else the cache's artifact tuned at exactly this shape, else the
  // default schedule of the kernel's profile (runtime/resolve.h); an error means mlk cannot run. `cc` may be
  // null (no cache, or none needed).
  Status PrepareMlk(const PrepareOptions& o, client::CliCache* cc);
  // Sets baseline_ from o.baseline_key (taken from `cc`) or
  // o.baseline_default; what cannot be had is recorded in baseline_.error.
  void PrepareBaseline(const PrepareOptions& o, client::CliCache* cc);
  // Sets peers_, one per o.peers, each run once and checked against mlk's
  // result (mlk_ must have run); a peer that cannot run records why.
  void PreparePeers(const PrepareOptions& o);
  KernelSpec spec_;
  std::string id_, name_, ir_hash_, cache_key_, variant_;
  DimEnv env_;
  Variant mlk_, baseline_;
  std::vector<Variant> peers_;
  std::unique_ptr<State> st_;
};

}  // namespace mlk::bench
