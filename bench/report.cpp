#include "bench/report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/escape.h"
#include "base/files.h"
#include "bench/stats.h"

namespace mlk::bench {

namespace {

using nlohmann::json;

json comparison_json(const Comparison& c) {
  return {{"baseline_median_ms", c.baseline_median_ms}, {"median_ms", c.current_median_ms}, {"ratio", c.ratio},
          {"ci_low", c.ci_low}, {"ci_high", c.ci_high}, {"p_slower", c.p_slower}, {"p_faster", c.p_faster},
          {"suspect", c.suspect}, {"faster", c.faster}};
}

json variant_json(const VariantResult& v) {
  json j = {{"name", v.name}, {"how", v.how}};
  if (!v.error.empty()) {
    j["error"] = v.error;
    return j;
  }
  j["median_ms"] = v.measured() ? v.median_ms() : 0.0;
  j["min_ms"] = v.measured() ? v.min_ms() : 0.0;
  j["calls_per_sample"] = v.calls_per_sample;
  j["samples_ms"] = v.samples_ms;
  j["round_sizes"] = v.round_sizes;
  return j;
}

// Field access with the JSON path in every error.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  Status fail(const std::string& path, const std::string& what) const {
    return Status::InvalidArgument(where_ + ": " + path + ": " + what);
  }
  Expected<std::string> str(const json& o, const std::string& path, const std::string& key, bool required = true) const {
    auto it = o.find(key);
    if (it == o.end()) {
      if (!required) return std::string();
      return fail(path, "missing field `" + key + "`");
    }
    if (!it->is_string()) return fail(path + "." + key, "expected a string");
    // A report may come from a server others write to: its words reach a terminal.
    if (has_control_char(it->get_ref<const std::string&>())) return fail(path + "." + key, "contains a control character");
    return it->get<std::string>();
  }
  Expected<std::vector<double>> samples(const json& o, const std::string& path) const {
    auto it = o.find("samples_ms");
    if (it == o.end()) return fail(path, "missing field `samples_ms`");
    if (!it->is_array() || it->empty()) return fail(path + ".samples_ms", "expected a non-empty array of times in ms");
    std::vector<double> out;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& v = (*it)[i];
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
        return fail(path + ".samples_ms[" + std::to_string(i) + "]", "expected a positive number of ms, found " + v.dump());
      out.push_back(v.get<double>());
    }
    return out;
  }

 private:
  std::string where_;
};

}  // namespace

double VariantResult::median_ms() const { return median(samples_ms); }
double VariantResult::min_ms() const { return *std::min_element(samples_ms.begin(), samples_ms.end()); }

const KernelResult* BenchReport::find(const std::string& id) const {
  for (const auto& k : kernels)
    if (k.id == id) return &k;
  return nullptr;
}

std::string report_to_json(const BenchReport& r) {
  json j;
  j["format"] = kReportFormat;
  j["format_version"] = kReportFormatVersion;
  j["created"] = r.created;
  j["machine"] = {{"host", r.machine.host}, {"cpu", r.machine.cpu}, {"cores", r.machine.cores},
                  {"features", r.machine.features}};
  j["versions"] = r.versions;
  j["settings"] = r.settings;
  j["calibration_ms"] = r.calibration_ms;
  j["kernels"] = json::array();
  for (const auto& k : r.kernels) {
    json kj = {{"id", k.id}, {"name", k.name}, {"file", k.file}, {"fn", k.fn}, {"target", k.target},
               {"dims", k.dims}, {"ir_hash", k.ir_hash}, {"cache_key", k.cache_key}, {"variant", k.variant},
               {"mlk", variant_json(k.mlk)}};
    kj["peers"] = json::array();
    for (const auto& p : k.peers) {
      json pj = variant_json(p);
      if (p.measured() && k.mlk.measured()) pj["speedup"] = p.median_ms() / k.mlk.median_ms();
      kj["peers"].push_back(pj);
    }
    if (k.comparison) {
      json c = {{"verdict", k.comparison->verdict}, {"first", comparison_json(k.comparison->first)},
                {"notes", k.comparison->notes}};
      c["first"]["mode"] = k.comparison->first_ab ? "ab" : "recorded";
      c["first"]["inconclusive"] = k.comparison->inconclusive;
      if (!k.comparison->against.empty()) c["against"] = k.comparison->against;
      if (k.comparison->confirm) {
        c["confirm"] = comparison_json(*k.comparison->confirm);
        c["confirm"]["mode"] = k.comparison->confirm_ab ? "ab" : "recorded";
      }
      kj["comparison"] = c;
    }
    if (k.instructions) {
      const InsnResult& n = *k.instructions;
      json ij = {{"counter", n.counter}, {"per_call", n.current}};
      if (n.baseline > 0) ij.update({{"baseline_per_call", n.baseline}, {"ratio", n.ratio}, {"regression", n.regression}});
      if (!n.note.empty()) ij["note"] = n.note;
      kj["instructions"] = ij;
    }
    j["kernels"].push_back(kj);
  }
  if (!r.baseline_path.empty()) {
    j["baseline"] = r.baseline_path;
    j["max_regression_pct"] = r.max_regression_pct;
    j["gate"] = r.gate;
    j["regressions"] = r.regressions;
  }
  if (r.insn_gate || !r.insn_regressions.empty()) {
    j["max_instruction_increase_pct"] = r.max_insn_increase_pct;
    j["instruction_regressions"] = r.insn_regressions;
  }
  return j.dump(1) + "\n";
}

