#include "cache/manifest.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include "base/escape.h"
#include "base/json.h"

namespace mlk::cache {

using nlohmann::json;

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

namespace {

json provenance_json(const Provenance& p) {
  json j{{"producer", p.producer}, {"host", p.host}, {"time", p.time}, {"toolchain", p.toolchain}, {"measured", p.measured}};
  if (!p.origin.empty()) j["origin"] = p.origin;  // absent when empty: records made before it hash as they did
  return j;
}

}  // namespace

std::string manifest_to_json(const Manifest& m) {
  json files = json::object();
  for (const auto& [name, ref] : m.files) files[name] = {{"digest", ref.digest}, {"size", ref.size}};
  json meta = parse_json(m.meta_json.empty() ? std::string("{}") : m.meta_json);
  MLK_CHECK(meta.is_object(), "manifest meta_json must be validated before serialisation");
  json j = {{"files", files}, {"meta", meta}, {"provenance", provenance_json(m.provenance)}};
  return j.dump();  // nlohmann's default object type is a std::map: keys come out sorted
}

Expected<Manifest> manifest_from_json(std::string_view text, int64_t max_values) {
  std::string why;
  json j = parse_json(text, &why, kMaxJsonDepth, max_values);
  if (j.is_discarded()) return Status::InvalidArgument("manifest is not valid JSON (" + why + ")");
  if (!j.is_object()) return Status::InvalidArgument("manifest is not a JSON object");
  auto bad = [](const std::string& field, const std::string& want, const json& v) {
    return Status::InvalidArgument("manifest: `" + field + "` must be " + want + ", got " + v.type_name());
  };
  auto missing = [](const std::string& field) { return Status::InvalidArgument("manifest: `" + field + "` is missing"); };
  // An integer that fits in int64_t.
  auto int64_of = [](const json& v, int64_t* out) {
    if (!v.is_number_integer()) return false;
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = v.get<int64_t>();
    return true;
  };
  Manifest m;
  auto files = j.find("files");
  if (files == j.end()) return missing("files");
  if (!files->is_object()) return bad("files", "an object of file name -> {digest, size}", *files);
  for (const auto& [name, ref] : files->items()) {
    const std::string f = "files." + name;
    if (!ref.is_object()) return bad(f, "an object {digest, size}", ref);
    auto d = ref.find("digest");
    if (d == ref.end()) return missing(f + ".digest");
    if (!d->is_string()) return bad(f + ".digest", "a string", *d);
    auto sz = ref.find("size");
    if (sz == ref.end()) return missing(f + ".size");
    BlobRef b{d->get<std::string>(), 0};
    if (!int64_of(*sz, &b.size)) return bad(f + ".size", "an integer", *sz);
    m.files[name] = b;
  }
  auto meta = j.find("meta");
  if (meta == j.end()) return missing("meta");
  if (!meta->is_object()) return bad("meta", "a JSON object", *meta);
  m.meta_json = meta->dump();
  auto p = j.find("provenance");
  if (p == j.end()) return missing("provenance");
  if (!p->is_object()) return bad("provenance", "an object", *p);
  for (const char* f : {"producer", "host"}) {
    auto it = p->find(f);
    if (it == p->end()) return missing(std::string("provenance.") + f);
    if (!it->is_string()) return bad(std::string("provenance.") + f, "a string", *it);
    (std::string(f) == "producer" ? m.provenance.producer : m.provenance.host) = it->get<std::string>();
  }
  auto t = p->find("time");
  if (t == p->end()) return missing("provenance.time");
  if (!int64_of(*t, &m.provenance.time)) return bad("provenance.time", "an integer", *t);
  auto tc = p->find("toolchain");
  if (tc == p->end()) return missing("provenance.toolchain");
  if (!tc->is_object()) return bad("provenance.toolchain", "an object of name -> version", *tc);
  for (const auto& [k, v] : tc->items()) {
    if (!v.is_string()) return bad("provenance.toolchain." + k, "a string", v);
    m.provenance.toolchain[k] = v.get<std::string>();
  }
  auto ms = p->find("measured");
  if (ms == p->end()) return missing("provenance.measured");
  if (!ms->is_boolean()) return bad("provenance.measured", "true or false", *ms);
  m.provenance.measured = ms->get<bool>();
  if (auto o = p->find("origin"); o != p->end()) {
    if (!o->is_string()) return bad("provenance.origin", "a string", *o);
    m.provenance.origin = o->get<std::string>();
  }
  return m;
}

Expected<std::string> canonical_json_object(std::string_view text) {
  if (text.empty()) return std::string("{}");
  json j = parse_json(text);
  if (j.is_discarded()) return Status::InvalidArgument("manifest meta is not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument("manifest meta must be a JSON object, got " + std::string(j.type_name()));
  return j.dump();
}

Status validate_manifest(const Manifest& m) {
  for (const auto& [name, ref] : m.files) {
    if (name.empty() || name.size() > 255) return Status::InvalidArgument("file name `" + name + "` must have 1 to 255 bytes");
    for (unsigned char c : name)
      if (c < 0x20 || c == 0x7f) return Status::InvalidArgument("file name `" + name + "` contains a control character");
    if (name[0] == '/') return Status::InvalidArgument("file name `" + name + "` must be relative");
    size_t start = 0;
    while (start <= name.size()) {
      size_t slash = name.find('/', start);
      std::string part = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (part.empty() || part == "." || part == "..")
        return Status::InvalidArgument("file name `" + name + "` has an empty, `.` or `..` path part");
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (!is_sha256_hex(ref.digest))
      return Status::InvalidArgument("file `" + name + "`: `" + ref.digest + "` is not a sha256 digest (64 lower-case hex)");
    if (ref.size < 0) return Status::InvalidArgument("file `" + name + "`: negative size");
  }
  // Provenance is a writer's word that tools print (`mlk run`, `mlk build`,
  // tune summaries): no control characters, which a terminal would obey
  // (review 17 of issue 49: a forged host spoofed "signed by key ...").
  auto printable = [](const std::string& what, const std::string& text) {
    return has_control_char(text) ? Status::InvalidArgument("provenance " + what + " contains a control character")
                                  : Status::Ok();
  };
  MLK_RETURN_IF_ERROR(printable("producer", m.provenance.producer));
  MLK_RETURN_IF_ERROR(printable("host", m.provenance.host));
  MLK_RETURN_IF_ERROR(printable("origin", m.provenance.origin));
  for (const auto& [tool, version] : m.provenance.toolchain) {
    MLK_RETURN_IF_ERROR(printable("toolchain name", tool));
    MLK_RETURN_IF_ERROR(printable("toolchain version of `" + tool + "`", version));
  }
  auto meta = canonical_json_object(m.meta_json);
  if (!meta.ok()) return meta.status();
  return Status::Ok();
}

}  // namespace mlk::cache
