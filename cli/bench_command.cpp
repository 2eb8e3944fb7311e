// `mlk bench`: its flags, parsed into bench::RunOptions and checked together,
// then one bench::run (bench/run.h: the timing, the gate, the reports).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>

#include "base/signing.h"
#include "bench/run.h"
#include "bench/variants.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/flags.h"

namespace mlk::cli {

namespace {

using Options = bench::RunOptions;


Expected<double> parse_pct(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || v > 1000)
    return Status::Usage("--max-regression: `" + text + "` is not a percentage (a number above 0, e.g. 10)");
  return v;
}

Expected<std::vector<std::string>> parse_peers(const std::string& text) {
  const auto& all = bench::all_peer_names();
  if (text == "all") return all;
  if (text == "none") return std::vector<std::string>{};
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool known = false;
    for (const auto& n : all) known = known || n == item;
    if (!known) {
      std::string list;
      for (const auto& n : all) list += (list.empty() ? "" : ", ") + n;
      return Status::Usage("--peers: unknown peer `" + item + "` (known: " + list + ", or all, or none)");
    }
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  }
  return out;
}

const char* kBenchDescription =
    "Times fns as users get them: the tuned artifact from the artifact cache for this\n"
    "fn, shape and profile, or (for `host`) the default schedule when the cache has\n"
    "none, and says which. Inputs are random (fixed seed); each variant is warmed up\n"
    "and timed in interleaved rounds. Prints median times and mlk's speedup over each\n"
    "peer on stdout, progress on stderr.\n";

const char* kBenchEpilogue =
    "Exit status: 0 success; 1 a regression (named on stderr) or bad input (a .tl\n"
    "error, a missing or malformed suite or baseline, a kernel the baseline lacks);\n"
    "2 bad usage; 3 an internal error (a bug in mlk).\n";

FlagSetter store_pct(std::optional<double>& out) {
  return [&out](const std::string&, const std::string& text) -> Status {
    auto p = parse_pct(text);
    if (!p.ok()) return p.status();
    out = *p;
    return Status::Ok();
  };
}

FlagSetter store_peers(std::optional<std::vector<std::string>>& out) {
  return [&out](const std::string&, const std::string& text) -> Status {
    auto p = parse_peers(text);
    if (!p.ok()) return p.status();
    out = *p;
    return Status::Ok();
  };
}

// --settle: a whole number of seconds, 0 included.
FlagSetter store_settle(double& out) {
  return [&out](const std::string& flag, const std::string& text) -> Status {
    auto n = parse_int_flag(flag, text, 0, std::numeric_limits<int>::max());
    if (!n.ok() && n.status().message().find("too large") == std::string::npos)
      return Status::Usage(flag + ": `" + text + "` is not a whole number of seconds");
    if (!n.ok()) return n.status();
    out = static_cast<double>(*n);
    return Status::Ok();
  };
}

// --rounds: a count, at most 1000 used.
FlagSetter store_rounds(int& out) {
  return [&out](const std::string& flag, const std::string& text) -> Status {
    auto n = parse_count(flag, text);
    if (!n.ok()) return n.status();
    out = static_cast<int>(std::min<int64_t>(*n, 1000));
    return Status::Ok();
  };
}

