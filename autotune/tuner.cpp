#include "autotune/tuner.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "autotune/cost_model.h"
#include "autotune/inputs.h"
#include "autotune/tuning_log.h"
#include "autotune/gpu_cost_model.h"
#include "autotune/measure_cuda.h"
#include "autotune/learned_cost_model.h"
#include "base/stats.h"
#include "base/log.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "scheduler/kernel.h"
#include "artifact/build.h"
#include "lang/memory_budget.h"
#include "targets/detect.h"
#include "targets/toolchain.h"
#include "base/json.h"

namespace mlk::tune {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {


double interpreter_cost(const std::vector<StageInfo>& stages) {
  double cost = 0;
  for (const auto& s : stages) {
    double c = 1;
    for (int64_t e : s.extents) c *= std::max<int64_t>(1, e);
    for (int64_t e : s.rextents) c *= std::max<int64_t>(1, e);
    cost += c;
  }
  return cost;
}

// Whether `env` is a valid shape of `f`: every parameter and result extent
// evaluates to at least 1 and every refinement holds.
bool valid_shape(const ir::Function& f, const DimEnv& env) {
  for (const Pred& r : f.refinements) {
    auto ok = r.eval(env);
    if (!ok || !*ok) return false;
  }
  auto shape_ok = [&](const Shape& s) {
    for (const Dim& d : s) {
      auto v = d.eval(env);
      if (!v || *v < 1) return false;
    }
    return true;
  };
  for (const auto& p : f.params)
    if (!shape_ok(p.type.shape)) return false;
  for (const auto& r : f.results())
    if (!shape_ok(r.type.shape)) return false;
  return true;
}

// The shape candidates are verified at: the tuning shape itself (the cached
// artifact is for that shape), unless the interpreter would need more than
// ~1e10 element-steps there; then a smaller shape with every dimension
// capped, odd remainders kept and refinements still satisfied.
DimEnv verification_dims(const ir::Function& f, const DimEnv& dims, const std::vector<StageInfo>& stages) {
  if (interpreter_cost(stages) <= 1e10) return dims;
  DimEnv small = dims;
  for (auto& [k, v] : small)
    if (v > 64) v = 48 + v % 16;
  return valid_shape(f, small) ? small : dims;
}

// The second verification shape, with ragged tails: each dimension, in turn,
// takes the first of the candidate extents below that keeps the shape valid
// (refinements such as `D mod H = 0` included) and is at most max(its
// verification extent, 7), so that the interpreter's work does not grow.
// The candidates are odd (a vectorised or tiled loop has a tail, and below a
// vector width only a tail), then odd multiples of small powers of two for
// dimensions a refinement makes even. Dimensions of 1 or 2 stay as they are,
// and so does one no candidate fits. nullopt when no dimension changed.
std::optional<DimEnv> ragged_dims(const ir::Function& f, const DimEnv& base) {
  std::vector<int64_t> candidates = {129, 67, 37, 7, 5, 3};
  for (int64_t k : {2, 4, 8, 16, 32, 64})
    for (int64_t odd : {7, 5, 3}) candidates.push_back(k * odd);
  DimEnv env = base;
  bool changed = false;
  for (auto& [name, v] : env) {
    const int64_t orig = v;
    if (orig <= 2) continue;
    for (int64_t c : candidates) {
      if (c > std::max<int64_t>(orig, 7)) continue;
      v = c;
      if (valid_shape(f, env)) break;
      v = orig;
    }
    changed = changed || v != orig;
  }
  if (!changed) return std::nullopt;
  return env;
}

std::string dims_text(const DimEnv& d) {
  std::string s;
  for (const auto& [k, v] : d) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

bool has_nan(const HostTensor& t);
bool has_nan(const std::vector<HostTensor>& ts) {
  for (const auto& t : ts)
    if (has_nan(t)) return true;
  return false;
}

bool has_nan(const HostTensor& t) {
  if (!is_float(t.dtype)) return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isnan(t.get(i))) return true;
  return false;
}


// The tolerance of one result against its reference `want`:
// tolerance_for(dtype, red), its atol scaled by the reference's RMS when
// that exceeds 1 (float dtypes only).
Tolerance result_tolerance(DType dtype, int64_t red, const HostTensor& want) {
  Tolerance tol = tolerance_for(dtype, red);
  // Rounding errors of a dot product scale with the magnitude of its
  // terms, which for random data is the typical magnitude of the
  // results: the absolute tolerance is relative to the reference's
  // RMS when that exceeds 1 (chained matmuls, as in `mlp`, produce
  // results in the hundreds). NaN and infinite elements are left out.
  if (is_float(dtype) && want.numel() > 0) {
    double sq = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      double v = want.get(i);
      if (!std::isfinite(v)) continue;
      sq += v * v;
      ++n;
    }
    const double rms = n ? std::sqrt(sq / static_cast<double>(n)) : 0;
    if (std::isfinite(rms) && rms > 1) tol.atol *= rms;
  }
  return tol;
}

// When `ref` (the reference interpreter's results of fn for c.inputs at
// `env`) holds a NaN: c's float params (ranges[i] kFloat) are made
// non-negative, smallest first, and the reference recomputed into `ref`
// after each, until it has no NaN or none is left. Appends the name of each
// param changed to `non_negative`. A failing interpreter is InvalidArgument
// naming c.name.
Status reference_without_nan(const ir::Module& m, const std::string& fn, const ir::Function& f,
                             const std::vector<InputRange>& ranges, const DimEnv& env, VerifyCase& c,
                             std::vector<HostTensor>& ref, json& non_negative) {
  // Negative values outside a function's domain (the `eps` of an
  // rmsnorm under an rsqrt) make results NaN, and a NaN reference
  // checks little: float params are made non-negative, smallest first,
  // until the reference has no NaN.
  if (!has_nan(ref)) return Status::Ok();
  std::vector<size_t> order;
  for (size_t i = 0; i < f.params.size(); ++i)
    if (ranges[i].kind == InputRange::Kind::kFloat) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return c.inputs[a].numel() < c.inputs[b].numel(); });
  for (size_t i : order) {
    HostTensor& t = c.inputs[i];
    for (int64_t e = 0; e < t.numel(); ++e) t.set(e, std::fabs(t.get(e)));
    non_negative.push_back(f.params[i].name);
    auto again = interpret_all(m, fn, c.inputs, env);
    if (!again.ok())
      return Status::InvalidArgument("the reference interpreter failed on random inputs at the " + c.name + ": " +
                                     again.status().message());
    ref = std::move(*again);
    if (!has_nan(ref)) break;
  }
  return Status::Ok();
}

}  // namespace

