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
// A signature (version 2) signs that statement for one namespace and at one
// sequence number, the bytes
//
//   "mlk-entry-signature-2\n" + {"ns":NS,"seq":SEQ,"subject":SHA256}
//
// where SHA256 is the sha256 of the statement, NS the namespace the signer
// meant the entry for ("" for a directory) and SEQ the signing time in
// milliseconds since 1970. A loader counts a signature only for a namespace
// it reads (a dev namespace's signature is not one for release), and a
// server keeps, per signed namespace and key, the sequence below which it
// stores no signed entry again (a withdrawn or replaced build cannot be
// rebound to its key: service/api_objects.cpp). Version-1 signatures (the
// statement itself, no namespace, no sequence) count only where a caller
// asks for them: re-signing them with `mlk cache push --sign` (docs/signing.md).
//
// Signatures are kept in the metadata of the entry (the manifest.json of a
// directory) as "signatures": [{"key_id", "public_key", "ns", "seq", "sig"}],
// additive to the formats: readers that do not know them ignore them.
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

// Values a manifest.json may hold for signed_manifest_digest (an artifact's
// has hundreds; the bound keeps a server's parse of a writer's bytes small).
inline constexpr int64_t kMaxManifestValues = 200000;

// The digest manifest.json stands for in a statement (see above).
// InvalidArgument when it is not a JSON object or holds more than
// kMaxManifestValues values.
Expected<std::string> signed_manifest_digest(std::string_view manifest_json);

// The statement's file digests from the files' bytes.
Expected<std::map<std::string, std::string>> statement_digests(const std::map<std::string, std::string>& files);

// The bytes an entry signature covers. `digests`: statement_digests().
// InvalidArgument when meta_json is not a JSON object.
Expected<std::string> entry_statement(const std::string& key, const std::map<std::string, std::string>& digests,
                                      std::string_view meta_json);

// What a signature is for: the namespace and the sequence number.
struct SignatureScope {
  std::string ns;    // "" for an artifact directory
  int64_t seq = 0;   // 0: the signing time (now_sequence())
};

// Milliseconds since 1970 by the system clock: the sequence of a signature made now.
int64_t now_sequence();

// `json_text` (entry metadata, or a directory's manifest.json) with a
// signature of `statement` by `key` for `scope` added, replacing an earlier
// one by the same key. Compact JSON, or indented by `indent` when >= 0.
Expected<std::string> add_signature(std::string_view json_text, const std::string& statement, const SigningKey& key,
                                    const SignatureScope& scope, int indent = -1);

// `meta_json` signed by `key` for `scope` as the metadata of entry
// `cache_key` whose files are `files` (name -> bytes): statement_digests,
// entry_statement, add_signature in one. Compact JSON.
Expected<std::string> sign_entry(const std::string& cache_key, const std::map<std::string, std::string>& files,
                                 std::string_view meta_json, const SigningKey& key, const SignatureScope& scope);

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

// Which signatures count.
struct SignatureCheck {
  std::vector<std::string> namespaces;  // a signature counts only for one of these
  bool accept_v1 = false;               // version-1 signatures count too (re-signing them)
};

// The signature that counted.
struct SignedBy {
  std::string key_id, ns;
  int64_t seq = 0;
  bool v1 = false;
};

// OK when a signature in `json_text`'s "signatures" by a key of `trusted`
// for a namespace of `want` verifies over `statement`; `signer`, when given,
// gets it (the one of highest sequence when several count). Otherwise
// InvalidArgument starting with `what` (e.g. "entry 0123abcd"):
//   ENTRY is unsigned (sign it with `--sign KEYFILE`)
//   ENTRY is signed by key 3f2a0c1d9e8b7a65, which is not trusted
//   ENTRY: the signature by key 3f2a0c1d9e8b7a65 does not verify (...)
//   ENTRY is signed by key 3f2a0c1d9e8b7a65 for namespace `dev`, not for `prod` (...)
//   ENTRY is signed by key 3f2a0c1d9e8b7a65 with a version-1 signature, which binds no namespace (...)
// Malformed "signatures" are refused the same way (Corruption, naming the field).
Status check_signed(const std::string& what, const std::string& statement, std::string_view json_text,
                    const std::vector<std::string>& trusted, const SignatureCheck& want, SignedBy* signer = nullptr);

// `json_text` with its "verify_report" signed by `key` (the report's
// "signature" set) for the entry `statement`. InvalidArgument when it has
// no report.
Expected<std::string> sign_report(std::string_view json_text, const std::string& statement, const SigningKey& key,
                                  int indent = -1);

// OK when `json_text`'s verify_report carries a signature by a key of
// `trusted` that verifies for `statement`; `seq` gets its sequence (the
// signing time in ms, signed inside the report as "seq"; 1 for a report
// signed before reports had one). Otherwise InvalidArgument starting with
// `what`:
//   ENTRY has no verification report (run `mlk verify` first)
//   ENTRY's verification report is unsigned (a self-written report is not evidence; ...)
//   ENTRY's verification report is signed by key ID, which is not a trusted verifier
//   ENTRY's verification report: the signature by key ID does not verify (...)
Status check_report_signed(const std::string& what, const std::string& statement, std::string_view json_text,
                           const std::vector<std::string>& trusted, std::string* signer = nullptr,
                           int64_t* seq = nullptr);

// A candidate pack (artifact/candidate_set.h: native code a measurement
// worker runs) is signed by the tuning client for the namespace whose jobs
// carry it, over
//
//   "mlk-candidate-pack-1\n" + {"ns":NS,"pack":SHA256,"seq":SEQ}
//
// where SHA256 is the pack's digest (the job's setup) and SEQ the signing
// time in ms. The signature, {"key_id", "public_key", "ns", "seq", "sig"}, is the job payload's
// "pack_signature". A worker with trusted signers and a signed namespace on
// the server run (store) only packs one of their keys signed for it.
Expected<std::string> sign_pack(const std::string& pack_sha256, const std::string& ns, const SigningKey& key);

// OK when `payload_json`'s "pack_signature" is by a key of `trusted`, for a
// namespace of `namespaces`, over `pack_sha256`. Otherwise InvalidArgument:
//   the candidate pack is unsigned (`mlk tune --sign-packs KEYFILE` signs packs)
//   the candidate pack is signed by key ID, which is not trusted
//   the candidate pack is signed by key ID for namespace `dev`, not for `prod`
//   the candidate pack: the signature by key ID does not verify (...)
Status check_pack_signed(const std::string& pack_sha256, std::string_view payload_json,
                         const std::vector<std::string>& trusted, const std::vector<std::string>& namespaces);

// `json_text` without its verify_report (compact, or indented by `indent`).
Expected<std::string> drop_report(std::string_view json_text, int indent = -1);

}  // namespace mlk::cache