CommandSpec spec(Options& o) {
  return {
      .name = "bench",
      .summary = "time fns against their peers; record baselines and gate on regressions",
      .forms = {{"FILE.tl", {"!--fn", "!--target", "--dims", "..."}}, {"", {"!--suite", "--target", "..."}}},
      .description = kBenchDescription,
      .flags =
          {
              {.name = "--fn", .metavar = "NAME", .help = "the fn to time", .set = store(o.fn)},
              {.name = "--dims", .metavar = "N=V,...", .help = "its shape",
               .default_value = "the fn's first `tune` declaration", .set = store_dims(o.dims)},
              {.name = "--target", .metavar = "PROFILE", .help = "a CPU profile this machine runs (see `mlk targets`)",
               .set = store(o.target)},
              {.name = "--suite", .metavar = "SUITE.json", .help = "a JSON list of kernels instead of FILE.tl (docs/cli.md)",
               .set = store(o.suite)},
              {.name = "--peers", .metavar = "LIST",
               .help = "comma-separated: default, Adams2019, Li2018, Mullapudi2016, openblas (matmul fns); or all, or "
                       "none",
               .default_value = "all; none with --record or --baseline, unless --plot is given",
               .set = store_peers(o.peers)},
              {.name = "--rounds", .metavar = "N", .help = "interleaved rounds, each on fresh buffers",
               .default_value = "10", .set = store_rounds(o.rounds)},
              {.name = "--min-time", .metavar = "MS", .help = "time spent timing each variant, over all rounds",
               .default_value = "500", .set = store_count(o.min_time_ms)},
              {.name = "--seed", .metavar = "K", .help = "the random inputs' seed", .default_value = "1",
               .set = store_count(o.seed)},
              {.name = "--record", .metavar = "FILE", .help = "write the results as a baseline (the same JSON as --json)",
               .set = store(o.record)},
              {.name = "--against", .metavar = "KEY",
               .help = "A/B with one kernel (FILE.tl): the artifact stored under cache key KEY (from the cache or "
                       "the server of --cache), or `default` for the default schedule, timed in the same rounds as "
                       "this build's on the same inputs; the verdict as with --baseline",
               .set = store(o.against)},
              {.name = "--baseline", .metavar = "FILE",
               .help = "compare with a baseline (a --record file). A/B: the baseline's own artifact (by the cache "
                       "key it records, from the cache or server; or the default schedule of the same program) is "
                       "timed sample by sample in turn with this build's, on the same inputs, so a busy machine "
                       "slows both alike. Per round and side, the fastest sample; a kernel is suspect when the mean "
                       "log-ratio of the rounds is more than PCT slower and its 99% t interval lies above "
                       "1 + PCT/100 (p < 0.01); a "
                       "suspect is measured again, and is a regression only when the re-measurement agrees. When "
                       "the artifact cannot be had: against the recorded times (the weaker mode, said so)",
               .set = store(o.baseline)},
              {.name = "--recorded",
               .help = "compare with the baseline's recorded times only (the weaker mode: Mann-Whitney and a "
                       "bootstrap interval of unpaired rounds; a busy machine looks like a slower kernel)",
               .set = set_bool(o.recorded)},
              {.name = "--max-regression", .metavar = "PCT",
               .help = "fail (exit 1) on a regression of more than PCT percent; without it, --baseline reports at "
                       "10% and never fails",
               .set = store_pct(o.max_regression)},
              {.name = "--count-instructions",
               .help = "also count the instructions of one call of each kernel's artifact (and, A/B, of the "
                       "baseline's): by the CPU's counters where this machine gives them, else under valgrind's "
                       "callgrind (exact, repeatable); one thread; tuned artifacts only",
               .set = set_bool(o.count_insns)},
              {.name = "--max-instruction-increase", .metavar = "PCT",
               .help = "fail (exit 1) when a kernel's instruction count is more than PCT percent above the "
                       "baseline's artifact's, however the times look",
               .set = store_pct(o.max_insn_increase)},
              {.name = "--push",
               .help = "store the results on the server (kernel, target, machine, versions, cache key, samples; "
                       "token from $MLK_TOKEN); with --baseline-set, as that set's baseline too",
               .set = set_bool(o.push)},
              {.name = "--baseline-set", .metavar = "NAME",
               .help = "with --push: the named baseline (e.g. main) these results become; otherwise compare with "
                       "it, fetched from the server, as with --baseline",
               .set = store(o.baseline_set)},
              {.name = "--server", .metavar = "URL", .help = "the `mlk serve` of --push and --baseline-set",
               .default_value = "--cache, when it is an http:// URL", .set = store(o.server)},
              {.name = "--any-machine", .help = "allow a baseline recorded on another machine",
               .set = set_bool(o.any_machine)},
              {.name = "--settle", .metavar = "SECONDS",
               .help = "with --baseline: wait up to this long for the machine to run a calibration loop as fast as "
                       "when the baseline was recorded, before timing and before re-measuring",
               .default_value = "30", .set = store_settle(o.settle_s)},
              {.name = "--json", .metavar = "OUT",
               .help = "write the results, every sample included, as JSON; OUT `-`: on stdout, and the tables go to "
                       "stderr",
               .set = store(o.json_out)},
              {.name = "--plot", .metavar = "FILE", .help = "write a bar chart of mlk's speedup over each peer: "
                       "FILE.svg, or FILE.png (the SVG rendered by librsvg)",
               .set = store(o.plot)},
              cache_flag(o.cache, CacheFlag::kStoreOrServer),
              {.name = "--namespace", .metavar = "NAME", .help = "the cache namespace", .default_value = "default",
               .set = store(o.ns)},
              namespaces_flag(o.namespaces),
              {.name = "--no-cache", .help = "never consult the cache (time the default schedule)",
               .set = set_bool(o.no_cache)},
              {.name = "--trusted-signers", .metavar = "KEYS",
               .help = "load a cache artifact only when one of these keys (64 hex or KEY.pub files, comma-separated) "
                       "signed it; others are passed over (the default schedule is timed)",
               .default_value = "$MLK_TRUSTED_SIGNERS, else none",
               .set = [&o](const std::string&, const std::string& v) -> Status {
                 auto keys = parse_trusted_keys(v);
                 if (!keys.ok()) return Status::Usage("--trusted-signers: " + keys.status().message());
                 o.trusted = *keys;
                 return Status::Ok();
               }},
              {.name = "-q", .help = "no progress lines", .set = set_bool(o.quiet), .aliases = {"--quiet"}},
          },
      .epilogue = kBenchEpilogue,
      .positional = one_positional(o.file, " (one .tl file, or --suite)"),
  };
}

