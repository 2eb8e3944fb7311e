// `mlk bench`: times fns as users get them (the tuned artifact from the cache,
// else the default schedule) side by side with their peers, writes baselines,
// and gates on regressions against one (docs/cli.md, docs/ci.md).
//
// The order of work: parse flags; resolve every kernel (type-check, shape,
// target) and check the baseline covers them, so that bad input fails before
// minutes of timing; time each kernel (mlk and peers in interleaved rounds);
// re-measure every kernel the gate suspects; print tables; write files.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "base/time.h"
#include "bench/baseline_check.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "bench/svg_plot.h"
#include "bench/tables.h"
#include "bench/timing.h"
#include "bench/variants.h"
#include "cache/paths.h"
#include "cli/args.h"
#include "cli/flags.h"
#include "cli/command.h"
#include "lang/frontend.h"
#include "lang/memory_budget.h"
#include "targets/toolchain.h"

namespace mlk::cli {

namespace {

struct Options {
  std::string file, fn, target, suite, cache, ns = "default";
  std::map<std::string, int64_t> dims;
  std::string record, baseline, json_out, plot;
  std::optional<double> max_regression;
  std::optional<std::vector<std::string>> peers;
  int rounds = 10;
  double min_time_ms = 500;
  double settle_s = 30;
  uint64_t seed = 1;
  bool no_cache = false, any_machine = false, quiet = false, recorded = false;
};

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
              {.name = "--baseline", .metavar = "FILE",
               .help = "compare with a baseline. Per round, the median; a kernel is suspect when the median round is "
                       "more than PCT slower, a one-sided Mann-Whitney U test of the rounds gives p < 0.01, and the "
                       "99% bootstrap interval of the ratio lies above 1 + PCT/100; a suspect is measured again, and "
                       "is a regression only when the re-measurement agrees. The re-measurement is A/B: the "
                       "baseline's own artifact (by its recorded cache key, from the cache; or the default schedule "
                       "of the same program) timed interleaved with this build's, so a busy machine slows both alike",
               .set = store(o.baseline)},
              {.name = "--recorded",
               .help = "re-measure against the baseline's recorded times only (the weaker mode; also used when the "
                       "baseline's artifact is gone)",
               .set = set_bool(o.recorded)},
              {.name = "--max-regression", .metavar = "PCT",
               .help = "fail (exit 1) on a regression of more than PCT percent; without it, --baseline reports at "
                       "10% and never fails",
               .set = store_pct(o.max_regression)},
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
              {.name = "--plot", .metavar = "FILE.svg", .help = "write a bar chart of mlk's speedup over each peer",
               .set = store(o.plot)},
              {.name = "--cache", .metavar = "PATH", .help = "the store",
               .default_value = "$MLK_CACHE, else $XDG_CACHE_HOME/mlk/cache.db", .set = store(o.cache)},
              {.name = "--namespace", .metavar = "NAME", .help = "the cache namespace", .default_value = "default",
               .set = store(o.ns)},
              {.name = "--no-cache", .help = "never consult the cache (time the default schedule)",
               .set = set_bool(o.no_cache)},
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
  if (o.max_regression && o.baseline.empty()) return Status::Usage("--max-regression needs --baseline FILE");
  if (!o.plot.empty() && (o.plot.size() < 4 || o.plot.substr(o.plot.size() - 4) != ".svg"))
    return Status::Usage("--plot: `" + o.plot + "` must end in .svg (mlk writes SVG only; convert with rsvg-convert for PNG)");
  if (!o.peers) {
    bool gating = !o.record.empty() || !o.baseline.empty();
    o.peers = gating && o.plot.empty() ? std::vector<std::string>{} : bench::all_peer_names();
  }
  if (!o.plot.empty() && o.peers->empty()) return Status::Usage("--plot needs peers to compare with (not --peers none)");
  return Status::Ok();
}

int fail(const Status& s) {
  std::fprintf(stderr, "mlk bench: %s\n", s.message().c_str());
  return s.exit_code();
}

// Test seam (docs/ci.md): MLK_BENCH_TEST_SLOW=FN doubles the time of every call
// of FN's mlk variant in the first measurement; FN:always in the re-measurement
// too. A simulated regression that is real (always) or transient (first only).
struct SlowSeam {
  std::string fn;
  bool always = false;
  bool first_pass = true;
  static SlowSeam from_env() {
    SlowSeam s;
    if (const char* e = std::getenv("MLK_BENCH_TEST_SLOW")) {
      s.fn = e;
      if (auto c = s.fn.find(':'); c != std::string::npos) {
        s.always = s.fn.substr(c + 1) == "always";
        s.fn = s.fn.substr(0, c);
      }
    }
    return s;
  }
};

std::function<Status()> slowed(std::function<Status()> run, const SlowSeam* seam) {
  return [run = std::move(run), seam]() {
    auto t0 = std::chrono::steady_clock::now();
    Status s = run();
    if (seam->first_pass || seam->always) {
      auto until = std::chrono::steady_clock::now() + (std::chrono::steady_clock::now() - t0);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    return s;
  };
}

// One `mlk bench` invocation: its steps, in the order of work the file
// comment gives, and the state they hand on to each other.
class Bench {
 public:
  explicit Bench(const Options& o) : o_(o) {
    progress_ = [this](const std::string& s) {
      if (!o_.quiet) std::fprintf(stderr, "%s\n", s.c_str());
    };
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  // The whole command; returns its exit status.
  int Run();

 private:
  // 1. What to time, resolved and checked.
  Status ResolveKernels();
  void StartReport();
  Status ReadBaseline();
  // 2. Time each kernel.
  void TimeKernels();
  void TimeKernel(size_t i);
  bench::KernelResult ResultOf(bench::PreparedKernel& k, const std::vector<bench::TimingResult>& times,
                               const std::vector<size_t>& peer_of_item) const;
  bool JudgeAgainstBaseline(bench::KernelResult& kr, const std::string& tag);
  // 3. Re-measure the suspects.
  void ConfirmSuspects();
  void Confirm(size_t ri);
  std::unique_ptr<bench::PreparedKernel> BaselineTwin(const bench::PreparedKernel& k, const bench::KernelResult& kr,
                                                      const bench::KernelResult& b, std::string& no_ab) const;
  // 4. Report.
  void PrintTables(FILE* out) const;
  void PrintBaseline(FILE* out) const;
  int WriteFiles() const;
  Status WritePlot() const;
  void PrintRegressions() const;

  const Options& o_;
  std::function<void(const std::string&)> progress_;
  std::vector<std::unique_ptr<bench::PreparedKernel>> kernels_;
  bench::BenchReport report_;
  std::optional<bench::BenchReport> base_;
  bench::GateOptions gate_;
  bench::PrepareOptions popts_;
  bench::TimingOptions topts_;
  SlowSeam seam_;
  int failures_ = 0;
  std::vector<size_t> suspects_;  // indices into kernels_ (and report_.kernels)
};

Status Bench::ResolveKernels() {
  std::vector<bench::KernelSpec> specs;
  if (!o_.suite.empty()) {
    auto s = bench::read_suite(o_.suite, o_.target);
    if (!s.ok()) return s.status();
    specs = *s;
  } else {
    specs.push_back({"", o_.file, o_.fn, o_.target, o_.dims, ""});
  }
  for (const auto& spec : specs) {
    auto k = bench::PreparedKernel::Resolve(spec);
    if (!k.ok()) return k.status();
    for (const auto& other : kernels_)
      if (other->id() == (*k)->id())
        return Status::InvalidArgument("kernel `" + other->id() + "` is listed twice" +
                                       (spec.where.empty() ? "" : " (" + spec.where + ")"));
    // Its inputs (and the fresh copies RenewBuffers makes) and the outputs of
    // mlk and every peer must fit in memory: checked before Prepare allocates.
    if (auto fe = compile_file(spec.file); fe.ok() && fe->ok())
      if (const ir::Function* f = fe->module.find(spec.fn)) {
        std::string label = spec.where.empty() ? (spec.dims.empty() ? "`" + (*k)->id() + "`" : "--dims " + dims_label(spec.dims))
                                               : spec.where + ": `" + (*k)->id() + "`";
        if (Status s = check_memory_budget(*f, (*k)->dims(), 2, 2 + static_cast<int>(o_.peers->size()), label); !s.ok())
          return s;
      }
    kernels_.push_back(std::move(k).value());
  }
  return Status::Ok();
}

void Bench::StartReport() {
  report_.created = now_iso();
  report_.machine = bench::this_machine();
  report_.versions = {{"mlk", mlk_version()}, {"halide", halide_version()}, {"llvm", llvm_version()}};
  report_.settings = {{"rounds", o_.rounds}, {"min_time_ms", o_.min_time_ms}, {"seed", static_cast<double>(o_.seed)},
                      {"sample_ms", bench::TimingOptions{}.sample_ms}};
  gate_.max_regression_pct = o_.max_regression.value_or(10);
}

// --baseline: read, and checked to cover every kernel on this machine.
Status Bench::ReadBaseline() {
  if (o_.baseline.empty()) return Status::Ok();
  auto b = bench::read_report(o_.baseline);
  if (!b.ok()) return b.status();
  if (Status s = bench::check_baseline(*b, o_.baseline, report_.machine, kernels_, o_.any_machine); !s.ok()) return s;
  base_ = std::move(b).value();
  report_.baseline_path = o_.baseline;
  report_.max_regression_pct = gate_.max_regression_pct;
  report_.gate = o_.max_regression.has_value();
  for (const auto& [k, v] : base_->versions)
    if (report_.versions.count(k) && report_.versions[k] != v)
      progress_("mlk bench: note: the baseline was recorded with " + k + " " + v + ", this is " + report_.versions[k]);
  return Status::Ok();
}

void Bench::TimeKernels() {
  report_.calibration_ms = bench::settle(base_ ? base_->calibration_ms : std::vector<double>{}, o_.settle_s, progress_);
  popts_.store_path = o_.no_cache ? "" : cache::default_store_path(o_.cache);
  popts_.ns = o_.ns;
  popts_.peers = *o_.peers;
  popts_.seed = o_.seed;
  topts_.rounds = o_.rounds;
  topts_.min_time_s = o_.min_time_ms / 1000;
  seam_ = SlowSeam::from_env();
  for (size_t i = 0; i < kernels_.size(); ++i) TimeKernel(i);
}

// Prepares kernels_[i] and times mlk and its peers in interleaved rounds; a
// kernel that fails is counted in failures_ (and said on stderr), one the
// baseline suspects stays compiled for its re-measurement.
void Bench::TimeKernel(size_t i) {
  bench::PreparedKernel& k = *kernels_[i];
  const std::string tag = "[bench " + std::to_string(i + 1) + "/" + std::to_string(kernels_.size()) + " " + k.name() + "]";
  bench::PrepareOptions popts = popts_;
  popts.progress = [&](const std::string& s) { progress_(tag + " " + s); };
  if (Status s = k.Prepare(popts); !s.ok()) {
    std::fprintf(stderr, "mlk bench: %s: %s\n", k.id().c_str(), s.message().c_str());
    ++failures_;
    return;
  }
  progress_(tag + " mlk: " + k.mlk().how);
  if (!seam_.fn.empty() && seam_.fn == k.spec().fn) k.mlk().run = slowed(k.mlk().run, &seam_);
  std::vector<bench::Timed> items = {{k.mlk().run, 3, [&k] { k.RenewBuffers(); }}};
  std::vector<size_t> peer_of_item;
  for (size_t p = 0; p < k.peers().size(); ++p)
    if (k.peers()[p].run) {
      items.push_back({k.peers()[p].run, 1, nullptr});
      peer_of_item.push_back(p);
    }
  progress_(tag + " timing " + std::to_string(items.size()) + " variant" + (items.size() == 1 ? "" : "s") + " in " +
            std::to_string(o_.rounds) + " rounds");
  auto times = bench::measure_interleaved(items, topts_);
  bench::KernelResult kr = ResultOf(k, times, peer_of_item);
  if (!kr.mlk.measured()) {
    std::fprintf(stderr, "mlk bench: %s: %s\n", k.id().c_str(), kr.mlk.error.c_str());
    ++failures_;
    k.Release();
    return;
  }
  progress_(tag + " mlk median " + bench::fmt_ms(kr.mlk.median_ms()) + " ms over " +
            std::to_string(kr.mlk.samples_ms.size()) + " samples of " + std::to_string(kr.mlk.calls_per_sample) +
            " call" + (kr.mlk.calls_per_sample == 1 ? "" : "s"));
  bool keep = base_ && JudgeAgainstBaseline(kr, tag);
  report_.kernels.push_back(std::move(kr));
  if (!keep) k.Release();  // a suspect stays compiled for its re-measurement
}

// The result of timing `k`: times[0] is mlk's, times[t] that of the peer
// peer_of_item[t - 1].
bench::KernelResult Bench::ResultOf(bench::PreparedKernel& k, const std::vector<bench::TimingResult>& times,
                                    const std::vector<size_t>& peer_of_item) const {
  bench::KernelResult kr;
  kr.id = k.id();
  kr.name = k.name();
  kr.file = k.spec().file;
  kr.fn = k.spec().fn;
  kr.target = k.spec().target;
  kr.dims = k.dims();
  kr.ir_hash = k.ir_hash();
  kr.cache_key = k.cache_key();
  kr.variant = k.variant();
  kr.mlk = {"mlk", k.mlk().how, times[0].status.ok() ? "" : times[0].status.message(), times[0].samples_ms,
            times[0].round_sizes, times[0].calls_per_sample};
  for (const auto& v : k.peers()) kr.peers.push_back({v.name, v.how, v.error, {}, {}, 1});
  for (size_t t = 1; t < times.size(); ++t) {
    auto& pr = kr.peers[peer_of_item[t - 1]];
    pr.samples_ms = times[t].samples_ms;
    pr.round_sizes = times[t].round_sizes;
    pr.calls_per_sample = times[t].calls_per_sample;
    if (!times[t].status.ok()) pr.error = "failed: " + times[t].status.message();
  }
  return kr;
}

// Compares `kr`'s rounds with the baseline's and records the comparison in
// it. True when the gate suspects a regression: then kr is listed in
// suspects_ (under the index it is about to get in report_.kernels).
bool Bench::JudgeAgainstBaseline(bench::KernelResult& kr, const std::string& tag) {
  const bench::KernelResult& b = *base_->find(kr.id);
  bench::KernelComparison c;
  c.first = bench::compare_rounds(bench::round_medians(b.mlk.samples_ms, b.mlk.round_sizes),
                                  bench::round_medians(kr.mlk.samples_ms, kr.mlk.round_sizes), gate_);
  c.notes = bench::comparison_notes(kr, b);
  if (c.first.baseline_rounds < 5 || c.first.current_rounds < 5)
    c.notes.push_back("too few rounds to judge (" + std::to_string(c.first.baseline_rounds) + " in the baseline, " +
                      std::to_string(c.first.current_rounds) + " now; the test needs 5 on each side)");
  c.verdict = c.first.suspect ? "regression" : c.first.faster ? "faster" : "ok";
  if (c.first.suspect) {
    suspects_.push_back(report_.kernels.size());
    progress_(tag + " " + bench::change_text(c.first.ratio) + " against the baseline: suspect; it will be measured again");
  }
  kr.comparison = c;
  return c.first.suspect;
}

// After everything else: a regression must show twice.
void Bench::ConfirmSuspects() {
  seam_.first_pass = false;
  if (!suspects_.empty()) (void)bench::settle(base_->calibration_ms, o_.settle_s, progress_);
  for (size_t ri : suspects_) Confirm(ri);
}

// A/B: the baseline's own artifact (by its recorded cache key, or the
// default schedule of the same program), prepared to be timed interleaved
// with this build's in this process, so that whatever load the machine
// carries hits both alike. Null, with the reason in `no_ab`, when that is
// impossible and recorded times are compared instead.
std::unique_ptr<bench::PreparedKernel> Bench::BaselineTwin(const bench::PreparedKernel& k, const bench::KernelResult& kr,
                                                           const bench::KernelResult& b, std::string& no_ab) const {
  no_ab = o_.recorded ? "--recorded" : "";
  if (no_ab.empty() && b.variant == "default" && b.ir_hash != kr.ir_hash)
    no_ab = "the baseline ran the default schedule of another program";
  if (no_ab.empty() && b.variant != "default" && b.variant != "tuned")
    no_ab = "the baseline does not say which artifact it timed";
  if (!no_ab.empty()) return nullptr;
  auto t = bench::PreparedKernel::Resolve(k.spec());
  bench::PrepareOptions bo = popts_;
  bo.peers.clear();
  bo.progress = nullptr;
  if (b.variant == "tuned") bo.artifact_key = b.cache_key;
  else bo.default_schedule = true;
  Status s = t.ok() ? (*t)->Prepare(bo) : t.status();
  if (s.ok()) return std::move(*t);
  no_ab = "the baseline's artifact cannot be had: " + s.message();
  return nullptr;
}

// Re-measures the suspect report_.kernels[ri] and settles its verdict.
void Bench::Confirm(size_t ri) {
  bench::KernelResult& kr = report_.kernels[ri];
  bench::PreparedKernel* k = nullptr;
  for (auto& kk : kernels_)
    if (kk->id() == kr.id) k = kk.get();
  const bench::KernelResult& b = *base_->find(kr.id);
  std::string no_ab;
  std::unique_ptr<bench::PreparedKernel> twin = BaselineTwin(*k, kr, b, no_ab);
  progress_("[bench confirm " + kr.name + "] measuring again" +
            (twin ? ", interleaved with the baseline's artifact (A/B)" : ", against the recorded times (" + no_ab + ")"));
  std::vector<bench::Timed> items = {{k->mlk().run, 3, [k] { k->RenewBuffers(); }}};
  if (twin) items.push_back({twin->mlk().run, 3, [t = twin.get()] { t->RenewBuffers(); }});
  auto again = bench::measure_interleaved(items, topts_);
  bench::KernelComparison& c = *kr.comparison;
  const Status* bad = nullptr;
  for (const auto& r : again)
    if (!bad && (!r.status.ok() || r.samples_ms.empty())) bad = &r.status;
  if (bad) {
    std::fprintf(stderr, "mlk bench: %s: the re-measurement failed: %s\n", kr.id.c_str(), bad->message().c_str());
    c.notes.push_back("the re-measurement failed: " + bad->message());
    c.verdict = "unconfirmed";
    ++failures_;
  } else {
    const bool ab = twin != nullptr;
    const std::vector<double>& bs = ab ? again[1].samples_ms : b.mlk.samples_ms;
    const std::vector<size_t>& br = ab ? again[1].round_sizes : b.mlk.round_sizes;
    c.confirm = bench::compare_rounds(bench::round_medians(bs, br),
                                      bench::round_medians(again[0].samples_ms, again[0].round_sizes), gate_);
    c.confirm_ab = ab;
    c.notes.push_back(ab ? "re-measured A/B: the baseline's artifact timed interleaved with this build's, in one process"
                         : "re-measured against the baseline's recorded times only (" + no_ab +
                               "): the weaker mode, in which a busy machine looks like a slower kernel");
    c.verdict = c.confirm->suspect ? "regression" : "unconfirmed";
  }
  if (twin) twin->Release();
  if (c.verdict == "regression") report_.regressions.push_back(kr.id);
  k->Release();
}

// The times table and, with peers, the speedup table and its notes.
void Bench::PrintTables(FILE* out) const {
  std::fprintf(out, "median times (ms) on %s, %d cores; mlk: the tuned artifact from the cache, else the default schedule\n",
               report_.machine.cpu.c_str(), report_.machine.cores);
  std::fputs(bench::times_table(report_, *o_.peers).c_str(), out);
  if (o_.peers->empty()) return;
  std::fprintf(out, "\nmlk's speedup over each peer (peer median / mlk median; above 1: mlk is faster)\n");
  std::fputs(bench::ratios_table(report_, *o_.peers).c_str(), out);
  for (const auto& n : bench::peer_notes(report_)) std::fprintf(out, "note: %s\n", n.c_str());
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  bool openblas_ran = false;
  for (const auto& k : report_.kernels)
    for (const auto& p : k.peers) openblas_ran = openblas_ran || (p.name == "openblas" && p.measured());
  if (openblas_ran && forced && *forced)
    std::fprintf(out, "note: OPENBLAS_CORETYPE=%s is set, so OpenBLAS runs that kernel rather than the one it would pick "
                 "for this CPU; unset it to compare with OpenBLAS at its best\n", forced);
}

// The gate table against the baseline, its notes and the calibration loop.
void Bench::PrintBaseline(FILE* out) const {
  std::fprintf(out, "\nagainst baseline %s (recorded %s on %s); regression limit +%g%%%s\n", o_.baseline.c_str(),
               base_->created.c_str(), base_->machine.host.c_str(), gate_.max_regression_pct,
               report_.gate ? "" : " (report only: no --max-regression)");
  std::fputs(bench::gate_table(report_).c_str(), out);
  for (const auto& k : report_.kernels)
    if (k.comparison)
      for (const auto& n : k.comparison->notes) std::fprintf(out, "note: %s: %s\n", k.name.c_str(), n.c_str());
  if (base_->calibration_ms.empty()) return;
  double ratio = bench::median(report_.calibration_ms) / bench::median(base_->calibration_ms);
  std::fprintf(out, "calibration loop: %s ms now, %s ms in the baseline (%.2fx)\n",
               bench::fmt_ms(bench::median(report_.calibration_ms)).c_str(),
               bench::fmt_ms(bench::median(base_->calibration_ms)).c_str(), ratio);
  if (ratio > 1.05 || ratio < 1 / 1.05)
    std::fprintf(stderr, "mlk bench: warning: this machine runs the fixed calibration loop %.2fx as fast as when "
                         "the baseline was recorded; differences may be the machine's, not mlk's\n", 1 / ratio);
}

// --json, --record and --plot. Returns the exit status so far: 1 when a
// kernel failed, a write error's when one failed.
int Bench::WriteFiles() const {
  int status = failures_ ? 1 : 0;
  if (o_.json_out == "-") {
    std::fputs(bench::report_to_json(report_).c_str(), stdout);
    std::fflush(stdout);
  } else if (!o_.json_out.empty()) {
    if (Status s = bench::write_report(o_.json_out, report_); !s.ok()) status = fail(s);
  }
  if (!o_.record.empty()) {
    if (failures_) {
      std::fprintf(stderr, "mlk bench: baseline %s not written: %d kernel%s failed\n", o_.record.c_str(), failures_,
                   failures_ == 1 ? "" : "s");
    } else if (Status s = bench::write_report(o_.record, report_); !s.ok()) {
      status = fail(s);
    } else {
      progress_("mlk bench: wrote baseline " + o_.record);
    }
  }
  if (!o_.plot.empty()) {
    if (Status s = WritePlot(); !s.ok()) status = fail(s);
    else progress_("mlk bench: wrote " + o_.plot);
  }
  return status;
}

// --plot: mlk's speedup over each peer, one bar per kernel and peer.
Status Bench::WritePlot() const {
  std::vector<bench::PlotRow> rows;
  for (const auto& k : report_.kernels) {
    bench::PlotRow row{k.name, {}, {}};
    for (const auto& pn : *o_.peers) {
      std::optional<double> v;
      std::string why = "n/a";
      for (const auto& p : k.peers) {
        if (p.name != pn) continue;
        if (p.measured()) v = p.median_ms() / k.mlk.median_ms();
        else if (p.error.rfind("same as mlk", 0) == 0) why = "the same kernel as mlk";
        else if (p.error.rfind("not applicable", 0) == 0) why = "not applicable";
        else why = "failed (see the output)";
      }
      row.values.push_back(v);
      row.missing.push_back(why);
    }
    rows.push_back(row);
  }
  std::string svg = bench::speedup_svg("mlk's speedup over each peer", report_.machine.cpu + ", " +
                                       std::to_string(report_.machine.cores) + " cores, " + report_.created +
                                       "; mlk " + report_.versions.at("mlk") + ", Halide " + report_.versions.at("halide"),
                                       *o_.peers, rows);
  return bench::write_text_file(o_.plot, svg);
}

// One line on stderr per confirmed regression.
void Bench::PrintRegressions() const {
  for (const auto& id : report_.regressions) {
    const bench::KernelResult& k = *report_.find(id);
    const bench::Comparison& c = *k.comparison->confirm;
    const std::string p = c.p_slower < 1e-6 ? "< 1e-6" : "= " + bench::fmt_ms(c.p_slower);
    std::fprintf(stderr,
                 "mlk bench: regression: `%s` is %.1f%% slower than in %s (median %s ms -> %s ms; 99%% interval of "
                 "the ratio [%.3f, %.3f], Mann-Whitney p %s; limit %g%%); confirmed by a re-measurement%s\n",
                 k.id.c_str(), (c.ratio - 1) * 100, o_.baseline.c_str(), bench::fmt_ms(c.baseline_median_ms).c_str(),
                 bench::fmt_ms(c.current_median_ms).c_str(), c.ci_low, c.ci_high, p.c_str(), gate_.max_regression_pct,
                 k.comparison->confirm_ab ? " (A/B against the baseline's artifact)" : " (against recorded times only)");
  }
}

int Bench::Run() {
  if (Status s = ResolveKernels(); !s.ok()) return fail(s);
  StartReport();
  if (Status s = ReadBaseline(); !s.ok()) return fail(s);
  TimeKernels();
  ConfirmSuspects();
  // With `--json -` stdout carries the JSON document alone.
  FILE* out = o_.json_out == "-" ? stderr : stdout;
  if (report_.kernels.empty()) return 1;  // every kernel failed, each said why
  PrintTables(out);
  if (base_) PrintBaseline(out);
  int status = WriteFiles();
  PrintRegressions();
  if (report_.gate && !report_.regressions.empty()) return 1;
  if (base_ && !report_.gate && !report_.regressions.empty())
    std::fprintf(stderr, "mlk bench: (report only: pass --max-regression PCT to fail on regressions)\n");
  return status;
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
  return Bench(o).Run();
}

}  // namespace mlk::cli
