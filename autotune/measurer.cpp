#include "autotune/measurer.h"

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "artifact/build.h"
#include "base/files.h"
#include "autotune/measure_cuda.h"
#include "autotune/tuner.h"
#include "targets/detect.h"

namespace mlk::tune {

std::string gpu_scratch_dir() {
  // One private (0700, unpredictable) directory per process; candidates are
  // built in a folder inside it, which a measurer may remove and recreate.
  static const std::string root = [] {
    auto d = make_private_temp_dir("mlk-tune-gpu-");
    return d.ok() ? *d : std::string();
  }();
  MLK_CHECK(!root.empty(), "cannot create the GPU candidates' private temporary directory");
  return root + "/candidate";
}

Expected<Measurement> LocalMeasurer::measure(const MeasureSetup& setup, const Schedule& schedule) {
  return tune::measure(setup, schedule);
}

Expected<Measurement> FunctionMeasurer::measure(const MeasureSetup& setup, const Schedule& schedule) {
  return fn_(setup, schedule);
}

Expected<Measurement> CudaMeasurer::measure(const MeasureSetup& setup, const Schedule& schedule) {
  MeasureSetup full = setup;
  full.cutoff_ms = 0;
  return measure_cuda(full, p_, schedule, gpu_scratch_dir());
}

Expected<Measurement> BuildOnlyMeasurer::measure(const MeasureSetup& setup, const Schedule& schedule) {
  Measurement m;
  BuildRequest req{setup.module, setup.fn, "", p_, setup.dims, schedule, gpu_scratch_dir()};
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
  m.manifest_json = r->manifest_json;
  nlohmann::json man = nlohmann::json::parse(r->manifest_json);
  int spills = 0;
  if (man["ptxas"].is_object() && man["ptxas"].contains("kernels"))
    for (const auto& k : man["ptxas"]["kernels"]) spills += k.value("spill_stores", 0);
  if (spills > 0) m.detail += ", " + std::to_string(spills) + " bytes of spills";
  return m;
}

Expected<Measurers> make_measurers(const Profile& p, const TuneOptions& opts) {
  Measurers out;
  if (p.is_gpu()) {
    // Remote GPU workers (`mlk tune --workers`), which run built artifacts.
    if (opts.measurer) {
      out.search = std::make_unique<FunctionMeasurer>(opts.measurer, opts.parallel_measurements);
      return out;
    }
    const Runnable gpu = cuda_measurable(p);
    if (gpu.ok) out.search = std::make_unique<CudaMeasurer>(p);
    else out.search = std::make_unique<BuildOnlyMeasurer>(p, gpu.reason);
    return out;
  }
  Runnable rn = can_run(p, detect_cpu(), detect_cuda());
  if (!rn.ok) return Status::Unsupported("cannot measure " + p.name + " here: " + rn.reason);
  if (opts.measurer) out.search = std::make_unique<FunctionMeasurer>(opts.measurer, opts.parallel_measurements);
  else out.search = std::make_unique<LocalMeasurer>();
  if (opts.measurer && !opts.final_round_here) out.final_round = std::make_unique<FunctionMeasurer>(opts.measurer, 1);
  else out.final_round = std::make_unique<LocalMeasurer>();
  return out;
}

}  // namespace mlk::tune
