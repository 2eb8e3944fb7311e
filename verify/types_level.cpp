// The types level: the typed IR re-verified, the artifact's recorded
// signature and the lowered Halide pipeline's buffers against the signature.
#include <nlohmann/json.hpp>

#include "lang/ir_printer.h"
#include "lang/ir_verify.h"
#include "scheduler/algorithm.h"
#include "scheduler/kernel.h"
#include "verify/levels.h"
#include "base/json.h"

namespace mlk::verify {

using nlohmann::json;

namespace {

// Halide's spelling of a dtype's storage type (scheduler/lower.h, storage_type).
const char* halide_storage(DType t) {
  switch (t) {
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I8: return "int8";
    case DType::I16: return "int16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
    case DType::Bool: return "uint8";
  }
  return "?";
}

std::string shape_text(const Shape& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + s[i].str();
  return o + "]";
}

// The manifest's "signature" against the fn's: "" when equal, else what differs.
std::string signature_mismatch(const ir::Function& f, const json& sig) {
  if (!sig.is_object() || !sig.contains("params") || !sig["params"].is_array()) return "the manifest has no signature";
  const json& ps = sig["params"];
  if (ps.size() != f.params.size())
    return "the artifact takes " + std::to_string(ps.size()) + " parameters, the fn " + std::to_string(f.params.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto& p = f.params[i];
    json want_shape = json::array();
    for (const Dim& d : p.type.shape) want_shape.push_back(d.str());
    if (ps[i].value("name", "") != p.name || ps[i].value("dtype", "") != dtype_name(p.type.dtype) ||
        ps[i].value("shape", json()) != want_shape)
      return "parameter " + std::to_string(i) + " is `" + ps[i].dump() + "` in the artifact, `" + p.name + ": " +
             p.type.str() + "` in the fn";
  }
  const std::vector<ir::Result> results = f.results();
  // "results" lists every result (an artifact built before it existed: "result" alone).
  const json listed = sig.contains("results") ? sig["results"] : json::array({sig.value("result", json::object())});
  if (!listed.is_array() || listed.size() != results.size())
    return "the artifact has " + std::to_string(listed.is_array() ? listed.size() : 0) + " results, the fn " +
           std::to_string(results.size());
  for (size_t k = 0; k < results.size(); ++k) {
    json want = json::array();
    for (const Dim& d : results[k].type.shape) want.push_back(d.str());
    const json& res = listed[k];
    if (!res.is_object() || res.value("dtype", "") != dtype_name(results[k].type.dtype) ||
        res.value("shape", json()) != want)
      return "result " + std::to_string(k) + " is `" + res.dump() + "` in the artifact, `" + results[k].type.str() +
             "` in the fn";
  }
  return "";
}

}  // namespace

LevelReport check_types(const Context& c) {
  LevelReport r;
  r.checked = "the typed IR re-verified against the op registry; the artifact's recorded signature and the lowered "
              "Halide pipeline's inputs, output and stage extents against the fn's signature";
  r.guarantee = "the artifact takes and returns exactly the dtypes, ranks and shapes the signature states (types "
                "and shapes only: nothing about the values computed)";
  auto fail = [&](std::string why) {
    r.pass = false;
    r.counterexample = std::move(why);
    return r;
  };
  if (Status s = ir::verify_module(c.m); !s.ok()) return fail("the typed IR does not verify: " + s.message());
  r.evidence.push_back("typed IR verified (" + std::to_string(c.m.functions.size()) + " fns)");
  json man = parse_json(c.manifest);
  if (!man.is_object()) return fail("manifest.json is not a JSON object");
  if (std::string why = signature_mismatch(c.f, man.value("signature", json())); !why.empty()) return fail(why);
  r.evidence.push_back("manifest signature equals `" + c.fn + "`'s");
  auto alg = summarize_algorithm(c.m, c.fn, c.profile.halide_target);
  if (!alg.ok()) return fail("the typed IR does not lower: " + alg.status().message());
  if (alg->inputs.size() != c.f.params.size())
    return fail("the pipeline has " + std::to_string(alg->inputs.size()) + " inputs, the fn " +
                std::to_string(c.f.params.size()) + " parameters");
  for (size_t i = 0; i < alg->inputs.size(); ++i) {
    const auto& p = c.f.params[i];
    const auto& b = alg->inputs[i];
    if (b.name != "in_" + p.name || b.type != halide_storage(p.type.dtype) ||
        b.rank != static_cast<int>(p.type.shape.size()))
      return fail("pipeline input " + b.name + " is " + b.type + " of rank " + std::to_string(b.rank) + ", parameter `" +
                  p.name + "` is " + p.type.str());
  }
  const std::vector<ir::Result> results = c.f.results();
  std::vector<AlgorithmBuffer> outputs = {alg->output};
  outputs.insert(outputs.end(), alg->more_outputs.begin(), alg->more_outputs.end());
  if (outputs.size() != results.size())
    return fail("the pipeline has " + std::to_string(outputs.size()) + " outputs, the fn " +
                std::to_string(results.size()) + " results");
  for (size_t k = 0; k < results.size(); ++k)
    if (outputs[k].type != halide_storage(results[k].type.dtype) ||
        outputs[k].rank != static_cast<int>(results[k].type.shape.size()))
      return fail("the pipeline's output " + outputs[k].name + " is " + outputs[k].type + " of rank " +
                  std::to_string(outputs[k].rank) + ", the result is " + results[k].type.str());
  r.evidence.push_back("pipeline: " + std::to_string(alg->inputs.size()) + " inputs and the output match in type and rank");
  auto infos = stage_infos_for(c.m, c.fn, c.dims, c.profile.halide_target);
  if (!infos.ok()) return fail("the stage table cannot be made: " + infos.status().message());
  auto extents_of = [&](const Shape& s) {
    std::vector<int64_t> e;
    for (const Dim& d : s) e.push_back(d.eval(c.dims).value_or(-1));
    return e;
  };
  auto vec_str = [](const std::vector<int64_t>& v) {
    std::string o = "[";
    for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + std::to_string(v[i]);
    return o + "]";
  };
  for (const StageInfo& st : *infos) {
    std::vector<int64_t> want;
    std::string what;
    for (size_t k = 0; k < results.size(); ++k)
      if (st.name == (k == 0 ? std::string("output") : "output" + std::to_string(k)))
        want = extents_of(results[k].type.shape), what = "the result " + shape_text(results[k].type.shape);
    for (const auto& p : c.f.params)
      if (st.name == "load_" + p.name) want = extents_of(p.type.shape), what = "`" + p.name + "` " + shape_text(p.type.shape);
    if (what.empty()) continue;
    if (st.extents != want)
      return fail("stage " + st.name + " has extents " + vec_str(st.extents) + " at these dims, " + what + " is " +
                  vec_str(want));
  }
  r.evidence.push_back("input and output stage extents equal the signature's shapes at the dims");
  r.pass = true;
  return r;
}

}  // namespace mlk::verify
