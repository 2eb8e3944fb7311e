// `mlk verify`: an artifact checked against the typed IR it claims to
// implement, level by level (verify/report.h names the levels; each one's
// guarantee is in docs/verification.md). Halide-free: the Halide side is
// reached through scheduler/algorithm.h and scheduler/algorithm_terms.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/sandbox.h"
#include "base/status.h"
#include "lang/bind.h"
#include "lang/ir.h"
#include "targets/profile.h"
#include "verify/report.h"

namespace mlk::verify {

struct VerifyRequest {
  const ir::Module* module = nullptr;  // checked; must outlive the call
  std::string fn;
  Profile profile;
  DimEnv dims;  // every dimension variable of `fn`: the shape the running levels use
  // The artifact's files (manifest.json, the library, ...), as a cache entry
  // or an artifact directory holds them.
  std::map<std::string, std::string> files;
  std::vector<Level> levels;
  uint64_t seed = 1;  // of the random inputs (envelope, memory)
  // Set: the artifact's code runs only in sandboxed children (base/sandbox.h)
  // that send back numbers (outputs, a pass or a fail), never text, so that
  // every word of the report is this process's and nothing the artifact
  // reads can leave in it (`mlk verify --sign`, docs/signing.md). Unset: in
  // this process.
  std::optional<SandboxSpec> isolate = {};
};

// The files of the artifact directory `dir` (`mlk build -o DIR`): its
// manifest.json and the files its "files" object lists, nothing else, since
// that is what a signature covers; a file beside them (a library found
// through $ORIGIN) is neither read nor loaded with it. Each file is opened
// without following links and checked as a plain file on what was opened.
// InvalidArgument without a manifest, for a listed name that is not a plain
// file name, or for a link or other non-plain file; NotFound (naming it) for
// a listed file that is missing.
Expected<std::map<std::string, std::string>> read_artifact_dir(const std::string& dir);

// Runs the requested levels, cheapest first. A level that fails is in the
// report with its counterexample; the Status is an error only when the
// request itself is unusable (no such fn, a dimension missing, no manifest).
Expected<Report> verify_artifact(const VerifyRequest& r);

}  // namespace mlk::verify
