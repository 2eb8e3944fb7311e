#include "cache/entry_meta.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include "base/json.h"

namespace mlk::cache {

using nlohmann::json;

namespace {

Status bad_field(const std::string& field, const std::string& want, const json& v) {
  return Status::Corruption("entry metadata: `" + field + "` must be " + want + ", got " + v.type_name());
}

Status parse_verified_into(const json& j, EntryMeta::Verified& out) {
  auto it = j.find("verify_report");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return bad_field("verify_report", "an object", *it);
  auto p = it->find("passed");
  if (p == it->end()) return Status::Corruption("entry metadata: `verify_report.passed` is missing");
  if (!p->is_array()) return bad_field("verify_report.passed", "an array of level names", *p);
  for (const auto& v : *p) {
    if (!v.is_string()) return bad_field("verify_report.passed[]", "a string", v);
    out.passed.insert(v.get<std::string>());
  }
  out.present = true;
  return Status::Ok();
}

}  // namespace

std::string EntryMeta::Verified::str() const {
  if (!present) return "unverified";
  std::string s;
  for (const auto& l : verification_levels())
    if (passed.count(l)) s += (s.empty() ? "" : ",") + l;
  return s.empty() ? "none" : s;
}

const std::vector<std::string>& verification_levels() {
  static const std::vector<std::string> v = {"types", "identity", "envelope", "memory", "equivalence"};
  return v;
}

Expected<std::vector<std::string>> parse_required_levels(const std::string& text) {
  std::set<std::string> want;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    std::string w = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (w == "all") {
      for (const auto& l : verification_levels()) want.insert(l);
    } else if (w == "cheap") {
      want.insert("types"), want.insert("identity");
    } else if (std::find(verification_levels().begin(), verification_levels().end(), w) != verification_levels().end()) {
      want.insert(w);
    } else {
      return Status::Usage("unknown verification level `" + w +
                           "` (levels: types, identity, envelope, memory, equivalence; or all, cheap)");
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::vector<std::string> out;
  for (const auto& l : verification_levels())
    if (want.count(l)) out.push_back(l);
  return out;
}

Expected<EntryMeta::Verified> parse_verified(std::string_view text) {
  json j = parse_json(text);
  if (!j.is_object()) return Status::Corruption("the verification report's container is not a JSON object");
  EntryMeta::Verified v;
  MLK_RETURN_IF_ERROR(parse_verified_into(j, v));
  return v;
}

Status require_verified(const std::string& what, const EntryMeta::Verified& v, const std::vector<std::string>& required) {
  if (!v.present) return Status::InvalidArgument(what + " has no verification report (run `mlk verify` first)");
  std::string missing;
  for (const auto& l : required)
    if (!v.passed.count(l)) missing += (missing.empty() ? "" : ",") + l;
  if (missing.empty()) return Status::Ok();
  return Status::InvalidArgument(what + " is not verified at " + missing + " (its report passes: " + v.str() + ")");
}

Expected<EntryMeta> parse_entry_meta(std::string_view text) {
  json j = parse_json(text);
  if (j.is_discarded()) return Status::Corruption("entry metadata is not valid JSON");
  if (!j.is_object()) return Status::Corruption(std::string("entry metadata must be a JSON object, got ") + j.type_name());
  EntryMeta m;
  for (const char* f : {"fn", "program_hash", "target"}) {
    auto it = j.find(f);
    if (it == j.end()) continue;
    if (!it->is_string()) return bad_field(f, "a string", *it);
    (std::string(f) == "fn" ? m.fn : std::string(f) == "target" ? m.target : m.program_hash) = it->get<std::string>();
  }
  if (auto it = j.find("dims"); it != j.end()) {
    if (!it->is_object()) return bad_field("dims", "an object of dimension name -> integer", *it);
    for (const auto& [k, v] : it->items()) {
      if (!v.is_number_integer()) return bad_field("dims." + k, "an integer", v);
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return Status::Corruption("entry metadata: `dims." + k + "` is out of range");
      m.dims[k] = v.get<int64_t>();
    }
  }
  for (const char* f : {"best_ms", "default_ms"}) {
    auto it = j.find(f);
    if (it == j.end()) continue;
    if (!it->is_number()) return bad_field(f, "a number", *it);
    (std::string(f) == "best_ms" ? m.best_ms : m.default_ms) = it->get<double>();
  }
  if (auto it = j.find("measured"); it != j.end()) {
    if (!it->is_boolean()) return bad_field("measured", "true or false", *it);
    m.measured = it->get<bool>();
  }
  MLK_RETURN_IF_ERROR(parse_verified_into(j, m.verification));
  m.canonical = j.dump();
  return m;
}

}  // namespace mlk::cache
