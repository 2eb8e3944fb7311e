// A candidate set: a tuning's candidates built here as ready artifacts, with
// what a runner elsewhere needs to check and time them, and the runner's
// measurements that come back. `mlk tune --export-candidates DIR` writes the
// set, `mlk-measure DIR` (runtime/candidate_runner.h) measures it on the
// machine that has the device, and `mlk tune --import-measurements FILE`
// stores the winner (docs/tuning.md, "Measuring elsewhere").
//
// The folder:
//   candidates.json   this file's CandidateSet (format "mlk-candidates-1")
//   c00/, c01/ ...    one artifact per candidate, as `mlk build` writes it
//   data/*.bin        the verification cases' inputs and expected results,
//                     raw little-endian elements (sha256 in candidates.json)
// Timing inputs are not carried (a 4096^3 GEMM's would be 128 MiB): the
// runner draws them, uniform in [-1, 1), from a fixed seed.
//
// Reading checks everything it trusts: the format, each data file's size
// and sha256, every name a plain file name inside the folder. Halide-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "lang/bind.h"
#include "lang/compare.h"
#include "lang/tensor.h"

namespace mlk {

inline constexpr const char* kCandidateSetFormat = "mlk-candidates-1";
inline constexpr const char* kMeasurementsFormat = "mlk-measurements-1";

struct CandidateCase {
  std::string name;  // "verification shape, set 0"
  DimEnv dims;
  std::vector<HostTensor> inputs;
  HostTensor expected;  // the reference interpreter's result
  Tolerance tol;
};

// A parameter or result at the timing shape: dtype and shape only.
struct TensorSpec {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

struct Candidate {
  std::string id;             // "c03": also its folder
  std::string origin;         // the search's: "default", "mutation", ...
  std::string schedule_json;  // Schedule::to_json
  std::string schedule_hash;
  double estimate_ms = 0;     // the search's time for it (the cost model's where nothing ran)
  std::string library_sha256; // of its library, as its manifest lists it
};

struct CandidateSet {
  std::string fn, profile, ir_hash;
  DimEnv dims;                        // the tuning shape
  std::vector<TensorSpec> timing_inputs;  // at the tuning shape, in parameter order
  TensorSpec timing_output;
  std::vector<CandidateCase> cases;   // every candidate must pass every case
  std::string cases_record;           // the verification record (JSON object text) for the manifest
  std::vector<Candidate> candidates;  // best first by the search's ranking; the default among them
  // Timing: warm-up runs, then runs until min_time_s is spent, at least
  // min_reps and at most max_reps.
  int warmup = 2, min_reps = 5, max_reps = 50;
  double min_time_s = 0.2;
};

// Writes `set` into `dir` (which holds the candidates' artifacts already):
// candidates.json and data/. IOError when a file cannot be written.
Status write_candidate_set(const CandidateSet& set, const std::string& dir);
// Reads dir/candidates.json and its data. InvalidArgument for another
// format or a malformed field, Corruption for a data file whose size or
// sha256 differs, each naming the file and the field.
Expected<CandidateSet> read_candidate_set(const std::string& dir);
// sha256 of dir/candidates.json: what a measurement names as its set.
Expected<std::string> candidate_set_digest(const std::string& dir);

// One candidate as the runner found it.
struct CandidateResult {
  std::string id, schedule_hash, library_sha256;
  std::string verdict = "error";  // "ok", "wrong" (differs from the expected result), "error"
  std::string detail;
  double median_ms = 0;
  std::vector<double> times_ms;
  double max_abs_error = 0, max_rel_error = 0;
};

struct Measurements {
  std::string set_sha256;  // candidate_set_digest of what was measured
  std::string fn, profile;
  DimEnv dims;
  std::string device;      // "cuda:0 NVIDIA H200 (sm_90, 132 SMs), driver 13000" or "cpu: ..."
  std::string runner;      // "mlk-measure 0.3.0"
  std::string timing;      // how the times were taken
  std::vector<CandidateResult> results;
};

// A candidate set's folder as one blob, for a job of `mlk tune --workers`
// (GPU profiles): "mlk-candidate-pack 1\n", the header's length and "\n",
// the header (JSON: each file's relative path and size), then the files'
// bytes. Only plain relative paths (candidates.json, data/NAME, ID/NAME).
Expected<std::string> pack_candidate_set(const std::string& dir);
// Writes a pack's files into `dir` (created). InvalidArgument, naming what
// is wrong, for a malformed pack: a bad magic or length, a path that is not
// plain, sizes that do not add up; nothing is written outside `dir`.
Status unpack_candidate_set(std::string_view pack, const std::string& dir);

std::string measurements_json(const Measurements& m);
// InvalidArgument naming the field for a malformed file.
Expected<Measurements> parse_measurements(const std::string& text, const std::string& where);

}  // namespace mlk