Expected<BenchReport> report_from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(where + ": not valid JSON (" + e.what() + ")");
  }
  const std::string not_ours = where + ": not an mlk bench report (expected a JSON object with \"format\": \"" +
                               kReportFormat + "\", as `mlk bench --record` writes)";
  if (!j.is_object() || !j.contains("format") || j["format"] != kReportFormat) return Status::InvalidArgument(not_ours);
  if (!j.contains("format_version") || !j["format_version"].is_number_integer() ||
      j["format_version"].get<int>() != kReportFormatVersion)
    return Status::InvalidArgument(where + ": format_version " + (j.contains("format_version") ? j["format_version"].dump() : "(missing)") +
                                   " is not supported (this mlk reads " + std::to_string(kReportFormatVersion) + ")");
  Reader rd(where);
  BenchReport r;
  auto created = rd.str(j, "(top level)", "created", false);
  if (!created.ok()) return created.status();
  r.created = *created;
  if (!j.contains("machine") || !j["machine"].is_object()) return rd.fail("(top level)", "missing object `machine`");
  const json& m = j["machine"];
  for (auto [field, dst] : {std::pair{"host", &r.machine.host}, {"cpu", &r.machine.cpu}, {"features", &r.machine.features}}) {
    auto v = rd.str(m, "machine", field);
    if (!v.ok()) return v.status();
    *dst = *v;
  }
  if (!m.contains("cores") || !m["cores"].is_number_integer()) return rd.fail("machine", "missing integer `cores`");
  r.machine.cores = m["cores"].get<int>();
  if (j.contains("versions") && j["versions"].is_object())
    for (const auto& [k, v] : j["versions"].items())
      if (v.is_string()) r.versions[k] = v.get<std::string>();
  if (j.contains("settings") && j["settings"].is_object())
    for (const auto& [k, v] : j["settings"].items())
      if (v.is_number()) r.settings[k] = v.get<double>();
  if (j.contains("calibration_ms") && j["calibration_ms"].is_array())
    for (const auto& v : j["calibration_ms"])
      if (v.is_number() && v.get<double>() > 0) r.calibration_ms.push_back(v.get<double>());
  if (!j.contains("kernels") || !j["kernels"].is_array()) return rd.fail("(top level)", "missing array `kernels`");
  const json& ks = j["kernels"];
  for (size_t i = 0; i < ks.size(); ++i) {
    const std::string path = "kernels[" + std::to_string(i) + "]";
    const json& kj = ks[i];
    if (!kj.is_object()) return rd.fail(path, "expected an object");
    KernelResult k;
    for (auto [field, dst] : {std::pair{"id", &k.id}, {"fn", &k.fn}, {"target", &k.target}, {"variant", &k.variant}}) {
      auto v = rd.str(kj, path, field);
      if (!v.ok()) return v.status();
      *dst = *v;
    }
    if (k.id.empty()) return rd.fail(path + ".id", "is empty");
    for (auto [field, dst] : {std::pair{"name", &k.name}, {"file", &k.file}, {"ir_hash", &k.ir_hash}, {"cache_key", &k.cache_key}}) {
      auto v = rd.str(kj, path, field, false);
      if (!v.ok()) return v.status();
      *dst = *v;
    }
    if (!kj.contains("dims") || !kj["dims"].is_object()) return rd.fail(path, "missing object `dims`");
    for (const auto& [d, v] : kj["dims"].items()) {
      if (!v.is_number_integer() || v.get<int64_t>() < 1) return rd.fail(path + ".dims." + d, "expected a positive integer");
      k.dims[d] = v.get<int64_t>();
    }
    if (!kj.contains("mlk") || !kj["mlk"].is_object()) return rd.fail(path, "missing object `mlk`");
    const json& mj = kj["mlk"];
    k.mlk.name = "mlk";
    auto how = rd.str(mj, path + ".mlk", "how", false);
    if (!how.ok()) return how.status();
    k.mlk.how = *how;
    auto err = rd.str(mj, path + ".mlk", "error", false);
    if (!err.ok()) return err.status();
    if (!err->empty()) return rd.fail(path + ".mlk", "was not measured (" + *err + "); it cannot serve as a baseline");
    auto s = rd.samples(mj, path + ".mlk");
    if (!s.ok()) return s.status();
    k.mlk.samples_ms = *s;
    if (!mj.contains("round_sizes")) return rd.fail(path + ".mlk", "missing field `round_sizes`");
    {
      const json& rs = mj["round_sizes"];
      size_t total = 0;
      bool ok = rs.is_array();
      for (size_t r = 0; ok && r < rs.size(); ++r) {
        ok = rs[r].is_number_unsigned() && rs[r].get<size_t>() > 0;
        if (ok) {
          total += rs[r].get<size_t>();
          k.mlk.round_sizes.push_back(rs[r].get<size_t>());
        }
      }
      if (!ok || total != k.mlk.samples_ms.size())
        return rd.fail(path + ".mlk.round_sizes", "expected positive sample counts that add up to the " +
                                                      std::to_string(k.mlk.samples_ms.size()) + " samples");
    }
    if (r.find(k.id)) return rd.fail(path + ".id", "`" + k.id + "` appears twice");
    r.kernels.push_back(std::move(k));
  }
  return r;
}

Expected<BenchReport> read_report(const std::string& path) {
  auto text = read_file(path);  // "cannot read PATH: No such file or directory", "... Permission denied"
  if (!text.ok()) return text.status();
  return report_from_json(*text, path);
}

Status write_text_file(const std::string& path, const std::string& text) {
  // A new file renamed over `path`, never written through a link (a report
  // path in a shared folder: review 9 of issue 49).
  const std::filesystem::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  return replace_file_in_dir(dir, p.filename().string(), text);
}

Status write_report(const std::string& path, const BenchReport& r) { return write_text_file(path, report_to_json(r)); }


}  // namespace mlk::bench
