#include "autotune/program_tune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include "base/log.h"

namespace mlk::tune {

namespace {

std::string label(const TuneRequest& r) {
  std::string s = r.fn + " [";
  bool first = true;
  for (const auto& [k, v] : r.dims) s += (first ? "" : ",") + k + "=" + std::to_string(v), first = false;
  return s + "]";
}

// A job being tuned: its task and what the scheduler knows of it.
struct Active {
  size_t job;
  TuningTask task;
  double best_before = 0;   // best time before its last slice
  double last_slice_s = 0;  // seconds its last slice took
};

// One line per tuned job: its best-so-far curve at a few points of its own
// search seconds, and when it came within 5% of its final best; then the
// count within 5% after 60 s.
void report_convergence(const std::vector<TuneRequest>& jobs, const std::vector<ProgramJobResult>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    const std::vector<CurvePoint>& c = out[i].curve;
    if (c.empty()) continue;
    std::string points;
    for (double t : {10.0, 30.0, 60.0}) {
      const double b = best_at(c, t);
      char p[48];
      if (b > 0) std::snprintf(p, sizeof p, "%.0f s %.4g ms, ", t, b);
      else std::snprintf(p, sizeof p, "%.0f s -, ", t);
      points += p;
    }
    log_linef(LogLevel::kProgress, "[tune program] curve %s: %sfinal %.4g ms at %.0f s; within 5%% after %.0f s",
              label(jobs[i]).c_str(), points.c_str(), c.back().best_ms, c.back().at_s, seconds_to_within(c, 0.05));
  }
  const ConvergenceSummary s = summarize_convergence(out);
  log_linef(LogLevel::kProgress, "[tune program] %d of %d kernels within 5%% of their final best after 60 s of their search",
            s.converged, s.jobs);
}

}  // namespace

double program_slice_s(const ProgramTuneOptions& o, size_t n) {
  if (o.slice_s > 0) return o.slice_s;
  return std::clamp(o.budget_s / (4.0 * static_cast<double>(std::max<size_t>(n, 1))), 5.0, 60.0);
}

double expected_gain(double best_before, double best_now, double last_slice_s, double spent_s, double alpha) {
  if (best_now <= 0) return std::numeric_limits<double>::infinity();
  const double recent = best_before > 0 && last_slice_s > 0 ? std::max(0.0, best_before - best_now) / last_slice_s : 0;
  const double optimistic = best_now / std::max(spent_s, 1e-3);
  return alpha * recent + (1 - alpha) * optimistic;
}

