#include "autotune/tuner.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "autotune/cost_model.h"
#include "lang/interpreter.h"
#include "lang/ir_printer.h"
#include "scheduler/kernel.h"
#include "targets/artifact.h"
#include "targets/detect.h"
#include "targets/toolchain.h"

namespace mlk::tune {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// --- inputs ------------------------------------------------------------------

HostTensor random_input(const ir::Param& p, const DimEnv& env, std::mt19937_64& rng) {
  std::vector<int64_t> shape;
  for (const Dim& d : p.type.shape) shape.push_back(*d.eval(env));
  HostTensor t(p.type.dtype, shape);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    DType dt = p.type.dtype;
    // Integer inputs are small and non-negative so that they are valid indices
    // for a gather over any dimension of at least 2.
    t.set(i, dt == DType::Bool ? static_cast<double>(rng() % 2) : is_integer(dt) ? static_cast<double>(rng() % 2) : u(rng));
  }
  return t;
}

// The shape candidates are verified at: the tuning shape itself (the cached
// artifact is for that shape), unless the interpreter would need more than
// ~1e10 element-steps there; then a smaller shape with every dimension
// capped, odd remainders kept and refinements still satisfied.
DimEnv verification_dims(const ir::Function& f, const DimEnv& dims, const std::vector<StageInfo>& stages) {
  double cost = 0;
  for (const auto& s : stages) {
    double c = 1;
    for (int64_t e : s.extents) c *= std::max<int64_t>(1, e);
    for (int64_t e : s.rextents) c *= std::max<int64_t>(1, e);
    cost += c;
  }
  if (cost <= 1e10) return dims;
  DimEnv small = dims;
  for (auto& [k, v] : small)
    if (v > 64) v = 48 + v % 16;
  for (const Pred& r : f.refinements) {
    auto ok = r.eval(small);
    if (!ok || !*ok) return dims;
  }
  for (const auto& p : f.params)
    for (const Dim& d : p.type.shape) {
      auto v = d.eval(small);
      if (!v || *v < 1) return dims;
    }
  return small;
}

std::string knobs_json(const Knobs& k) { return json(k).dump(); }

// --- the tuning log ----------------------------------------------------------

json trial_json(const Trial& t) {
  return {{"trial", t.index},
          {"origin", t.origin},
          {"schedule_hash", t.schedule.hash()},
          {"schedule", json::parse(t.schedule.to_json())},
          {"knobs", t.knobs},
          {"predicted_ms", t.predicted_ms},
          {"verdict", verdict_name(t.m.verdict)},
          {"detail", t.m.detail},
          {"compile_ms", t.m.compile_ms},
          {"median_ms", t.m.median_ms},
          {"times_ms", t.m.times_ms}};
}

Measurement::Verdict parse_verdict(const std::string& s) {
  if (s == "ok") return Measurement::Verdict::kOk;
  if (s == "wrong") return Measurement::Verdict::kWrong;
  if (s == "crash") return Measurement::Verdict::kCrash;
  if (s == "timeout") return Measurement::Verdict::kTimeout;
  return Measurement::Verdict::kError;
}

// Trials of an earlier run of the same tuning problem, by schedule hash.
// Final-round re-measurements of an earlier run, by schedule hash.
using FinalTimes = std::map<std::string, std::vector<double>>;

Expected<std::map<std::string, Trial>> read_log(const std::string& path, const json& header, FinalTimes* finals) {
  std::map<std::string, Trial> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  bool first = true;
  int lineno = 0;
  uintmax_t good = 0;  // bytes of complete lines
  while (std::getline(in, line)) {
    ++lineno;
    bool complete = !in.eof();
    json j = line.empty() ? json() : json::parse(line, nullptr, false);
    if (line.empty() || j.is_discarded() || !complete) {
      // A run killed mid-write leaves a torn last line: cut it off so the
      // appended trials start on a line of their own. Anything else is damage.
      if (in.peek() == EOF && (j.is_discarded() || !complete)) {
        in.close();
        std::filesystem::resize_file(path, good);
        break;
      }
      if (line.empty()) {
        good += 1;
        continue;
      }
      return Status::Corruption(path + ":" + std::to_string(lineno) + ": not a JSON line");
    }
    good += line.size() + 1;
    if (j.contains("final")) {
      (*finals)[j.value("schedule_hash", "")] = j.value("times_ms", std::vector<double>{});
      continue;
    }
    if (first) {
      first = false;
      if (!j.contains("header") || j["header"] != header)
        return Status::InvalidArgument(path + " is the log of a different tuning run (function, shape, profile, seed or "
                                       "toolchain differ); remove it or choose another --log");
      continue;
    }
    Trial t;
    t.index = j.value("trial", 0);
    t.origin = j.value("origin", "");
    auto s = Schedule::from_json(j["schedule"].dump());
    if (!s.ok()) return Status::Corruption(path + ":" + std::to_string(lineno) + ": " + s.status().message());
    t.schedule = *s;
    t.knobs = j.value("knobs", Knobs{});
    t.predicted_ms = j.value("predicted_ms", 0.0);
    t.m.verdict = parse_verdict(j.value("verdict", "error"));
    t.m.detail = j.value("detail", "");
    t.m.compile_ms = j.value("compile_ms", 0.0);
    t.m.median_ms = j.value("median_ms", 0.0);
    t.m.times_ms = j.value("times_ms", std::vector<double>{});
    out[t.schedule.hash()] = t;
  }
  return out;
}

