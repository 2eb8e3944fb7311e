// The SPMD launcher (spmd/launch.h).
#include "spmd/launch.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

extern char** environ;

namespace mlk::spmd {
namespace {

std::string mesh_text(const ir::ShardPlan& p) {
  std::string s;
  for (const auto& a : p.mesh) s += (s.empty() ? "" : ", ") + a.name + "=" + std::to_string(a.size);
  return "mesh(" + s + ")";
}

std::string dims_arg(const std::map<std::string, int64_t>& dims) {
  std::string s;
  for (const auto& [k, v] : dims) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s.empty() ? "-" : s;
}

}  // namespace

Status check_spmd(const SpmdRun& r, const ir::Module& m) {
  const ir::ShardPlan* p = m.find_shard(r.fn);
  if (!p) return Status::Usage("--ranks runs a fn defined by `shard`; `" + r.fn + "` is not one");
  if (p->ranks() != r.ranks)
    return Status::Usage("`" + r.fn + "` runs on " + mesh_text(*p) + ", which has " + std::to_string(p->ranks()) +
                         " ranks, but --ranks is " + std::to_string(r.ranks));
  if (r.output.empty()) return Status::Usage("--ranks needs --output OUT.safetensors");
  return Status::Ok();
}

Status launch_spmd(const SpmdRun& r, const ir::Module& m) {
  const ir::ShardPlan& p = *m.find_shard(r.fn);
  std::filesystem::path runner = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "mlk-rank";
  if (!std::filesystem::exists(runner))
    return Status::NotFound("the per-rank runner " + runner.string() + " is missing (build the mlk-rank target)");
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::string threads = std::to_string(std::max<int64_t>(1, cores / r.ranks));
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(r.ranks), "--oversubscribe", "--bind-to", "none",
                                   "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none",
                                   "-x", "HL_NUM_THREADS=" + std::string(std::getenv("HL_NUM_THREADS")
                                                                              ? std::getenv("HL_NUM_THREADS")
                                                                              : threads.c_str())};
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  if (!r.namespaces.empty()) args.insert(args.end(), {"-x", "MLK_NAMESPACES=" + r.namespaces});
  if (!r.trusted.empty()) {
    std::string keys;
    for (const auto& k : r.trusted) keys += (keys.empty() ? "" : ",") + k;
    args.insert(args.end(), {"-x", "MLK_RANK_TRUSTED=" + keys});
  }
  std::string cache = r.no_cache ? "-" : r.cache.empty() ? "@default" : r.cache;
  for (std::string a :
       {runner.string(), r.file, r.fn, r.output, std::to_string(r.timeout_s), dims_arg(r.dims), cache, r.ns})
    args.push_back(a);
  args.insert(args.end(), r.inputs.begin(), r.inputs.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string steps;
  for (const auto& s : p.steps) steps += (steps.empty() ? "" : ", ") + s.kernel;
  std::fprintf(stderr, "mlk run: %s: %lld ranks on %s, kernels %s\n", r.fn.c_str(),
               static_cast<long long>(r.ranks), mesh_text(p).c_str(), steps.c_str());
  pid_t pid = 0;
  if (posix_spawnp(&pid, "mpirun", nullptr, nullptr, argv.data(), environ) != 0)
    return Status::NotFound("cannot start mpirun (install Open MPI: scripts/install.sh)");
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return Status::Ok();
  return Status::IOError("the SPMD run of `" + r.fn + "` on " + std::to_string(r.ranks) + " ranks failed (mpirun " +
                         (WIFEXITED(st) ? "exited with status " + std::to_string(WEXITSTATUS(st))
                                        : std::string("was killed")) +
                         "); the ranks' messages are above");
}

}  // namespace mlk::spmd
