// The tuner's loop: the naive schedule first (the fixed baseline), then the SearchStrategy's
// candidates, each evaluated once (or taken from the resumed log), measured
// by the Measurer within the budget's slices, predicted by the CostModel and
// appended to the TuningLog; then the final round.
#include "autotune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "autotune/cost_model_interface.h"
#include "autotune/final_round.h"
#include "autotune/measurer.h"
#include "autotune/search_strategy.h"
#include "autotune/tuning_log.h"
#include "autotune/tuning_setup.h"
#include "base/log.h"
#include "lang/ir_printer.h"
#include "lang/memory_budget.h"
#include "scheduler/kernel.h"
#include "targets/toolchain.h"

namespace mlk::tune {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class Search final : public SearchHistory {
 public:
  Search(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims, const TuneOptions& o,
         std::vector<StageInfo> stages, Measurers measurers)
      : fn_(fn), p_(p), o_(o), label_(fn + " " + p.name), stages_(std::move(stages)),
        measurers_(std::move(measurers)),
        cost_(make_cost_model(stages_, p_, {.seed = o.seed, .elem_bytes = result_bytes(m, fn), .label = label_,
                                            .progress = o.progress})),
        strategy_(std::make_unique<EvolutionarySearch>(stages_, p_, o.seed, o.autoschedulers, *cost_, label_)),
        setup_(base_setup(m, fn, p, dims, o)) {}

  // The inputs and verification cases (tuning_setup.h), where candidates are measured.
  Status prepare_measurement() {
    if (!measures() && !o_.cases_for_export) return Status::Ok();
    // Exported cases travel: a case's tensors stay under 4 MiB.
    auto v = tune::prepare_measurement(setup_, stages_, o_.seed, o_.cases_for_export ? (4 << 20) : 0);
    if (!v.ok()) return v.status();
    verification_ = std::move(*v);
    return Status::Ok();
  }
  void set_log(TuningLog* log) {
    log_ = log;
    resume_ = log->earlier();
    resume_final_ = log->finals();
  }

  // SearchHistory.
  const std::deque<Trial>& trials() const override { return trials_; }
  bool seen(const std::string& hash) const override { return seen_.count(hash) > 0; }
  double score(const Trial& t) const override {
    if (measures() || t.m.median_ms > 0) return t.m.median_ms;
    double s = t.predicted_ms;
    if (t.m.detail.find("spills") != std::string::npos) s *= 2;
    return s;
  }

  // Continues the search for `seconds` more of its budget, each part picking
  // up where the previous call stopped. The candidates and their order do
  // not depend on how the budget is sliced, so a log replays whatever the
  // slicing of the run that wrote it.
  Status advance(double seconds) {
    if (!failed_.ok()) return failed_;
    // An earlier slice's overrun (its last trial) is not owed: the caller
    // accounts the seconds each slice really took.
    allowance_s_ = std::max(allowance_s_, spent_s_) + seconds;
    slice_start_ = Clock::now();
    slice_first_trial_ = trials_.size();
    running_ = true;
    step();
    spent_s_ += std::chrono::duration<double>(Clock::now() - slice_start_).count();
    running_ = false;
    return failed_;
  }
  // Nothing is left to try (or the measurer failed), or the trial limit is reached.
  bool converged() const {
    return !failed_.ok() || (default_done_ && strategy_->done()) || static_cast<int>(trials_.size()) >= o_.trials;
  }
  double best_score() const { return best_ ? score(*best_) : 0; }
  double default_score() const { return default_; }
  int trial_count() const { return static_cast<int>(trials_.size()); }
  int resumed() const { return resumed_; }
  bool has_best() const { return best_ != nullptr; }
  const std::string& fn() const { return fn_; }
  const Status& failed() const { return failed_; }
  // Seconds of search so far: the slices advanced, the current one included.
  double elapsed_s() const {
    return spent_s_ + (running_ ? std::chrono::duration<double>(Clock::now() - slice_start_).count() : 0);
  }

  // Final round and result, once advancing is over.
  Expected<TuneResult> finish() {
    if (!failed_.ok()) return failed_;
    if (measurers_.final_round) {
      auto fr = final_round({&trials_, [this](const Trial& t) { return score(t); }, &setup_, compile_limit(),
                             o_.final_round_here, measurers_.final_round.get(), &resume_final_, log_});
      if (!fr.ok()) return failed_ = fr.status();
      take_final_round(std::move(*fr));
    }
    return result();
  }

 private:
  bool measures() const { return measurers_.search->measures(); }