// --- the search --------------------------------------------------------------

class Search {
 public:
  Search(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims, const TuneOptions& o,
         std::vector<StageInfo> stages)
      : m_(m), fn_(fn), p_(p), dims_(dims), o_(o), stages_(std::move(stages)), rng_(o.seed),
        space_(knob_space(stages_, p)), start_(Clock::now()) {}

  Status prepare_measurement() {
    const ir::Function& f = *m_.find(fn_);
    std::mt19937_64 data_rng(o_.seed ^ 0x9e3779b97f4a7c15ULL);
    setup_.module = &m_;
    setup_.fn = fn_;
    setup_.target = p_.halide_target;
    setup_.dims = dims_;
    setup_.timeout_s = o_.timeout_s;
    setup_.fault = o_.fault;
    // Input sets rotated between timed runs, as many as fit in ~256 MiB.
    int64_t bytes = 0;
    for (const auto& p : f.params) {
      int64_t n = 1;
      for (const Dim& d : p.type.shape) n *= *d.eval(dims_);
      bytes += n * dtype_bits(p.type.dtype) / 8;
    }
    int sets = static_cast<int>(std::clamp<int64_t>((256LL << 20) / std::max<int64_t>(bytes, 1), 1, 3));
    for (int s = 0; s < sets; ++s) {
      std::vector<HostTensor> in;
      for (const auto& p : f.params) in.push_back(random_input(p, dims_, data_rng));
      setup_.timing.push_back(std::move(in));
    }
    setup_.verify_dims = verification_dims(f, dims_, stages_);
    for (const auto& p : f.params) setup_.verify_inputs.push_back(random_input(p, setup_.verify_dims, data_rng));
    auto ref = interpret(m_, fn_, setup_.verify_inputs, setup_.verify_dims);
    if (!ref.ok()) return Status::InvalidArgument("the reference interpreter failed on random inputs: " + ref.status().message());
    setup_.reference = *ref;
    int64_t red = 1;
    for (const auto& s : stages_)
      for (int64_t e : s.rextents) red = std::max(red, e);
    setup_.tol = tolerance_for(f.result_type.dtype, red);
    // Rounding errors of a dot product scale with the magnitude of its terms,
    // which for random data is the typical magnitude of the results: the
    // absolute tolerance is relative to the reference's RMS when that exceeds
    // 1 (chained matmuls, as in `mlp`, produce results in the hundreds).
    if (is_float(f.result_type.dtype) && setup_.reference.numel() > 0) {
      double sq = 0;
      for (int64_t i = 0; i < setup_.reference.numel(); ++i) sq += setup_.reference.get(i) * setup_.reference.get(i);
      const double rms = std::sqrt(sq / static_cast<double>(setup_.reference.numel()));
      if (std::isfinite(rms) && rms > 1) setup_.tol.atol *= rms;
    }
    reference_ = "reference interpreter on fresh random inputs at ";
    for (const auto& [k, v] : setup_.verify_dims) reference_ += k + "=" + std::to_string(v) + " ";
    return Status::Ok();
  }

  void set_resume(std::map<std::string, Trial> r, FinalTimes finals) {
    resume_ = std::move(r);
    resume_final_ = std::move(finals);
  }
  void set_log(std::ofstream* log) { log_ = log; }