// --- the search --------------------------------------------------------------

class Search {
 public:
  Search(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims, const TuneOptions& o,
         std::vector<StageInfo> stages)
      : m_(m), fn_(fn), p_(p), dims_(dims), o_(o), stages_(std::move(stages)), rng_(o.seed),
        space_(knob_space(stages_, p)) {}

  Status prepare_measurement() {
    const ir::Function& f = *m_.find(fn_);
    data_seed_ = o_.seed ^ 0x9e3779b97f4a7c15ULL;
    std::mt19937_64 data_rng(data_seed_);
    setup_.module = &m_;
    setup_.fn = fn_;
    setup_.target = p_.halide_target;
    setup_.dims = dims_;
    setup_.run_timeout_s = o_.run_timeout_s;
    setup_.fault = o_.fault;
    setup_.compile_fault = o_.compile_fault;
    // Input sets rotated between timed runs, as many as fit in ~256 MiB.
    int64_t bytes = 0;
    for (const auto& p : f.params) {
      int64_t n = 1;
      for (const Dim& d : p.type.shape) n *= *d.eval(dims_);
      bytes += n * dtype_bits(p.type.dtype) / 8;
    }
    int sets = static_cast<int>(std::clamp<int64_t>((256LL << 20) / std::max<int64_t>(bytes, 1), 1, 3));
    const std::vector<InputRange> tuning_ranges = input_ranges(m_, f, dims_);
    for (int s = 0; s < sets; ++s) {
      std::vector<HostTensor> in;
      for (size_t i = 0; i < f.params.size(); ++i) in.push_back(random_input(f.params[i], tuning_ranges[i], dims_, data_rng));
      setup_.timing.push_back(std::move(in));
    }
    int64_t red = 1;
    for (const auto& s : stages_)
      for (int64_t e : s.rextents) red = std::max(red, e);
    const std::vector<ir::Result> results = f.results();
    // The verification shape (the tuning shape, or a capped one) and the
    // ragged one, each with two independent input sets.
    std::vector<std::pair<std::string, DimEnv>> shapes = {{"verification", verification_dims(f, dims_, stages_)}};
    std::string ragged_note;
    if (auto rg = ragged_dims(f, shapes[0].second)) {
      auto st = stage_infos_for(m_, fn_, *rg, p_.halide_target);
      if (st.ok() && interpreter_cost(*st) <= 1e10) shapes.push_back({"ragged", *rg});
      else ragged_note = "the ragged shape would cost the interpreter too much";
    } else {
      ragged_note = "no dimension could be made ragged within the refinements";
    }
    json shapes_j = json::array(), cases_j = json::array();
    for (const auto& [shape_name, env] : shapes) {
      std::vector<InputRange> ranges = input_ranges(m_, f, env);
      json ranges_j = json::array();
      for (size_t i = 0; i < f.params.size(); ++i) ranges_j.push_back(range_json(f.params[i], ranges[i]));
      shapes_j.push_back({{"name", shape_name}, {"dims", env}, {"params", ranges_j}});
      for (int set = 0; set < 2; ++set) {
        VerifyCase c;
        c.shape = shape_name;
        c.set = set;
        c.name = shape_name + " shape [" + dims_text(env) + "], input set " + std::to_string(set);
        c.dims = env;
        for (size_t i = 0; i < f.params.size(); ++i) c.inputs.push_back(random_input(f.params[i], ranges[i], env, data_rng));
        auto ref = interpret_all(m_, fn_, c.inputs, env);
        if (!ref.ok())
          return Status::InvalidArgument("the reference interpreter failed on random inputs at the " + c.name + ": " +
                                         ref.status().message());
        // Negative values outside a function's domain make results NaN, and
        // a NaN reference checks little (reference_without_nan).
        json non_negative = json::array();
        MLK_RETURN_IF_ERROR(reference_without_nan(m_, fn_, f, ranges, env, c, *ref, non_negative));
        c.references = *ref;
        json tols_j = json::array();
        for (size_t k = 0; k < results.size(); ++k) {
          Tolerance tol = result_tolerance(results[k].type.dtype, red, c.references[k]);
          c.tols.push_back(tol);
          tols_j.push_back({{"rtol", tol.rtol}, {"atol", tol.atol}});
        }
        cases_j.push_back({{"shape", shape_name}, {"input_set", set}, {"dims", env},
                           {"tolerance", results.size() == 1 ? tols_j[0] : tols_j},
                           {"made_non_negative", non_negative}});
        setup_.verify.push_back(std::move(c));
      }
    }
    verification_ = {
        {"reference", "the reference interpreter (lang/interpreter.cpp)"},
        {"generator", "mt19937_64"},
        {"seed", data_seed_},
        {"seed_from", "tuning seed xor 0x9e3779b97f4a7c15; draws: the timing sets, then per shape input sets 0 and 1"},
        {"float_values", "random sign, magnitude 10^u with u uniform in [log10(1e-3), log10(4)]"},
        {"input_sets", 2},
        {"shapes", shapes_j},
        {"cases", cases_j},
        {"tolerance_from", std::string("tolerance_for(") + dtype_name(f.result_type.dtype) + ", " + std::to_string(red) +
                               "), atol scaled by the reference RMS when above 1" +
                               (results.size() > 1 ? "; per result, by its dtype and RMS" : "")},
    };
    if (!ragged_note.empty()) verification_["ragged_shape_skipped"] = ragged_note;
    reference_ = "reference interpreter on 2 random input sets at " + dims_text(shapes[0].second);
    if (shapes.size() > 1) reference_ += " and at the ragged shape " + dims_text(shapes[1].second);
    return Status::Ok();
  }

