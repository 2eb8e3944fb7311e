// The runtime: pretuned kernels from the artifact cache (a local store or a
// `mlk serve`), selected per machine, run on DLPack tensors behind loud
// boundary checks (runtime/boundary.h). docs/runtime.md describes it.
//
// Contracts:
// - An artifact is re-hashed before it is loaded (cache reads re-hash every
//   blob, LoadedArtifact re-hashes the files against the manifest); a
//   mismatch is an error, never a load.
// - Kernel::Run checks every argument and the output before the kernel
//   touches memory; on a violation nothing is written.
// - Runtime and Kernel are thread-safe. Each artifact is loaded once per
//   Runtime and shared by every Kernel that uses it; kernels live as long as
//   the Runtime (or longer, through their shared_ptr).
#pragma once

#include <dlpack/dlpack.h>

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lang/bind.h"
#include "lang/ir.h"
#include "lang/precision.h"
#include "base/status.h"
#include "runtime/boundary.h"
#include "runtime/resolve.h"
#include "runtime/shipped.h"

namespace mlk {
class LoadedArtifact;
namespace client {
class CliCache;
}
}  // namespace mlk

namespace mlk::rt {

struct JitPlugin;  // runtime/jit.h

struct Options {
  std::string cache;           // a store path or a server URL (http://HOST:PORT); "" = $MLK_CACHE, else the default store
  std::string ns = "default";  // namespace (team) in the store; on a server "default" means the token's team
  std::string token;           // bearer token for a server; "" = $MLK_TOKEN
  // A server's read order, "own,NS,..." (client/cli_cache.h); "" = $MLK_NAMESPACES.
  // Malformed, or given with a local store: Open() fails ("namespaces: ...").
  std::string namespaces;
};

// The profiles to try, best first: "cuda_sm90,host" is
// select([prefer(cuda_sm90), fallback(host)]), and how strict the lookup is.
struct TargetPolicy {
  std::vector<std::string> profiles;
  Require require = Require::kAny;
  // `;require=verified:LEVELS` (e.g. verified:envelope): a tuned artifact
  // whose `mlk verify` report passes these levels (docs/verification.md).
  std::vector<std::string> verified;
  // `;require=signed:KEYS` (Ed25519 public keys, 64 hex, or KEY.pub files,
  // comma-separated): only a tuned artifact signed by one of these keys
  // (docs/signing.md); anything else is refused before it is loaded, and
  // there is no JIT fallback. With verified:LEVELS too, only a report one of
  // these keys signed counts.
  std::vector<std::string> trusted;
  // `;precision=bf16|f16|f32`: the program's products under that policy
  // (lang/precision.h, docs/numerics.md): the kernels tuned with `mlk tune
  // --precision` (their own cache keys), else the policy's default schedule.
  // Unset: the program's own (f32 for a .tl file, its manifest's for an
  // artifact directory or a cache entry). Set, a program loaded under
  // another policy is refused, not run at the wrong precision.
  std::optional<Precision> precision;
  // Comma-separated profile names (see `mlk targets`), optionally followed by
  // options `;require=any|tuned|exact|verified:LEVELS|signed:KEYS` and
  // `;precision=P` (several allowed, each after a `;`):
  // "cpu_avx512,host;require=tuned;precision=bf16". "" = {"host"}.
  static Expected<TargetPolicy> Parse(const std::string& text);
  std::string str() const;
};

// Which artifact a kernel runs, and why.
struct Selection {
  // kExact: tuned at exactly the requested shape; kOtherShape: tuned for the
  // same fn and profile at the nearest other shape; kDefaultJit: no tuned
  // artifact, the default schedule compiled by Halide's JIT (the JIT plugin,
  // runtime/jit.h) for this machine; kShipped: no tuned artifact, a schedule
  // shipped with mlk for this machine's CPU family (runtime/shipped.h),
  // compiled by the JIT; kDirectory: the artifact of an `mlk build -o DIR`
  // directory.
  enum class Source { kExact, kOtherShape, kDefaultJit, kDirectory, kShipped };
  Source source = Source::kExact;
  std::string profile;                // the chosen profile
  std::string key;                    // its cache key ("" for the JIT and a directory)
  std::string tuned_dims;             // the shape it was tuned at, "B=1,S=128,D=4096"
  bool exact = false;                 // tuned at exactly the requested shape
  std::string reason;                 // one line for people
  std::vector<std::string> rejected;  // "PROFILE: why not", for the profiles tried before it
  std::string explain() const;        // reason, then the rejections
  // The same, then a call's refinements its handles proved, one line each
  // (CheckedCall::skipped; runtime/checked.h).
  std::string explain(const std::vector<std::string>& skipped) const;
};

// "exact", "other-shape", "default-jit", "directory", "shipped"
const char* source_name(Selection::Source s);

// A loaded program: its checked IR, the program hash of each fn, and, for an
// `mlk build` directory, the artifact it holds.
struct Program {
  std::string file;  // where it was read ("" when it came from the cache)
  std::string text;  // the program's source, as checked (the JIT plugin checks it again)
  Precision precision = Precision::kF32;  // the policy applied to `module` (lang/precision.h)
  ir::Module module;
  std::map<std::string, std::string> fn_hash;  // ir::function_hash of every fn, computed once
  struct Directory {
    std::string dir, fn, profile;
    DimEnv dims;
    // The directory's manifest.json and the files it lists, read once;
    // `statement` is what a directory signature covers
    // (cache::directory_statement). A policy with trusted signers checks
    // the signature over these bytes before anything is loaded, and the
    // artifact is loaded from them, at its first kernel (under the
    // runtime's lock).
    std::map<std::string, std::string> files;
    std::string statement;
    mutable std::shared_ptr<LoadedArtifact> artifact;
  };
  std::optional<Directory> directory;
};

// Weights a kernel's products read packed (docs/artifacts.md, "Packed
// weights"), made by Kernel::PackWeight for one set of weights: one BF16
// tensor of pairs per Kernel::packed_params(), dense, of its shape, and the
// data pointer of the weight it was packed from (Run refuses packs of
// another tensor). A Weight depends only on that tensor and its shape, so
// kernels of other shapes of one fn share it (runtime/model.h).
struct PackedWeights {
  struct Weight {
    std::vector<uint16_t> data;
    std::vector<int64_t> shape;  // [1, k2, c, 2] (scheduler/packed.h)
    const void* source = nullptr;
  };
  std::vector<std::shared_ptr<const Weight>> weights;
  size_t bytes() const;
};

// Per-call options of Kernel::Run.
struct RunOptions {
  // CUDA kernels: the CUstream to run on (nullptr: the legacy default
  // stream). With every tensor on the device the call returns once the work
  // is queued; the caller synchronises the stream before reading the result
  // (as with any CUDA library). Ignored by CPU kernels.
  void* cuda_stream = nullptr;
  // What the checked handles among the arguments proved (runtime/checked.h,
  // CallArgs): the refinements the boundary need not evaluate again.
  std::vector<Proven> proven;
  // CPU kernels with packed_params(): those weights packed by PackWeight
  // from the very tensors passed as those arguments (the kernel reads these
  // instead of packing the arguments again; a pack of another tensor, by
  // its data pointer, or of another shape is refused). Null: packed within
  // the call.
  const PackedWeights* packed = nullptr;
};

class Kernel {
 public:
  const ir::Function& signature() const { return *fn_; }
  const Selection& selection() const { return sel_; }
  // The result's shape for these arguments (checked as Run checks them).
  Expected<std::vector<int64_t>> OutputShape(const std::vector<const DLTensor*>& args) const;
  // Runs on `args` into `out` (allocated by the caller: OutputShape, the
  // fn's result dtype, compact row-major, disjoint from every argument).
  // A CUDA kernel takes kDLCUDA tensors on the process's CUDA device in
  // place (no allocation, no copy) and host tensors with a copy each way;
  // a CPU kernel takes CPU tensors (runtime/boundary.h, the device rule).
  // Without a CUDA driver a CUDA kernel's run fails with Unsupported.
  Status Run(const std::vector<const DLTensor*>& args, DLTensor* out, const RunOptions& options = {}) const;
  // A fn with several results (or one): the shape of each, and a run into
  // one output per result (each as Run's `out`, none sharing memory with
  // another). One call of the kernel computes them all. Run and OutputShape
  // refuse a fn with several results. CPU kernels only.
  Expected<std::vector<std::vector<int64_t>>> OutputShapes(const std::vector<const DLTensor*>& args) const;
  Status RunAll(const std::vector<const DLTensor*>& args, const std::vector<DLTensor*>& outs,
                const RunOptions& options = {}) const;
  // Whether it runs on a GPU (a CUDA artifact).
  bool on_cuda() const;
  // The parameters whose weights its products read packed, in pack order:
  // an artifact's (tuned, shipped or from the JIT store) whose manifest
  // lists packed_weights; empty otherwise (a kernel compiled in memory packs
  // within each call). PackedShapes gives the shape of each for a call on
  // `args` (checked as Run checks them; the output is not needed),
  // PackWeight packs the `which`-th from them, PackWeights all of them, for
  // RunOptions::packed.
  const std::vector<int>& packed_params() const;
  Expected<std::vector<std::vector<int64_t>>> PackedShapes(const std::vector<const DLTensor*>& args) const;
  Expected<std::shared_ptr<const PackedWeights::Weight>> PackWeight(size_t which,
                                                                    const std::vector<const DLTensor*>& args) const;
  Expected<std::shared_ptr<const PackedWeights>> PackWeights(const std::vector<const DLTensor*>& args) const;
  // A run of a fn with one result whose boundary was checked before
  // (runtime/call_plan.h): `c` is the check of a call of the same
  // signature, `args` and `out` this call's data pointers (data +
  // byte_offset), already checked for layout and alignment. CPU kernels.
  // Allocates nothing for a fn of at most kMaxPlannedArgs parameters.
  Status RunChecked(const CheckedCall& c, void* const* args, size_t n, void* out) const;
  static constexpr size_t kMaxPlannedArgs = 16;