std::vector<ProgramJobResult> tune_program(const std::vector<TuneRequest>& jobs, const ProgramTuneOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  std::vector<ProgramJobResult> out(jobs.size());
  std::vector<Active> active;
  // Cache hits first; the rest start (their references are computed here).
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto hit = lookup_tuned(jobs[i]);
    if (!hit.ok() || *hit) {
      if (hit.ok()) out[i].outcome = std::move(**hit);
      else out[i].status = hit.status();
      if (o.progress && hit.ok())
        log_linef(LogLevel::kProgress, "[tune program %zu/%zu] %s: cached", i + 1, jobs.size(), label(jobs[i]).c_str());
      continue;
    }
    std::error_code ec;
    std::filesystem::create_directories(jobs[i].work_dir, ec);
    TuneOptions opts = jobs[i].opts;
    opts.log_path = tuning_log_path(jobs[i]);
    opts.progress = false;  // one line per slice instead of one per trial
    auto task = TuningTask::Start(*jobs[i].module, jobs[i].fn, jobs[i].profile, jobs[i].dims, opts);
    if (!task.ok()) {
      out[i].status = task.status();
      continue;
    }
    active.push_back({i, std::move(task).value()});
  }
  const double start_s = since(t0);  // lookups and references
  double finish_s = 0;               // final rounds, builds, checks, stores
  const double slice = program_slice_s(o, active.size());
  if (o.progress && !active.empty())
    log_linef(LogLevel::kProgress, "[tune program] %zu of %zu jobs to tune, %.0f s of search in all, slices of %.0f s",
              active.size(), jobs.size(), o.budget_s, slice);
  double spent = 0;
  // The measurer's error that stopped a job's search or final round: it
  // stops every job (TuningTask::stopped), each unfinished one failing with it.
  Status stopped = Status::Ok();
  // Finishes a converged (or the last) job: final round, build, check, store.
  auto finish_job = [&](Active& a) {
    ProgramJobResult& r = out[a.job];
    r.search_s = a.task.spent_s();
    r.trials = a.task.trials();
    r.resumed = a.task.resumed();
    auto res = a.task.finish();
    if (!res.ok()) {
      r.status = res.status();
      if (!a.task.stopped().ok()) stopped = a.task.stopped();
      return;
    }
    r.curve = best_so_far(res->log);
    auto stored = store_tuned(jobs[a.job], *res);
    if (stored.ok()) r.outcome = std::move(stored).value();
    else r.status = stored.status();
  };
  auto finish = [&](Active& a) {
    const auto f0 = Clock::now();
    finish_job(a);
    finish_s += since(f0);
  };
  auto run_slice = [&](Active& a, bool first) {
    const double before = a.task.spent_s();
    a.best_before = a.task.best_ms();
    Status st = a.task.advance(std::min(slice, std::max(o.budget_s - spent, 0.0)));
    a.last_slice_s = a.task.spent_s() - before;
    spent += a.last_slice_s;
    if (!st.ok()) stopped = st;
    if (!o.progress || !st.ok()) return;
    const double best = a.task.best_ms(), dflt = a.task.default_ms();
    std::string resumed = a.task.resumed() ? ", " + std::to_string(a.task.resumed()) + " from the log" : "";
    char speed[48] = "";
    if (best > 0 && dflt > 0) std::snprintf(speed, sizeof speed, ", %.2fx over naive", dflt / best);
    log_linef(LogLevel::kProgress, "[tune program %zu/%zu] %s%s: +%.0f s, %d trials%s, best %.4g ms%s%s; program %.0f/%.0f s, ETA %.0f s",
              a.job + 1, jobs.size(), label(jobs[a.job]).c_str(), first ? " (first slice)" : "", a.last_slice_s,
              a.task.trials(), resumed.c_str(), best, speed, a.task.converged() ? ", converged" : "", spent, o.budget_s,
              std::max(0.0, o.budget_s - spent));
  };
  // Every job gets a first slice, in order.
  for (size_t k = 0; k < active.size() && stopped.ok(); ++k) run_slice(active[k], true);
  std::vector<bool> done(active.size(), false);
  auto finish_converged = [&]() {
    for (size_t k = 0; k < active.size() && stopped.ok(); ++k)
      if (!done[k] && active[k].task.converged()) {
        finish(active[k]);
        done[k] = true;
      }
  };
  finish_converged();
  // Then the slices go by expected gain until the budget is spent.
  while (spent < o.budget_s && stopped.ok()) {
    std::optional<size_t> pick;
    double best_gain = -1;
    for (size_t k = 0; k < active.size(); ++k) {
      if (done[k]) continue;
      const Active& a = active[k];
      double g = expected_gain(a.best_before, a.task.best_ms(), a.last_slice_s, a.task.spent_s(), o.alpha);
      if (g > best_gain) best_gain = g, pick = k;
    }
    if (!pick) break;
    run_slice(active[*pick], false);
    finish_converged();
  }
  for (size_t k = 0; k < active.size(); ++k)
    if (!done[k] && stopped.ok()) finish(active[k]);
    else if (!done[k]) out[active[k].job].status = stopped;
  if (!stopped.ok()) return out;
  if (o.progress && !active.empty())
    log_linef(LogLevel::kProgress,
              "[tune program] done in %.0f s: %.0f s of search, %.0f s starting (cache lookups, references), %.0f s "
              "finishing (final rounds, builds, checks)",
              since(t0), spent, start_s, finish_s);
  if (o.progress && !active.empty()) report_convergence(jobs, out);
  return out;
}

ConvergenceSummary summarize_convergence(const std::vector<ProgramJobResult>& results, double fraction, double by_s) {
  ConvergenceSummary s;
  for (const ProgramJobResult& r : results) {
    if (r.curve.empty()) continue;
    ++s.jobs;
    if (seconds_to_within(r.curve, fraction) <= by_s) ++s.converged;
  }
  return s;
}

}  // namespace mlk::tune
