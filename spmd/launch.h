// `mlk run --ranks N`: an SPMD run of a fn defined by `shard` on N local
// ranks, started with Open MPI's mpirun over loopback (spmd/rank_main.cpp is
// the per-rank program). The launcher checks what it can before starting
// anything (the fn has a plan, N is its mesh's size) and reports a failed run
// with mpirun's exit status.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/ir.h"

namespace mlk::spmd {

struct SpmdRun {
  std::string file, fn, output;
  std::string cache, ns = "default";  // --cache (empty: the default store), --namespace
  bool no_cache = false;
  std::vector<std::string> inputs;
  std::map<std::string, int64_t> dims;
  int64_t ranks = 0;
  double timeout_s = 60;
  std::string namespaces;  // --namespaces: given to the ranks as $MLK_NAMESPACES; "" = the caller's
  // --require signed:KEYS: given to the ranks as $MLK_RANK_TRUSTED; each
  // rank then loads only artifacts one of them signed, with no JIT fallback.
  std::vector<std::string> trusted = {};
};

// Usage when `fn` has no plan or the rank count is not its mesh's.
Status check_spmd(const SpmdRun& r, const ir::Module& m);

// Runs mpirun and waits; Ok when every rank succeeded.
Status launch_spmd(const SpmdRun& r, const ir::Module& m);

}  // namespace mlk::spmd
