// The memory-safety level: the artifact called in a child process on buffers
// that end exactly at a guard page (PROT_NONE: any access past the end
// faults) and start after a canary zone (checked after the call), with
// Halide's bounds assertions kept; inputs must come back unchanged. At the
// given dims and at a ragged shape (every dimension one larger) where the
// refinements allow it.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/testing.h"
#include "verify/levels.h"
#include "base/json.h"

namespace mlk::verify {

namespace {

constexpr size_t kCanary = 256;
constexpr uint8_t kCanaryByte = 0xA5;

// One guarded buffer: [canary][data] then a PROT_NONE page.
struct Guarded {
  std::string name;
  uint8_t* base = nullptr;
  size_t map_len = 0;
  uint8_t* data = nullptr;
  size_t bytes = 0;
};

bool make_guarded(Guarded& g, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t body = ((bytes + kCanary + page - 1) / page) * page;
  g.map_len = body + page;
  void* p = mmap(nullptr, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  g.base = static_cast<uint8_t*>(p);
  if (mprotect(g.base + body, page, PROT_NONE) != 0) return false;
  g.bytes = bytes;
  g.data = g.base + body - bytes;
  std::memset(g.base, kCanaryByte, body - bytes);
  return true;
}

bool canary_intact(const Guarded& g) {
  for (uint8_t* p = g.data - kCanary; p < g.data; ++p)
    if (*p != kCanaryByte) return false;
  return true;
}

// The child's buffers, for its SIGSEGV handler (async-signal-safe writes only).
std::vector<Guarded>* g_bufs = nullptr;
int g_pipe = -1;

void on_fault(int, siginfo_t* si, void*) {
  const uint8_t* a = static_cast<const uint8_t*>(si->si_addr);
  const char* msg = "a fault outside every guarded buffer";
  if (g_bufs)
    for (const Guarded& g : *g_bufs)
      if (a >= g.data + g.bytes && a < g.base + g.map_len) msg = g.name.c_str();
  if (write(g_pipe, msg, std::strlen(msg)) < 0) _exit(3);
  _exit(2);
}

// In the child: the call and the checks; "" when all is well.
std::string child_run(const Context& c, const DimEnv& dims, const std::vector<std::vector<int64_t>>& shapes,
                      std::vector<Guarded>& bufs) {
  auto art = LoadedArtifact::LoadFiles(c.files);  // a fresh copy: no runtime state inherited
  if (!art.ok()) return "the artifact cannot be loaded: " + art.status().message();
  auto in = make_inputs(c.f, dims, "random", 1, c.seed);
  if (!in.ok()) return in.status().message();
  std::vector<mlk_tensor_t> args;
  for (size_t i = 0; i < in->size(); ++i) {
    std::memcpy(bufs[i].data, (*in)[i].bytes.data(), bufs[i].bytes);
    args.push_back({bufs[i].data, abi_dtype(c.f.params[i].type.dtype), static_cast<int32_t>(shapes[i].size()),
                    shapes[i].data(), nullptr});
  }
  const std::vector<int64_t>& oshape = shapes.back();
  mlk_tensor_t out{bufs.back().data, abi_dtype(c.f.result_type.dtype), static_cast<int32_t>(oshape.size()),
                   oshape.data(), nullptr};
  Status s = (*art)->Call(args, out, dims, c.fn);
  if (!s.ok()) return "the call failed (a bounds assertion or a refused shape): " + s.message();
  for (size_t i = 0; i < bufs.size(); ++i)
    if (!canary_intact(bufs[i])) return "the canary zone before `" + bufs[i].name + "` was overwritten";
  for (size_t i = 0; i < in->size(); ++i)
    if (std::memcmp(bufs[i].data, (*in)[i].bytes.data(), bufs[i].bytes) != 0)
      return "the kernel wrote into its input `" + bufs[i].name + "`";
  return "";
}

// One shape, in a child process: "" when every check passed.
std::string run_guarded(const Context& c, const DimEnv& dims) {
  auto shapes = rt::param_shapes(c.f, dims);
  if (!shapes.ok()) return shapes.status().message();
  std::vector<int64_t> oshape;
  for (const Dim& d : c.f.result_type.shape) oshape.push_back(d.eval(dims).value_or(1));
  shapes->push_back(oshape);
  std::vector<Guarded> bufs(shapes->size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    const DType t = i < c.f.params.size() ? c.f.params[i].type.dtype : c.f.result_type.dtype;
    int64_t n = 1;
    for (int64_t e : (*shapes)[i]) n *= e;
    bufs[i].name = i < c.f.params.size() ? c.f.params[i].name : "the output";
    if (!make_guarded(bufs[i], static_cast<size_t>(n) * (dtype_bits(t) / 8))) return "cannot map guarded buffers";
  }
  int fds[2];
  if (pipe(fds) != 0) return "cannot create a pipe";
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    g_bufs = &bufs, g_pipe = fds[1];
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    std::string why = child_run(c, dims, *shapes, bufs);
    if (!why.empty() && write(fds[1], why.data(), why.size()) < 0) _exit(3);
    _exit(why.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string msg;
  char b[512];
  for (ssize_t k; (k = read(fds[0], b, sizeof b)) > 0;) msg.append(b, static_cast<size_t>(k));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  for (auto& g : bufs) munmap(g.base, g.map_len);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
  if (WIFEXITED(st) && WEXITSTATUS(st) == 2) return "an access past the end of `" + msg + "` hit the guard page";
  if (WIFSIGNALED(st)) return "the kernel was killed by signal " + std::to_string(WTERMSIG(st));
  return msg.empty() ? "the checking process failed" : msg;
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
    r.counterexample = "not run: CUDA artifacts are not run by `mlk verify` on this machine";
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
  if (!no_asserts) r.evidence.push_back("bounds assertions kept (target " + target + ")");
  std::vector<std::pair<std::string, DimEnv>> shapes = {{"the dims", c.dims}};
  DimEnv ragged = c.dims;
  for (auto& [k, v] : ragged) v += 1;
  if (rt::param_shapes(c.f, ragged).ok()) shapes.push_back({"the ragged shape", ragged});
  else r.evidence.push_back("ragged shape skipped: one larger in every dimension breaks a refinement");
  for (const auto& [label, dims] : shapes) {
    std::string ds;
    for (const auto& [k, v] : dims) ds += (ds.empty() ? "" : ",") + k + "=" + std::to_string(v);
    std::string why = guarded_run(c, dims, [&] { return run_guarded(c, dims); });
    if (!why.empty()) {
      r.counterexample = "at " + label + " (" + ds + "): " + why;
      return r;
    }
    r.evidence.push_back("clean at " + label + " (" + ds + ")");
  }
  if (no_asserts) {  // clean at the shapes tested, but nothing checks the others
    r.counterexample = "the artifact was built with no_asserts (target " + target + "): its bounds are unchecked";
    return r;
  }
  r.pass = true;
  return r;
}

}  // namespace mlk::verify