  double compile_limit() const { return tune::compile_limit(o_, trials_); }

  // Within the trial limit, and time left in the slice; the first candidate
  // of a slice is always evaluated, so that every slice makes progress.
  bool budget_left() const {
    return static_cast<int>(trials_.size()) < o_.trials &&
           (trials_.size() == slice_first_trial_ || elapsed_s() < allowance_s_);
  }

  // The naive schedule (trial 0, every knob at its default: the fixed
  // baseline, measured alone and before any budget check), then the strategy's groups while the budget lasts.
  void step() {
    if (!default_done_) {
      const Knobs def = default_knobs(stages_, p_);
      const Candidate c{"naive", def, schedule_from_knobs(stages_, def, p_)};
      const Trial* d = evaluate(c);
      if (d && d->m.verdict == Measurement::Verdict::kWrong && !d->resumed &&
          calibrate_on_default(setup_, verification_, c.sched, compile_limit(), label_)) {
        seen_.erase(c.sched.hash());
        trials_.pop_back();
        d = evaluate(c);
      }
      if (!failed_.ok()) return;
      if (d && d->m.ok()) default_ = score(*d);
      default_done_ = true;
    }
    while (!strategy_->done()) {
      if (!budget_left()) return;
      const std::vector<Candidate> group = strategy_->next(*this);
      if (group.empty()) continue;
      bool any = false;
      const size_t took = evaluate_window(group, &any);
      if (!failed_.ok()) return;
      strategy_->taken(took, any);
    }
  }

  // Evaluates a candidate once (deduplicated by schedule hash); null when
  // seen before or when the measurer failed.
  const Trial* evaluate(const Candidate& c) {
    if (!claim(c.sched)) return nullptr;
    Trial t = new_trial(c);
    if (!t.resumed) {
      set_limits(c.sched);
      if (!measure_into(t, measurers_.search->measure(setup_, c.sched))) return nullptr;
    }
    return record(std::move(t));
  }

  // A measurement into its trial, completed by the cost model; false (the
  // search stopped) when the measurer failed.
  bool measure_into(Trial& t, Expected<Measurement> m) {
    if (!m.ok()) {
      failed_ = m.status();
      return false;
    }
    t.m = std::move(*m);
    cost_->complete(t.knobs, t.m);
    return true;
  }

  // Evaluates the first candidates of `group` as evaluate() would one after
  // the other: one with a measurer of concurrency 1; else a window of up to
  // concurrency() candidates to measure (never more than the trials left),
  // dispatched at once with the cutoff and compile limit of now, and
  // recorded in the group's order (up to a failed measurement). Returns how
  // many candidates it took (evaluated, or skipped as already seen); `any`
  // set when one was evaluated.
  size_t evaluate_window(const std::vector<Candidate>& group, bool* any) {
    const int n = measurers_.search->concurrency();
    if (n == 1) {
      if (evaluate(group[0])) *any = true;
      return 1;
    }
    const size_t left = static_cast<size_t>(std::max(0, o_.trials - static_cast<int>(trials_.size())));
    std::vector<Trial> window;
    int to_measure = 0;
    size_t i = 0;
    for (; i < group.size() && window.size() < left && to_measure < n; ++i) {
      if (!claim(group[i].sched)) continue;
      window.push_back(new_trial(group[i]));
      if (!window.back().resumed) ++to_measure;
    }
    if (window.empty()) return std::max<size_t>(i, 1);
    set_limits(window.front().schedule);
    // Each call reads setup_ (unchanged until every call returned) and its
    // own schedule; calls left running when one failed are waited for.
    std::vector<std::future<Expected<Measurement>>> running;
    for (const Trial& t : window)
      if (!t.resumed)
        running.push_back(std::async(std::launch::async,
                                     [this, s = t.schedule] { return measurers_.search->measure(setup_, s); }));
    size_t next = 0;
    for (Trial& t : window) {
      if (!t.resumed && !measure_into(t, running[next++].get())) return i;
      record(std::move(t));
    }
    *any = true;
    return i;
  }

  // Marks a schedule seen; false when it was already.
  bool claim(const Schedule& sched) { return seen_.insert(sched.hash()).second; }

  // A trial of a candidate not seen before, taken from the resumed log when it is there.
  Trial new_trial(const Candidate& c) {
    Trial t;
    t.origin = c.origin;
    t.knobs = c.knobs;
    t.schedule = c.sched;
    t.predicted_ms = c.knobs.empty() ? 0 : cost_->predict(c.knobs);
    auto it = resume_.find(c.sched.hash());
    if (it != resume_.end()) {
      t.m = it->second.m;
      t.origin = it->second.origin;
      t.at_s = it->second.at_s;
      t.resumed = true;
      ++resumed_;
    }
    return t;
  }

