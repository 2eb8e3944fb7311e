// Where the running levels run the artifact's code (levels.h): in this
// process, or, with Context::isolate, in a sandboxed child (base/sandbox.h)
// that sends back only numbers. The child's answer is one status byte, then,
// for outputs, each element as a little-endian double; the parent checks
// its length before reading a value of it. Nothing the child says becomes
// text in the report: the artifact, which runs there, cannot put words (or
// anything it read) into what the parent signs.
#include <cstring>

#include "artifact/loaded.h"
#include "base/child.h"
#include "verify/levels.h"

namespace mlk::verify {

namespace {

constexpr char kOk = 'K', kFailed = 'F', kNoSandbox = 'S';

void write_all(int fd, const std::string& s) {
  for (size_t at = 0; at < s.size();) {
    ssize_t n = write(fd, s.data() + at, s.size() - at);
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

// Runs `work` in a sandboxed child; its answer (status byte first), or why
// no answer came.
Expected<std::string> in_sandbox(const SandboxSpec& spec, const std::function<std::string()>& work) {
  auto r = run_child(
      [&](int fd) {
        SandboxSpec inside = spec;
        inside.keep_fd = fd;
        inside.null_stdio = true;
        if (Status s = enter_sandbox(inside); !s.ok()) {
          write_all(fd, std::string(1, kNoSandbox));  // no text: the artifact could write the same byte later
          return;
        }
        write_all(fd, work());
      },
      ChildLimits{.time_s = 600, .max_output = int64_t{256} << 20, .die_with_parent = true});
  if (!r.ok()) return r.status();
  if (!r->out.empty() && r->out[0] == kNoSandbox)
    return Status::Unsupported(std::string("the artifact could not be run in a sandbox (this machine may not allow "
                                           "unprivileged user namespaces: try `unshare -U -m -p -n -f true`) ") +
                               kIsolatedFailure);
  if (r->timed_out || r->overflow || r->signal || r->exit_code != 0 || r->out.empty() ||
      (r->out[0] != kOk && r->out[0] != kFailed))
    return Status::InvalidArgument(std::string("the artifact's process ended without an answer ") + kIsolatedFailure);
  return r->out;
}

}  // namespace

Expected<std::vector<HostTensor>> artifact_outputs(const Context& c, const std::vector<std::vector<HostTensor>>& inputs,
                                                   const std::vector<HostTensor>& like) {
  auto run_all = [&]() -> Expected<std::vector<HostTensor>> {
    auto art = LoadedArtifact::LoadFiles(c.files);
    if (!art.ok()) return Status::InvalidArgument("the artifact cannot be loaded: " + art.status().message());
    std::vector<HostTensor> out;
    for (const auto& in : inputs) {
      auto got = (*art)->Run(c.f, in, c.dims);
      if (!got.ok()) return Status::InvalidArgument("the artifact failed on an input set: " + got.status().message());
      out.push_back(std::move(*got));
    }
    return out;
  };
  if (!c.isolate) return run_all();
  auto answer = in_sandbox(*c.isolate, [&] {
    auto got = run_all();
    if (!got.ok()) return std::string(1, kFailed);
    std::string bytes(1, kOk);
    for (const HostTensor& t : *got)
      for (int64_t i = 0; i < t.numel(); ++i) {
        double v = t.get(i);
        bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
      }
    return bytes;
  });
  if (!answer.ok()) return answer.status();
  if ((*answer)[0] == kFailed)
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

std::string guarded_run(const Context& c, const DimEnv&, const std::function<std::string()>& run) {
  if (!c.isolate) return run();
  auto answer = in_sandbox(*c.isolate, [&] { return std::string(1, run().empty() ? kOk : kFailed); });
  if (!answer.ok()) return answer.status().message();
  return (*answer)[0] == kOk ? "" : std::string("a check failed ") + kIsolatedFailure;
}

}  // namespace mlk::verify
