// The JIT store: default-schedule kernels that the JIT plugin compiled ahead
// of time (mlk_jit_build, artifact/jit_plugin.h), kept on this machine so
// that a later process loads a kernel in milliseconds instead of compiling
// it for seconds. Each entry is an artifact directory (as `mlk build -o`
// writes it) named by the key of what was compiled: the plugin's identity,
// the fn and its program hash, the precision policy, the resolved profile
// and the shape the schedule was made for. An entry is written under a
// private temporary name and renamed into place, so readers never see half
// of one, and two processes building the same key both end with the same
// kernel. It is a cache, never the only copy of anything: a damaged entry
// is removed and built again, and the oldest entries beyond kJitStoreKeep
// are removed. The store is a directory only this user can enter (0700),
// marked as a store (.mlk-jit-store); one another user owns, one in a folder
// another user could replace it in, and a non-empty folder that is not a
// store are refused (their code would run here, or their files be mixed in).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "artifact/loaded.h"
#include "base/status.h"
#include "lang/bind.h"
#include "targets/profile.h"

namespace mlk::rt {

// The most entries a store keeps (the least recently used go first).
inline constexpr int kJitStoreKeep = 128;

// Where the store of the artifact cache at `store_path` lives:
// $MLK_JIT_STORE when set and not empty ("off": no store, every process
// compiles in memory), else the directory STORE.jit beside the cache.
std::optional<std::string> jit_store_dir(const std::string& store_path);

// The key (64 hex) of fn `fn` with program hash `fn_hash` under `precision`
// for `profile` (as resolved here: host made concrete), scheduled for
// `dims`, compiled by the plugin `plugin_identity` (jit_plugin_identity)
// under `schedule` (a schedule's JSON; "": the profile's default).
std::string jit_store_key(const std::string& plugin_identity, const std::string& fn, const std::string& fn_hash,
                          const std::string& precision, const Profile& profile, const DimEnv& dims,
                          const std::string& schedule = "");

// "" when a C compiler to link a build is here ($CC's first word, else
// `cc`: a path, or a name found on $PATH); else why not, in words. Looked up
// once per process and value of $CC.
std::string missing_c_compiler();

struct JitStoreEntry {
  std::shared_ptr<LoadedArtifact> artifact;
  std::string dir;      // the entry's directory
  bool built = false;   // false: an earlier build (this process's or another's) was loaded
  std::string note;     // "": nothing to say; else what happened to a damaged entry
};

// The kernel of `key` in the store `dir`: the entry loaded when there is
// one, else `build(tmp)` writes the artifact into the empty directory `tmp`
// and it is moved into place and loaded. InvalidArgument when the store
// cannot be trusted (another user's), IOError when it cannot be written,
// and the build's own error when the build fails; the caller then compiles
// in memory.
Expected<JitStoreEntry> jit_store_get(const std::string& dir, const std::string& key,
                                      const std::function<Status(const std::string& tmp)>& build);

}  // namespace mlk::rt