// What the table cannot say: which flags go together; the default peers.
Status complete_options(Options& o) {
  if (o.file.empty() && o.suite.empty()) return Status::Usage("no input: give FILE.tl --fn NAME, or --suite FILE");
  if (!o.file.empty() && !o.suite.empty()) return Status::Usage("give FILE.tl or --suite, not both");
  if (!o.file.empty() && o.fn.empty()) return Status::Usage("--fn NAME is required with FILE.tl");
  if (!o.file.empty() && o.target.empty()) return Status::Usage("--target PROFILE is required (see `mlk targets`)");
  if (!o.suite.empty() && (!o.fn.empty() || !o.dims.empty()))
    return Status::Usage("--fn and --dims go with FILE.tl; a suite names its own");
  if (o.max_regression && o.baseline.empty() && o.against.empty() && (o.baseline_set.empty() || o.push))
    return Status::Usage("--max-regression needs --baseline FILE or --against KEY");
  if (o.server.empty() && (o.cache.rfind("http://", 0) == 0 || o.cache.rfind("https://", 0) == 0)) o.server = o.cache;
  if ((o.push || !o.baseline_set.empty()) && o.server.empty())
    return Status::Usage(std::string(o.push ? "--push" : "--baseline-set") +
                         " needs --server URL (or a --cache that is a server URL)");
  if (!o.baseline_set.empty() && !o.push && (!o.baseline.empty() || !o.against.empty()))
    return Status::Usage("--baseline-set NAME is the baseline: not with --baseline or --against");
  if (o.max_insn_increase && !o.count_insns)
    return Status::Usage("--max-instruction-increase needs --count-instructions");
  if (o.max_insn_increase && o.baseline.empty() && o.against.empty() && (o.baseline_set.empty() || o.push))
    return Status::Usage("--max-instruction-increase needs --baseline FILE or --against KEY");
  if (!o.against.empty() && o.file.empty())
    return Status::Usage("--against KEY goes with FILE.tl (one kernel); a suite compares with --baseline FILE");
  if (!o.against.empty() && !o.baseline.empty()) return Status::Usage("give --against or --baseline, not both");
  if (!o.against.empty() && o.recorded) return Status::Usage("--recorded needs --baseline FILE (--against has no times)");
  if (!o.against.empty() && o.against != "default" &&
      (o.against.size() != 64 || o.against.find_first_not_of("0123456789abcdef") != std::string::npos))
    return Status::Usage("--against: `" + o.against + "` is neither a cache key (64 hex digits) nor `default`");
  if (!o.plot.empty() && (o.plot.size() < 4 || (o.plot.substr(o.plot.size() - 4) != ".svg" &&
                                                 o.plot.substr(o.plot.size() - 4) != ".png")))
    return Status::Usage("--plot: `" + o.plot + "` must end in .svg or .png");
  if (!o.peers) {
    bool gating = !o.record.empty() || !o.baseline.empty() || !o.against.empty() || !o.baseline_set.empty();
    o.peers = gating && o.plot.empty() ? std::vector<std::string>{} : bench::all_peer_names();
  }
  if (!o.plot.empty() && o.peers->empty()) return Status::Usage("--plot needs peers to compare with (not --peers none)");
  return Status::Ok();
}

}  // namespace

CommandSpec bench_spec() {
  static Options scratch;
  return spec(scratch);
}

int run_bench(const std::vector<std::string>& args) {
  Options o;
  if (int bad = parse_or_usage_error(spec(o), args)) return bad;
  if (Status s = complete_options(o); !s.ok()) return usage_error("bench", s.message());
  if (o.trusted.empty() && !o.no_cache) {  // $MLK_TRUSTED_SIGNERS: the machine's default policy
    auto keys = default_trusted_signers();
    if (!keys.ok()) return usage_error("bench", keys.status().message());
    o.trusted = *keys;
  }
  return bench::run(o);
}

}  // namespace mlk::cli
