#include "cache/signatures.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/sha256.h"
#include "cache/store.h"

namespace mlk::cache {

using nlohmann::json;

namespace {

constexpr const char* kEntryDomain = "mlk-entry-signature-1\n";
constexpr const char* kSignatureDomain = "mlk-entry-signature-2\n";
constexpr const char* kReportDomain = "mlk-verify-report-1\n";
constexpr int64_t kMaxSequence = int64_t{1} << 53;
constexpr const char* kPackDomain = "mlk-candidate-pack-1\n";

Expected<json> object_of(std::string_view text, const std::string& what) {
  json j = parse_json(text.empty() ? std::string_view("{}") : text);
  if (!j.is_object()) return Status::InvalidArgument(what + " is not a JSON object");
  return j;
}

json signature_json(const SigningKey& key, const std::string& sig) {
  return json{{"key_id", key.key_id}, {"public_key", key.public_key}, {"sig", sig}};
}

// The bytes a version-2 signature signs (see the header).
std::string signed_bytes(const std::string& statement, const std::string& ns, int64_t seq) {
  return std::string(kSignatureDomain) + json{{"ns", ns}, {"seq", seq}, {"subject", sha256_hex(statement)}}.dump();
}

// The bytes a candidate pack's signature signs (see the header).
std::string pack_bytes(const std::string& pack_sha256, const std::string& ns, int64_t seq) {
  return std::string(kPackDomain) + json{{"ns", ns}, {"pack", pack_sha256}, {"seq", seq}}.dump();
}

struct Sig {
  std::string public_key, sig, ns;
  int64_t seq = 0;
  bool v1 = true;  // no "ns": the statement itself is signed
};

// A {"public_key", "sig"[, "ns", "seq"]} object, read defensively.
Expected<Sig> read_sig(const json& s, const std::string& field) {
  if (!s.is_object()) return Status::Corruption(field + " must be an object {key_id, public_key, ns, seq, sig}");
  auto pk = s.find("public_key");
  auto sg = s.find("sig");
  if (pk == s.end() || !pk->is_string() || !is_public_key_hex(pk->get<std::string>()))
    return Status::Corruption(field + ".public_key must be an Ed25519 public key (64 hex characters)");
  if (sg == s.end() || !sg->is_string()) return Status::Corruption(field + ".sig must be a string");
  Sig out{pk->get<std::string>(), sg->get<std::string>()};
  if (auto ns = s.find("ns"); ns != s.end()) {
    auto seq = s.find("seq");
    // A namespace's name or "" (a directory's): never a writer's free text,
    // which the refusals print (review 18 of issue 49).
    if (!ns->is_string() || (!ns->get<std::string>().empty() && !validate_namespace(ns->get<std::string>()).ok()))
      return Status::Corruption(field + ".ns must be a namespace name");
    if (seq == s.end() || !seq->is_number_integer() || seq->get<int64_t>() < 0 || seq->get<int64_t>() > kMaxSequence)
      return Status::Corruption(field + ".seq must be an integer in [0, 2^53]");
    out.ns = ns->get<std::string>();
    out.seq = seq->get<int64_t>();
    out.v1 = false;
  }
  return out;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "`" : ", `") + n + "`";
  return out.empty() ? "no namespace" : out;
}

bool trusted_key(const std::vector<std::string>& trusted, const std::string& pk) {
  for (const auto& t : trusted)
    if (t == pk) return true;
  return false;
}

std::string dump(const json& j, int indent) { return indent >= 0 ? j.dump(indent) : j.dump(); }

}  // namespace

