// Where the running levels run the artifact's code (levels.h): in this
// process, or, with Context::isolate, in mlk-measure exec'd inside the
// sandbox (runtime/isolated_run.h): a fresh image, so nothing of this
// process's memory (its cache token, its arguments) is there to read. The
// runner's answer is a status byte, then, for outputs, each element as a
// little-endian double; the parent checks its length before reading a value
// of it. Nothing the runner says becomes text in the report.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "artifact/loaded.h"
#include "base/child.h"
#include "runtime/candidate_runner.h"
#include "runtime/guarded_call.h"
#include "runtime/isolated_run.h"
#include "verify/levels.h"

namespace mlk::verify {

namespace {

constexpr char kNoSandbox = 'S';

void write_all(int fd, const std::string& s) {
  for (size_t at = 0; at < s.size();) {
    ssize_t n = write(fd, s.data() + at, s.size() - at);
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

// In the forked child: the request as standard input (a memory file made
// before the sandbox), the answer's pipe as standard output, then the
// sandbox and the runner. Says kNoSandbox when either cannot be had.
[[noreturn]] void exec_runner(int fd, const SandboxSpec& spec, const std::string& runner, const std::string& request) {
  int in = memfd_create("mlk-verify-request", MFD_CLOEXEC);
  int null = open("/dev/null", O_WRONLY);
  bool ok = in >= 0 && null >= 0;
  if (ok) {
    write_all(in, request);
    ok = lseek(in, 0, SEEK_SET) == 0 && dup2(in, 0) == 0 && dup2(fd, 1) == 1 && dup2(null, 2) == 2;
  }
  SandboxSpec inside = spec;
  inside.readable.push_back(runner);
  if (ok) ok = enter_sandbox(inside).ok();
  if (ok) {
    std::vector<char*> envp;
    for (const auto& e : inside.keep_env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    char* argv[] = {const_cast<char*>("mlk-measure"), const_cast<char*>("--isolated-run"), nullptr};
    execve(runner.c_str(), argv, envp.data());
  }
  write_all(1, std::string(1, kNoSandbox));  // no text: the artifact could write the same byte later
  _exit(0);
}

// The runner's answer to `request` (status byte first), or why no answer came.
Expected<std::string> in_sandbox(const SandboxSpec& spec, const rt::IsolatedRequest& request) {
  auto runner = rt::measure_program("`mlk verify --sign` runs the artifact");
  if (!runner.ok()) return runner.status();
  const std::string bytes = rt::encode_isolated(request);
  auto r = run_child([&](int fd) { exec_runner(fd, spec, *runner, bytes); },
                     ChildLimits{.time_s = 600, .max_output = int64_t{256} << 20, .die_with_parent = true});
  if (!r.ok()) return r.status();
  if (!r->out.empty() && r->out[0] == kNoSandbox)
    return Status::Unsupported("the artifact could not be run in a sandbox (this machine may not allow unprivileged "
                               "user namespaces: try `unshare -U -m -p -n -f true`; or " + *runner +
                               " cannot be started) " + std::string(kIsolatedFailure));
  if (r->timed_out || r->overflow || r->signal || r->exit_code != 0 || r->out.empty() ||
      (r->out[0] != rt::kIsolatedOk && r->out[0] != rt::kIsolatedFailed))
    return Status::InvalidArgument(std::string("the artifact's process ended without an answer ") + kIsolatedFailure);
  return r->out;
}

}  // namespace

Expected<std::vector<HostTensor>> artifact_outputs(const Context& c, const std::vector<std::vector<HostTensor>>& inputs,
                                                   const std::vector<HostTensor>& like) {
  if (!c.isolate) {
    auto art = LoadedArtifact::LoadFiles(c.files);
    if (!art.ok()) return Status::InvalidArgument("the artifact cannot be loaded: " + art.status().message());
    std::vector<HostTensor> out;
    for (const auto& in : inputs) {
      auto got = (*art)->Run(c.f, in, c.dims);
      if (!got.ok()) return Status::InvalidArgument("the artifact failed on an input set: " + got.status().message());
      out.push_back(std::move(*got));
    }
    return out;
  }
  auto answer = in_sandbox(*c.isolate, {.mode = rt::IsolatedRequest::Mode::kOutputs, .files = c.files, .fn = c.fn,
                                        .dims = c.dims, .inputs = inputs, .outputs = like});
  if (!answer.ok()) return answer.status();
  if ((*answer)[0] == rt::kIsolatedFailed)
    return Status::InvalidArgument(std::string("the artifact could not be loaded or failed ") + kIsolatedFailure);
  size_t want = 1;
  for (const HostTensor& t : like) want += static_cast<size_t>(t.numel()) * sizeof(double);
  if (answer->size() != want)
    return Status::InvalidArgument(std::string("the artifact's process sent results of the wrong size ") + kIsolatedFailure);
  std::vector<HostTensor> out;
  size_t at = 1;
  for (const HostTensor& t : like) {
    HostTensor got = t;  // its dtype and shape; every value replaced below
    for (int64_t i = 0; i < t.numel(); ++i, at += sizeof(double)) {
      double v;
      std::memcpy(&v, answer->data() + at, sizeof v);
      got.set(i, v);
    }
    out.push_back(std::move(got));
  }
  return out;
}

std::string guarded_run(const Context& c, const rt::GuardedCall& call) {
  if (!c.isolate) return rt::guarded_call(call);
  auto answer = in_sandbox(*c.isolate, {.mode = rt::IsolatedRequest::Mode::kGuarded, .files = call.files,
                                        .fn = call.fn, .dims = call.dims, .inputs = {call.inputs},
                                        .outputs = {call.output}, .names = call.names});
  if (!answer.ok()) return answer.status().message();
  return (*answer)[0] == rt::kIsolatedOk ? "" : std::string("a check failed ") + kIsolatedFailure;
}

}  // namespace mlk::verify
