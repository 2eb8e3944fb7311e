// Writing a cache hit's files into an artifact directory (`mlk build -o DIR`,
// `mlk tune -o DIR`).
#pragma once

#include <map>
#include <string>

#include "base/status.h"

namespace mlk::cache {

// Writes each of `files` (name -> bytes, an artifact as the store holds it)
// into folder `dir`, made if missing, each file replaced and never written
// through a link (base/files.h replace_file_in_dir). Every name must be a
// plain file name (no `/`): a writer's entry must not place files into DIR's
// subfolders. manifest.json is written without its `signatures` and
// `verify_report`: a directory's signature and report are the statement of
// whoever signed that directory, and a hit copied out under a writer's key
// must not carry them into a runtime that trusts their keys (review 17 of
// issue 49: an old or another team's signed directory, stored again, was
// loaded as signed). Signing the copy (`--sign`) is the caller's choice.
// InvalidArgument naming a file that is not plain or a manifest.json that is
// not a JSON object; IOError naming a path that cannot be written.
Status write_hit_dir(const std::map<std::string, std::string>& files, const std::string& dir);

}  // namespace mlk::cache
