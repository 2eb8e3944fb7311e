#include "runtime/guarded_call.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "artifact/loaded.h"

namespace mlk::rt {

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

mlk_tensor_t view(Guarded& g, const HostTensor& t) {
  return {g.data, abi_dtype(t.dtype), static_cast<int32_t>(t.shape.size()), t.shape.data(), nullptr};
}

// In the child: the call and the checks; "" when all is well.
std::string child_run(const GuardedCall& call, std::vector<Guarded>& bufs) {
  auto art = LoadedArtifact::LoadFiles(call.files);  // a fresh copy: no runtime state inherited
  if (!art.ok()) return "the artifact cannot be loaded: " + art.status().message();
  std::vector<mlk_tensor_t> args;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    std::memcpy(bufs[i].data, call.inputs[i].bytes.data(), bufs[i].bytes);
    args.push_back(view(bufs[i], call.inputs[i]));
  }
  mlk_tensor_t out = view(bufs.back(), call.output);
  Status s = (*art)->Call(args, out, call.dims, call.fn);
  if (!s.ok()) return "the call failed (a bounds assertion or a refused shape): " + s.message();
  for (size_t i = 0; i < bufs.size(); ++i)
    if (!canary_intact(bufs[i])) return "the canary zone before `" + bufs[i].name + "` was overwritten";
  for (size_t i = 0; i < call.inputs.size(); ++i)
    if (std::memcmp(bufs[i].data, call.inputs[i].bytes.data(), bufs[i].bytes) != 0)
      return "the kernel wrote into its input `" + bufs[i].name + "`";
  return "";
}

}  // namespace

std::string guarded_call(const GuardedCall& call) {
  std::vector<Guarded> bufs(call.inputs.size() + 1);
  for (size_t i = 0; i < bufs.size(); ++i) {
    const HostTensor& t = i < call.inputs.size() ? call.inputs[i] : call.output;
    bufs[i].name = i < call.inputs.size() ? (i < call.names.size() ? call.names[i] : "an input") : "the output";
    if (!make_guarded(bufs[i], static_cast<size_t>(t.numel()) * t.elem_size())) {
      for (auto& g : bufs)
        if (g.base) munmap(g.base, g.map_len);
      return "cannot map guarded buffers";
    }
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
    std::string why = child_run(call, bufs);
    if (!why.empty() && write(fds[1], why.data(), why.size()) < 0) _exit(3);
    _exit(why.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string msg;
  char b[512];
  for (ssize_t k; (k = read(fds[0], b, sizeof b)) > 0;) msg.append(b, static_cast<size_t>(k));
  close(fds[0]);
  int st = 0;
  if (pid > 0) waitpid(pid, &st, 0);
  for (auto& g : bufs) munmap(g.base, g.map_len);
  if (pid < 0) return "cannot fork the checking process";
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
  if (WIFEXITED(st) && WEXITSTATUS(st) == 2) return "an access past the end of `" + msg + "` hit the guard page";
  if (WIFSIGNALED(st)) return "the kernel was killed by signal " + std::to_string(WTERMSIG(st));
  return msg.empty() ? "the checking process failed" : msg;
}

}  // namespace mlk::rt
