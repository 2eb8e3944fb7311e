#include "runtime/jit_store.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/json.h"
#include "base/sha256.h"
#include "targets/toolchain.h"

namespace mlk::rt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Entries are named by their 64-hex key; builds in progress ".tmp-XXXXXX".
bool is_key(const std::string& name) {
  return name.size() == 64 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// A build in progress: ".tmp-" and mkdtemp's six characters.
bool is_build(const std::string& name) { return name.size() == 11 && name.rfind(".tmp-", 0) == 0; }

// Removes the least recently used entries beyond kJitStoreKeep, and builds a
// crashed process left behind (older than an hour). Best effort, and it
// never throws: a store it cannot tidy still works.
void prune(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> entries;
  const auto now = fs::file_time_type::clock::now();
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code tec;
    const auto t = fs::last_write_time(it->path(), tec);
    if (tec) continue;
    if (is_key(name)) entries.emplace_back(t, it->path());
    else if (is_build(name) && now - t > std::chrono::hours(1)) fs::remove_all(it->path(), tec);
  }
  if (entries.size() <= static_cast<size_t>(kJitStoreKeep)) return;
  std::sort(entries.begin(), entries.end());
  for (size_t i = 0; i + kJitStoreKeep < entries.size(); ++i) fs::remove_all(entries[i].second, ec);
}

// Every folder from the root down to `dir` (canonical) is one no other user
// can rename or replace entries of: owned by this user or root, and not
// writable by group or others unless sticky (as /tmp). Else another user
// could swap the store, or a folder above it, for one of theirs.
Status no_other_writer(const fs::path& dir) {
  fs::path p;
  for (const auto& part : dir) {
    p /= part;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return Status::IOError("cannot read " + p.string() + ": " + std::strerror(errno));
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
      return Status::InvalidArgument(p.string() + " belongs to user " + std::to_string(st.st_uid) +
                                     ": another user could replace the JIT store in it");
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return Status::InvalidArgument(p.string() + " is writable by other users (and not sticky): they could "
                                                  "replace the JIT store in it");
  }
  return Status::Ok();
}

constexpr const char* kMarker = ".mlk-jit-store";

// The store at `dir` opened for use: its canonical path, after the checks of
// no_other_writer on its folder, made (0700, with its marker file) when
// missing. An existing folder is a store when it holds the marker, or is
// empty; it must belong to this user, and is made 0700.
Expected<fs::path> open_store(const std::string& dir) {
  std::error_code ec;
  const fs::path given = fs::absolute(dir, ec);
  if (ec || given.filename().empty()) return Status::InvalidArgument("the JIT store `" + dir + "` is not a folder's path");
  fs::create_directories(given.parent_path(), ec);
  const fs::path parent = fs::canonical(given.parent_path(), ec);
  if (ec) return Status::IOError("cannot open " + given.parent_path().string() + ": " + ec.message());
  MLK_RETURN_IF_ERROR(no_other_writer(parent));
  const fs::path store = parent / given.filename();
  // A folder that is not a store is left as it is (not made 0700). Found
  // not empty, then unmarked: an opener writes the marker before anything
  // else and none removes it, so a folder another opener is making right now
  // (made, then marked) is never taken for someone else's.
  if (fs::is_directory(fs::symlink_status(store, ec)) && !fs::is_empty(store, ec) && !fs::exists(store / kMarker, ec))
    return Status::InvalidArgument(store.string() + " is not a JIT store (no " + kMarker +
                                   " in it) and is not empty: name a new folder");
  MLK_RETURN_IF_ERROR(ensure_private_dir(store.string()));  // refuses a link, a file, another user's folder
  if (!fs::exists(store / kMarker, ec))
    MLK_RETURN_IF_ERROR(write_file((store / kMarker).string(), "mlk JIT store (docs/runtime.md)\n"));
  return store;
}

// The entry at `entry` loaded, its time of last use set to now.
Expected<std::shared_ptr<LoadedArtifact>> load(const fs::path& entry) {
  auto art = LoadedArtifact::Load(entry.string());
  if (!art.ok()) return art.status();
  std::error_code ec;
  fs::last_write_time(entry, fs::file_time_type::clock::now(), ec);
  return std::shared_ptr<LoadedArtifact>(std::move(*art));
}

}  // namespace