  bool budget_left() const {
    return static_cast<int>(trials_.size()) < o_.trials && elapsed_s() < o_.time_s;
  }
  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // Evaluates a candidate once (deduplicated by schedule hash).
  const Trial* evaluate(const std::string& origin, const Knobs& knobs, const Schedule& sched) {
    std::string h = sched.hash();
    if (seen_.count(h)) return nullptr;
    seen_.insert(h);
    Trial t;
    t.index = static_cast<int>(trials_.size());
    t.origin = origin;
    t.knobs = knobs;
    t.schedule = sched;
    t.predicted_ms = knobs.empty() ? 0 : predict_ms(stages_, knobs, p_);
    auto it = resume_.find(h);
    if (it != resume_.end()) {
      t.m = it->second.m;
      t.origin = it->second.origin;
      t.resumed = true;
      ++resumed_;
    } else if (p_.is_gpu()) {
      t.m = build_only(sched);
    } else {
      setup_.cutoff_ms = best_ ? 3 * score(*best_) : 0;
      t.m = measure(setup_, sched);
    }
    trials_.push_back(t);
    if (log_ && it == resume_.end()) {
      *log_ << trial_json(t).dump() << "\n";
      log_->flush();
    }
    const Trial& back = trials_.back();
    if (back.m.ok() && (!best_ || score(back) < score(*best_))) best_ = &back;
    progress(back);
    return &back;
  }

  // Without a GPU, a GPU candidate is "measured" by building it and running
  // ptxas: failures and spills count against it, the cost model ranks the rest.
  Measurement build_only(const Schedule& sched) {
    Measurement m;
    BuildRequest req{&m_, fn_, "", p_, dims_, sched,
                     (std::filesystem::temp_directory_path() / ("mlk-tune-gpu-" + std::to_string(getpid()))).string()};
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
    m.median_ms = 0;  // filled from the cost model by score()
    if (spills > 0) m.detail += ", " + std::to_string(spills) + " bytes of spills";
    return m;
  }

  double score(const Trial& t) const {
    if (!p_.is_gpu()) return t.m.median_ms;
    double s = t.predicted_ms;
    if (t.m.detail.find("spills") != std::string::npos) s *= 2;
    return s;
  }

  void progress(const Trial& t) {
    if (!o_.progress) return;
    double per = elapsed_s() / std::max<size_t>(1, trials_.size());
    double eta = std::min(o_.time_s - elapsed_s(), per * (o_.trials - static_cast<double>(trials_.size())));
    std::string best = best_ ? fmt(score(*best_)) + " ms" : "none yet";
    std::string speed = best_ && default_ > 0 ? " (" + fmt(default_ / score(*best_)) + "x over default)" : "";
    std::fprintf(stderr, "[tune %s %s] trial %zu/%d %-9s %-7s %s  best %s%s  ETA %.0fs\n", fn_.c_str(),
                 p_.name.c_str(), trials_.size(), o_.trials, t.origin.c_str(), verdict_name(t.m.verdict),
                 t.m.ok() ? (fmt(score(t)) + " ms").c_str() : "", best.c_str(), speed.c_str(), std::max(0.0, eta));
  }

