// Signed cache entries and signed verification reports (docs/signing.md).
// Halide-free; nlohmann/json stays in signatures.cpp.
//
// What an entry signature covers: the bytes
//
//   "mlk-entry-signature-1\n" + {"files":{NAME:SHA256,...},"key":KEY,"meta":META}
//
// as canonical JSON (object keys sorted, compact, nlohmann's dump()), where
//   KEY   the entry's cache key ("" for an `mlk build -o DIR` directory), so a
//         signed entry cannot be served under another key;
//   files every file of the artifact by the sha256 of its bytes, except
//         manifest.json: the sha256 of its canonical JSON without its
//         top-level "signatures" and "verify_report" (so attaching a report
//         keeps the signature valid, and every field the loader reads is
//         covered);
//   META  the entry metadata (fn, program_hash, target, dims, timings: what
//         the resolver's nearest-shape choice reads) without "signatures" and
//         "verify_report"; {} for a directory.
// Provenance (host, time) is not covered: the store fills it in.
//
// Signatures are kept in the metadata of the entry (the manifest.json of a
// directory) as "signatures": [{"key_id", "public_key", "sig"}], additive to
// the formats: readers that do not know them ignore them.
//
// A verification report (verify_report, docs/verification.md) is signed by
// its verifier over
//
//   "mlk-verify-report-1\n" + {"report":REPORT,"subject":SHA256}
//
// where REPORT is the report without its "signature" field and SHA256 the
// sha256 of the entry statement above: the report is bound to the exact
// entry (key, files, metadata) it is about and cannot be transplanted. The
// signature is the report's "signature": {"key_id", "public_key", "sig"}.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/signing.h"
#include "base/status.h"

namespace mlk::cache {

// The digest manifest.json stands for in a statement (see above).
// InvalidArgument when it is not a JSON object.
Expected<std::string> signed_manifest_digest(std::string_view manifest_json);

// The statement's file digests from the files' bytes.
Expected<std::map<std::string, std::string>> statement_digests(const std::map<std::string, std::string>& files);

// The bytes an entry signature covers. `digests`: statement_digests().
// InvalidArgument when meta_json is not a JSON object.
Expected<std::string> entry_statement(const std::string& key, const std::map<std::string, std::string>& digests,
                                      std::string_view meta_json);

// `json_text` (entry metadata, or a directory's manifest.json) with a
// signature of `statement` by `key` added, replacing an earlier one by the
// same key. Compact JSON, or indented by `indent` when >= 0.
Expected<std::string> add_signature(std::string_view json_text, const std::string& statement, const SigningKey& key,
                                    int indent = -1);

// `meta_json` signed by `key` as the metadata of entry `cache_key` whose
// files are `files` (name -> bytes): statement_digests, entry_statement,
// add_signature in one. Compact JSON.
Expected<std::string> sign_entry(const std::string& cache_key, const std::map<std::string, std::string>& files,
                                 std::string_view meta_json, const SigningKey& key);

// The statement of entry `cache_key` with these files and metadata.
Expected<std::string> statement_of_files(const std::string& cache_key, const std::map<std::string, std::string>& files,
                                         std::string_view meta_json);

// The statement of an artifact directory (`mlk build -o DIR`): key "",
// metadata {}, and of `files` (name -> bytes) manifest.json and the files its
// "files" object lists. InvalidArgument when manifest.json is missing or
// not an object, or a listed file is missing.
Expected<std::string> directory_statement(const std::map<std::string, std::string>& files);

// The key ids of the signatures `json_text` carries ("" when none), e.g.
// "3f2a0c1d9e8b7a65,0011223344556677".
std::string signer_ids(std::string_view json_text);

// OK when a signature in `json_text`'s "signatures" by a key of `trusted`
// verifies over `statement`; `signer`, when given, gets its key id.
// Otherwise InvalidArgument starting with `what` (e.g. "entry 0123abcd"):
//   ENTRY is unsigned (sign it with `--sign KEYFILE`)
//   ENTRY is signed by key 3f2a0c1d9e8b7a65, which is not trusted
//   ENTRY: the signature by key 3f2a0c1d9e8b7a65 does not verify (...)
// Malformed "signatures" are refused the same way (Corruption, naming the field).
Status check_signed(const std::string& what, const std::string& statement, std::string_view json_text,
                    const std::vector<std::string>& trusted, std::string* signer = nullptr);

// `json_text` with its "verify_report" signed by `key` (the report's
// "signature" set) for the entry `statement`. InvalidArgument when it has
// no report.
Expected<std::string> sign_report(std::string_view json_text, const std::string& statement, const SigningKey& key,
                                  int indent = -1);

// OK when `json_text`'s verify_report carries a signature by a key of
// `trusted` that verifies for `statement`. Otherwise InvalidArgument
// starting with `what`:
//   ENTRY has no verification report (run `mlk verify` first)
//   ENTRY's verification report is unsigned (a self-written report is not evidence; ...)
//   ENTRY's verification report is signed by key ID, which is not a trusted verifier
//   ENTRY's verification report: the signature by key ID does not verify (...)
Status check_report_signed(const std::string& what, const std::string& statement, std::string_view json_text,
                           const std::vector<std::string>& trusted, std::string* signer = nullptr);

// `json_text` without its verify_report (compact, or indented by `indent`).
Expected<std::string> drop_report(std::string_view json_text, int indent = -1);

}  // namespace mlk::cache
