// The results of `mlk bench` as data, and their JSON form: what `--json OUT`
// writes and what `--record FILE` writes as a baseline (the same document; any
// `--json` output can serve as a baseline). nlohmann/json stays in report.cpp.
//
// A baseline is matched to a run kernel by kernel id, `FN [D=V,...] TARGET`
// (dims sorted by name), never by file path, so that it can move between
// checkouts. read_report() checks everything the gate later relies on and
// names the file and the field that is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/gate.h"
#include "base/status.h"

namespace mlk::bench {

inline constexpr const char* kReportFormat = "mlk-bench";
inline constexpr int kReportFormatVersion = 1;

struct MachineInfo {
  std::string host;      // gethostname()
  std::string cpu;       // /proc/cpuinfo "model name", or "unknown"
  int cores = 0;
  std::string features;  // cpuid features mlk detects, space-separated
};

// One timed variant of a kernel: mlk itself or a peer.
struct VariantResult {
  std::string name;   // "mlk", "default", "Adams2019", "Li2018", "Mullapudi2016", "openblas"
  std::string how;    // what ran, for people
  std::string error;  // why it was not measured (not applicable, failed); empty when measured
  std::vector<double> samples_ms;
  std::vector<size_t> round_sizes;  // samples per measurement round, in order; empty: one round
  int64_t calls_per_sample = 1;
  bool measured() const { return error.empty() && !samples_ms.empty(); }
  double median_ms() const;  // precondition: measured()
  double min_ms() const;     // precondition: measured()
};

// The comparison of a kernel with its baseline entry.
struct KernelComparison {
  Comparison first;                  // the first measurement
  // first (and confirm) timed the baseline's artifact beside this build, in
  // the same rounds (A/B, paired: bench/paired.h); false: against the
  // baseline's recorded times (the weaker mode, gate.h).
  bool first_ab = false;
  std::string against;               // what the A/B timed: "artifact KEY" or "the default schedule"
  // The first was no regression by its interval, but slower than the limit
  // by its point estimate: measured again too, as a suspect is.
  bool inconclusive = false;
  std::optional<Comparison> confirm; // the re-measurement, when the first was suspect or inconclusive
  bool confirm_ab = false;           // confirm timed the baseline's artifact beside this build (A/B)
  std::string verdict;               // "ok", "faster", "unconfirmed", "regression"
  std::vector<std::string> notes;    // IR, cache key, variant or version changed since the baseline
};

// Instructions per call (bench/insn_count.h), of this build's artifact and,
// A/B, of the baseline's; gated apart from the times.
struct InsnResult {
  std::string counter;          // "perf" or "callgrind"; empty when not counted (see note)
  double current = 0;           // this build's artifact, per call
  double baseline = 0;          // the baseline's artifact, per call; 0 when not counted
  double ratio = 0;             // current / baseline, when both were counted
  bool regression = false;      // ratio > 1 + the limit
  std::string note;             // why something was not counted
};

struct KernelResult {
  std::string id;    // "sgemm [K=64,M=64,N=64] host": what baselines are matched by
  std::string name;  // for people: the suite's name, else the id
  std::string file, fn, target;
  std::map<std::string, int64_t> dims;
  std::string ir_hash;    // the fn's content hash (lang/ir_printer.h)
  std::string cache_key;  // the key its tuned artifact has (or would have) in the cache
  std::string variant;    // what `mlk` is: "tuned" (from the cache) or "default" (schedule, JIT)
  VariantResult mlk;
  std::vector<VariantResult> peers;
  std::optional<KernelComparison> comparison;
  std::optional<InsnResult> instructions;  // with --count-instructions
};

struct BenchReport {
  std::string created;  // UTC, ISO 8601
  MachineInfo machine;
  std::map<std::string, std::string> versions;  // mlk, halide, llvm
  std::map<std::string, double> settings;       // rounds, min_time_s, sample_ms, seed
  std::vector<double> calibration_ms;           // timing.h calibration_samples()
  std::vector<KernelResult> kernels;
  // Set when compared with a baseline.
  std::string baseline_path;
  double max_regression_pct = 0;
  bool gate = false;                  // --max-regression given: regressions fail the run
  std::vector<std::string> regressions;  // ids of confirmed regressions
  double max_insn_increase_pct = 0;      // the instruction-count gate's limit
  bool insn_gate = false;                // --max-instruction-increase given
  std::vector<std::string> insn_regressions;  // ids whose instruction count rose beyond the limit

  const KernelResult* find(const std::string& id) const;
};

std::string report_to_json(const BenchReport& r);

// Parses and checks a report; errors are InvalidArgument and start with
// `where` (the file name): "B.json: kernels[1].mlk.samples_ms: ...".
Expected<BenchReport> report_from_json(const std::string& text, const std::string& where);

// Reads `path` (read_file's IOError: "cannot read PATH: No such file or
// directory") and parses it.
Expected<BenchReport> read_report(const std::string& path);
// Writes atomically (a temporary file renamed over `path`).
Status write_report(const std::string& path, const BenchReport& r);
// Writes any text atomically; shared with the SVG writer.
Status write_text_file(const std::string& path, const std::string& text);


}  // namespace mlk::bench
