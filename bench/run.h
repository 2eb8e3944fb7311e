// One `mlk bench` run as a library (the command, cli/bench_command.cpp, only
// parses its flags into RunOptions and calls run): times fns as users get
// them (the tuned artifact from the cache, else the default schedule) side by
// side with their peers, writes baselines, and gates on regressions against
// one (docs/cli.md, docs/ci.md).
//
// The order of work: resolve every kernel (type-check, shape, target) and
// check the baseline covers them, so that bad input fails before minutes of
// timing; time each kernel (mlk and peers in interleaved rounds); re-measure
// every kernel the gate suspects; print tables; write files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlk::bench {

// What `mlk bench` was asked, its flags checked together (which go with
// which: the command's complete_options). Names as the flags'.
struct RunOptions {
  std::string file, fn, target, suite, cache, ns = "default", namespaces;
  std::vector<std::string> trusted;  // --trusted-signers: cache artifacts only signed by one of these
  std::map<std::string, int64_t> dims;
  std::string record, baseline, json_out, plot, against, baseline_set, server;
  std::optional<double> max_regression, max_insn_increase;
  std::optional<std::vector<std::string>> peers;  // set: the command fills in the default
  int rounds = 10;
  double min_time_ms = 500;
  double settle_s = 30;
  uint64_t seed = 1;
  bool no_cache = false, any_machine = false, quiet = false, recorded = false, count_insns = false, push = false;
};

// The whole run: progress and errors on stderr ("mlk bench: ..."), the
// tables on stdout (stderr with `--json -`), the files asked for. Returns
// the exit status: 0, 1 (a kernel failed, a confirmed regression under a
// gate, a file not written), or an error's (Status::exit_code).
int run(const RunOptions& o);

}  // namespace mlk::bench