  // The limits of the next measurement: the cutoff from the best so far,
  // the compile limit (shorter for an autoscheduler's candidate).
  void set_limits(const Schedule& next) {
    setup_.cutoff_ms = best_ ? 3 * score(*best_) : 0;
    setup_.compile_timeout_s = compile_limit();
    if (!next.autoscheduler.empty() && o_.compile_timeout_s <= 0)
      setup_.compile_timeout_s = std::min(setup_.compile_timeout_s, autoscheduler_compile_limit(trials_));
  }

  // Appends a trial (the next index), logs it unless resumed, and updates the best.
  const Trial* record(Trial t) {
    t.index = static_cast<int>(trials_.size());
    if (!t.resumed) t.at_s = elapsed_s();
    trials_.push_back(std::move(t));
    const Trial& back = trials_.back();
    if (log_ && !back.resumed) log_->Append(back);
    if (back.m.ok() && (!best_ || score(back) < score(*best_))) best_ = &back;
    progress(back);
    return &back;
  }

  void progress(const Trial& t) {
    if (!o_.progress) return;
    const double per = elapsed_s() / std::max<size_t>(1, trials_.size()), n = static_cast<double>(trials_.size());
    log_trial_progress(t, {label_, trials_.size(), o_.trials, score(t), best_ != nullptr, best_score(), default_,
                           std::min(allowance_s_ - elapsed_s(), per * (o_.trials - n))});
  }

  // The final round's winner becomes the best, and its time of the naive schedule the naive one's.
  void take_final_round(FinalRound fr) {
    final_ms_ = std::move(fr.ms);
    final_times_ = std::move(fr.times);
    if (!fr.winner) return;
    best_ = fr.winner;
    const Trial* def = trials_.empty() || !trials_.front().m.ok() ? nullptr : &trials_.front();
    if (def && final_ms_.count(def)) default_ = final_ms_[def];
    if (o_.progress)
      log_linef(LogLevel::kProgress, "[tune %s] final round: %s %.4g ms vs naive %.4g ms", label_.c_str(),
                fr.winner->origin.c_str(), fr.winner_ms, default_);
  }

  TuneResult result() const {
    TuneResult r;
    r.fn = fn_;
    r.dims = setup_.dims;
    r.measured = measures();
    r.trials = static_cast<int>(trials_.size());
    r.log.assign(trials_.begin(), trials_.end());
    for (Trial& t : r.log) t.score_ms = score(t);
    r.default_ms = default_;
    r.untuned_ms = untuned_ms();
    r.reference = measures() ? verification_.reference : "none: " + measurers_.search->why_not_measured();
    if (best_) {
      r.best = best_->schedule;
      r.best_origin = best_->origin;
      auto f = final_ms_.find(best_);
      r.best_ms = f != final_ms_.end() ? f->second : score(*best_);
      r.best_times_ms = f != final_ms_.end() ? final_times_.at(best_) : best_->m.times_ms;
    }
    r.verify_cases = setup_.verify;
    r.cases_json = verification_json(verification_, nullptr, setup_.verify.size());
    if (measures()) r.verification_json = verification_json(verification_, best_, setup_.verify.size());
    return r;
  }

  // The default (untuned) schedule's score, as its trial was measured (the
  // final round's median when it took part); 0 when none was, or when it is
  // the naive schedule (no rule seeds: GPU profiles).
  double untuned_ms() const {
    const Knobs untuned = untuned_knobs(stages_, p_);
    if (untuned == default_knobs(stages_, p_)) return 0;
    const std::string want = schedule_from_knobs(stages_, untuned, p_).hash();
    for (const Trial& t : trials_)
      if (t.m.ok() && t.schedule.hash() == want) {
        auto f = final_ms_.find(&t);
        return f != final_ms_.end() ? f->second : score(t);
      }
    return 0;
  }

