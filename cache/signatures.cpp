#include "cache/signatures.h"

#include <nlohmann/json.hpp>

#include "base/json.h"
#include "base/sha256.h"

namespace mlk::cache {

using nlohmann::json;

namespace {

constexpr const char* kEntryDomain = "mlk-entry-signature-1\n";
constexpr const char* kReportDomain = "mlk-verify-report-1\n";

Expected<json> object_of(std::string_view text, const std::string& what) {
  json j = parse_json(text.empty() ? std::string_view("{}") : text);
  if (!j.is_object()) return Status::InvalidArgument(what + " is not a JSON object");
  return j;
}

json signature_json(const SigningKey& key, const std::string& sig) {
  return json{{"key_id", key.key_id}, {"public_key", key.public_key}, {"sig", sig}};
}

struct Sig {
  std::string public_key, sig;
};

// A {"public_key", "sig"} object, read defensively.
Expected<Sig> read_sig(const json& s, const std::string& field) {
  if (!s.is_object()) return Status::Corruption(field + " must be an object {key_id, public_key, sig}");
  auto pk = s.find("public_key");
  auto sg = s.find("sig");
  if (pk == s.end() || !pk->is_string() || !is_public_key_hex(pk->get<std::string>()))
    return Status::Corruption(field + ".public_key must be an Ed25519 public key (64 hex characters)");
  if (sg == s.end() || !sg->is_string()) return Status::Corruption(field + ".sig must be a string");
  return Sig{pk->get<std::string>(), sg->get<std::string>()};
}

bool trusted_key(const std::vector<std::string>& trusted, const std::string& pk) {
  for (const auto& t : trusted)
    if (t == pk) return true;
  return false;
}

std::string dump(const json& j, int indent) { return indent >= 0 ? j.dump(indent) : j.dump(); }

}  // namespace

Expected<std::string> signed_manifest_digest(std::string_view manifest_json) {
  auto j = object_of(manifest_json, "manifest.json");
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

Expected<std::string> add_signature(std::string_view json_text, const std::string& statement, const SigningKey& key,
                                    int indent) {
  auto j = object_of(json_text, "the signed document");
  if (!j.ok()) return j.status();
  auto sig = sign_bytes(key, statement);
  if (!sig.ok()) return sig.status();
  json list = json::array();
  if (auto it = j->find("signatures"); it != j->end() && it->is_array())
    for (const auto& s : *it)
      if (!(s.is_object() && s.value("public_key", "") == key.public_key)) list.push_back(s);
  list.push_back(signature_json(key, *sig));
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
                                 std::string_view meta_json, const SigningKey& key) {
  auto st = statement_of_files(cache_key, files, meta_json);
  if (!st.ok()) return st.status();
  return add_signature(meta_json, *st, key);
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
                    const std::vector<std::string>& trusted, std::string* signer) {
  auto j = object_of(json_text, what + ": its metadata");
  if (!j.ok()) return j.status();
  auto it = j->find("signatures");
  if (it == j->end() || it->is_null() || (it->is_array() && it->empty()))
    return Status::InvalidArgument(what + " is unsigned (sign it with `--sign KEYFILE`: docs/signing.md)");
  if (!it->is_array()) return Status::Corruption(what + ": `signatures` must be a list, got " + it->type_name());
  std::string foreign, failed;
  for (const auto& s : *it) {
    auto sig = read_sig(s, what + ": `signatures[]`");
    if (!sig.ok()) return sig.status();
    const std::string id = key_id_of(sig->public_key);
    if (!trusted_key(trusted, sig->public_key)) {
      foreign += (foreign.empty() ? "" : ",") + id;
      continue;
    }
    Status v = verify_signature(sig->public_key, statement, sig->sig);
    if (v.ok()) {
      if (signer) *signer = id;
      return Status::Ok();
    }
    failed = v.message();
  }
  if (!failed.empty()) return Status::InvalidArgument(what + ": " + failed);
  return Status::InvalidArgument(what + " is signed by key " + foreign + ", which is not trusted");
}

Expected<std::string> sign_report(std::string_view json_text, const std::string& statement, const SigningKey& key,
                                  int indent) {
  auto j = object_of(json_text, "the document holding the report");
  if (!j.ok()) return j.status();
  auto it = j->find("verify_report");
  if (it == j->end() || !it->is_object()) return Status::InvalidArgument("there is no verification report to sign");
  it->erase("signature");
  std::string bytes = std::string(kReportDomain) + json{{"report", *it}, {"subject", sha256_hex(statement)}}.dump();
  auto sig = sign_bytes(key, bytes);
  if (!sig.ok()) return sig.status();
  (*it)["signature"] = signature_json(key, *sig);
  return dump(*j, indent);
}

Status check_report_signed(const std::string& what, const std::string& statement, std::string_view json_text,
                           const std::vector<std::string>& trusted, std::string* signer) {
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
  return Status::Ok();
}

Expected<std::string> drop_report(std::string_view json_text, int indent) {
  auto j = object_of(json_text, "the document holding the report");
  if (!j.ok()) return j.status();
  j->erase("verify_report");
  return dump(*j, indent);
}

}  // namespace mlk::cache
