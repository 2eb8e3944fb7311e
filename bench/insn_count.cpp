#include "bench/insn_count.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "base/files.h"

extern char** environ;

namespace mlk::bench {

namespace {

std::string slurp(const std::string& path) {
  auto t = read_file(path);
  return t.ok() ? *t : std::string();
}

struct Ran {
  int status = -1;  // the exit status; -1 when it could not start or was killed
  std::string out, err;
};

// Runs argv[0] (searched on PATH) with `argv`, HL_NUM_THREADS=1 added to the
// environment; stdout and stderr captured through files in `dir`. posix_spawn,
// not fork: the caller has thread pools running.
Ran run_process(const std::vector<std::string>& argv, const std::string& dir) {
  const std::string out = dir + "/out.txt", err = dir + "/err.txt";
  Ran r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> env_s = {"HL_NUM_THREADS=1"};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("HL_NUM_THREADS=", 0) != 0) env_s.push_back(*e);
  std::vector<char*> args, env;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env_s) env.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  env.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.status = 127;
    r.err = "cannot run " + argv[0];
    return r;
  }
  int ws = 0;
  if (waitpid(pid, &ws, 0) == pid && WIFEXITED(ws)) r.status = WEXITSTATUS(ws);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string dims_arg(const std::map<std::string, int64_t>& dims) {
  std::string s;
  for (const auto& [k, v] : dims) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

// The value after `name ` on a line of `text`, or -1.
double field(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0 || line.rfind(name + ": ", 0) == 0)
      return std::strtod(line.c_str() + line.find(' ') + 1, nullptr);
  return -1;
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

std::string count_helper_path() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : self.parent_path()) / "mlk-count";
}

Expected<InsnCount> count_instructions(const CountRequest& r) {
  const std::string helper = count_helper_path();
  if (access(helper.c_str(), X_OK) != 0)
    return Status::NotFound("the counting helper " + helper + " is missing (it is built with mlk)");
  char tmpl[] = "/tmp/mlk-count-XXXXXX";
  if (!mkdtemp(tmpl)) return Status::IOError("cannot make a temporary directory for counting");
  const std::string dir = tmpl;
  std::vector<std::string> args = {helper, "--file", r.spec.file, "--fn", r.spec.fn, "--target", r.spec.target,
                                   "--dims", dims_arg(r.spec.dims), "--store", r.store, "--ns", r.ns, "--key", r.key,
                                   "--seed", std::to_string(r.seed), "--calls", std::to_string(r.calls),
                                   "--extra", std::to_string(r.extra_per_call)};
  if (!r.trusted.empty()) {
    std::string keys;
    for (const std::string& k : r.trusted) keys += (keys.empty() ? "" : ",") + k;
    args.insert(args.end(), {"--trusted", keys});
  }
  // The CPU's counters first; exit 4 says this machine does not give them.
  auto with = [&](std::vector<std::string> pre, const std::string& counter) {
    pre.insert(pre.end(), args.begin(), args.end());
    pre.push_back("--counter");
    pre.push_back(counter);
    return run_process(pre, dir);
  };
  InsnCount c;
  Ran p = with({}, "perf");
  if (p.status == 0) {
    c = {field(p.out, "instructions") / r.calls, field(p.out, "cycles") / r.calls, "perf"};
  } else if (p.status == 4) {
    const std::string cg = dir + "/callgrind.out";
    p = with({"valgrind", "--tool=callgrind", "--callgrind-out-file=" + cg, "--collect-atstart=no",
              "--toggle-collect=mlk_counted_calls"},
             "none");
    if (p.status == 127 && p.err.find("cannot run valgrind") != std::string::npos) {
      std::filesystem::remove_all(dir);
      return Status::NotFound("no instruction counter: this machine gives no CPU counters and valgrind is missing "
                              "(Debian: valgrind)");
    }
    if (p.err.find("Illegal opcode") != std::string::npos || p.err.find("unhandled instruction") != std::string::npos) {
      std::filesystem::remove_all(dir);
      return Status::Unsupported("valgrind cannot run this artifact's instructions (valgrind knows no AVX-512) and "
                                 "this machine gives no CPU counters: count an artifact of a profile valgrind runs, "
                                 "e.g. --target cpu_avx2");
    }
    double total = field(slurp(cg), "totals");
    if (total < 0) total = field(slurp(cg), "summary");
    if (p.status == 0 && total >= 0) c = {total / r.calls, 0, "callgrind"};
    else if (p.status == 0) p.status = -1, p.err = "callgrind wrote no totals";
  }
  std::filesystem::remove_all(dir);
  if (p.status != 0)
    return Status::InvalidArgument("counting instructions failed: " +
                                   (p.err.empty() ? "the helper exited with " + std::to_string(p.status) : last_line(p.err)));
  return c;
}

std::string insn_change_text(double ratio) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.2f%%", (ratio - 1) * 100);
  return b;
}

}  // namespace mlk::bench
