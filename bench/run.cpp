// One `mlk bench` run (bench/run.h).
#include "bench/run.h"

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
#include "bench/insn_count.h"
#include "bench/paired.h"
#include "bench/png_plot.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "bench/svg_plot.h"
#include "bench/tables.h"
#include "bench/timing.h"
#include "bench/variants.h"
#include "cache/paths.h"
#include "client/bench_history.h"
#include "lang/frontend.h"
#include "lang/memory_budget.h"
#include "targets/toolchain.h"

namespace mlk::bench {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "mlk bench: %s\n", s.message().c_str());
  return s.exit_code();
}

// Test seam (docs/ci.md): MLK_BENCH_TEST_SLOW=FN doubles the time of every call
// of FN's mlk variant (this build's, never the baseline's artifact) in the
// first measurement; FN:always in the re-measurement too; a last part xF
// (FN:always:x1.5) makes each call F times as long instead of twice. A
// simulated regression that is real (always) or transient (first only).
struct SlowSeam {
  std::string fn;
  bool always = false;
  bool first_pass = true;
  double factor = 2;
  static SlowSeam from_env() {
    SlowSeam s;
    const char* e = std::getenv("MLK_BENCH_TEST_SLOW");
    std::stringstream ss(e ? e : "");
    std::string part;
    for (int i = 0; std::getline(ss, part, ':'); ++i) {
      if (i == 0) s.fn = part;
      else if (part == "always") s.always = true;
      else if (part.size() > 1 && part[0] == 'x') s.factor = std::max(1.0, std::atof(part.c_str() + 1));
    }
    return s;
  }
};

