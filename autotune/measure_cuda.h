// Measuring a CUDA candidate on the GPU of this machine, where there is one:
// the candidate is built as an artifact (Halide AOT, PTX, the C wrapper),
// loaded, and run on device memory through its device entry
// (mlk_NAME_cuda, targets/abi.h) in the process's CUDA context
// (targets/cuda_driver.h). Each verification case is uploaded, run and read
// back, and compared with the reference like a CPU candidate; the timing
// inputs stay on the device and each run is timed with CUDA events
// (cuEventRecord around the launch, cuEventElapsedTime), warm-up first, then
// repetitions until min_time_s (min_reps..max_reps), median.
//
// Unlike CPU measurement this runs in the tuner's process (the CUDA context
// does not survive a fork): a candidate that faults the GPU ends the run.
#pragma once

#include "autotune/measure.h"
#include "targets/detect.h"
#include "targets/profile.h"

namespace mlk::tune {

// Whether CUDA candidates for `p` can be measured here: the driver loads and
// the process's device (MLK_CUDA_DEVICE, default 0) has compute capability
// >= p.compute_capability. The reason says why not.
Runnable cuda_measurable(const Profile& p);

// `setup` as for measure() (target is ignored; the module, fn, timing and
// verify cases are used). `scratch` is a directory for the candidate's
// artifact (created, then removed).
Measurement measure_cuda(const MeasureSetup& setup, const Profile& p, const Schedule& schedule,
                         const std::string& scratch);

}  // namespace mlk::tune