Expected<std::string> signed_manifest_digest(std::string_view manifest_json) {
  // An artifact's manifest holds hundreds of values; a server parses the
  // ones writers send, so the parse is bounded (about 16 MB of tree).
  std::string why;
  json parsed = parse_json(manifest_json.empty() ? std::string_view("{}") : manifest_json, &why, kMaxJsonDepth,
                           kMaxManifestValues);
  if (parsed.is_discarded()) return Status::InvalidArgument("manifest.json is not a JSON object (" + why + ")");
  auto j = parsed.is_object() ? Expected<json>(std::move(parsed))
                              : Expected<json>(Status::InvalidArgument("manifest.json is not a JSON object"));
  if (!j.ok()) return j.status();
  j->erase("signatures");
  j->erase("verify_report");
  return sha256_hex(j->dump());
}

Expected<std::map<std::string, std::string>> statement_digests(const std::map<std::string, std::string>& files) {
  std::map<std::string, std::string> d;
  for (const auto& [name, bytes] : files) {
    if (name == "manifest.json") {
      auto m = signed_manifest_digest(bytes);
      if (!m.ok()) return m.status();
      d[name] = *m;
    } else {
      d[name] = sha256_hex(bytes);
    }
  }
  return d;
}

Expected<std::string> entry_statement(const std::string& key, const std::map<std::string, std::string>& digests,
                                      std::string_view meta_json) {
  auto meta = object_of(meta_json, "the entry metadata");
  if (!meta.ok()) return meta.status();
  meta->erase("signatures");
  meta->erase("verify_report");
  json files = json::object();
  for (const auto& [name, d] : digests) files[name] = d;
  return std::string(kEntryDomain) + json{{"files", files}, {"key", key}, {"meta", *meta}}.dump();
}

int64_t now_sequence() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Expected<std::string> add_signature(std::string_view json_text, const std::string& statement, const SigningKey& key,
                                    const SignatureScope& scope, int indent) {
  auto j = object_of(json_text, "the signed document");
  if (!j.ok()) return j.status();
  const int64_t seq = scope.seq > 0 ? scope.seq : now_sequence();
  auto sig = sign_bytes(key, signed_bytes(statement, scope.ns, seq));
  if (!sig.ok()) return sig.status();
  json list = json::array();
  if (auto it = j->find("signatures"); it != j->end() && it->is_array())
    for (const auto& s : *it)
      if (!(s.is_object() && s.value("public_key", "") == key.public_key)) list.push_back(s);
  json one = signature_json(key, *sig);
  one["ns"] = scope.ns;
  one["seq"] = seq;
  list.push_back(one);
  (*j)["signatures"] = list;
  return dump(*j, indent);
}

Expected<std::string> statement_of_files(const std::string& cache_key, const std::map<std::string, std::string>& files,
                                         std::string_view meta_json) {
  auto digests = statement_digests(files);
  if (!digests.ok()) return digests.status();
  return entry_statement(cache_key, *digests, meta_json);
}

Expected<std::string> sign_entry(const std::string& cache_key, const std::map<std::string, std::string>& files,
                                 std::string_view meta_json, const SigningKey& key, const SignatureScope& scope) {
  auto st = statement_of_files(cache_key, files, meta_json);
  if (!st.ok()) return st.status();
  return add_signature(meta_json, *st, key, scope);
}

Expected<std::string> directory_statement(const std::map<std::string, std::string>& files) {
  auto it = files.find("manifest.json");
  if (it == files.end()) return Status::InvalidArgument("the artifact directory has no manifest.json");
  auto man = object_of(it->second, "manifest.json");
  if (!man.ok()) return man.status();
  std::map<std::string, std::string> covered = {{"manifest.json", it->second}};
  if (auto f = man->find("files"); f != man->end() && f->is_object())
    for (const auto& [name, digest] : f->items()) {
      auto b = files.find(name);
      if (b == files.end()) return Status::InvalidArgument("manifest.json lists " + name + ", which is missing");
      covered[name] = b->second;
    }
  return statement_of_files("", covered, "{}");
}

std::string signer_ids(std::string_view json_text) {
  json j = parse_json(json_text);
  std::string ids;
  if (!j.is_object()) return ids;
  auto it = j.find("signatures");
  if (it == j.end() || !it->is_array()) return ids;
  for (const auto& s : *it) {
    auto sig = read_sig(s, "signatures[]");
    if (sig.ok()) ids += (ids.empty() ? "" : ",") + key_id_of(sig->public_key);
  }
  return ids;
}

