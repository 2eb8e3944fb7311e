#include "runtime/shipped.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "runtime/resolve.h"

namespace mlk {
const char* shipped_schedules_text();  // schedules/shipped.json, embedded (targets/embed_text.cmake)
}

namespace mlk::rt {

using nlohmann::json;

namespace {

constexpr const char* kFormat = "mlk-shipped-schedules-1";

// The string member `key` of `o` (named `path` in messages), or "" with
// `*bad` set to why not; an absent optional member is `fallback`.
std::string text_of(const json& o, const std::string& path, std::string* bad, const char* fallback = nullptr) {
  const std::string key = path.substr(path.rfind('.') + 1);
  auto it = o.find(key);
  if (it == o.end() && fallback) return fallback;
  if (it == o.end() || !it->is_string()) {
    if (bad->empty()) *bad = "`" + path + "` is " + (it == o.end() ? "missing" : "not a string");
    return "";
  }
  return it->get<std::string>();
}

// The object member `key` of `o`, or null with `*bad` set.
const json* object_of(const json& o, const char* key, std::string* bad) {
  auto it = o.find(key);
  if (it != o.end() && it->is_object()) return &*it;
  if (bad->empty()) *bad = std::string("`") + key + "` is missing or not an object";
  return nullptr;
}

Expected<ShippedEntry> entry_of(const json& e) {
  if (!e.is_object()) return Status::InvalidArgument("not an object");
  std::string bad;
  ShippedEntry s;
  s.fn = text_of(e, "fn", &bad);
  s.fn_hash = text_of(e, "fn_hash", &bad);
  s.precision = text_of(e, "precision", &bad);
  s.program = text_of(e, "program", &bad);
  s.schedule_space = text_of(e, "schedule_space", &bad, "");
  const json* dims = object_of(e, "dims", &bad);
  const json* m = object_of(e, "machine", &bad);
  const json* sched = object_of(e, "schedule", &bad);
  const json* p = object_of(e, "provenance", &bad);
  if (!bad.empty()) return Status::InvalidArgument(bad);
  for (const auto& [k, v] : dims->items()) {
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      return Status::InvalidArgument("dim `" + k + "` is not a positive integer");
    s.dims[k] = v.get<int64_t>();
  }
  s.family_key = text_of(*m, "machine.family_key", &bad);
  auto cores = m->find("cores");
  if (cores == m->end() || !cores->is_number_integer() || cores->get<int64_t>() < 1 || cores->get<int64_t>() > 1 << 20)
    return Status::InvalidArgument("`machine.cores` is not a positive integer");
  s.cores = static_cast<int>(cores->get<int64_t>());
  s.schedule = sched->dump();
  const std::string cpu = text_of(*m, "machine.cpu_model", &bad, "an unnamed CPU");
  const std::string date = text_of(*p, "provenance.date", &bad, "?");
  const std::string version = text_of(*p, "provenance.mlk_version", &bad, "?");
  const std::string command = text_of(*p, "provenance.command", &bad, "?");
  if (!bad.empty()) return Status::InvalidArgument(bad);
  s.provenance = "tuned on " + cpu + " (" + std::to_string(s.cores) + " cores) " + date + " by mlk " + version + ": " + command;
  return s;
}

}  // namespace

Expected<std::vector<ShippedEntry>> parse_shipped(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(where + ": not JSON: " + e.what());
  }
  if (!j.is_object()) return Status::InvalidArgument(where + ": not a JSON object");
  auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != kFormat)
    return Status::InvalidArgument(where + ": `format` is not \"" + std::string(kFormat) + "\"");
  auto es = j.find("entries");
  if (es == j.end() || !es->is_array()) return Status::InvalidArgument(where + ": `entries` is missing or not an array");
  std::vector<ShippedEntry> out;
  for (size_t i = 0; i < es->size(); ++i) {
    auto e = entry_of((*es)[i]);
    if (!e.ok()) return Status::InvalidArgument(where + ": entry " + std::to_string(i) + ": " + e.status().message());
    out.push_back(std::move(e).value());
  }
  return out;
}

namespace {

Expected<ShippedDb> shared(Expected<std::vector<ShippedEntry>> parsed) {
  if (!parsed.ok()) return parsed.status();
  return ShippedDb(std::make_shared<const std::vector<ShippedEntry>>(std::move(parsed).value()));
}

}  // namespace

Expected<ShippedDb> shipped_schedules() {
  static std::mutex mu;
  static std::optional<Expected<ShippedDb>> embedded;
  static std::map<std::string, std::pair<std::string, Expected<ShippedDb>>> files;  // path: text, parse
  const char* env = std::getenv("MLK_SHIPPED_SCHEDULES");
  const std::string given = env ? env : "";
  if (given == "off") return ShippedDb(std::make_shared<const std::vector<ShippedEntry>>());
  std::lock_guard<std::mutex> lock(mu);
  if (given.empty()) {
    if (!embedded)
      embedded = shared(parse_shipped(shipped_schedules_text(), "the shipped schedules (schedules/shipped.json)"));
    return *embedded;
  }
  // A file is read at every lookup (a kernel's first selection, not a
  // call), so that one edited meanwhile counts; parsed again only then.
  const std::string where = "$MLK_SHIPPED_SCHEDULES=" + given;
  auto text = read_file(given);
  if (!text.ok()) return Status::InvalidArgument(where + ": " + text.status().message());
  auto it = files.find(given);
  if (it == files.end() || it->second.first != *text)
    it = files.insert_or_assign(given, std::make_pair(*text, shared(parse_shipped(*text, where)))).first;
  return it->second.second;
}

std::optional<ShippedChoice> find_shipped(const std::vector<ShippedEntry>& db, const std::string& fn_hash,
                                          const std::string& precision, const DimEnv& dims, const CpuInfo& cpu) {
  const std::string family = cpu_family_key(cpu);
  const ShippedEntry* best = nullptr;
  double best_d = 0;
  for (const ShippedEntry& e : db) {
    if (e.fn_hash != fn_hash || e.precision != precision || e.family_key != family || e.cores != cpu.cores) continue;
    auto d = shape_distance(e.dims, dims);
    if (!d || *d > kShippedReach) continue;
    if (!best || *d < best_d) {
      best = &e;
      best_d = *d;
    }
  }
  if (!best) return std::nullopt;
  return ShippedChoice{*best, best->dims == dims};
}

Expected<std::optional<ShippedChoice>> shipped_for(const std::string& profile, const std::string& fn_hash,
                                                   const std::string& precision, const DimEnv& dims,
                                                   const CpuInfo& cpu) {
  if (profile != "host") return std::optional<ShippedChoice>();
  auto db = shipped_schedules();
  if (!db.ok()) return db.status();
  return find_shipped(**db, fn_hash, precision, dims, cpu);
}

}  // namespace mlk::rt
