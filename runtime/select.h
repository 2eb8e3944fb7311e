// Explicit selection over artifacts the caller holds:
//
//   select({prefer(dir_candidate(rt, "a_sm90")), fallback(dir_candidate(rt, "a_cpu"))})
//
// Where a target policy (runtime.h, TargetPolicy) chooses among profiles of
// one artifact cache, a Selector chooses among candidates given one by one:
// `mlk build -o DIR` directories, or programs already loaded (a .tl file with
// its own policy, whose kernels come from its runtime's cache or the JIT).
// docs/runtime.md, "Choosing between artifacts you hold".
//
// Contracts:
// - Order: every `prefer` candidate is tried before any `fallback` one, each
//   group in the order given. A prefer candidate is used when it can serve the
//   fn here; a fallback one only when no prefer candidate can.
// - Per fn: a candidate serves fn `f` when it was loaded, has `f` (a directory
//   holds one fn), and can run here (a directory: its manifest's profile passes
//   can_run, so a CUDA artifact needs a driver and a device, a cpu_avx512 one
//   the AVX-512 features; a program: a profile of its policy runs here). Per
//   call, the candidate's runtime must also find a kernel at the call's shape
//   (a program under `require=tuned` may have none); NotFound or Unsupported
//   there skips it too, with that reason.
// - Skipped candidates are recorded with why (Choice::considered, explain()).
//   When none serves, NotFound lists every candidate's reason.
// - A damaged candidate (Corruption) is an error, never skipped: a fallback
//   never hides a damaged artifact (as with the cache, runtime.md).
// - Every candidate that has fn `f` must declare the same signature for it
//   (parameters, dims, results); select() refuses others (InvalidArgument).
// - A Selector is thread-safe; what it learns per fn (and per fn and shape)
//   is kept for its life: this machine does not change under it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/runtime.h"
#include "targets/detect.h"

namespace mlk::rt {

enum class Rank { kPrefer, kFallback };
const char* rank_name(Rank r);  // "prefer", "fallback"

struct Candidate {
  Rank rank = Rank::kPrefer;
  std::string name;                        // for people: the directory, or the program's file
  std::shared_ptr<Runtime> runtime;        // the runtime that loaded `program` (and finds its kernels)
  std::shared_ptr<const Program> program;  // null when it could not be loaded here (see `unavailable`)
  TargetPolicy policy;                     // a program's policy; unused for a directory
  Status unavailable;                      // why it could not be loaded (NotFound, Unsupported)
};

// A candidate from an `mlk build -o DIR` directory, loaded by `rt`
// (Runtime::LoadArtifactDir). A directory that is not there, or that this
// machine cannot load (CPU features it lacks), is a candidate that records
// why; a damaged one (Corruption) and any other error are returned.
Expected<Candidate> dir_candidate(std::shared_ptr<Runtime> rt, const std::string& dir);
// A program the caller loaded with `rt` (LoadProgram or LoadArtifactDir);
// `policy` chooses its kernels when it is a .tl program.
Candidate program_candidate(std::shared_ptr<Runtime> rt, std::shared_ptr<const Program> program,
                            TargetPolicy policy = {});
Candidate prefer(Candidate c);    // rank kPrefer
Candidate fallback(Candidate c);  // rank kFallback

// One candidate as tried for a fn.
struct Considered {
  size_t index = 0;  // its position in the list given to select()
  Rank rank = Rank::kPrefer;
  std::string name;
  bool chosen = false;
  std::string reason;  // skipped: why; chosen: what runs
};

// Which candidate serves a fn here, and why the ones tried before it did not.
struct Choice {
  std::string fn;
  std::vector<Considered> considered;  // in the order tried, up to and including the chosen one
  bool found() const { return !considered.empty() && considered.back().chosen; }
  const Considered* chosen() const { return found() ? &considered.back() : nullptr; }
  // "`rmsnorm`: candidate 1 (fallback, /tmp/a_cpu): ...", then "  not candidate 0 (prefer, ...): why".
  std::string explain() const;
};

class Selector {
 public:
  // Checks the candidates (Corruption, signatures; see the contracts).
  static Expected<std::shared_ptr<Selector>> Make(std::vector<Candidate> candidates);

  const std::vector<Candidate>& candidates() const { return candidates_; }
  // Every public fn of the loaded candidates (a directory: its one fn), sorted.
  std::vector<std::string> fns() const;
  // fn's signature, from the first loaded candidate that has it; null if none.
  const ir::Function* signature(const std::string& fn) const;

  // The shape-free choice for fn (never an error: found() says whether one serves).
  Choice Choose(const std::string& fn) const;

  struct Picked {
    std::shared_ptr<const Kernel> kernel;
    Choice choice;  // the chosen reason is the kernel's selection().explain()
  };
  // The kernel for fn at `dims` (every dimension variable): Choose's order,
  // asking each candidate's runtime in turn. NotFound naming every candidate
  // when none serves; other errors (Corruption, a bad shape) as they are.
  Expected<Picked> GetKernel(const std::string& fn, const DimEnv& dims) const;

 private:
  Selector() = default;
  // Why candidate `c` cannot serve fn here ("" when it can, shape aside).
  std::string static_reason(const Candidate& c, const std::string& fn) const;
  std::vector<size_t> order_;  // prefer candidates, then fallback ones
  std::vector<Candidate> candidates_;
  CpuInfo cpu_;
  CudaInfo cuda_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Choice> choices_;  // by fn
  mutable std::map<std::string, Picked> picked_;   // by fn and dims
};

// select({prefer(..), fallback(..)}): Selector::Make.
Expected<std::shared_ptr<Selector>> select(std::vector<Candidate> candidates);

}  // namespace mlk::rt
