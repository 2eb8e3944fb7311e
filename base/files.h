// Whole-file reads and writes: the one place mlk reads or writes a file in
// one piece. Errors are IOError statuses that name the path.
#pragma once

#include <string>
#include <vector>
#include <string_view>

#include "base/status.h"

namespace mlk {

// The bytes of `path`. IOError "cannot read PATH: REASON" when it cannot be
// opened (the system's words: "No such file or directory", "Permission
// denied"; "it is a directory"), "error while reading PATH: REASON" on a
// read error.
Expected<std::string> read_file(const std::string& path);

// Replaces `path` with `bytes` (truncating; not atomic: callers that need
// atomicity write a temporary and rename it). IOError "cannot write PATH:
// REASON".
Status write_file(const std::string& path, std::string_view bytes);

// Creates `path` with `bytes` (mode 0644): refused when anything stands
// there already, a link included (O_EXCL). IOError "cannot write PATH:
// File exists" and the like.
Status write_new_file(const std::string& path, std::string_view bytes);

// Replaces file `name` of directory `dir` with `bytes`, atomically and
// never through a link: a new file made beside it (O_EXCL, O_NOFOLLOW,
// relative to the directory opened once) is renamed over it, so a link
// planted at `name` is replaced, not followed. For a folder another user
// may write into (an artifact directory being signed). IOError naming the
// path.
Status replace_file_in_dir(const std::string& dir, const std::string& name, std::string_view bytes);

// Makes `path` a directory that only this user can enter (mode 0700):
// created if missing; an existing one must be a real directory (not a
// link) owned by this user, and is then made 0700. InvalidArgument naming
// the path and its owner otherwise (another user made it first: its files
// could be theirs). For a scratch folder beside a store that may lie in a
// shared folder (`STORE.work`).
Status ensure_private_dir(const std::string& path);

// The user's home folders, for sandboxes to hide: $HOME and the password
// database's home of the effective user, each when absolute and not `/`,
// links resolved, without repeats. Both: a worker or verifier started with
// no $HOME (env -i, a container entrypoint), or another one, still has its
// real home hidden (review 15).
std::vector<std::string> home_folders();

// A new directory under the system's temporary directory, named `prefix`
// and six random characters, mode 0700 (mkdtemp): no other user can
// predict it, enter it or plant a link in it. IOError when it cannot be made.
Expected<std::string> make_private_temp_dir(const std::string& prefix);

}  // namespace mlk
