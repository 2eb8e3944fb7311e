// How the tuner gets a candidate's time: the Measurer interface, and its
// implementations (measured in a local worker process, on this machine's GPU
// with CUDA, elsewhere through a function such as `mlk tune --workers`'s
// remote workers, or built only, where a GPU profile has no GPU here).
//
// The contract: measure() returns a Measurement for every candidate it could
// try, whatever its verdict (a wrong, crashing, slow or uncompilable
// candidate is a Measurement, and costs one trial); an error Status only
// when measuring cannot go on at all (no remote worker took the job, the
// server is gone), and the search then stops with that Status. measure()
// reads the setup and the schedule only; it may be called from
// concurrency() threads at once.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "autotune/measure.h"
#include "base/status.h"
#include "targets/profile.h"

namespace mlk::tune {

struct TuneOptions;

class Measurer {
 public:
  virtual ~Measurer() = default;
  virtual Expected<Measurement> measure(const MeasureSetup& setup, const Schedule& schedule) = 0;
  // How many measure() calls may run at once, each on its own thread; 1
  // for a measurer that times on this machine's cores or GPU.
  virtual int concurrency() const { return 1; }
  // False when the times are estimates, not measurements (nothing runs the
  // candidates): the search then ranks by the cost model, and its result
  // says measured: false.
  virtual bool measures() const { return true; }
  // When measures() is false: why, and what ranks the candidates instead
  // (TuneResult::reference says "none: " and this).
  virtual std::string why_not_measured() const { return ""; }
};

// measure() (autotune/measure.h): a forked worker process of this machine.
class LocalMeasurer : public Measurer {
 public:
  Expected<Measurement> measure(const MeasureSetup& setup, const Schedule& schedule) override;
};

// A function's measurements (TuneOptions::measurer: remote workers, tests'
// fakes), up to `concurrency` at once (at least 1).
class FunctionMeasurer : public Measurer {
 public:
  using Fn = std::function<Expected<Measurement>(const MeasureSetup&, const Schedule&)>;
  FunctionMeasurer(Fn fn, int concurrency) : fn_(std::move(fn)), concurrency_(std::max(1, concurrency)) {}
  Expected<Measurement> measure(const MeasureSetup& setup, const Schedule& schedule) override;
  int concurrency() const override { return concurrency_; }

 private:
  Fn fn_;
  int concurrency_;
};

// measure_cuda() (autotune/measure_cuda.h) on this machine's GPU, in this
// process. Every candidate is timed in full: the setup's cutoff is not
// applied.
class CudaMeasurer : public Measurer {
 public:
  explicit CudaMeasurer(Profile p) : p_(std::move(p)) {}
  Expected<Measurement> measure(const MeasureSetup& setup, const Schedule& schedule) override;

 private:
  Profile p_;
};

// A GPU profile without a GPU: the candidate is built as an artifact and its
// PTX assembled by ptxas. A build failure counts against it; otherwise the
// verdict is ok, the detail is ptxas's status (with the bytes of spills),
// median_ms 0 and manifest_json the artifact's manifest, from which the GPU
// cost model estimates the time (CostModel::complete). Reads the setup's
// module, fn and dims.
class BuildOnlyMeasurer : public Measurer {
 public:
  BuildOnlyMeasurer(Profile p, std::string why_not) : p_(std::move(p)), why_not_(std::move(why_not)) {}
  Expected<Measurement> measure(const MeasureSetup& setup, const Schedule& schedule) override;
  bool measures() const override { return false; }
  std::string why_not_measured() const override {
    return "no GPU to run on (" + why_not_ + "; PTX assembled by ptxas, ranked by the GPU cost model)";
  }

 private:
  Profile p_;
  std::string why_not_;
};

// The measurers of one tuning, chosen by profile and options.
struct Measurers {
  std::unique_ptr<Measurer> search;  // the search's candidates
  // The final round's (TuneOptions::final_round_here); null where there is
  // no final round (GPU profiles).
  std::unique_ptr<Measurer> final_round;
};

// CPU profiles: opts.measurer (with opts.parallel_measurements) if set, else
// LocalMeasurer; the final round measures locally, or through opts.measurer
// unless opts.final_round_here. Unsupported when the profile cannot run
// here. GPU profiles: opts.measurer if set (remote GPU workers, which run
// the candidates built here), else CudaMeasurer where the GPU can run the
// profile (cuda_measurable), else BuildOnlyMeasurer; no final round.
Expected<Measurers> make_measurers(const Profile& p, const TuneOptions& opts);

// The scratch directory of a GPU candidate's artifact.
std::string gpu_scratch_dir();

}  // namespace mlk::tune