Status check_signed(const std::string& what, const std::string& statement, std::string_view json_text,
                    const std::vector<std::string>& trusted, const SignatureCheck& want, SignedBy* signer) {
  auto j = object_of(json_text, what + ": its metadata");
  if (!j.ok()) return j.status();
  auto it = j->find("signatures");
  if (it == j->end() || it->is_null() || (it->is_array() && it->empty()))
    return Status::InvalidArgument(what + " is unsigned (sign it with `--sign KEYFILE`: docs/signing.md)");
  if (!it->is_array()) return Status::Corruption(what + ": `signatures` must be a list, got " + it->type_name());
  std::string foreign, failed, elsewhere, v1;
  std::optional<SignedBy> best;
  for (const auto& s : *it) {
    auto sig = read_sig(s, what + ": `signatures[]`");
    if (!sig.ok()) return sig.status();
    const std::string id = key_id_of(sig->public_key);
    if (!trusted_key(trusted, sig->public_key)) {
      foreign += (foreign.empty() ? "" : ",") + id;
      continue;
    }
    if (sig->v1 && !want.accept_v1) {
      v1 = id;
      continue;
    }
    if (!sig->v1 && std::find(want.namespaces.begin(), want.namespaces.end(), sig->ns) == want.namespaces.end()) {
      elsewhere = "key " + id + " for namespace `" + sig->ns + "`";
      continue;
    }
    Status v = verify_signature(sig->public_key, sig->v1 ? statement : signed_bytes(statement, sig->ns, sig->seq), sig->sig);
    if (!v.ok()) {
      failed = v.message();
      continue;
    }
    if (!best || sig->seq > best->seq) best = SignedBy{id, sig->ns, sig->seq, sig->v1};
  }
  if (best) {
    if (signer) *signer = *best;
    return Status::Ok();
  }
  if (!failed.empty()) return Status::InvalidArgument(what + ": " + failed);
  if (!elsewhere.empty() && want.namespaces.empty())
    return Status::InvalidArgument(what + " is signed by " + elsewhere +
                                   ", and it came from a namespace or a server that this cache does not read now "
                                   "(a signature counts only for the namespace its entry came from)");
  if (!elsewhere.empty())
    return Status::InvalidArgument(what + " is signed by " + elsewhere + ", not for " + quoted_list(want.namespaces) +
                                   " (a signature binds the namespace it was made for: sign it for this one)");
  if (!v1.empty())
    return Status::InvalidArgument(what + " is signed by key " + v1 +
                                   " with a version-1 signature, which binds no namespace or sequence; re-sign it "
                                   "(`mlk cache push KEY --sign KEYFILE --trusted-signers " + v1 + "`: docs/signing.md)");
  return Status::InvalidArgument(what + " is signed by key " + foreign + ", which is not trusted");
}

Expected<std::string> sign_report(std::string_view json_text, const std::string& statement, const SigningKey& key,
                                  int indent) {
  auto j = object_of(json_text, "the document holding the report");
  if (!j.ok()) return j.status();
  auto it = j->find("verify_report");
  if (it == j->end() || !it->is_object()) return Status::InvalidArgument("there is no verification report to sign");
  it->erase("signature");
  (*it)["seq"] = now_sequence();  // signed with the report: a release namespace's floor reads it
  std::string bytes = std::string(kReportDomain) + json{{"report", *it}, {"subject", sha256_hex(statement)}}.dump();
  auto sig = sign_bytes(key, bytes);
  if (!sig.ok()) return sig.status();
  (*it)["signature"] = signature_json(key, *sig);
  return dump(*j, indent);
}