  // The compile limit of the next candidate (TuneOptions::compile_timeout_s).
  double compile_limit() const {
    if (o_.compile_timeout_s > 0) return o_.compile_timeout_s;
    if (trials_.empty()) return kFirstCompileTimeoutS;
    return std::max(kMinCompileTimeoutS, kCompileTimeoutFactor * trials_.front().m.compile_ms / 1000);
  }

  void set_resume(std::map<std::string, Trial> r, FinalTimes finals) {
    resume_ = std::move(r);
    resume_final_ = std::move(finals);
  }
  void set_log(TuningLog* log) { log_ = log; }

  // Within the trial limit, and time left in the slice; the first candidate
  // of a slice is always evaluated, so that every slice makes progress.
  bool budget_left() const {
    return static_cast<int>(trials_.size()) < o_.trials &&
           (trials_.size() == slice_first_trial_ || elapsed_s() < allowance_s_);
  }
  // Seconds of search so far: the slices advanced, the current one included.
  double elapsed_s() const {
    return spent_s_ + (running_ ? std::chrono::duration<double>(Clock::now() - slice_start_).count() : 0);
  }

  // A candidate of a group known ahead (evaluate_window).
  struct Candidate {
    std::string origin;
    Knobs knobs;
    Schedule sched;
  };

  // Evaluates a candidate once (deduplicated by schedule hash).
  const Trial* evaluate(const std::string& origin, const Knobs& knobs, const Schedule& sched) {
    if (!claim(sched)) return nullptr;
    Trial t = new_trial(origin, knobs, sched);
    if (t.resumed) {
    } else if (p_.is_gpu()) {
      t.m = gpu_measured_ ? measure_cuda(setup_, p_, sched, gpu_scratch()) : build_only(sched, knobs);
    } else {
      set_limits();
      t.m = o_.measurer ? o_.measurer(setup_, sched) : measure(setup_, sched);
    }
    return record(std::move(t));
  }

  // How many candidates are measured at once (TuneOptions::parallel_measurements):
  // only a measurer that measures elsewhere measures several.
  int parallelism() const { return o_.measurer && !p_.is_gpu() ? std::max(1, o_.parallel_measurements) : 1; }

  // Evaluates the next candidates of `group` from `from` on, as evaluate()
  // would one after the other: one with parallelism() 1; else a window of up
  // to parallelism() candidates to measure (never more than the trials
  // left), dispatched at once with the cutoff and compile limit of now, and
  // recorded in the group's order. Returns how many candidates it took
  // (evaluated, or skipped as already seen); `any` set when one was evaluated.
  size_t evaluate_window(const std::vector<Candidate>& group, size_t from, bool* any) {
    const int n = parallelism();
    if (n == 1) {
      const Candidate& c = group[from];
      if (evaluate(c.origin, c.knobs, c.sched)) *any = true;
      return 1;
    }
    const size_t left = static_cast<size_t>(std::max(0, o_.trials - static_cast<int>(trials_.size())));
    std::vector<Trial> window;
    int to_measure = 0;
    size_t i = from;
    for (; i < group.size() && window.size() < left && to_measure < n; ++i) {
      if (!claim(group[i].sched)) continue;
      window.push_back(new_trial(group[i].origin, group[i].knobs, group[i].sched));
      if (!window.back().resumed) ++to_measure;
    }
    if (window.empty()) return std::max<size_t>(i - from, 1);
    set_limits();
    // Each call reads setup_ (unchanged until every call returned) and its own schedule.
    std::vector<std::future<Measurement>> running;
    for (const Trial& t : window)
      if (!t.resumed)
        running.push_back(std::async(std::launch::async, [this, s = t.schedule] { return o_.measurer(setup_, s); }));
    size_t next = 0;
    for (Trial& t : window) {
      if (!t.resumed) t.m = running[next++].get();
      record(std::move(t));
    }
    *any = true;
    return i - from;
  }

  // Marks a schedule seen; false when it was already.
  bool claim(const Schedule& sched) { return seen_.insert(sched.hash()).second; }

