#include "cache/manifest.h"

#include <nlohmann/json.hpp>

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
  return json{{"producer", p.producer},
              {"host", p.host},
              {"time", p.time},
              {"toolchain", p.toolchain},
              {"measured", p.measured}};
}

}  // namespace

std::string manifest_to_json(const Manifest& m) {
  json files = json::object();
  for (const auto& [name, ref] : m.files) files[name] = {{"digest", ref.digest}, {"size", ref.size}};
  json meta = json::parse(m.meta_json.empty() ? std::string("{}") : m.meta_json, nullptr, false);
  MLK_CHECK(meta.is_object(), "manifest meta_json must be validated before serialisation");
  json j = {{"files", files}, {"meta", meta}, {"provenance", provenance_json(m.provenance)}};
  return j.dump();  // nlohmann's default object type is a std::map: keys come out sorted
}

Expected<Manifest> manifest_from_json(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("manifest is not a JSON object");
  try {
    Manifest m;
    for (const auto& [name, ref] : j.at("files").items()) {
      m.files[name] = BlobRef{ref.at("digest").get<std::string>(), ref.at("size").get<int64_t>()};
    }
    m.meta_json = j.at("meta").dump();
    const json& p = j.at("provenance");
    m.provenance.producer = p.at("producer").get<std::string>();
    m.provenance.host = p.at("host").get<std::string>();
    m.provenance.time = p.at("time").get<int64_t>();
    m.provenance.toolchain = p.at("toolchain").get<std::map<std::string, std::string>>();
    m.provenance.measured = p.at("measured").get<bool>();
    if (!j.at("meta").is_object()) return Status::InvalidArgument("manifest: `meta` is not a JSON object");
    return m;
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("manifest: ") + e.what());
  }
}

Expected<std::string> canonical_json_object(std::string_view text) {
  if (text.empty()) return std::string("{}");
  json j = json::parse(text.begin(), text.end(), nullptr, false);
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
  auto meta = canonical_json_object(m.meta_json);
  if (!meta.ok()) return meta.status();
  return Status::Ok();
}

}  // namespace mlk::cache