Status check_report_signed(const std::string& what, const std::string& statement, std::string_view json_text,
                           const std::vector<std::string>& trusted, std::string* signer, int64_t* seq) {
  auto j = object_of(json_text, what + ": its metadata");
  if (!j.ok()) return j.status();
  auto it = j->find("verify_report");
  if (it == j->end() || it->is_null())
    return Status::InvalidArgument(what + " has no verification report (run `mlk verify` first)");
  if (!it->is_object()) return Status::Corruption(what + ": `verify_report` must be an object, got " + it->type_name());
  json report = *it;
  auto s = report.find("signature");
  if (s == report.end() || s->is_null())
    return Status::InvalidArgument(what + "'s verification report is unsigned (a self-written report is not evidence: "
                                          "`mlk verify --sign KEYFILE` by a trusted verifier signs one)");
  auto sig = read_sig(*s, what + ": `verify_report.signature`");
  if (!sig.ok()) return sig.status();
  const std::string id = key_id_of(sig->public_key);
  if (!trusted_key(trusted, sig->public_key))
    return Status::InvalidArgument(what + "'s verification report is signed by key " + id +
                                   ", which is not a trusted verifier");
  report.erase("signature");
  std::string bytes = std::string(kReportDomain) + json{{"report", report}, {"subject", sha256_hex(statement)}}.dump();
  Status v = verify_signature(sig->public_key, bytes, sig->sig);
  if (!v.ok())
    return Status::InvalidArgument(what + "'s verification report: " + v.message() +
                                   "; a report is bound to the exact entry it was made for");
  if (signer) *signer = id;
  if (seq) {  // signed with the report; a report signed before reports had one counts as 1
    auto q = report.find("seq");
    *seq = q != report.end() && q->is_number_integer() && q->get<int64_t>() >= 1 ? q->get<int64_t>() : 1;
  }
  return Status::Ok();
}

Expected<std::string> sign_pack(const std::string& pack_sha256, const std::string& ns, const SigningKey& key) {
  const int64_t seq = now_sequence();
  auto sig = sign_bytes(key, pack_bytes(pack_sha256, ns, seq));
  if (!sig.ok()) return sig.status();
  json one = signature_json(key, *sig);
  one["ns"] = ns;
  one["seq"] = seq;
  return one.dump();
}

Status check_pack_signed(const std::string& pack_sha256, std::string_view payload_json,
                         const std::vector<std::string>& trusted, const std::vector<std::string>& namespaces) {
  const std::string what = "the candidate pack " + pack_sha256.substr(0, 16);
  json payload = parse_json(payload_json);
  auto it = payload.is_object() ? payload.find("pack_signature") : payload.end();
  if (!payload.is_object() || it == payload.end() || it->is_null())
    return Status::InvalidArgument(what + " is unsigned (`mlk tune --sign-packs KEYFILE` signs the packs it sends)");
  auto sig = read_sig(*it, "pack_signature");
  if (!sig.ok()) return Status::InvalidArgument(what + ": " + sig.status().message());
  const std::string id = key_id_of(sig->public_key);
  if (!trusted_key(trusted, sig->public_key))
    return Status::InvalidArgument(what + " is signed by key " + id + ", which is not trusted");
  if (sig->v1) return Status::InvalidArgument(what + ": `pack_signature` names no namespace");
  if (std::find(namespaces.begin(), namespaces.end(), sig->ns) == namespaces.end())
    return Status::InvalidArgument(what + " is signed by key " + id + " for namespace `" + sig->ns + "`, not for " +
                                   quoted_list(namespaces));
  Status v = verify_signature(sig->public_key, pack_bytes(pack_sha256, sig->ns, sig->seq), sig->sig);
  if (!v.ok()) return Status::InvalidArgument(what + ": " + v.message());
  return Status::Ok();
}

Expected<std::string> drop_report(std::string_view json_text, int indent) {
  auto j = object_of(json_text, "the document holding the report");
  if (!j.ok()) return j.status();
  j->erase("verify_report");
  return dump(*j, indent);
}

}  // namespace mlk::cache
