#include "verify/verify.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json.h"
#include "verify/levels.h"

namespace mlk::verify {

namespace {

// The bytes of plain file `name` in the open directory `dirfd`, never
// through a link: opened with O_NOFOLLOW and checked by fstat on what was
// opened, so a file swapped for a link between a check and the read (to
// the verifier's key, say) is refused, not read.
Expected<std::string> read_plain_at(int dirfd, const std::string& dir, const std::string& name) {
  const std::string where = dir + "/" + name;
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return errno == ENOENT ? Status::NotFound(where + " is missing")
                           : Status::InvalidArgument(where + " is not a plain file of the directory (" +
                                                     std::strerror(errno) + ")");
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(where + " is not a plain file of the directory");
  }
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return Status::IOError("cannot read " + where + ": " + std::strerror(e));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

Expected<std::map<std::string, std::string>> read_artifact_dir(const std::string& dir) {
  std::map<std::string, std::string> files;
  int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return Status::InvalidArgument("cannot open the artifact directory " + dir + ": " + std::strerror(errno));
  auto read_all = [&]() -> Status {
    auto man = read_plain_at(dirfd, dir, "manifest.json");
    if (!man.ok())
      return man.status().code() == Status::Code::kNotFound
                 ? Status::InvalidArgument(dir + " has no manifest.json (not an artifact directory)")
                 : man.status();
    files["manifest.json"] = *man;
    const nlohmann::json m = parse_json(*man);
    if (!m.is_object() || !m.contains("files")) return Status::Ok();
    if (!m["files"].is_object()) return Status::InvalidArgument(dir + "/manifest.json: `files` must be an object");
    for (const auto& [name, digest] : m["files"].items()) {
      if (name.empty() || name == "." || name == ".." || name == "manifest.json" ||
          name.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
        return Status::InvalidArgument(dir + "/manifest.json lists `" + name.substr(0, 80) +
                                       "`, which is not a plain file name of the directory");
      auto bytes = read_plain_at(dirfd, dir, name);
      if (!bytes.ok())
        return bytes.status().code() == Status::Code::kNotFound
                   ? Status::NotFound(dir + "/manifest.json lists `" + name + "`, but there is no such file beside it")
                   : bytes.status();
      files[name] = std::move(*bytes);
    }
    return Status::Ok();
  };
  Status s = read_all();
  ::close(dirfd);
  if (!s.ok()) return s;
  return files;
}

Expected<Report> verify_artifact(const VerifyRequest& r) {
  const ir::Function* f = r.module ? r.module->find(r.fn) : nullptr;
  if (!f) return Status::NotFound("no fn `" + r.fn + "` in the program");
  for (const auto& d : f->dim_vars)
    if (!r.dims.count(d))
      return Status::Usage("verification runs at a concrete shape: --dims must give `" + d + "` (e.g. --dims " + d + "=4)");
  auto man = r.files.find("manifest.json");
  if (man == r.files.end()) return Status::InvalidArgument("the artifact has no manifest.json");
  Report rep;
  rep.fn = r.fn;
  rep.target = r.profile.name;
  for (const auto& [k, v] : r.dims) rep.dims += (rep.dims.empty() ? "" : ",") + k + "=" + std::to_string(v);
  const Context c{*r.module, *f, r.fn, r.profile, r.dims, r.files, man->second, r.seed, r.isolate ? &*r.isolate : nullptr};
  for (Level l : r.levels) {
    auto t0 = std::chrono::steady_clock::now();
    LevelReport lr;
    // The levels that check values walk one result; for a fn with several
    // they pass nothing rather than a part.
    const bool one_result_level = l == Level::kEnvelope || l == Level::kMemory || l == Level::kEquivalence;
    if (one_result_level && !f->more_results.empty()) {
      lr.checked = "nothing: this level checks fns with one result";
      lr.guarantee = "none";
      lr.counterexample = "`" + r.fn + "` has " + std::to_string(f->results().size()) +
                          " results; the " + level_name(l) + " level checks fns with one result";
      lr.level = l;
      rep.levels.push_back(std::move(lr));
      continue;
    }
    switch (l) {
      case Level::kTypes: lr = check_types(c); break;
      case Level::kIdentity: lr = check_identity(c); break;
      case Level::kEnvelope: lr = check_envelope(c); break;
      case Level::kMemory: lr = check_memory(c); break;
      case Level::kEquivalence: lr = check_equivalence(c); break;
    }
    lr.level = l;
    lr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.isolate) {  // the artifact's code chose how long it ran: only 1, 10, 100 or 1000 s go into the report
      lr.seconds = lr.seconds <= 1 ? 1 : lr.seconds <= 10 ? 10 : lr.seconds <= 100 ? 100 : 1000;
      if (!lr.pass && lr.not_run.empty()) {  // why a level failed may quote the artifact's manifest: not in a signed report
        lr.counterexample = "failed (a signed report keeps the details out; run without --sign to see them)";
        lr.evidence.clear();
      }
    }
    rep.levels.push_back(std::move(lr));
  }
  return rep;
}

}  // namespace mlk::verify