std::optional<std::string> jit_store_dir(const std::string& store_path) {
  const char* env = std::getenv("MLK_JIT_STORE");
  if (env && *env) {
    if (std::string(env) == "off") return std::nullopt;
    return std::string(env);
  }
  return store_path + ".jit";
}

std::string missing_c_compiler() {
  static std::mutex mu;
  static std::map<std::string, std::string> known;  // by $CC
  const char* env = std::getenv("CC");
  const std::string cc = env && *env ? env : "";
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(cc); it != known.end()) return it->second;
  const std::string name = cc.empty() ? "cc" : cc.substr(0, cc.find(' '));
  std::string why = "no C compiler to link it (" + (cc.empty() ? std::string("`cc`") : "$CC=`" + cc + "`") +
                    " is not " + (name.find('/') != std::string::npos ? "an executable" : "on $PATH") + ")";
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) why.clear();
  } else if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (size_t b = 0, e; b <= dirs.size(); b = e + 1) {
      e = dirs.find(':', b);
      if (e == std::string::npos) e = dirs.size();
      const std::string d = dirs.substr(b, e - b);
      if (!d.empty() && ::access((d + "/" + name).c_str(), X_OK) == 0) {
        why.clear();
        break;
      }
    }
  }
  return known[cc] = why;
}

std::string jit_store_key(const std::string& plugin_identity, const std::string& fn, const std::string& fn_hash,
                          const std::string& precision, const Profile& profile, const DimEnv& dims,
                          const std::string& schedule) {
  json d = json::object();
  for (const auto& [k, v] : dims) d[k] = v;
  json what = {{"store", 1},
                     {"plugin", plugin_identity},
                     {"mlk", mlk_version()},
                     {"halide", halide_version()},
                     {"llvm", llvm_version()},
                     {"fn", fn},
                     {"fn_hash", fn_hash},
                     {"precision", precision},
                     {"profile",
                      {{"name", profile.name},
                       {"halide_target", profile.halide_target},
                       {"features", profile.features},
                       {"vector_bits", profile.vector_bits},
                       {"cores", profile.cores},
                       {"cache_kib", {profile.l1_kib, profile.l2_kib, profile.l3_kib}}}},
                     {"dims", d}};
  // A default schedule keeps the key it had before schedules were given.
  if (!schedule.empty()) what["schedule"] = sha256_hex(schedule);
  return sha256_hex(what.dump());
}

Expected<JitStoreEntry> jit_store_get(const std::string& dir, const std::string& key,
                                      const std::function<Status(const std::string& tmp)>& build) {
  std::error_code ec;
  auto opened = open_store(dir);
  if (!opened.ok()) return opened.status();
  const fs::path& store = *opened;
  const fs::path entry = store / key;
  JitStoreEntry got;
  got.dir = entry.string();
  if (fs::is_directory(entry, ec)) {
    auto art = load(entry);
    if (!art.ok() && fs::is_directory(entry, ec)) art = load(entry);  // once more: another process may have been replacing it
    if (art.ok()) {
      got.artifact = *art;
      return got;
    }
    // Damaged (a disk error, a hand edit): gone, and built again below.
    got.note = "the store's entry " + entry.string() + " was damaged (" + art.status().message() + ") and was built again";
    fs::remove_all(entry, ec);
  }
  std::string tmp = (store / ".tmp-XXXXXX").string();
  if (!mkdtemp(tmp.data())) return Status::IOError("cannot create a folder in " + store.string() + ": " + std::strerror(errno));
  if (Status s = build(tmp); !s.ok()) {
    fs::remove_all(tmp, ec);
    return s;
  }
  if (::rename(tmp.c_str(), entry.c_str()) != 0) {
    const int err = errno;
    fs::remove_all(tmp, ec);
    // Another process put the same kernel there first: that one is loaded.
    if (err != EEXIST && err != ENOTEMPTY)
      return Status::IOError("cannot move a build into " + entry.string() + ": " + std::strerror(err));
  }
  auto art = load(entry);
  if (!art.ok()) return art.status();
  got.artifact = *art;
  got.built = true;
  prune(store);
  return got;
}

}  // namespace mlk::rt
