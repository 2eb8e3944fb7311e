#include "bench/baseline_check.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "bench/stats.h"
#include "bench/tables.h"
#include "bench/timing.h"
#include "targets/detect.h"

namespace mlk::bench {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) return line.substr(line.find_first_not_of(" \t", c + 1));
    }
  return "unknown";
}

}  // namespace

MachineInfo this_machine() {
  MachineInfo m;
  char h[256] = {0};
  gethostname(h, sizeof h - 1);
  m.host = h;
  m.cpu = cpu_model();
  CpuInfo c = detect_cpu();
  m.cores = c.cores;
  for (const auto& f : c.features) m.features += (m.features.empty() ? "" : " ") + f;
  return m;
}

Status check_baseline(const BenchReport& base, const std::string& path, const MachineInfo& here,
                      const std::vector<std::unique_ptr<PreparedKernel>>& kernels, bool any_machine) {
  const auto& bm = base.machine;
  if (!any_machine && (bm.cpu != here.cpu || bm.cores != here.cores || bm.features != here.features))
    return Status::InvalidArgument(path + " was recorded on another machine (" + bm.cpu + ", " + std::to_string(bm.cores) +
                                   " cores, host " + bm.host + ") than this one (" + here.cpu + ", " +
                                   std::to_string(here.cores) + " cores): its times are not comparable; record a "
                                   "baseline on this machine, or pass --any-machine");
  for (const auto& k : kernels) {
    if (base.find(k->id())) continue;
    std::string have, other_targets;
    for (const auto& b : base.kernels) {
      have += (have.empty() ? "" : "; ") + b.id;
      if (b.fn == k->spec().fn && b.dims == k->dims()) other_targets += (other_targets.empty() ? "" : ", ") + b.target;
    }
    std::string where = k->spec().where.empty() ? "" : " (" + k->spec().where + ")";
    if (!other_targets.empty())
      return Status::InvalidArgument(path + " has `" + k->id() + "`" + where + " only for target " + other_targets +
                                     ", not " + k->spec().target + "; record a baseline for " + k->spec().target);
    return Status::InvalidArgument(path + " has no kernel `" + k->id() + "`" + where + " (it has: " +
                                   (have.empty() ? "none" : have) + "); record a baseline of the same kernels with --record");
  }
  return Status::Ok();
}


std::vector<std::string> comparison_notes(const KernelResult& now, const KernelResult& base) {
  std::vector<std::string> notes;
  if (!base.ir_hash.empty() && base.ir_hash != now.ir_hash) notes.push_back("the fn's IR changed since the baseline");
  else if (!base.cache_key.empty() && base.cache_key != now.cache_key)
    notes.push_back("its cache key changed since the baseline (versions of mlk, Halide or LLVM, or the schedule space)");
  if (base.variant != now.variant)
    notes.push_back("the baseline timed the " + std::string(base.variant == "tuned" ? "tuned artifact" : "default schedule") +
                    ", this run the " + (now.variant == "tuned" ? "tuned artifact" : "default schedule"));
  return notes;
}

std::vector<double> settle(const std::vector<double>& base_cal, double settle_s,
                           const std::function<void(const std::string&)>& progress) {
  std::vector<double> cal = calibration_samples(7);
  if (base_cal.empty()) return cal;
  const double base = median(base_cal);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(settle_s);
  bool said = false;
  while (median(cal) > 1.05 * base && std::chrono::steady_clock::now() < deadline) {
    if (!said)
      progress("mlk bench: this machine runs the calibration loop " + fmt_ms(median(cal) / base) +
               "x as slow as when the baseline was recorded; waiting up to " + fmt_ms(settle_s) +
               " s for it to settle");
    said = true;
    std::this_thread::sleep_for(std::chrono::seconds(2));
    cal = calibration_samples(7);
  }
  if (said) progress("mlk bench: calibration loop now " + fmt_ms(median(cal) / base) + "x the baseline's");
  return cal;
}


}  // namespace mlk::bench