std::function<Status()> slowed(std::function<Status()> run, const SlowSeam* seam) {
  return [run = std::move(run), seam]() {
    auto t0 = std::chrono::steady_clock::now();
    Status s = run();
    if (seam->first_pass || seam->always) {
      auto spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0) * (seam->factor - 1);
      auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(spent);
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
  explicit Bench(const RunOptions& o) : o_(o) {
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
  bool JudgeAgainstBaseline(bench::KernelResult& kr, const std::string& tag, const bench::TimingResult* twin);
  void CountInstructions(bench::KernelResult& kr, const std::string& against);
  bool comparing() const { return base_.has_value() || !o_.against.empty(); }
  // 3. Re-measure the suspects.
  void ConfirmSuspects();
  void Confirm(size_t ri);
  void BaselineRef(const bench::PreparedKernel& k, bench::PrepareOptions& popts, std::string& against,
                   std::string& no_ab) const;
  // 4. Report.
  void PrintTables(FILE* out) const;
  void PrintBaseline(FILE* out) const;
  int WriteFiles() const;
  Status WritePlot() const;
  void PrintRegressions() const;

  const RunOptions& o_;
  std::function<void(const std::string&)> progress_;
  std::vector<std::unique_ptr<bench::PreparedKernel>> kernels_;
  bench::BenchReport report_;
  std::optional<bench::BenchReport> base_;
  bench::GateOptions gate_;
  bench::PrepareOptions popts_;
  bench::TimingOptions topts_;
  SlowSeam seam_;
  int failures_ = 0;
  std::vector<size_t> suspects_;  // indices into report_.kernels
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
        // A/B: the baseline's artifact has its own copies of the inputs and its own output.
        const bool ab = !o_.recorded && (!o_.baseline.empty() || !o_.against.empty());
        if (Status s = check_memory_budget(*f, (*k)->dims(), ab ? 4 : 2, (ab ? 3 : 2) + static_cast<int>(o_.peers->size()),
                                           label);
            !s.ok())
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
  report_.max_insn_increase_pct = o_.max_insn_increase.value_or(2);
  report_.insn_gate = o_.max_insn_increase.has_value();
  if (!o_.against.empty()) {
    report_.baseline_path = o_.against == "default" ? "the default schedule" : "artifact " + o_.against.substr(0, 16);
    report_.max_regression_pct = gate_.max_regression_pct;
    report_.gate = o_.max_regression.has_value();
  }
}

// --baseline: read, and checked to cover every kernel on this machine.
Status Bench::ReadBaseline() {
  const bool from_set = !o_.baseline_set.empty() && !o_.push;
  if (o_.baseline.empty() && !from_set) return Status::Ok();
  const std::string where = from_set ? "baseline set " + o_.baseline_set + " on " + o_.server : o_.baseline;
  auto b = [&]() -> Expected<bench::BenchReport> {
    if (!from_set) return bench::read_report(o_.baseline);
    auto text = client::fetch_baseline_set(o_.server, o_.ns == "default" ? "" : o_.ns, o_.baseline_set);
    if (!text.ok()) return text.status();
    return bench::report_from_json(*text, where);
  }();
  if (!b.ok()) return b.status();
  if (Status s = bench::check_baseline(*b, where, report_.machine, kernels_, o_.any_machine); !s.ok()) return s;
  base_ = std::move(b).value();
  report_.baseline_path = where;
  report_.max_regression_pct = gate_.max_regression_pct;
  report_.gate = o_.max_regression.has_value();
  for (const auto& [k, v] : base_->versions)
    if (report_.versions.count(k) && report_.versions[k] != v)
      progress_("mlk bench: note: the baseline was recorded with " + k + " " + v + ", this is " + report_.versions[k]);
  return Status::Ok();
}

void Bench::TimeKernels() {
  // Only the weaker mode compares with times of another moment; A/B needs no quiet.
  const bool recorded_only = base_ && o_.recorded;
  report_.calibration_ms = bench::settle(recorded_only ? base_->calibration_ms : std::vector<double>{}, o_.settle_s, progress_);
  popts_.store_path = o_.no_cache ? "" : cache::default_store_path(o_.cache);
  popts_.ns = o_.ns;
  popts_.namespaces = o_.namespaces;
  popts_.trusted = o_.trusted;
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
  std::string against, no_ab;
  if (comparing()) BaselineRef(k, popts, against, no_ab);
  if (Status s = k.Prepare(popts); !s.ok()) {
    std::fprintf(stderr, "mlk bench: %s: %s\n", k.id().c_str(), s.message().c_str());
    ++failures_;
    return;
  }
  progress_(tag + " mlk: " + k.mlk().how);
  if (!seam_.fn.empty() && seam_.fn == k.spec().fn) k.mlk().run = slowed(k.mlk().run, &seam_);
  bench::Variant* twin = k.baseline().run ? &k.baseline() : nullptr;
  if (comparing() && !twin && no_ab.empty()) no_ab = "the baseline's artifact cannot be had: " + k.baseline().error;
  if (comparing() && !twin && !base_) {  // --against: the artifact is the whole comparison
    std::fprintf(stderr, "mlk bench: %s: %s\n", k.id().c_str(), no_ab.c_str());
    ++failures_;
    k.Release();
    return;
  }
  if (twin) progress_(tag + " A/B against " + twin->how);
  else if (comparing()) progress_(tag + " against the baseline's recorded times (" + no_ab + ")");
  // A/B: at least 8 samples a side each round, whose fastest stands for the round.
  std::vector<bench::Timed> items = {{k.mlk().run, twin ? 8 : 3, [&k] { k.RenewBuffers(); }}};
  // The baseline in turn with mlk, on the buffers mlk's round renewed.
  if (twin) items.push_back({twin->run, 8, nullptr});
  std::vector<size_t> peer_of_item;
  for (size_t p = 0; p < k.peers().size(); ++p)
    if (k.peers()[p].run) {
      items.push_back({k.peers()[p].run, 1, nullptr});
      peer_of_item.push_back(p);
    }
  progress_(tag + " timing " + std::to_string(items.size()) + " variant" + (items.size() == 1 ? "" : "s") + " in " +
            std::to_string(o_.rounds) + " rounds");
  // A/B: mlk and the baseline sample by sample in turn; then the peers, interleaved by rounds.
  std::optional<bench::TimingResult> twin_times;
  std::vector<bench::TimingResult> times;
  if (twin) {
    auto ab = bench::measure_paired(items[0], items[1], topts_);
    twin_times = std::move(ab[1]);
    times.push_back(std::move(ab[0]));
    std::vector<bench::Timed> peers(items.begin() + 2, items.end());
    if (!peers.empty())  // the peers are compared by their medians: interleaved rounds of their own
      for (auto& t : bench::measure_interleaved(peers, topts_)) times.push_back(std::move(t));
  } else {
    times = bench::measure_interleaved(items, topts_);
  }
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
  bool keep = false;
  if (comparing()) {
    keep = JudgeAgainstBaseline(kr, tag, twin_times ? &*twin_times : nullptr);
    if (!kr.comparison) ++failures_;  // the baseline's artifact failed and nothing else can judge
    else if (twin) kr.comparison->against = against;
    if (!no_ab.empty() && kr.comparison) kr.comparison->notes.push_back("not A/B: " + no_ab);
  }
  if (o_.count_insns) CountInstructions(kr, twin ? against : "");
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

// Compares `kr`'s rounds with those of the baseline's artifact timed beside
// it (`twin`, A/B, paired), else with the baseline's recorded rounds, and
// records the comparison in it. True when the gate suspects a regression:
// then kr is listed in suspects_ (under the index it is about to get in
// report_.kernels). No comparison at all when the twin failed and there are
// no recorded times to fall back on.
bool Bench::JudgeAgainstBaseline(bench::KernelResult& kr, const std::string& tag, const bench::TimingResult* twin) {
  const bench::KernelResult* b = base_ ? base_->find(kr.id) : nullptr;
  bench::KernelComparison c;
  const auto cur = bench::round_medians(kr.mlk.samples_ms, kr.mlk.round_sizes);
  std::string twin_failed;
  if (twin && (!twin->status.ok() || twin->samples_ms.empty() || twin->round_sizes != kr.mlk.round_sizes))
    twin_failed = twin->status.ok() ? "its rounds did not complete" : twin->status.message();
  if (twin && twin_failed.empty()) {
    c.first = bench::compare_paired_samples(twin->samples_ms, twin->round_sizes, kr.mlk.samples_ms,
                                            kr.mlk.round_sizes, gate_);
    c.first_ab = true;
    if (c.first.current_rounds < 3)
      c.notes.push_back("too few rounds to judge (" + std::to_string(c.first.current_rounds) +
                        "; the paired comparison needs 3)");
  } else {
    if (!twin_failed.empty()) {
      std::fprintf(stderr, "mlk bench: %s: the baseline's artifact failed: %s\n", kr.id.c_str(), twin_failed.c_str());
      if (!b) return false;
    }
    c.first = bench::compare_rounds(bench::round_medians(b->mlk.samples_ms, b->mlk.round_sizes), cur, gate_);
    if (c.first.baseline_rounds < 5 || c.first.current_rounds < 5)
      c.notes.push_back("too few rounds to judge (" + std::to_string(c.first.baseline_rounds) + " in the baseline, " +
                        std::to_string(c.first.current_rounds) + " now; the test needs 5 on each side)");
    c.notes.push_back("compared with the baseline's recorded times only: the weaker mode, in which a busy machine "
                      "looks like a slower kernel");
  }
  if (b)
    for (auto& n : bench::comparison_notes(kr, *b)) c.notes.push_back(std::move(n));
  c.verdict = c.first.suspect ? "regression" : c.first.faster ? "faster" : "ok";
  // Inconclusive: slower than the limit by the point estimate, and slower
  // at all by the t test, but the rounds scattered too widely to put the
  // interval above the limit (on a busy 2-core VM a kernel made twice as
  // slow was seen at [1.00, 1.91] in 10 rounds). It is measured again too,
  // as a suspect is.
  c.inconclusive = !c.first.suspect && c.first.ratio > 1 + gate_.max_regression_pct / 100 &&
                   c.first.p_slower < gate_.alpha;
  if (c.first.suspect || c.inconclusive) {
    suspects_.push_back(report_.kernels.size());
    progress_(tag + " " + bench::change_text(c.first.ratio) + " against the baseline" + (c.first_ab ? " (A/B)" : "") +
              (c.first.suspect ? ": suspect" : ": inconclusive") + "; it will be measured again");
  }
  kr.comparison = c;
  return c.first.suspect || c.inconclusive;
}

// Test seam (docs/ci.md): MLK_BENCH_TEST_EXTRA_INSTRUCTIONS=FN:N adds about N
// instructions to every counted call of FN's artifact (this build's only),
// and nothing to what is timed: an instruction-count regression that timing
// cannot see.
int64_t extra_instructions(const std::string& fn) {
  const char* e = std::getenv("MLK_BENCH_TEST_EXTRA_INSTRUCTIONS");
  std::string v = e ? e : "";
  auto c = v.find(':');
  if (c == std::string::npos || v.substr(0, c) != fn) return 0;
  return std::atoll(v.c_str() + c + 1);
}

// --count-instructions: this build's artifact and, A/B against an artifact
// (`against` is "artifact KEY"), the baseline's; the instruction gate's
// verdict in kr.instructions.
void Bench::CountInstructions(bench::KernelResult& kr, const std::string& against) {
  bench::InsnResult n;
  bench::CountRequest rq{{kr.name, kr.file, kr.fn, kr.target, kr.dims, ""}, popts_.store_path, o_.ns, kr.cache_key,
                         o_.seed, 2, extra_instructions(kr.fn), popts_.trusted};
  if (kr.variant != "tuned") {
    n.note = "not counted: this build runs the default schedule, compiled at run time; counting needs a tuned artifact";
    kr.instructions = n;
    return;
  }
  auto cur = bench::count_instructions(rq);
  if (!cur.ok()) {
    std::fprintf(stderr, "mlk bench: %s: %s\n", kr.id.c_str(), cur.status().message().c_str());
    n.note = cur.status().message();
    ++failures_;
    kr.instructions = n;
    return;
  }
  n.counter = cur->counter;
  n.current = cur->instructions;
  progress_("[bench " + kr.name + "] " + std::to_string(static_cast<int64_t>(n.current)) + " instructions a call (" +
            n.counter + ")");
  if (against.rfind("artifact ", 0) == 0) {
    rq.key = against.substr(9);
    rq.extra_per_call = 0;
    auto base = bench::count_instructions(rq);
    if (base.ok() && base->instructions > 0) {
      n.baseline = base->instructions;
      n.ratio = n.current / n.baseline;
      n.regression = n.ratio > 1 + o_.max_insn_increase.value_or(2) / 100;
      if (n.regression) report_.insn_regressions.push_back(kr.id);
    } else {
      n.note = "the baseline's artifact not counted: " + (base.ok() ? "no instructions" : base.status().message());
    }
  } else if (comparing()) {
    n.note = "the baseline's artifact not counted: it is not a tuned artifact";
  }
  kr.instructions = n;
}

// After everything else: a regression must show twice.
void Bench::ConfirmSuspects() {
  seam_.first_pass = false;
  bool recorded = false;
  for (size_t ri : suspects_) recorded = recorded || !report_.kernels[ri].comparison->first_ab;
  if (recorded) (void)bench::settle(base_->calibration_ms, o_.settle_s, progress_);
  for (size_t ri : suspects_) Confirm(ri);
}

// Which artifact of the baseline's `k` is timed beside (PrepareOptions'
// baseline_key, baseline_default): --against's key (or the default
// schedule), else the one the baseline's entry names (by its recorded cache
// key, or the default schedule of the same program), so that whatever load
// the machine carries hits both alike. `against` says which, for people;
// `no_ab` why none can be, when recorded times are compared instead.
void Bench::BaselineRef(const bench::PreparedKernel& k, bench::PrepareOptions& popts, std::string& against,
                        std::string& no_ab) const {
  if (!o_.against.empty()) {
    if (o_.against == "default") popts.baseline_default = true;
    else popts.baseline_key = o_.against;
  } else {
    const bench::KernelResult& b = *base_->find(k.id());
    no_ab = o_.recorded ? "--recorded" : "";
    if (no_ab.empty() && b.variant == "default" && b.ir_hash != k.ir_hash())
      no_ab = "the baseline ran the default schedule of another program";
    if (no_ab.empty() && b.variant != "default" && b.variant != "tuned")
      no_ab = "the baseline does not say which artifact it timed";
    if (!no_ab.empty()) return;
    if (b.variant == "tuned") popts.baseline_key = b.cache_key;
    else popts.baseline_default = true;
  }
  against = popts.baseline_default ? "the default schedule" : "artifact " + popts.baseline_key;
}

// Re-measures the suspect report_.kernels[ri] as it was measured first (A/B
// beside the baseline's artifact, or against the recorded times) and
// settles its verdict.
void Bench::Confirm(size_t ri) {
  bench::KernelResult& kr = report_.kernels[ri];
  bench::PreparedKernel* k = nullptr;
  for (auto& kk : kernels_)
    if (kk->id() == kr.id) k = kk.get();
  bench::KernelComparison& c = *kr.comparison;
  bench::Variant* twin = k->baseline().run ? &k->baseline() : nullptr;
  progress_("[bench confirm " + kr.name + "] measuring again" +
            (twin ? ", in the same rounds as the baseline's artifact (A/B)" : ", against the recorded times"));
  std::vector<bench::Timed> items = {{k->mlk().run, twin ? 8 : 3, [k] { k->RenewBuffers(); }}};
  if (twin) items.push_back({twin->run, 8, nullptr});
  // Twice the rounds of the first measurement: the spread of the rounds,
  // not their length, is what hides a regression on a busy machine.
  bench::TimingOptions longer = topts_;
  longer.rounds = 2 * topts_.rounds;
  longer.min_time_s = 2 * topts_.min_time_s;
  auto again = twin ? bench::measure_paired(items[0], items[1], longer) : bench::measure_interleaved(items, longer);
  const Status* bad = nullptr;
  for (const auto& r : again)
    if (!bad && (!r.status.ok() || r.samples_ms.empty())) bad = &r.status;
  if (bad || (twin && again[0].round_sizes != again[1].round_sizes)) {
    const std::string why = bad ? bad->message() : "its rounds did not complete";
    std::fprintf(stderr, "mlk bench: %s: the re-measurement failed: %s\n", kr.id.c_str(), why.c_str());
    c.notes.push_back("the re-measurement failed: " + why);
    c.verdict = c.inconclusive ? "ok" : "unconfirmed";
    ++failures_;
  } else {
    const auto cur = bench::round_medians(again[0].samples_ms, again[0].round_sizes);
    if (twin) {
      c.confirm = bench::compare_paired_samples(again[1].samples_ms, again[1].round_sizes, again[0].samples_ms,
                                                again[0].round_sizes, gate_);
    } else {
      const bench::KernelResult& b = *base_->find(kr.id);
      c.confirm = bench::compare_rounds(bench::round_medians(b.mlk.samples_ms, b.mlk.round_sizes), cur, gate_);
    }
    c.confirm_ab = twin != nullptr;
    c.verdict = c.confirm->suspect ? "regression" : c.inconclusive ? "ok" : "unconfirmed";
  }
  if (c.verdict == "regression") report_.regressions.push_back(kr.id);
  k->Release();
}

// The times table and, with peers, the speedup table and its notes.
void Bench::PrintTables(FILE* out) const {
  std::fprintf(out, "median times (ms) on %s, %d cores; mlk: the tuned artifact from the cache, else the default schedule\n",
               report_.machine.cpu.c_str(), report_.machine.cores);
  std::fputs(bench::times_table(report_, *o_.peers).c_str(), out);
  for (const auto& k : report_.kernels) {
    if (!k.instructions) continue;
    const bench::InsnResult& n = *k.instructions;
    std::string line = n.counter.empty() ? "" : std::to_string(static_cast<int64_t>(n.current)) + " a call (" + n.counter + ")";
    if (n.baseline > 0)
      line += ", the baseline's artifact " + std::to_string(static_cast<int64_t>(n.baseline)) + " (" +
              bench::insn_change_text(n.ratio) + ")" + (n.regression ? ": INSTRUCTION REGRESSION" : "");
    if (!n.note.empty()) line += (line.empty() ? "" : "; ") + n.note;
    std::fprintf(out, "instructions: %s: %s\n", k.name.c_str(), line.c_str());
  }
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
  if (base_)
    std::fprintf(out, "\nagainst baseline %s (recorded %s on %s); regression limit +%g%%%s\n", report_.baseline_path.c_str(),
                 base_->created.c_str(), base_->machine.host.c_str(), gate_.max_regression_pct,
                 report_.gate ? "" : " (report only: no --max-regression)");
  else
    std::fprintf(out, "\nagainst %s, A/B; regression limit +%g%%%s\n", report_.baseline_path.c_str(),
                 gate_.max_regression_pct, report_.gate ? "" : " (report only: no --max-regression)");
  std::fputs(bench::gate_table(report_).c_str(), out);
  for (const auto& k : report_.kernels)
    if (k.comparison)
      for (const auto& n : k.comparison->notes) std::fprintf(out, "note: %s: %s\n", k.name.c_str(), n.c_str());
  if (!base_ || base_->calibration_ms.empty() || !o_.recorded) return;
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
  if (o_.push) {
    if (failures_) {
      std::fprintf(stderr, "mlk bench: results not pushed: %d kernel%s failed\n", failures_, failures_ == 1 ? "" : "s");
    } else if (auto n = client::push_bench_report(o_.server, o_.ns == "default" ? "" : o_.ns, bench::report_to_json(report_),
                                          o_.baseline_set);
               !n.ok()) {
      status = fail(n.status());
    } else {
      progress_("mlk bench: pushed " + std::to_string(*n) + " result" + (*n == 1 ? "" : "s") + " to " + o_.server +
                (o_.baseline_set.empty() ? "" : " as baseline set " + o_.baseline_set));
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
  if (o_.plot.substr(o_.plot.size() - 4) == ".svg") return bench::write_text_file(o_.plot, svg);
  auto png = bench::svg_to_png(svg);  // librsvg and cairo
  if (!png.ok()) return png.status();
  return bench::write_text_file(o_.plot, *png);
}

// One line on stderr per confirmed regression, then one per instruction-count one.
void Bench::PrintRegressions() const {
  for (const auto& id : report_.insn_regressions) {
    const bench::InsnResult& n = *report_.find(id)->instructions;
    std::fprintf(stderr,
                 "mlk bench: instruction regression: `%s` runs %s instructions a call, %s against the baseline's "
                 "artifact's %s (%s; limit %g%%)\n",
                 id.c_str(), std::to_string(static_cast<int64_t>(n.current)).c_str(),
                 bench::insn_change_text(n.ratio).c_str(), std::to_string(static_cast<int64_t>(n.baseline)).c_str(),
                 n.counter.c_str(), report_.max_insn_increase_pct);
  }
  for (const auto& id : report_.regressions) {
    const bench::KernelResult& k = *report_.find(id);
    const bench::Comparison& c = *k.comparison->confirm;
    const std::string p = c.p_slower < 1e-6 ? "< 1e-6" : "= " + bench::fmt_ms(c.p_slower);
    std::fprintf(stderr,
                 "mlk bench: regression: `%s` is %.1f%% slower than in %s (median %s ms -> %s ms; 99%% interval of "
                 "the ratio [%.3f, %.3f], %s p %s; limit %g%%); confirmed by a re-measurement%s\n",
                 k.id.c_str(), (c.ratio - 1) * 100, report_.baseline_path.c_str(),
                 bench::fmt_ms(c.baseline_median_ms).c_str(), bench::fmt_ms(c.current_median_ms).c_str(), c.ci_low,
                 c.ci_high, k.comparison->confirm_ab ? "paired t" : "Mann-Whitney", p.c_str(), gate_.max_regression_pct,
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
  if (comparing()) PrintBaseline(out);
  int status = WriteFiles();
  PrintRegressions();
  if (report_.gate && !report_.regressions.empty()) return 1;
  if (report_.insn_gate && !report_.insn_regressions.empty()) return 1;
  if (comparing() && !report_.gate && !report_.regressions.empty())
    std::fprintf(stderr, "mlk bench: (report only: pass --max-regression PCT to fail on regressions)\n");
  return status;
}

}  // namespace

int run(const RunOptions& o) { return Bench(o).Run(); }

}  // namespace mlk::bench