 private:
  friend class Runtime;
  Expected<Placement> placement() const;
  std::shared_ptr<const Program> program_;
  const ir::Function* fn_ = nullptr;
  std::shared_ptr<LoadedArtifact> artifact_;  // a tuned artifact, or
  struct Jit;
  std::shared_ptr<Jit> jit_;                  // the default schedule, compiled by the JIT
  DimEnv unbound_;  // values of the dims no parameter binds, from the request
  Selection sel_;
};

class Runtime {
 public:
  static Expected<std::unique_ptr<Runtime>> Open(Options options);
  ~Runtime();

  // The checked program in `file` under `precision` (read and checked once
  // per path, content and policy).
  Expected<std::shared_ptr<const Program>> LoadProgram(const std::string& file, Precision precision = Precision::kF32);
  // The same for a program given as text; `name` stands for its file in
  // diagnostics (a program derived from another, e.g. with the `vjp` fns
  // mlk.torch adds to a block's program).
  Expected<std::shared_ptr<const Program>> LoadSource(const std::string& name, const std::string& text,
                                                      Precision precision = Precision::kF32);
  // The artifact directory `dir` written by `mlk build -o DIR`: its
  // program.tl (checked against the manifest's ir_hash), its library
  // (re-hashed against the manifest) and its required CPU features (checked
  // against this machine). Kernels of it never consult the cache.
  Expected<std::shared_ptr<const Program>> LoadArtifactDir(const std::string& dir);

