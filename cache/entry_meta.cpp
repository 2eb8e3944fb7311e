#include "cache/entry_meta.h"

#include <nlohmann/json.hpp>

namespace mlk::cache {

using nlohmann::json;

namespace {

Status bad_field(const std::string& field, const std::string& want, const json& v) {
  return Status::Corruption("entry metadata: `" + field + "` must be " + want + ", got " + v.type_name());
}

}  // namespace

Expected<EntryMeta> parse_entry_meta(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
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
  m.canonical = j.dump();
  return m;
}

}  // namespace mlk::cache