  // A trial of a candidate not seen before, taken from the resumed log when it is there.
  Trial new_trial(const std::string& origin, const Knobs& knobs, const Schedule& sched) {
    Trial t;
    t.origin = origin;
    t.knobs = knobs;
    t.schedule = sched;
    t.predicted_ms = knobs.empty() ? 0 : predict_ms(stages_, knobs, p_);
    auto it = resume_.find(sched.hash());
    if (it != resume_.end()) {
      t.m = it->second.m;
      t.origin = it->second.origin;
      t.at_s = it->second.at_s;
      t.resumed = true;
      ++resumed_;
    }
    return t;
  }

  // The limits of the next CPU measurement: the cutoff from the best so far, the compile limit.
  void set_limits() {
    setup_.cutoff_ms = best_ ? 3 * score(*best_) : 0;
    setup_.compile_timeout_s = compile_limit();
    if (phase_ == Phase::kAutoschedulers && o_.compile_timeout_s <= 0)
      setup_.compile_timeout_s = std::min(setup_.compile_timeout_s, autoscheduler_limit());
  }

  // Without --compile-timeout, an autoscheduler's candidate compiles (its
  // search included) for at most kAutoschedulerCompileFactor x the slowest
  // compile of the schedules tried before it, and at least
  // kMinAutoschedulerCompileS: on 2 cores Adams2019 spent 24-60 s and more
  // on 3- and 4-stage pipelines whose rule schedules compile in 2 s, and
  // lost to them.
  double autoscheduler_limit() const {
    double slowest = 0;
    for (const Trial& t : trials_) slowest = std::max(slowest, t.m.compile_ms / 1000);
    return std::max(kMinAutoschedulerCompileS, kAutoschedulerCompileFactor * slowest);
  }

  // Appends a trial (the next index), logs it unless resumed, and updates the best.
  const Trial* record(Trial t) {
    t.index = static_cast<int>(trials_.size());
    if (!t.resumed) t.at_s = elapsed_s();
    trials_.push_back(std::move(t));
    const Trial& back = trials_.back();
    if (log_ && !back.resumed) {
      log_->Append(back);
    }
    if (back.m.ok() && (!best_ || score(back) < score(*best_))) best_ = &back;
    progress(back);
    return &back;
  }

  std::string gpu_scratch() const {
    return (std::filesystem::temp_directory_path() / ("mlk-tune-gpu-" + std::to_string(getpid()))).string();
  }

  // Without a GPU, a GPU candidate is "measured" by building it and running
  // ptxas: failures count against it, and the GPU cost model
  // (gpu_cost_model.h) estimates the rest from the ptxas report (median_ms
  // holds the estimate; the result says measured: false).
  Measurement build_only(const Schedule& sched, const Knobs& knobs) {
    Measurement m;
    BuildRequest req{&m_, fn_, "", p_, dims_, sched, gpu_scratch()};
    auto r = build_artifact(req);
    std::error_code ec;
    std::filesystem::remove_all(req.out_dir, ec);
    if (!r.ok()) {
      m.verdict = Measurement::Verdict::kError;
      m.detail = r.status().message();
      return m;
    }
    m.verdict = Measurement::Verdict::kOk;
    m.detail = r->ptxas_status;
    json man = json::parse(r->manifest_json);
    int spills = 0;
    if (man["ptxas"].is_object() && man["ptxas"].contains("kernels"))
      for (const auto& k : man["ptxas"]["kernels"]) spills += k.value("spill_stores", 0);
    const ir::Function* f = m_.find(fn_);
    const int elem_bytes = f ? dtype_bits(f->result_type.dtype) / 8 : 4;
    m.median_ms = knobs.empty() ? 0 : predict_gpu(stages_, knobs, p_, elem_bytes, ptxas_kernels(r->manifest_json)).ms;
    if (spills > 0) m.detail += ", " + std::to_string(spills) + " bytes of spills";
    return m;
  }

  double score(const Trial& t) const {
    if (!p_.is_gpu() || gpu_measured_ || t.m.median_ms > 0) return t.m.median_ms;
    double s = t.predicted_ms;
    if (t.m.detail.find("spills") != std::string::npos) s *= 2;
    return s;
  }

  void progress(const Trial& t) {
    if (!o_.progress) return;
    double per = elapsed_s() / std::max<size_t>(1, trials_.size());
    double eta = std::min(allowance_s_ - elapsed_s(), per * (o_.trials - static_cast<double>(trials_.size())));
    std::string best = best_ ? fmt(score(*best_)) + " ms" : "none yet";
    std::string speed = best_ && default_ > 0 ? " (" + fmt(default_ / score(*best_)) + "x over default)" : "";
    std::string compile = t.m.compile_ms > 0 ? "  compile " + fmt(t.m.compile_ms / 1000) + " s" : "";
    log_linef(LogLevel::kProgress, "[tune %s %s] trial %zu/%d %-9s %-7s %s%s  best %s%s  ETA %.0fs", fn_.c_str(),
              p_.name.c_str(), trials_.size(), o_.trials, t.origin.c_str(), verdict_name(t.m.verdict),
              t.m.ok() ? (fmt(score(t)) + " ms").c_str() : "", compile.c_str(), best.c_str(), speed.c_str(),
              std::max(0.0, eta));
  }