  // The kernel of fn `fn` of the program in `program_file` for the shape
  // `dims` (every dimension variable; see dims_of): per profile of `policy`
  // in order, skipping profiles this machine cannot run, what find_tuned
  // (runtime/resolve.h) finds; when no profile has a tuned artifact and the
  // policy requires none, the default schedule compiled by Halide's JIT for
  // the first CPU profile of the policy this machine runs (compiled once per
  // fn and profile, kept for the Runtime's life) by the JIT plugin, loaded on
  // first use (runtime/jit.h; NotFound naming where it was looked for when
  // it cannot be loaded). NotFound otherwise, with every profile's reason.
  // selection() says which and why.
  Expected<std::shared_ptr<const Kernel>> GetKernel(const std::string& program_file, const std::string& fn,
                                                    const TargetPolicy& policy, const DimEnv& dims);
  // The same for a program already loaded: no file is read or hashed again.
  Expected<std::shared_ptr<const Kernel>> GetKernel(const std::shared_ptr<const Program>& program, const std::string& fn,
                                                    const TargetPolicy& policy, const DimEnv& dims);
  // The kernels of several fns of `program` at once, in order, as GetKernel
  // finds each: the first request of each fn not found before is resolved
  // side by side with the others' (one per core, at most four at a time),
  // so that their JIT compiles overlap, then the rest in order; a model's
  // first call compiles its distinct fns so (runtime/model.h). The kernels
  // are those GetKernel would give called in request order.
  struct KernelRequest {
    std::string fn;
    DimEnv dims;
    // A kernel the JIT compiles reads weights packed (docs/artifacts.md,
    // "Packed weights"): for a caller that packs its weights once (a model);
    // a tuned artifact is taken as it is.
    bool pack_weights = false;
  };
  std::vector<Expected<std::shared_ptr<const Kernel>>> GetKernels(const std::shared_ptr<const Program>& program,
                                                                  const TargetPolicy& policy,
                                                                  const std::vector<KernelRequest>& wanted);
  // The same by the fn's program hash (`mlk check --hash`): the program text
  // comes from the cached entry (program.tl) and is checked against the hash.
  Expected<std::shared_ptr<const Kernel>> GetKernelByHash(const std::string& program_hash, const std::string& fn,
                                                          const TargetPolicy& policy, const DimEnv& dims);

