#include "artifact/manifest.h"

#include <nlohmann/json.hpp>
#include "base/json.h"

namespace mlk {

using nlohmann::json;

namespace {

bool is_plain_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos && n.find('\0') == std::string::npos;
}

}  // namespace

Expected<ArtifactManifest> parse_artifact_manifest(std::string_view text, const std::string& where) {
  auto bad = [&](const std::string& what) { return Status::Corruption(where + ": " + what); };
  json j = parse_json(text);
  if (j.is_discarded() || !j.is_object()) return bad("not an mlk artifact manifest (not a JSON object)");
  auto fmt = j.find("format");
  if (fmt == j.end() || !fmt->is_string() || fmt->get<std::string>() != "mlk-artifact-1")
    return bad("not an mlk artifact manifest (`format` is not \"mlk-artifact-1\")");
  ArtifactManifest m;
  auto files = j.find("files");
  if (files == j.end() || !files->is_object()) return bad("`files` must be an object of file name -> sha256");
  for (const auto& [name, digest] : files->items()) {
    if (!is_plain_name(name)) return bad("`files`: `" + name + "` is not a plain file name");
    if (!digest.is_string()) return bad("`files." + name + "` must be a sha256 string, got " + digest.type_name());
    m.files[name] = digest.get<std::string>();
  }
  for (const char* f : {"library", "entry_symbol"}) {
    auto it = j.find(f);
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
      return bad(std::string("`") + f + "` must be a non-empty string");
    (std::string(f) == "library" ? m.library : m.entry_symbol) = it->get<std::string>();
  }
  if (!is_plain_name(m.library)) return bad("`library`: `" + m.library + "` is not a plain file name");
  if (!m.files.count(m.library)) return bad("`library` " + m.library + " is not listed in `files`");
  auto abi = j.find("abi_version");
  if (abi == j.end() || !abi->is_number_integer() || (abi->is_number_unsigned() && abi->get<uint64_t>() > INT64_MAX))
    return bad("`abi_version` must be an integer");
  m.abi_version = abi->get<int64_t>();
  if (auto sig = j.find("signature"); sig != j.end()) {
    if (!sig->is_object()) return bad(std::string("`signature` must be an object, got ") + sig->type_name());
    if (auto u = sig->find("unbound_dims"); u != sig->end()) {
      if (!u->is_array()) return bad("`signature.unbound_dims` must be a list of dimension names");
      for (const auto& d : *u) {
        if (!d.is_string()) return bad("`signature.unbound_dims` must be a list of dimension names");
        m.unbound_dims.push_back(d.get<std::string>());
      }
    }
    if (auto r = sig->find("results"); r != sig->end()) {
      if (!r->is_array() || r->empty() || r->size() > 64)
        return bad("`signature.results` must be a list of 1 to 64 result types");
      m.results = r->size();
    }
  }
  if (auto prof = j.find("profile"); prof != j.end() && prof->is_object()) {
    if (auto k = prof->find("kind"); k != prof->end() && k->is_string()) m.profile_kind = k->get<std::string>();
    if (auto n = prof->find("name"); n != prof->end() && n->is_string()) m.profile_name = n->get<std::string>();
  }
  if (auto cu = j.find("cuda"); cu != j.end()) {
    auto e = cu->is_object() ? cu->find("entry_symbol") : cu->end();
    if (!cu->is_object() || e == cu->end() || !e->is_string() || e->get<std::string>().empty())
      return bad("`cuda.entry_symbol` must be a non-empty string");
    m.cuda_entry_symbol = e->get<std::string>();
  }
  if (auto pw = j.find("packed_weights"); pw != j.end()) {
    const std::string what = "`packed_weights` must be an object with `pack_symbol`, `entry_symbol` and `weights`";
    if (!pw->is_object()) return bad(what);
    auto ps = pw->find("pack_symbol"), es = pw->find("entry_symbol"), ws = pw->find("weights");
    if (ps == pw->end() || es == pw->end() || ws == pw->end() || !ps->is_string() || !es->is_string() ||
        ps->get<std::string>().empty() || es->get<std::string>().empty() || !ws->is_array() || ws->empty() ||
        ws->size() > 1024)
      return bad(what + " (1 to 1024 weights)");
    m.pack_symbol = ps->get<std::string>();
    m.packed_entry_symbol = es->get<std::string>();
    for (const auto& w : *ws) {
      auto ix = w.is_object() ? w.find("index") : w.end();
      if (ix == w.end() || !ix->is_number_integer() || ix->get<int64_t>() < 0 || ix->get<int64_t>() > 4096)
        return bad("`packed_weights.weights[]` must be objects whose `index` is a parameter's index");
      m.packed_params.push_back(static_cast<int>(ix->get<int64_t>()));
    }
  }
  return m;
}

}  // namespace mlk
