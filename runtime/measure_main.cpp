// mlk-measure: measures a candidate set on the machine it runs on
// (runtime/candidate_runner.h). Links the runtime's artifact loader only.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "base/files.h"
#include "runtime/candidate_runner.h"
#include "runtime/isolated_run.h"
#include "targets/toolchain.h"

namespace {

constexpr const char* kUsage =
    "usage: mlk-measure DIR [-o FILE] [--only ID,...] [--quiet]\n"
    "\n"
    "Measures the candidate set in DIR, as `mlk tune --export-candidates DIR` wrote it, on\n"
    "this machine: each candidate is loaded, checked against the expected output of every\n"
    "verification case, and timed at the tuning shape (CUDA events on the GPU of\n"
    "MLK_CUDA_DEVICE, default 0, for CUDA candidates; the steady clock for CPU ones).\n"
    "Needs no compiler: only the NVIDIA driver for CUDA candidates. To serve a server's\n"
    "jobs of built artifacts as a measurement worker, run mlk-measure-worker.\n"
    "\n"
    "  -o, --out FILE   where the measurements go (default DIR/measurements.json); give\n"
    "                   it to `mlk tune ... --import-measurements FILE`\n"
    "  --only ID,...    measure only these candidates (c00, c01, ...)\n"
    "  --quiet          no progress line per candidate\n"
    "  --isolated-run   (for `mlk verify --sign`, which starts it in its sandbox) run one\n"
    "                   artifact on the request read from standard input and write the\n"
    "                   answer, numbers only, to standard output\n"
    "\n"
    "Exit status: 0 when the set was measured (a wrong or failing candidate is a verdict\n"
    "in the file, not a failure of the run); 1 for bad usage or a damaged set; 2 when the\n"
    "set cannot run here (no NVIDIA driver, no such device, a CPU without the profile's\n"
    "features).\n";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// --isolated-run: the request on standard input, the answer on standard
// output (runtime/isolated_run.h). Exit status 1 for a request it cannot read.
int isolated_run() {
  std::string request;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) request.append(buf, n);
  auto r = mlk::rt::decode_isolated(request);
  if (!r.ok()) return std::fprintf(stderr, "mlk-measure: %s\n", r.status().message().c_str()), 1;
  request.clear();
  request.shrink_to_fit();
  const std::string answer = mlk::rt::run_isolated(*r);
  return std::fwrite(answer.data(), 1, answer.size(), stdout) == answer.size() && std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, out;
  mlk::rt::RunnerOptions opts;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return std::fputs(kUsage, stdout), 0;
    if (a == "--isolated-run" && argc == 2) return isolated_run();
    if (a == "--version") return std::printf("mlk-measure %s\n", mlk::mlk_version().c_str()), 0;
    if ((a == "-o" || a == "--out" || a == "--only") && i + 1 >= argc)
      return std::fprintf(stderr, "mlk-measure: %s needs a value\n%s", a.c_str(), kUsage), 1;
    if (a == "-o" || a == "--out") out = argv[++i];
    else if (a == "--only") opts.only = split(argv[++i]);
    else if (a == "--quiet") quiet = true;
    else if (!a.empty() && a[0] == '-') return std::fprintf(stderr, "mlk-measure: unknown flag %s\n%s", a.c_str(), kUsage), 1;
    else if (dir.empty()) dir = a;
    else return std::fprintf(stderr, "mlk-measure: one DIR only (got %s and %s)\n", dir.c_str(), a.c_str()), 1;
  }
  if (dir.empty()) return std::fputs(kUsage, stderr), 1;
  if (out.empty()) out = (std::filesystem::path(dir) / "measurements.json").string();
  if (!quiet) opts.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  auto m = mlk::rt::run_candidates(dir, opts);
  if (!m.ok()) {
    std::fprintf(stderr, "mlk-measure: %s\n", m.status().message().c_str());
    return m.status().code() == mlk::Status::Code::kUnsupported ? 2 : 1;
  }
  if (mlk::Status s = mlk::write_file(out, mlk::measurements_json(*m) + "\n"); !s.ok()) {
    std::fprintf(stderr, "mlk-measure: %s\n", s.message().c_str());
    return 1;
  }
  int ok = 0;
  for (const auto& r : m->results) ok += r.verdict == "ok";
  std::fprintf(stderr, "mlk-measure: %d of %zu candidates of `%s` passed on %s; wrote %s\n", ok, m->results.size(),
               m->fn.c_str(), m->device.c_str(), out.c_str());
  return 0;
}
