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
#include "cli/command.h"
#include "lang/frontend.h"
#include "lang/memory_budget.h"
#include "targets/toolchain.h"

namespace mlk::cli {

const char* kBenchUsage =
    "usage: mlk bench FILE.tl --fn NAME --target PROFILE [--dims N=V,...] [OPTIONS]\n"
    "       mlk bench --suite SUITE.json [--target PROFILE] [OPTIONS]\n"
    "\n"
    "Times fns as users get them: the tuned artifact from the artifact cache for this\n"
    "fn, shape and profile, or (for `host`) the default schedule when the cache has\n"
    "none, and says which. Inputs are random (fixed seed); each variant is warmed up\n"
    "and timed in interleaved rounds. Prints median times and mlk's speedup over each\n"
    "peer on stdout, progress on stderr.\n"
    "\n"
    "  --fn NAME            the fn to time\n"
    "  --dims N=V,...       its shape (default: the fn's first `tune` declaration)\n"
    "  --target PROFILE     a CPU profile this machine runs (see `mlk targets`)\n"
    "  --suite FILE         a JSON list of kernels instead of FILE.tl (docs/cli.md)\n"
    "  --peers LIST         comma-separated: default, Adams2019, Li2018, Mullapudi2016,\n"
    "                       openblas (matmul fns); or all, or none. Default: all, but\n"
    "                       none with --record or --baseline (unless --plot is given)\n"
    "  --rounds N           interleaved rounds, each on fresh buffers (default 10)\n"
    "  --min-time MS        time spent timing each variant, over all rounds (default 500)\n"
    "  --seed K             the random inputs' seed (default 1)\n"
    "  --record FILE        write the results as a baseline (the same JSON as --json)\n"
    "  --baseline FILE      compare with a baseline. Per round, the median; a kernel is\n"
    "                       suspect when the median round is more than PCT slower, a\n"
    "                       one-sided Mann-Whitney U test of the rounds gives p < 0.01,\n"
    "                       and the 99% bootstrap interval of the ratio lies above\n"
    "                       1 + PCT/100; a suspect is measured again, and is a\n"
    "                       regression only when the re-measurement agrees. The\n"
    "                       re-measurement is A/B: the baseline's own artifact (by its\n"
    "                       recorded cache key, from the cache; or the default schedule\n"
    "                       of the same program) timed interleaved with this build's,\n"
    "                       so a busy machine slows both alike\n"
    "  --recorded           re-measure against the baseline's recorded times only (the\n"
    "                       weaker mode; also used when the baseline's artifact is gone)\n"
    "  --max-regression PCT fail (exit 1) on a regression of more than PCT percent;\n"
    "                       without it, --baseline reports at 10% and never fails\n"
    "  --any-machine        allow a baseline recorded on another machine\n"
    "  --settle SECONDS     with --baseline: wait up to this long (default 30) for the\n"
    "                       machine to run a calibration loop as fast as when the\n"
    "                       baseline was recorded, before timing and before re-measuring\n"
    "  --json OUT           write the results, every sample included, as JSON; OUT `-`:\n"
    "                       on stdout, and the tables go to stderr\n"
    "  --plot FILE.svg      write a bar chart of mlk's speedup over each peer\n"
    "  --cache PATH         the store (default: $MLK_CACHE, else $XDG_CACHE_HOME/mlk/cache.db)\n"
    "  --namespace NAME     the cache namespace (default: default)\n"
    "  --no-cache           never consult the cache (time the default schedule)\n"
    "  -q                   no progress lines\n"
    "\n"
    "Exit status: 0 success; 1 a regression (named on stderr) or bad input (a .tl\n"
    "error, a missing or malformed suite or baseline, a kernel the baseline lacks);\n"
    "2 bad usage; 3 an internal error (a bug in mlk).\n";

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

Expected<Options> parse(const std::vector<std::string>& args) {
  Options o;
  ArgReader r(args);
  while (!r.done()) {
    std::string a = r.next();
    if (a == "--no-cache") o.no_cache = true;
    else if (a == "--any-machine") o.any_machine = true;
    else if (a == "--recorded") o.recorded = true;
    else if (a == "-q" || a == "--quiet") o.quiet = true;
    else if (a == "--fn" || a == "--dims" || a == "--target" || a == "--suite" || a == "--cache" || a == "--namespace" ||
             a == "--record" || a == "--baseline" || a == "--json" || a == "--plot" || a == "--max-regression" ||
             a == "--peers" || a == "--rounds" || a == "--min-time" || a == "--seed" || a == "--settle") {
      auto v = r.value();
      if (!v.ok()) return v.status();
      if (a == "--fn") o.fn = *v;
      else if (a == "--target") o.target = *v;
      else if (a == "--suite") o.suite = *v;
      else if (a == "--cache") o.cache = *v;
      else if (a == "--namespace") o.ns = *v;
      else if (a == "--record") o.record = *v;
      else if (a == "--baseline") o.baseline = *v;
      else if (a == "--json") o.json_out = *v;
      else if (a == "--plot") o.plot = *v;
      else if (a == "--dims") {
        auto d = parse_dims(*v);
        if (!d.ok()) return d.status();
        o.dims = *d;
      } else if (a == "--max-regression") {
        auto p = parse_pct(*v);
        if (!p.ok()) return p.status();
        o.max_regression = *p;
      } else if (a == "--peers") {
        auto p = parse_peers(*v);
        if (!p.ok()) return p.status();
        o.peers = *p;
      } else if (a == "--settle") {
        auto n = parse_int_flag(a, *v, 0, std::numeric_limits<int>::max());
        if (!n.ok() && n.status().message().find("too large") == std::string::npos)
          return Status::Usage("--settle: `" + *v + "` is not a whole number of seconds");
        if (!n.ok()) return n.status();
        o.settle_s = static_cast<double>(*n);
      } else {
        auto n = parse_count(a, *v);
        if (!n.ok()) return n.status();
        if (a == "--rounds") o.rounds = static_cast<int>(std::min<int64_t>(*n, 1000));
        if (a == "--min-time") o.min_time_ms = static_cast<double>(*n);
        if (a == "--seed") o.seed = static_cast<uint64_t>(*n);
      }
    } else if (!a.empty() && a[0] == '-') {
      return Status::Usage("unknown option `" + a + "`");
    } else if (o.file.empty()) {
      o.file = a;
    } else {
      return Status::Usage("unexpected argument `" + a + "` (one .tl file, or --suite)");
    }
  }
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
  return o;
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

}  // namespace

int run_bench(const std::vector<std::string>& args) {
  const Command& self = command("bench");
  auto parsed = parse(args);
  if (!parsed.ok()) return parsed.status().code() == Status::Code::kUsage ? usage_error(self, parsed.status().message())
                                                                          : fail(parsed.status());
  const Options& o = *parsed;
  auto progress = [&](const std::string& s) {
    if (!o.quiet) std::fprintf(stderr, "%s\n", s.c_str());
  };

  // 1. What to time, resolved and checked.
  std::vector<bench::KernelSpec> specs;
  if (!o.suite.empty()) {
    auto s = bench::read_suite(o.suite, o.target);
    if (!s.ok()) return fail(s.status());
    specs = *s;
  } else {
    specs.push_back({"", o.file, o.fn, o.target, o.dims, ""});
  }
  std::vector<std::unique_ptr<bench::PreparedKernel>> kernels;
  for (const auto& spec : specs) {
    auto k = bench::PreparedKernel::Resolve(spec);
    if (!k.ok()) return fail(k.status());
    for (const auto& other : kernels)
      if (other->id() == (*k)->id())
        return fail(Status::InvalidArgument("kernel `" + other->id() + "` is listed twice" +
                                            (spec.where.empty() ? "" : " (" + spec.where + ")")));
    // Its inputs (and the fresh copies RenewBuffers makes) and the outputs of
    // mlk and every peer must fit in memory: checked before Prepare allocates.
    if (auto fe = compile_file(spec.file); fe.ok() && fe->ok())
      if (const ir::Function* f = fe->module.find(spec.fn)) {
        std::string label = spec.where.empty() ? (spec.dims.empty() ? "`" + (*k)->id() + "`" : "--dims " + dims_label(spec.dims))
                                               : spec.where + ": `" + (*k)->id() + "`";
        if (Status s = check_memory_budget(*f, (*k)->dims(), 2, 2 + static_cast<int>(o.peers->size()), label); !s.ok())
          return fail(s);
      }
    kernels.push_back(std::move(k).value());
  }
  bench::BenchReport report;
  report.created = now_iso();
  report.machine = bench::this_machine();
  report.versions = {{"mlk", mlk_version()}, {"halide", halide_version()}, {"llvm", llvm_version()}};
  report.settings = {{"rounds", o.rounds}, {"min_time_ms", o.min_time_ms}, {"seed", static_cast<double>(o.seed)},
                     {"sample_ms", bench::TimingOptions{}.sample_ms}};
  std::optional<bench::BenchReport> base;
  bench::GateOptions gate;
  gate.max_regression_pct = o.max_regression.value_or(10);
  if (!o.baseline.empty()) {
    auto b = bench::read_report(o.baseline);
    if (!b.ok()) return fail(b.status());
    if (Status s = bench::check_baseline(*b, o.baseline, report.machine, kernels, o.any_machine); !s.ok()) return fail(s);
    base = std::move(b).value();
    report.baseline_path = o.baseline;
    report.max_regression_pct = gate.max_regression_pct;
    report.gate = o.max_regression.has_value();
    for (const auto& [k, v] : base->versions)
      if (report.versions.count(k) && report.versions[k] != v)
        progress("mlk bench: note: the baseline was recorded with " + k + " " + v + ", this is " + report.versions[k]);
  }

  // 2. Time each kernel.
  report.calibration_ms = bench::settle(base ? base->calibration_ms : std::vector<double>{}, o.settle_s, progress);
  bench::PrepareOptions popts;
  popts.store_path = o.no_cache ? "" : cache::default_store_path(o.cache);
  popts.ns = o.ns;
  popts.peers = *o.peers;
  popts.seed = o.seed;
  bench::TimingOptions topts;
  topts.rounds = o.rounds;
  topts.min_time_s = o.min_time_ms / 1000;
  SlowSeam seam = SlowSeam::from_env();
  int failures = 0;
  std::vector<size_t> suspects;  // indices into kernels (and report.kernels)
  for (size_t i = 0; i < kernels.size(); ++i) {
    bench::PreparedKernel& k = *kernels[i];
    const std::string tag = "[bench " + std::to_string(i + 1) + "/" + std::to_string(kernels.size()) + " " + k.name() + "]";
    popts.progress = [&](const std::string& s) { progress(tag + " " + s); };
    if (Status s = k.Prepare(popts); !s.ok()) {
      std::fprintf(stderr, "mlk bench: %s: %s\n", k.id().c_str(), s.message().c_str());
      ++failures;
      continue;
    }
    progress(tag + " mlk: " + k.mlk().how);
    if (!seam.fn.empty() && seam.fn == k.spec().fn) k.mlk().run = slowed(k.mlk().run, &seam);
    std::vector<bench::Timed> items = {{k.mlk().run, 3, [&k] { k.RenewBuffers(); }}};
    std::vector<size_t> peer_of_item;
    for (size_t p = 0; p < k.peers().size(); ++p)
      if (k.peers()[p].run) {
        items.push_back({k.peers()[p].run, 1, nullptr});
        peer_of_item.push_back(p);
      }
    progress(tag + " timing " + std::to_string(items.size()) + " variant" + (items.size() == 1 ? "" : "s") + " in " +
             std::to_string(o.rounds) + " rounds");
    auto times = bench::measure_interleaved(items, topts);
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
    if (!kr.mlk.measured()) {
      std::fprintf(stderr, "mlk bench: %s: %s\n", k.id().c_str(), kr.mlk.error.c_str());
      ++failures;
      k.Release();
      continue;
    }
    progress(tag + " mlk median " + bench::fmt_ms(kr.mlk.median_ms()) + " ms over " +
             std::to_string(kr.mlk.samples_ms.size()) + " samples of " + std::to_string(kr.mlk.calls_per_sample) +
             " call" + (kr.mlk.calls_per_sample == 1 ? "" : "s"));
    bool keep = false;
    if (base) {
      const bench::KernelResult& b = *base->find(kr.id);
      bench::KernelComparison c;
      c.first = bench::compare_rounds(bench::round_medians(b.mlk.samples_ms, b.mlk.round_sizes),
                                      bench::round_medians(kr.mlk.samples_ms, kr.mlk.round_sizes), gate);
      c.notes = bench::comparison_notes(kr, b);
      if (c.first.baseline_rounds < 5 || c.first.current_rounds < 5)
        c.notes.push_back("too few rounds to judge (" + std::to_string(c.first.baseline_rounds) + " in the baseline, " +
                          std::to_string(c.first.current_rounds) + " now; the test needs 5 on each side)");
      c.verdict = c.first.suspect ? "regression" : c.first.faster ? "faster" : "ok";
      if (c.first.suspect) {
        keep = true;
        suspects.push_back(report.kernels.size());
        progress(tag + " " + bench::change_text(c.first.ratio) + " against the baseline: suspect; it will be measured again");
      }
      kr.comparison = c;
    }
    report.kernels.push_back(std::move(kr));
    if (!keep) k.Release();  // a suspect stays compiled for its re-measurement
  }

  // 3. Re-measure the suspects, after everything else: a regression must show twice.
  seam.first_pass = false;
  if (!suspects.empty()) (void)bench::settle(base->calibration_ms, o.settle_s, progress);
  for (size_t ri : suspects) {
    bench::KernelResult& kr = report.kernels[ri];
    bench::PreparedKernel* k = nullptr;
    for (auto& kk : kernels)
      if (kk->id() == kr.id) k = kk.get();
    const bench::KernelResult& b = *base->find(kr.id);
    // A/B: the baseline's own artifact (by its recorded cache key, or the
    // default schedule of the same program) timed interleaved with this
    // build's in this process, so that whatever load the machine carries hits
    // both alike. Recorded times are compared only when that is impossible.
    std::unique_ptr<bench::PreparedKernel> twin;
    std::string no_ab = o.recorded ? "--recorded" : "";
    if (no_ab.empty() && b.variant == "default" && b.ir_hash != kr.ir_hash)
      no_ab = "the baseline ran the default schedule of another program";
    if (no_ab.empty() && b.variant != "default" && b.variant != "tuned")
      no_ab = "the baseline does not say which artifact it timed";
    if (no_ab.empty()) {
      auto t = bench::PreparedKernel::Resolve(k->spec());
      bench::PrepareOptions bo = popts;
      bo.peers.clear();
      bo.progress = nullptr;
      if (b.variant == "tuned") bo.artifact_key = b.cache_key;
      else bo.default_schedule = true;
      Status s = t.ok() ? (*t)->Prepare(bo) : t.status();
      if (s.ok()) twin = std::move(*t);
      else no_ab = "the baseline's artifact cannot be had: " + s.message();
    }
    progress("[bench confirm " + kr.name + "] measuring again" +
             (twin ? ", interleaved with the baseline's artifact (A/B)" : ", against the recorded times (" + no_ab + ")"));
    std::vector<bench::Timed> items = {{k->mlk().run, 3, [k] { k->RenewBuffers(); }}};
    if (twin) items.push_back({twin->mlk().run, 3, [t = twin.get()] { t->RenewBuffers(); }});
    auto again = bench::measure_interleaved(items, topts);
    bench::KernelComparison& c = *kr.comparison;
    auto failed = [&]() -> const Status* {
      for (const auto& r : again)
        if (!r.status.ok() || r.samples_ms.empty()) return &r.status;
      return nullptr;
    };
    if (const Status* bad = failed()) {
      std::fprintf(stderr, "mlk bench: %s: the re-measurement failed: %s\n", kr.id.c_str(), bad->message().c_str());
      c.notes.push_back("the re-measurement failed: " + bad->message());
      c.verdict = "unconfirmed";
      ++failures;
    } else {
      const bool ab = twin != nullptr;
      const std::vector<double>& bs = ab ? again[1].samples_ms : b.mlk.samples_ms;
      const std::vector<size_t>& br = ab ? again[1].round_sizes : b.mlk.round_sizes;
      c.confirm = bench::compare_rounds(bench::round_medians(bs, br),
                                        bench::round_medians(again[0].samples_ms, again[0].round_sizes), gate);
      c.confirm_ab = ab;
      c.notes.push_back(ab ? "re-measured A/B: the baseline's artifact timed interleaved with this build's, in one process"
                           : "re-measured against the baseline's recorded times only (" + no_ab +
                                 "): the weaker mode, in which a busy machine looks like a slower kernel");
      c.verdict = c.confirm->suspect ? "regression" : "unconfirmed";
    }
    if (twin) twin->Release();
    if (c.verdict == "regression") report.regressions.push_back(kr.id);
    k->Release();
  }

  // 4. Report. With `--json -` stdout carries the JSON document alone.
  FILE* out = o.json_out == "-" ? stderr : stdout;
  if (report.kernels.empty()) return 1;  // every kernel failed, each said why
  std::fprintf(out, "median times (ms) on %s, %d cores; mlk: the tuned artifact from the cache, else the default schedule\n",
              report.machine.cpu.c_str(), report.machine.cores);
  std::fputs(bench::times_table(report, *o.peers).c_str(), out);
  if (!o.peers->empty()) {
    std::fprintf(out, "\nmlk's speedup over each peer (peer median / mlk median; above 1: mlk is faster)\n");
    std::fputs(bench::ratios_table(report, *o.peers).c_str(), out);
    for (const auto& n : bench::peer_notes(report)) std::fprintf(out, "note: %s\n", n.c_str());
    const char* forced = std::getenv("OPENBLAS_CORETYPE");
    bool openblas_ran = false;
    for (const auto& k : report.kernels)
      for (const auto& p : k.peers) openblas_ran = openblas_ran || (p.name == "openblas" && p.measured());
    if (openblas_ran && forced && *forced)
      std::fprintf(out, "note: OPENBLAS_CORETYPE=%s is set, so OpenBLAS runs that kernel rather than the one it would pick "
                  "for this CPU; unset it to compare with OpenBLAS at its best\n", forced);
  }
  if (base) {
    std::fprintf(out, "\nagainst baseline %s (recorded %s on %s); regression limit +%g%%%s\n", o.baseline.c_str(),
                base->created.c_str(), base->machine.host.c_str(), gate.max_regression_pct,
                report.gate ? "" : " (report only: no --max-regression)");
    std::fputs(bench::gate_table(report).c_str(), out);
    for (const auto& k : report.kernels)
      if (k.comparison)
        for (const auto& n : k.comparison->notes) std::fprintf(out, "note: %s: %s\n", k.name.c_str(), n.c_str());
    if (!base->calibration_ms.empty()) {
      double ratio = bench::median(report.calibration_ms) / bench::median(base->calibration_ms);
      std::fprintf(out, "calibration loop: %s ms now, %s ms in the baseline (%.2fx)\n",
                  bench::fmt_ms(bench::median(report.calibration_ms)).c_str(),
                  bench::fmt_ms(bench::median(base->calibration_ms)).c_str(), ratio);
      if (ratio > 1.05 || ratio < 1 / 1.05)
        std::fprintf(stderr, "mlk bench: warning: this machine runs the fixed calibration loop %.2fx as fast as when "
                             "the baseline was recorded; differences may be the machine's, not mlk's\n", 1 / ratio);
    }
  }
  int status = failures ? 1 : 0;
  if (o.json_out == "-") {
    std::fputs(bench::report_to_json(report).c_str(), stdout);
    std::fflush(stdout);
  } else if (!o.json_out.empty()) {
    if (Status s = bench::write_report(o.json_out, report); !s.ok()) status = fail(s);
  }
  if (!o.record.empty()) {
    if (failures) {
      std::fprintf(stderr, "mlk bench: baseline %s not written: %d kernel%s failed\n", o.record.c_str(), failures,
                   failures == 1 ? "" : "s");
    } else if (Status s = bench::write_report(o.record, report); !s.ok()) {
      status = fail(s);
    } else {
      progress("mlk bench: wrote baseline " + o.record);
    }
  }
  if (!o.plot.empty()) {
    std::vector<bench::PlotRow> rows;
    for (const auto& k : report.kernels) {
      bench::PlotRow row{k.name, {}, {}};
      for (const auto& pn : *o.peers) {
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
    std::string svg = bench::speedup_svg("mlk's speedup over each peer", report.machine.cpu + ", " +
                                         std::to_string(report.machine.cores) + " cores, " + report.created +
                                         "; mlk " + report.versions["mlk"] + ", Halide " + report.versions["halide"],
                                         *o.peers, rows);
    if (Status s = bench::write_text_file(o.plot, svg); !s.ok()) status = fail(s);
    else progress("mlk bench: wrote " + o.plot);
  }
  for (const auto& id : report.regressions) {
    const bench::KernelResult& k = *report.find(id);
    const bench::Comparison& c = *k.comparison->confirm;
    const std::string p = c.p_slower < 1e-6 ? "< 1e-6" : "= " + bench::fmt_ms(c.p_slower);
    std::fprintf(stderr,
                 "mlk bench: regression: `%s` is %.1f%% slower than in %s (median %s ms -> %s ms; 99%% interval of "
                 "the ratio [%.3f, %.3f], Mann-Whitney p %s; limit %g%%); confirmed by a re-measurement%s\n",
                 k.id.c_str(), (c.ratio - 1) * 100, o.baseline.c_str(), bench::fmt_ms(c.baseline_median_ms).c_str(),
                 bench::fmt_ms(c.current_median_ms).c_str(), c.ci_low, c.ci_high, p.c_str(), gate.max_regression_pct,
                 k.comparison->confirm_ab ? " (A/B against the baseline's artifact)" : " (against recorded times only)");
  }
  if (report.gate && !report.regressions.empty()) return 1;
  if (base && !report.gate && !report.regressions.empty())
    std::fprintf(stderr, "mlk bench: (report only: pass --max-regression PCT to fail on regressions)\n");
  return status;
}

}  // namespace mlk::cli