  std::string fn_;
  Profile p_;
  TuneOptions o_;
  std::string label_;  // "FN PROFILE", for log lines
  std::vector<StageInfo> stages_;
  Measurers measurers_;
  std::unique_ptr<CostModel> cost_;
  std::unique_ptr<SearchStrategy> strategy_;
  // The budget: seconds granted by advance() so far, and spent in it. The
  // search budget starts with the first advance(): computing the references
  // (prepare_measurement, up to a minute at large shapes) is not part of it.
  double allowance_s_ = 0, spent_s_ = 0;
  Clock::time_point slice_start_;
  bool running_ = false;
  size_t slice_first_trial_ = 0;  // trials_.size() when the slice began
  bool default_done_ = false;
  Status failed_ = Status::Ok();  // the measurer's error that stopped the search
  MeasureSetup setup_;
  Verification verification_;
  std::deque<Trial> trials_;  // stable addresses for best_
  std::set<std::string> seen_;
  std::map<std::string, Trial> resume_;
  FinalTimes resume_final_;
  const Trial* best_ = nullptr;
  double default_ = 0;
  TuningLog* log_ = nullptr;
  int resumed_ = 0;
  std::map<const Trial*, double> final_ms_;
  std::map<const Trial*, std::vector<double>> final_times_;
};

// The search and the log it appends to, which it points at.
struct TuningTask::State {
  std::unique_ptr<Search> search;
  std::unique_ptr<TuningLog> log;
};

TuningTask::TuningTask(std::unique_ptr<State> s) : s_(std::move(s)) {}
TuningTask::~TuningTask() = default;
TuningTask::TuningTask(TuningTask&&) noexcept = default;
TuningTask& TuningTask::operator=(TuningTask&&) noexcept = default;

Status TuningTask::advance(double seconds) { return s_->search->advance(seconds); }
bool TuningTask::converged() const { return s_->search->converged(); }
double TuningTask::best_ms() const { return s_->search->best_score(); }
double TuningTask::default_ms() const { return s_->search->default_score(); }
int TuningTask::trials() const { return s_->search->trial_count(); }
int TuningTask::resumed() const { return s_->search->resumed(); }
double TuningTask::spent_s() const { return s_->search->elapsed_s(); }
Status TuningTask::stopped() const { return s_->search->failed(); }

Expected<TuneResult> TuningTask::finish() {
  if (!s_->search->failed().ok()) return s_->search->failed();
  if (!s_->search->has_best())
    return Status::InvalidArgument("no candidate schedule for `" + s_->search->fn() + "` compiled and verified");
  return s_->search->finish();
}

Expected<TuningTask> TuningTask::Start(const ir::Module& m, const std::string& fn, const Profile& profile,
                                       const DimEnv& dims, const TuneOptions& opts) {
  const ir::Function* f = m.find(fn);
  if (!f) return Status::NotFound("no fn `" + fn + "` in the program");
  if (!f->is_public) return Status::InvalidArgument("`" + fn + "` is not public; only public fns are tuned and built");
  auto measurers = make_measurers(profile, opts);  // CPU profiles: Unsupported where they cannot run
  if (!measurers.ok()) return measurers.status();
  // Every dimension needs a value, and the shape must satisfy the signature.
  MLK_RETURN_IF_ERROR(check_tuning_shape(*f, fn, dims));
  // Refuse a shape whose inputs and outputs do not fit in memory, before allocating any.
  if (!profile.is_gpu()) MLK_RETURN_IF_ERROR(check_tuning_memory(*f, dims, "tuning `" + fn + "` at " + dims_label(dims)));
  // Stage names and extents, from a lowering in this process (no code runs,
  // so no Halide threads exist when workers are forked).
  auto stages = stage_infos_for(m, fn, dims, profile.halide_target);
  if (!stages.ok()) return stages.status();
  auto state = std::make_unique<State>();
  state->search = std::make_unique<Search>(m, fn, profile, dims, opts, *stages, std::move(*measurers));
  MLK_RETURN_IF_ERROR(state->search->prepare_measurement());
  if (!opts.log_path.empty()) {
    json header = {{"fn", fn}, {"ir", ir::function_hash(m, *f)}, {"dims", dims}, {"profile", profile.name},
                   {"seed", opts.seed}, {"rules", kScheduleSpaceVersion}, {"halide", halide_version()}};
    auto log = TuningLog::Open(opts.log_path, header, [&](const Knobs& k) { return check_knobs(*stages, k, profile); });
    if (!log.ok()) return log.status();
    state->log = std::move(log).value();
    state->search->set_log(state->log.get());
  }
  return TuningTask(std::move(state));
}

Expected<TuneResult> tune_function(const ir::Module& m, const std::string& fn, const Profile& profile,
                                   const DimEnv& dims, const TuneOptions& opts) {
  auto task = TuningTask::Start(m, fn, profile, dims, opts);
  if (!task.ok()) return task.status();
  MLK_RETURN_IF_ERROR(task->advance(opts.time_s));
  return task->finish();
}

}  // namespace mlk::tune
