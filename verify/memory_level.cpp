// The memory-safety level: the artifact called in a child process on buffers
// that end exactly at a guard page (PROT_NONE: any access past the end
// faults) and start after a canary zone (checked after the call), with
// Halide's bounds assertions kept; inputs must come back unchanged. At the
// given dims and at a ragged shape (every dimension one larger) where the
// refinements allow it.
#include <nlohmann/json.hpp>

#include "runtime/guarded_call.h"
#include "runtime/testing.h"
#include "verify/levels.h"
#include "base/json.h"

namespace mlk::verify {

namespace {

// The call at one shape: the random inputs at the parameters' shapes.
Expected<rt::GuardedCall> call_at(const Context& c, const DimEnv& dims) {
  auto shapes = rt::param_shapes(c.f, dims);
  if (!shapes.ok()) return shapes.status();
  auto in = make_inputs(c.f, dims, "random", 1, c.seed);
  if (!in.ok()) return in.status();
  std::vector<int64_t> oshape;
  for (const Dim& d : c.f.result_type.shape) oshape.push_back(d.eval(dims).value_or(1));
  rt::GuardedCall call{.files = c.files, .fn = c.fn, .dims = dims, .inputs = std::move(*in),
                       .output = HostTensor(c.f.result_type.dtype, oshape)};
  for (const auto& p : c.f.params) call.names.push_back(p.name);
  return call;
}

}  // namespace

LevelReport check_memory(const Context& c) {
  LevelReport r;
  r.checked = "the artifact called on buffers that end at a guard page and start after a canary zone, with Halide's "
              "bounds assertions kept, at the dims and at a ragged shape; inputs compared before and after";
  r.guarantee = "at the shapes tested the kernel reads and writes nothing past the end of any buffer, writes nothing "
                "in the 256 bytes before one, and does not modify its inputs (other shapes are covered only by the "
                "bounds assertions it keeps)";
  if (c.profile.is_gpu()) {
    r.not_run = "CUDA artifacts are not run by `mlk verify` on this machine (it runs CPU code only)";
    return r;
  }
  nlohmann::json man = parse_json(c.manifest);
  std::string target = man.is_object() && man.value("profile", nlohmann::json::object()).is_object()
                           ? man["profile"].value("halide_target", "")
                           : "";
  const bool no_asserts = target.find("no_asserts") != std::string::npos;
  if (c.isolate)
    r.evidence.push_back("self-reported: the checks run in the sandboxed process that runs the artifact, so a hostile "
                         "artifact can make them pass; they find honest mistakes");
  if (!no_asserts)
    r.evidence.push_back(c.isolate ? "bounds assertions kept, per the manifest's target"
                                   : "bounds assertions kept (target " + target + ")");
  std::vector<std::pair<std::string, DimEnv>> shapes = {{"the dims", c.dims}};
  DimEnv ragged = c.dims;
  for (auto& [k, v] : ragged) v += 1;
  if (rt::param_shapes(c.f, ragged).ok()) shapes.push_back({"the ragged shape", ragged});
  else r.evidence.push_back("ragged shape skipped: one larger in every dimension breaks a refinement");
  for (const auto& [label, dims] : shapes) {
    std::string ds;
    for (const auto& [k, v] : dims) ds += (ds.empty() ? "" : ",") + k + "=" + std::to_string(v);
    auto call = call_at(c, dims);
    std::string why = call.ok() ? guarded_run(c, *call) : call.status().message();
    if (!why.empty()) {
      r.counterexample = "at " + label + " (" + ds + "): " + why;
      return r;
    }
    r.evidence.push_back("clean at " + label + " (" + ds + ")");
  }
  if (no_asserts) {  // clean at the shapes tested, but nothing checks the others
    r.counterexample = c.isolate ? "the artifact was built with no_asserts (per its manifest): its bounds are unchecked"
                                 : "the artifact was built with no_asserts (target " + target + "): its bounds are unchecked";
    return r;
  }
  r.pass = true;
  return r;
}

}  // namespace mlk::verify