  static std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, v < 10 ? "%.3f" : "%.1f", v);
    return b;
  }

  // Once enough trials are measured, the batch is ranked by the learned
  // cost model fitted to them (learned_cost_model.h) instead of the
  // analytic one; its predictions replace the batch's scores.
  void rank_by_learned_model(std::vector<std::pair<double, std::pair<std::string, Knobs>>>& batch) {
    constexpr size_t kMinTrials = 8;
    if (p_.is_gpu()) return;  // no measured times to learn from
    std::vector<std::vector<float>> x;
    std::vector<double> ms;
    for (const Trial& t : trials_)
      if (t.m.ok() && !t.knobs.empty() && t.m.median_ms > 0) {
        x.push_back(schedule_features(stages_, t.knobs, p_));
        ms.push_back(t.m.median_ms);
      }
    if (x.size() < kMinTrials) return;
    if (x.size() != learned_.trained_on()) {
      Status st = learned_.fit(x, ms);
      if (!st.ok()) {
        log_linef(LogLevel::kWarning, "[tune %s %s] %s; ranking with the analytic model", fn_.c_str(), p_.name.c_str(),
                  st.message().c_str());
        return;
      }
      if (o_.progress && !learned_note_)
        log_linef(LogLevel::kNote, "[tune %s %s] ranking candidates with the cost model learned from %zu measured trials",
                  fn_.c_str(), p_.name.c_str(), x.size());
      learned_note_ = true;
    }
    std::vector<std::vector<float>> rows;
    for (const auto& b : batch) rows.push_back(schedule_features(stages_, b.second.second, p_));
    auto pred = learned_.predict(rows);
    if (!pred.ok()) return;
    for (size_t i = 0; i < batch.size(); ++i) batch[i].first = (*pred)[i];
  }

  Knobs mutate(const Knobs& k) {
    Knobs out = k;
    std::vector<std::pair<std::string, std::string>> choices;
    for (const auto& [stage, knobs] : space_)
      for (const auto& [name, values] : knobs)
        if (values.size() > 1) choices.push_back({stage, name});
    if (choices.empty()) return out;
    int n = 1 + static_cast<int>(rng_() % 2);
    for (int i = 0; i < n; ++i) {
      const auto& [stage, name] = choices[rng_() % choices.size()];
      const auto& values = space_.at(stage).at(name);
      out[stage][name] = values[rng_() % values.size()];
    }
    return out;
  }

  Knobs crossover(const Knobs& a, const Knobs& b) {
    Knobs out = a;
    for (const auto& [stage, knobs] : b)
      if (rng_() % 2) out[stage] = knobs;
    return out;
  }

  // When the default schedule itself misses the tolerance, the program is
  // ill-conditioned on these inputs (F32 rounding amplified, e.g. by a
  // LayerNorm of nearly equal values or a saturated softmax), not wrong: a
  // lowering bug is far larger. Then each case's absolute tolerance becomes
  // 4x the default schedule's largest error on it, provided that error is
  // under 1% of the reference's RMS (else nothing changes and the default
  // stays wrong), and the calibration is recorded with the verification.
  // Returns whether it calibrated.
  // The default's errors come from a worker process (MeasureSetup::errors_only):
  // this process never runs a JIT pipeline, or every later worker would
  // inherit a dead thread pool and compute on one thread.
  bool calibrate_on_default(const Schedule& sched) {
    MeasureSetup s = setup_;
    s.errors_only = true;
    s.compile_timeout_s = compile_limit();
    const Measurement em = measure(s, sched);
    // One error per result of each case (case-major). The gate is the
    // case's: every error within 1% of the largest RMS of its results (the
    // scale of its values, as for one result). Each result's tolerance is
    // then raised by its own error only, so a large one does not loosen
    // the others.
    const size_t results = setup_.verify.empty() ? 0 : setup_.verify[0].references.size();
    if (!em.ok() || em.case_max_abs_errors.size() != setup_.verify.size() * results) return false;
    const std::vector<double>& errs = em.case_max_abs_errors;
    for (size_t ci = 0; ci < setup_.verify.size(); ++ci) {
      double scale = 1;
      for (const HostTensor& want : setup_.verify[ci].references) {
        double sq = 0;
        int64_t n = 0;
        for (int64_t i = 0; i < want.numel(); ++i)
          if (std::isfinite(want.get(i))) sq += want.get(i) * want.get(i), ++n;
        scale = std::max(scale, n ? std::sqrt(sq / static_cast<double>(n)) : 0.0);
      }
      for (size_t k = 0; k < results; ++k) {
        const double e = errs[ci * results + k];
        if (!std::isfinite(e) || e > 0.01 * scale) return false;
      }
    }
    json cal = json::array();
    for (size_t ci = 0; ci < setup_.verify.size(); ++ci) {
      VerifyCase& c = setup_.verify[ci];
      json atols = json::array(), found = json::array();
      for (size_t k = 0; k < results; ++k) {
        c.tols[k].atol = std::max(c.tols[k].atol, 4 * errs[ci * results + k]);
        atols.push_back(c.tols[k].atol);
        found.push_back(errs[ci * results + k]);
      }
      cal.push_back({{"case", c.name},
                     {"default_max_abs_error", results == 1 ? found[0] : found},
                     {"atol", results == 1 ? atols[0] : atols}});
    }
    verification_["calibrated_on_default"] = cal;
    log_linef(LogLevel::kNote, "[tune %s %s] the default schedule misses the tolerance by rounding alone (ill-conditioned "
                   "inputs): absolute tolerance set to 4x its error per case",
                   fn_.c_str(), p_.name.c_str());
    return true;
  }

  // Continues the search for `seconds` more of its budget: the default
  // schedule, the rules' seeds, Halide's autoschedulers, then evolution, each
  // phase picking up where the previous call stopped. The candidates and
  // their order do not depend on how the budget is sliced (the picks of a
  // batch left when a slice ends are evaluated first in the next), so a log
  // replays whatever the slicing of the run that wrote it.
  void advance(double seconds) {
    // An earlier slice's overrun (its last trial) is not owed: the caller
    // accounts the seconds each slice really took.
    allowance_s_ = std::max(allowance_s_, spent_s_) + seconds;
    slice_start_ = Clock::now();
    slice_first_trial_ = trials_.size();
    running_ = true;
    step();
    spent_s_ += std::chrono::duration<double>(Clock::now() - slice_start_).count();
    running_ = false;
  }
  // Nothing is left to try: evolution went stale or the trial limit is reached.
  bool converged() const { return phase_ == Phase::kDone || static_cast<int>(trials_.size()) >= o_.trials; }
  double best_score() const { return best_ ? score(*best_) : 0; }
  double default_score() const { return default_; }
  int trial_count() const { return static_cast<int>(trials_.size()); }

  // Final round and result, once advancing is over.
  TuneResult finish() {
    if (!p_.is_gpu()) final_round();
    return result();
  }

 private:
  enum class Phase { kDefault, kSeeds, kAutoschedulers, kEvolution, kDone };

  void step() {
    if (phase_ == Phase::kDefault) {
      Knobs def = default_knobs(stages_, p_);
      const Schedule def_sched = schedule_from_knobs(stages_, def, p_);
      const Trial* d = evaluate("default", def, def_sched);
      if (d && d->m.verdict == Measurement::Verdict::kWrong && !d->resumed && calibrate_on_default(def_sched)) {
        seen_.erase(def_sched.hash());
        trials_.pop_back();
        d = evaluate("default", def, def_sched);
      }
      if (d && d->m.ok()) default_ = score(*d);
      phase_ = Phase::kSeeds;
    }
    // The rules' own best guesses (register-tiled GEMM, fused attention,
    // fused vectorised row reductions), so that evolution starts from them;
    // before the autoschedulers, whose compilation alone can take a minute
    // on a large pipeline.
    if (phase_ == Phase::kSeeds) {
      std::vector<Candidate> seeds;
      for (const Knobs& k : seed_knobs(stages_, p_)) seeds.push_back({"rule-seed", k, schedule_from_knobs(stages_, k, p_)});
      bool any = false;
      while (next_ < seeds.size()) {
        if (!budget_left()) return;
        next_ += evaluate_window(seeds, next_, &any);
      }
      phase_ = Phase::kAutoschedulers;
      next_ = 0;
    }
    if (phase_ == Phase::kAutoschedulers) {
      std::vector<Candidate> autos;
      int stages = 0;
      for (const StageInfo& st : stages_) stages += st.kind != StageInfo::Kind::kInput;
      if (o_.autoschedulers && !p_.is_gpu())
        for (const std::string& name : autoschedulers_for(false)) {
          AutoschedulerBudget b = autoscheduler_budget(name, stages);
          if (!b.tried_by_tune) {
            if (!said_skipped_) log_linef(LogLevel::kNote, "[tune %s %s] %s", fn_.c_str(), p_.name.c_str(), b.why_not.c_str());
            continue;
          }
          Schedule s;
          s.autoscheduler = name;
          autos.push_back({name, {}, s});
        }
      said_skipped_ = true;
      bool any = false;
      while (next_ < autos.size()) {
        if (!budget_left()) return;
        next_ += evaluate_window(autos, next_, &any);
      }
      phase_ = Phase::kEvolution;
    }
    while (phase_ == Phase::kEvolution) {
      if (!budget_left()) return;
      if (pending_.empty() && !next_batch()) {
        if (++stale_ >= 5) phase_ = Phase::kDone;
        continue;
      }
      std::vector<Candidate> picks;
      for (const auto& [origin, k] : pending_) picks.push_back({origin, k, schedule_from_knobs(stages_, k, p_)});
      bool any = false;
      const size_t took = evaluate_window(picks, 0, &any);
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(took));
      batch_any_ = any || batch_any_;
      if (pending_.empty()) {
        stale_ = batch_any_ ? 0 : stale_ + 1;
        if (stale_ >= 5) phase_ = Phase::kDone;
      }
    }
  }

  // Evolution over the rules' knobs: 32 mutations and crossovers of the best
  // four, ranked by the cost model; the two best-ranked are exploited and
  // one other explored at random. False when the batch holds nothing new.
  bool next_batch() {
    const Knobs def = default_knobs(stages_, p_);
    std::vector<const Trial*> pool;
    for (const auto& t : trials_)
      if (t.m.ok() && !t.knobs.empty()) pool.push_back(&t);
    std::sort(pool.begin(), pool.end(), [&](const Trial* a, const Trial* b) { return score(*a) < score(*b); });
    if (pool.size() > 4) pool.resize(4);
    if (pool.empty()) pool.push_back(nullptr);
    std::vector<std::pair<double, std::pair<std::string, Knobs>>> batch;
    std::set<std::string> batch_seen;
    for (int i = 0; i < 32; ++i) {
      const Trial* pa = pool[rng_() % pool.size()];
      Knobs base = pa ? pa->knobs : def;
      bool cross = pool.size() > 1 && rng_() % 4 == 0;
      Knobs k = cross ? crossover(base, pool[rng_() % pool.size()]->knobs) : mutate(base);
      std::string h = schedule_from_knobs(stages_, k, p_).hash();
      if (seen_.count(h) || !batch_seen.insert(h).second) continue;
      batch.push_back({predict_ms(stages_, k, p_), {cross ? "crossover" : "mutation", k}});
    }
    if (batch.empty()) return false;
    rank_by_learned_model(batch);
    std::sort(batch.begin(), batch.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<size_t> pick = {0};
    if (batch.size() > 1) pick.push_back(1);
    if (batch.size() > 2) pick.push_back(2 + rng_() % (batch.size() - 2));
    for (size_t i : pick) pending_.push_back(batch[i].second);
    batch_any_ = false;
    return true;
  }

 public:
  // Timings within one search are noisy on a busy machine: the best few
  // candidates and the default are measured again, longer, side by side, and
  // the winner and the reported speedup come from this round.
  void final_round() {
    std::vector<const Trial*> top;
    for (const auto& t : trials_)
      if (t.m.ok()) top.push_back(&t);
    std::sort(top.begin(), top.end(), [&](const Trial* a, const Trial* b) { return score(*a) < score(*b); });
    if (top.size() > 3) top.resize(3);
    const Trial* def = trials_.empty() || !trials_.front().m.ok() ? nullptr : &trials_.front();
    if (def && std::find(top.begin(), top.end(), def) == top.end()) top.push_back(def);
    // Only a candidate that drift could make the winner is measured again
    // (each costs a compile: 10-15 s for a MiniLM layer); the default, if
    // far behind, keeps its search time for the report. Not when the search
    // times came from remote workers (final_round_here): then a worker's
    // report must not decide which candidates this machine measures.
    if (!top.empty() && !o_.final_round_here) {
      const double lead = score(*top.front());
      std::erase_if(top, [&](const Trial* t) { return score(*t) > lead * kFinalRoundSpread; });
    }
    if (top.empty() || (top.size() < 2 && !o_.final_round_here)) return;
    MeasureSetup longer = setup_;
    longer.min_time_s = 1.0;
    longer.min_reps = 10;
    longer.max_reps = 500;
    longer.cutoff_ms = 0;
    longer.compile_timeout_s = compile_limit();
    const Trial* winner = nullptr;
    double winner_ms = 0;
    // Two rounds, interleaved, so drift hits all alike; the second only for
    // the candidates within kCloseCall of the first round's best (a lead
    // larger than that is not drift), so a clear winner costs one compile.
    constexpr double kCloseCall = 1.05;
    for (int round = 0; round < 2; ++round) {
      if (round == 1) {
        double lead = 0;
        for (const auto& [t, ms] : final_ms_) lead = lead == 0 ? ms : std::min(lead, ms);
        std::vector<const Trial*> close;
        for (const Trial* t : top)
          if (final_ms_.count(t) && final_ms_[t] <= lead * kCloseCall) close.push_back(t);
        if (close.size() < 2) break;
        top = close;
      }
      for (const Trial* t : top) {
        std::string h = t->schedule.hash() + "#" + std::to_string(round);
        Measurement m;
        auto it = resume_final_.find(h);
        if (it != resume_final_.end()) {
          m.verdict = Measurement::Verdict::kOk;
          m.times_ms = it->second;
        } else {
          // A candidate far slower than the others (often the default of a
          // large pipeline, a second a run) needs few runs to be placed:
          // about kFinalRoundRunS of runs, at least 3.
          MeasureSetup setup = longer;
          if (t->m.median_ms > 0)
            setup.min_reps = static_cast<int>(std::clamp(kFinalRoundRunS * 1e3 / t->m.median_ms, 3.0, 10.0));
          m = o_.measurer && !o_.final_round_here ? o_.measurer(setup, t->schedule) : measure(setup, t->schedule);
          if (log_ && m.ok()) {
            log_->AppendFinal(h, m.times_ms);
          }
        }
        if (!m.ok() || m.times_ms.empty()) continue;
        const double med = median(m.times_ms);
        auto& best = final_ms_[t];
        best = best == 0 ? med : std::min(best, med);
        final_times_[t] = m.times_ms;
      }
    }
    for (const auto& [t, ms] : final_ms_)
      if (!winner || ms < winner_ms) {
        winner = t;
        winner_ms = ms;
      }
    if (!winner) return;
    best_ = winner;
    if (def && final_ms_.count(def)) default_ = final_ms_[def];
    if (o_.progress)
      log_linef(LogLevel::kProgress, "[tune %s %s] final round: %s %.4g ms vs default %.4g ms", fn_.c_str(),
                p_.name.c_str(), winner->origin.c_str(), winner_ms, default_);
  }

  TuneResult result() const {
    TuneResult r;
    r.fn = fn_;
    r.dims = dims_;
    r.measured = !p_.is_gpu() || gpu_measured_;
    r.trials = static_cast<int>(trials_.size());
    r.log.assign(trials_.begin(), trials_.end());
    r.default_ms = default_;
    r.reference = p_.is_gpu() && !gpu_measured_
                      ? "none: no GPU to run on (" + gpu_why_not_ + "; PTX assembled by ptxas, ranked by the GPU cost model)"
                      : reference_;
    if (best_) {
      r.best = best_->schedule;
      r.best_origin = best_->origin;
      auto f = final_ms_.find(best_);
      r.best_ms = f != final_ms_.end() ? f->second : score(*best_);
      r.best_times_ms = f != final_ms_.end() ? final_times_.at(best_) : best_->m.times_ms;
    }
    if (!p_.is_gpu() || gpu_measured_) {
      r.verify_cases = setup_.verify;
      json v = verification_;
      if (best_)
        v["winner_jit"] = {{"max_abs_error", best_->m.max_abs_error}, {"max_rel_error", best_->m.max_rel_error},
                           {"cases_passed", setup_.verify.size()}};
      r.verification_json = v.dump();
    }
    return r;
  }

  bool has_best() const { return best_ != nullptr; }
  const std::string& fn() const { return fn_; }
  int resumed() const { return resumed_; }

 private:
  const ir::Module& m_;
  std::string fn_;
  Profile p_;
  DimEnv dims_;
  TuneOptions o_;
  std::vector<StageInfo> stages_;
  std::mt19937_64 rng_;
  LearnedCostModel learned_{o_.seed};
  bool learned_note_ = false;
  // A CUDA profile on a machine whose GPU can run it (measure_cuda.h):
  // candidates are run and timed there; else why not.
  bool gpu_measured_ = false;
  std::string gpu_why_not_ = "no GPU";

 public:
  void measure_on_gpu(const Runnable& r) {
    gpu_measured_ = r.ok;
    gpu_why_not_ = r.reason;
  }

 private:
  KnobSpace space_;
  // The budget: seconds granted by advance() so far, and spent in it. The
  // search budget starts with the first advance(): computing the references
  // (prepare_measurement, up to a minute at large shapes) is not part of it.
  double allowance_s_ = 0, spent_s_ = 0;
  Clock::time_point slice_start_;
  bool running_ = false;
  size_t slice_first_trial_ = 0;  // trials_.size() when the slice began
  Phase phase_ = Phase::kDefault;
  size_t next_ = 0;  // the next seed or autoscheduler
  bool said_skipped_ = false;  // the autoschedulers not tried were named (once per tune)
  std::deque<std::pair<std::string, Knobs>> pending_;  // the current batch's picks not yet evaluated
  int stale_ = 0;    // batches in a row that evaluated nothing new
  bool batch_any_ = false;
  MeasureSetup setup_;
  std::string reference_;
  uint64_t data_seed_ = 0;
  json verification_;
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

void TuningTask::advance(double seconds) { s_->search->advance(seconds); }
bool TuningTask::converged() const { return s_->search->converged(); }
double TuningTask::best_ms() const { return s_->search->best_score(); }
double TuningTask::default_ms() const { return s_->search->default_score(); }
int TuningTask::trials() const { return s_->search->trial_count(); }
int TuningTask::resumed() const { return s_->search->resumed(); }
double TuningTask::spent_s() const { return s_->search->elapsed_s(); }

Expected<TuneResult> TuningTask::finish() {
  if (!s_->search->has_best())
    return Status::InvalidArgument("no candidate schedule for `" + s_->search->fn() + "` compiled and verified");
  return s_->search->finish();
}

Expected<TuningTask> TuningTask::Start(const ir::Module& m, const std::string& fn, const Profile& profile,
                                       const DimEnv& dims, const TuneOptions& opts) {
  const ir::Function* f = m.find(fn);
  if (!f) return Status::NotFound("no fn `" + fn + "` in the program");
  if (!f->is_public) return Status::InvalidArgument("`" + fn + "` is not public; only public fns are tuned and built");
  if (!profile.is_gpu()) {
    Runnable rn = can_run(profile, detect_cpu(), detect_cuda());
    if (!rn.ok) return Status::Unsupported("cannot measure " + profile.name + " here: " + rn.reason);
  }
  // Every dimension needs a value, and the shape must satisfy the signature.
  for (const auto& d : f->dim_vars)
    if (!dims.count(d)) return Status::InvalidArgument("tuning `" + fn + "` needs a value for dimension `" + d + "` (--dims or a `tune` declaration)");
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& p : f->params) {
    auto s = concrete_shape(p.type.shape, dims);
    if (!s.ok()) return s.status();
    shapes.push_back(*s);
  }
  auto bound = bind_dims(*f, shapes, dims);
  if (!bound.ok()) return bound.status();
  // Refuse a shape whose inputs and outputs do not fit in memory, before allocating any.
  if (!profile.is_gpu()) MLK_RETURN_IF_ERROR(check_tuning_memory(*f, dims, "tuning `" + fn + "` at " + dims_label(dims)));
  // Stage names and extents, from a lowering in this process (no code runs,
  // so no Halide threads exist when workers are forked).
  auto stages = stage_infos_for(m, fn, dims, profile.halide_target);
  if (!stages.ok()) return stages.status();
  auto state = std::make_unique<State>();
  state->search = std::make_unique<Search>(m, fn, profile, dims, opts, *stages);
  Search& search = *state->search;
  const Runnable gpu = profile.is_gpu() ? cuda_measurable(profile) : Runnable{};
  if (!profile.is_gpu() || gpu.ok) MLK_RETURN_IF_ERROR(search.prepare_measurement());
  search.measure_on_gpu(gpu);
  if (!opts.log_path.empty()) {
    json header = {{"fn", fn}, {"ir", ir::function_hash(m, *f)}, {"dims", dims}, {"profile", profile.name},
                   {"seed", opts.seed}, {"rules", kScheduleSpaceVersion}, {"halide", halide_version()}};
    auto log = TuningLog::Open(opts.log_path, header);
    if (!log.ok()) return log.status();
    state->log = std::move(log).value();
    search.set_resume(state->log->earlier(), state->log->finals());
    search.set_log(state->log.get());
  }
  return TuningTask(std::move(state));
}

Expected<TuneResult> tune_function(const ir::Module& m, const std::string& fn, const Profile& profile,
                                   const DimEnv& dims, const TuneOptions& opts) {
  auto task = TuningTask::Start(m, fn, profile, dims, opts);
  if (!task.ok()) return task.status();
  task->advance(opts.time_s);
  return task->finish();
}

}  // namespace mlk::tune