  static std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, v < 10 ? "%.3f" : "%.1f", v);
    return b;
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

  void run() {
    // Trial 0: the default schedule; then Halide's autoschedulers.
    Knobs def = default_knobs(stages_, p_);
    const Trial* d = evaluate("default", def, schedule_from_knobs(stages_, def, p_));
    if (d && d->m.ok()) default_ = score(*d);
    if (o_.autoschedulers && !p_.is_gpu()) {
      for (const auto& name : autoschedulers_for(false)) {
        if (!budget_left()) break;
        Schedule s;
        s.autoscheduler = name;
        evaluate(name, {}, s);
      }
    }
    // The rules' own best guesses (register-tiled GEMM, fused vectorised row
    // reductions), so that evolution starts from them.
    for (const Knobs& k : seed_knobs(stages_, p_)) {
      if (!budget_left()) break;
      evaluate("rule-seed", k, schedule_from_knobs(stages_, k, p_));
    }
    // Evolution over the rules' knobs.
    int stale = 0;
    while (budget_left() && stale < 5) {
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
      if (batch.empty()) {
        ++stale;
        continue;
      }
      std::sort(batch.begin(), batch.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      // Exploit the two best-ranked, explore one at random.
      std::vector<size_t> pick = {0};
      if (batch.size() > 1) pick.push_back(1);
      if (batch.size() > 2) pick.push_back(2 + rng_() % (batch.size() - 2));
      bool any = false;
      for (size_t i : pick) {
        if (!budget_left()) break;
        const auto& [origin, k] = batch[i].second;
        any = evaluate(origin, k, schedule_from_knobs(stages_, k, p_)) != nullptr || any;
      }
      stale = any ? 0 : stale + 1;
    }
    if (!p_.is_gpu()) final_round();
  }

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
    if (top.size() < 2) return;
    MeasureSetup longer = setup_;
    longer.min_time_s = 1.0;
    longer.min_reps = 10;
    longer.max_reps = 500;
    longer.cutoff_ms = 0;
    const Trial* winner = nullptr;
    double winner_ms = 0;
    for (int round = 0; round < 2; ++round)  // interleaved, so drift hits all alike
      for (const Trial* t : top) {
        std::string h = t->schedule.hash() + "#" + std::to_string(round);
        Measurement m;
        auto it = resume_final_.find(h);
        if (it != resume_final_.end()) {
          m.verdict = Measurement::Verdict::kOk;
          m.times_ms = it->second;
        } else {
          m = measure(longer, t->schedule);
          if (log_ && m.ok()) {
            *log_ << json{{"final", true}, {"schedule_hash", h}, {"times_ms", m.times_ms}}.dump() << "\n";
            log_->flush();
          }
        }
        if (!m.ok() || m.times_ms.empty()) continue;
        std::vector<double> sorted = m.times_ms;
        std::sort(sorted.begin(), sorted.end());
        double med = sorted[sorted.size() / 2];
        auto& best = final_ms_[t];
        best = best == 0 ? med : std::min(best, med);
        final_times_[t] = m.times_ms;
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
      std::fprintf(stderr, "[tune %s %s] final round: %s %.4g ms vs default %.4g ms\n", fn_.c_str(), p_.name.c_str(),
                   winner->origin.c_str(), winner_ms, default_);
  }

  TuneResult result() const {
    TuneResult r;
    r.fn = fn_;
    r.dims = dims_;
    r.measured = !p_.is_gpu();
    r.trials = static_cast<int>(trials_.size());
    r.log.assign(trials_.begin(), trials_.end());
    r.default_ms = default_;
    r.reference = p_.is_gpu() ? "none: no GPU to run on (PTX assembled by ptxas, ranked by the cost model)" : reference_;
    if (best_) {
      r.best = best_->schedule;
      r.best_origin = best_->origin;
      auto f = final_ms_.find(best_);
      r.best_ms = f != final_ms_.end() ? f->second : score(*best_);
      r.best_times_ms = f != final_ms_.end() ? final_times_.at(best_) : best_->m.times_ms;
    }
    return r;
  }

  bool has_best() const { return best_ != nullptr; }
  int resumed() const { return resumed_; }

 private:
  const ir::Module& m_;
  std::string fn_;
  Profile p_;
  DimEnv dims_;
  TuneOptions o_;
  std::vector<StageInfo> stages_;
  std::mt19937_64 rng_;
  KnobSpace space_;
  Clock::time_point start_;
  MeasureSetup setup_;
  std::string reference_;
  std::deque<Trial> trials_;  // stable addresses for best_
  std::set<std::string> seen_;
  std::map<std::string, Trial> resume_;
  FinalTimes resume_final_;
  const Trial* best_ = nullptr;
  double default_ = 0;
  std::ofstream* log_ = nullptr;
  int resumed_ = 0;
  std::map<const Trial*, double> final_ms_;
  std::map<const Trial*, std::vector<double>> final_times_;
};

}  // namespace

Expected<TuneResult> tune_function(const ir::Module& m, const std::string& fn, const Profile& profile,
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
  // Stage names and extents, from a lowering in this process (no code runs,
  // so no Halide threads exist when workers are forked).
  auto stages = stage_infos_for(m, fn, dims);
  if (!stages.ok()) return stages.status();
  Search search(m, fn, profile, dims, opts, *stages);
  if (!profile.is_gpu()) MLK_RETURN_IF_ERROR(search.prepare_measurement());
  std::ofstream log;
  if (!opts.log_path.empty()) {
    json header = {{"fn", fn}, {"ir", ir::function_hash(m, *f)}, {"dims", dims}, {"profile", profile.name},
                   {"seed", opts.seed}, {"rules", kScheduleSpaceVersion}, {"halide", halide_version()}};
    FinalTimes finals;
    auto prev = read_log(opts.log_path, header, &finals);
    if (!prev.ok()) return prev.status();
    search.set_resume(*prev, finals);
    bool fresh = prev->empty();
    log.open(opts.log_path, fresh ? std::ios::trunc : std::ios::app);
    if (!log) return Status::IOError("cannot write the tuning log " + opts.log_path);
    if (fresh) log << json{{"header", header}}.dump() << "\n";
    search.set_log(&log);
  }
  search.run();
  if (!search.has_best()) return Status::InvalidArgument("no candidate schedule for `" + fn + "` compiled and verified");
  return search.result();
}

}  // namespace mlk::tune
