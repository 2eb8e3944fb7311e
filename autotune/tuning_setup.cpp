#include "autotune/tuning_setup.h"
#include "lang/precision.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "autotune/inputs.h"
#include "base/json.h"
#include "base/log.h"
#include "lang/interpreter.h"
#include "scheduler/kernel.h"

namespace mlk::tune {

using nlohmann::json;

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

// The bytes of every parameter and result of `f` at `dims`.
int64_t io_bytes(const ir::Function& f, const DimEnv& dims) {
  int64_t bytes = 0;
  auto add = [&](const ir::Type& t) {
    auto shape = concrete_shape(t.shape, dims);
    int64_t n = dtype_bits(t.dtype) / 8;
    for (int64_t e : shape.ok() ? *shape : std::vector<int64_t>{}) n *= e;
    bytes += n;
  };
  for (const auto& p : f.params) add(p.type);
  for (const auto& r : f.results()) add(r.type);
  return bytes;
}

// The shape candidates are verified at: the tuning shape itself (the cached
// artifact is for that shape), unless the interpreter would need more than
// ~1e10 element-steps there, or its tensors would take more than
// `max_bytes` (> 0: cases that must travel); then a smaller shape with
// every dimension capped, odd remainders kept and refinements still
// satisfied.
DimEnv verification_dims(const ir::Function& f, const DimEnv& dims, const std::vector<StageInfo>& stages,
                         int64_t max_bytes) {
  if (interpreter_cost(stages) <= 1e10 && (max_bytes <= 0 || io_bytes(f, dims) <= max_bytes)) return dims;
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

MeasureSetup base_setup(const ir::Module& m, const std::string& fn, const Profile& p, const DimEnv& dims,
                        const TuneOptions& o) {
  MeasureSetup s;
  s.module = &m;
  s.fn = fn;
  s.target = p.halide_target;
  s.dims = dims;
  s.run_timeout_s = o.run_timeout_s;
  s.fault = o.fault;
  s.compile_fault = o.compile_fault;
  return s;
}

int result_bytes(const ir::Module& m, const std::string& fn) {
  const ir::Function* f = m.find(fn);
  return f ? dtype_bits(f->result_type.dtype) / 8 : 4;
}

Expected<Verification> prepare_measurement(MeasureSetup& setup, const std::vector<StageInfo>& stages, uint64_t seed,
                                           int64_t max_case_bytes) {
  const ir::Module& m = *setup.module;
  const std::string& fn = setup.fn;
  const DimEnv& dims = setup.dims;
  const ir::Function& f = *m.find(fn);
  const uint64_t data_seed = seed ^ 0x9e3779b97f4a7c15ULL;
  std::mt19937_64 data_rng(data_seed);
  // Input sets rotated between timed runs, as many as fit in ~256 MiB.
  int64_t bytes = 0;
  for (const auto& p : f.params) {
    int64_t n = 1;
    for (const Dim& d : p.type.shape) n *= *d.eval(dims);
    bytes += n * dtype_bits(p.type.dtype) / 8;
  }
  int sets = static_cast<int>(std::clamp<int64_t>((256LL << 20) / std::max<int64_t>(bytes, 1), 1, 3));
  const std::vector<InputRange> tuning_ranges = input_ranges(m, f, dims);
  for (int s = 0; s < sets; ++s) {
    std::vector<HostTensor> in;
    for (size_t i = 0; i < f.params.size(); ++i) in.push_back(random_input(f.params[i], tuning_ranges[i], dims, data_rng));
    setup.timing.push_back(std::move(in));
  }
  int64_t red = 1;
  for (const auto& s : stages)
    for (int64_t e : s.rextents) red = std::max(red, e);
  const std::vector<ir::Result> results = f.results();
  // The verification shape (the tuning shape, or a capped one) and the
  // ragged one, each with two independent input sets.
  std::vector<std::pair<std::string, DimEnv>> shapes = {{"verification", verification_dims(f, dims, stages, max_case_bytes)}};
  std::string ragged_note;
  if (auto rg = ragged_dims(f, shapes[0].second)) {
    auto st = stage_infos_for(m, fn, *rg, setup.target);
    if (st.ok() && interpreter_cost(*st) <= 1e10) shapes.push_back({"ragged", *rg});
    else ragged_note = "the ragged shape would cost the interpreter too much";
  } else {
    ragged_note = "no dimension could be made ragged within the refinements";
  }
  json shapes_j = json::array(), cases_j = json::array();
  for (const auto& [shape_name, env] : shapes) {
    std::vector<InputRange> ranges = input_ranges(m, f, env);
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
      auto ref = interpret_all(m, fn, c.inputs, env);
      if (!ref.ok())
        return Status::InvalidArgument("the reference interpreter failed on random inputs at the " + c.name + ": " +
                                       ref.status().message());
      // Negative values outside a function's domain make results NaN, and
      // a NaN reference checks little (reference_without_nan).
      json non_negative = json::array();
      MLK_RETURN_IF_ERROR(reference_without_nan(m, fn, f, ranges, env, c, *ref, non_negative));
      c.references = *ref;
      json tols_j = json::array();
      for (size_t k = 0; k < results.size(); ++k) {
        const DType judged = judged_dtype(m, f, results[k].type.dtype);
        Tolerance tol = result_tolerance(judged, red, c.references[k]);
        tol.policy_outliers = judged != results[k].type.dtype;
        c.tols.push_back(tol);
        tols_j.push_back({{"rtol", tol.rtol}, {"atol", tol.atol}});
        if (tol.policy_outliers) tols_j.back()["policy_outliers"] = {{"rate", kPolicyOutlierRate}, {"within", kPolicyOutlierFactor}};
      }
      cases_j.push_back({{"shape", shape_name}, {"input_set", set}, {"dims", env},
                         {"tolerance", results.size() == 1 ? tols_j[0] : tols_j},
                         {"made_non_negative", non_negative}});
      setup.verify.push_back(std::move(c));
    }
  }
  Verification v;
  v.record = {
      {"reference", "the reference interpreter (lang/interpreter.cpp)"},
      {"generator", "mt19937_64"},
      {"seed", data_seed},
      {"seed_from", "tuning seed xor 0x9e3779b97f4a7c15; draws: the timing sets, then per shape input sets 0 and 1"},
      {"float_values", "random sign, magnitude 10^u with u uniform in [log10(1e-3), log10(4)]"},
      {"input_sets", 2},
      {"shapes", shapes_j},
      {"cases", cases_j},
      {"tolerance_from", std::string("tolerance_for(") + dtype_name(judged_dtype(m, f, f.result_type.dtype)) + ", " + std::to_string(red) +
                             "), atol scaled by the reference RMS when above 1" +
                             (results.size() > 1 ? "; per result, by its dtype and RMS" : "")},
  };
  if (!ragged_note.empty()) v.record["ragged_shape_skipped"] = ragged_note;
  v.reference = "reference interpreter on 2 random input sets at " + dims_text(shapes[0].second);
  if (shapes.size() > 1) v.reference += " and at the ragged shape " + dims_text(shapes[1].second);
  return v;
}

std::string verification_json(const Verification& v, const Trial* best, size_t cases) {
  json out = v.record;
  if (best)
    out["winner_jit"] = {{"max_abs_error", best->m.max_abs_error}, {"max_rel_error", best->m.max_rel_error},
                         {"cases_passed", cases}};
  return out.dump();
}

bool calibrate_on_default(MeasureSetup& setup, Verification& v, const Schedule& sched, double compile_limit_s,
                          const std::string& label) {
  MeasureSetup s = setup;
  s.errors_only = true;
  s.compile_timeout_s = compile_limit_s;
  const Measurement em = measure(s, sched);
  // One error per result of each case (case-major). The gate is the
  // case's: every error within 1% of the largest RMS of its results (the
  // scale of its values, as for one result). Each result's tolerance is
  // then raised by its own error only, so a large one does not loosen
  // the others.
  const size_t results = setup.verify.empty() ? 0 : setup.verify[0].references.size();
  if (!em.ok() || em.case_max_abs_errors.size() != setup.verify.size() * results) return false;
  const std::vector<double>& errs = em.case_max_abs_errors;
  for (size_t ci = 0; ci < setup.verify.size(); ++ci) {
    double scale = 1;
    for (const HostTensor& want : setup.verify[ci].references) {
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
  for (size_t ci = 0; ci < setup.verify.size(); ++ci) {
    VerifyCase& c = setup.verify[ci];
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
  v.record["calibrated_on_default"] = cal;
  log_linef(LogLevel::kNote, "[tune %s] the naive schedule (trial 0) misses the tolerance by rounding alone (ill-conditioned "
                 "inputs): absolute tolerance set to 4x its error per case",
            label.c_str());
  return true;
}

Status check_tuning_shape(const ir::Function& f, const std::string& fn, const DimEnv& dims) {
  for (const auto& d : f.dim_vars)
    if (!dims.count(d))
      return Status::InvalidArgument("tuning `" + fn + "` needs a value for dimension `" + d +
                                     "` (--dims or a `tune` declaration)");
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& p : f.params) {
    auto s = concrete_shape(p.type.shape, dims);
    if (!s.ok()) return s.status();
    shapes.push_back(*s);
  }
  auto bound = bind_dims(f, shapes, dims);
  if (!bound.ok()) return bound.status();
  return Status::Ok();
}

double compile_limit(const TuneOptions& o, const std::deque<Trial>& trials) {
  if (o.compile_timeout_s > 0) return o.compile_timeout_s;
  if (trials.empty()) return kFirstCompileTimeoutS;
  return std::max(kMinCompileTimeoutS, kCompileTimeoutFactor * trials.front().m.compile_ms / 1000);
}

double autoscheduler_compile_limit(const std::deque<Trial>& trials) {
  double slowest = 0;
  for (const Trial& t : trials) slowest = std::max(slowest, t.m.compile_ms / 1000);
  return std::max(kMinAutoschedulerCompileS, kAutoschedulerCompileFactor * slowest);
}

}  // namespace mlk::tune