  const std::string& store_path() const;

 private:
  Runtime() = default;
  // The key of kernels_ for these; "" when `prog` has no such fn.
  static std::string kernel_id(const Program& prog, const std::string& fn, const TargetPolicy& policy,
                               const DimEnv& dims, bool pack_weights = false);
  // `lock` holds mu_; DefaultJit releases it while the plugin compiles.
  Expected<std::shared_ptr<const Kernel>> Select(std::shared_ptr<const Program> prog, const std::string& fn,
                                                 const TargetPolicy& policy, const DimEnv& dims,
                                                 std::unique_lock<std::mutex>& lock, bool pack_weights = false);
  // Whether `policy` admits the directory program `d` at `dims` (its
  // signature, shape and report; runtime.cpp says which policy asks what).
  static Status directory_allowed(const Program::Directory& d, const TargetPolicy& policy,
                                  const std::vector<std::string>& trusted, const DimEnv& dims);
  // Select's steps; the caller holds mu_. LoadTuned: the artifact of the
  // cache entry `found`, loaded once per key (kept in artifacts_); a damaged
  // one is Corruption naming the key.
  Expected<std::shared_ptr<LoadedArtifact>> LoadTuned(const Tuned& found);
  // DefaultJit: fn of `prog` under the shipped schedule `shipped` (where not
  // null; one Halide refuses is noted and the default compiled instead),
  // else the default schedule, compiled by the JIT plugin for `profile` once
  // per fn hash, profile and schedule (kept in jits_). When
  // the plugin cannot be found: NotFound saying no tuned artifact serves
  // `policy` at `dims` either, followed by `why` (the profiles' reasons).
  // The compile runs with `lock` (of mu_) released, so that other fns
  // compile alongside (Model::Prepare resolves a model's kernels side by
  // side); a caller wanting the same fn meanwhile waits for that compile.
  // A failed compile is forgotten: a later call tries again.
  Expected<std::shared_ptr<Kernel::Jit>> DefaultJit(const Program& prog, const std::string& fn, const std::string& fhash,
                                                    const Profile& profile, const TargetPolicy& policy,
                                                    const DimEnv& dims, const std::string& why,
                                                    const ShippedChoice* shipped, std::unique_lock<std::mutex>& lock,
                                                    bool pack_weights);
  // DefaultJit's compile: ahead of time into the JIT store (runtime/jit_store.h),
  // or the store's earlier build loaded; in memory where the store is off or
  // cannot keep it (no C compiler, a store another user owns).
  // `schedule`: a schedule's JSON, "" for the default. `pack_weights`: the
  // build's products read weights packed (in memory: never).
  Expected<std::shared_ptr<Kernel::Jit>> CompileDefault(const JitPlugin& plugin, const Program& prog,
                                                        const std::string& fn, const std::string& fhash,
                                                        const Profile& profile, const DimEnv& dims,
                                                        const std::string& schedule, bool pack_weights) const;
  std::mutex mu_;
  Options opts_;
  std::unique_ptr<client::CliCache> cache_;
  std::map<std::string, std::shared_ptr<const Program>> programs_;        // by path + sha256 of the text
  std::map<std::string, std::shared_ptr<LoadedArtifact>> artifacts_;     // by cache key
  std::map<std::string, std::shared_ptr<const Kernel>> kernels_;         // by program, fn, policy, dims
  // By fn hash and profile; ready once its compile is done.
  std::map<std::string, std::shared_future<Expected<std::shared_ptr<Kernel::Jit>>>> jits_;
};

// Every dimension variable of `f` from the shapes of `args` and `given`
// (values of dims no argument binds), checked as Kernel::Run checks.
Expected<DimEnv> dims_of(const ir::Function& f, const std::vector<const DLTensor*>& args, const DimEnv& given);

}  // namespace mlk::rt
