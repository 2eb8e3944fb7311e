#include "artifact/candidate_set.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json.h"
#include "base/sha256.h"

namespace mlk {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A name the set may use for a file or folder: letters, digits, '.', '_',
// '-', not starting with '.'.
bool plain_name(const std::string& s) {
  if (s.empty() || s[0] == '.' || s.size() > 100) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

// Reads fields of a JSON object, remembering the first problem with its path.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}
  template <class T>
  T get(const char* key, T fallback = T{}) {
    if (!j_.is_object() || !j_.contains(key)) return fail(key, "is missing"), fallback;
    try {
      return j_.at(key).get<T>();
    } catch (const json::exception&) {
      return fail(key, "has the wrong type"), fallback;
    }
  }
  const json& at(const char* key) {
    static const json null;
    if (!j_.is_object() || !j_.contains(key)) return fail(key, "is missing"), null;
    return j_.at(key);
  }
  void fail(const std::string& key, const std::string& what) {
    if (error_.empty()) error_ = where_ + ": `" + key + "` " + what;
  }
  Status status() const { return error_.empty() ? Status::Ok() : Status::InvalidArgument(error_); }

 private:
  const json& j_;
  std::string where_, error_;
};

json spec_json(DType t, const std::vector<int64_t>& shape) { return {{"dtype", dtype_name(t)}, {"shape", shape}}; }

Expected<TensorSpec> parse_spec(const json& j, const std::string& where) {
  Fields f(j, where);
  auto name = f.get<std::string>("dtype");
  TensorSpec s;
  s.shape = f.get<std::vector<int64_t>>("shape");
  MLK_RETURN_IF_ERROR(f.status());
  auto t = parse_dtype(name);
  if (!t) return Status::InvalidArgument(where + ": unknown dtype `" + name + "`");
  s.dtype = *t;
  int64_t n = 1;
  for (int64_t e : s.shape) {
    if (e < 0 || e > (int64_t{1} << 40) || (e > 0 && n > (int64_t{1} << 40) / e))
      return Status::InvalidArgument(where + ": shape extent " + std::to_string(e) + " out of range");
    n *= e;
  }
  return s;
}

// A tensor's entry: its spec and data file, written as data/NAME.bin.
Expected<json> write_tensor(const HostTensor& t, const std::string& dir, const std::string& name) {
  const std::string rel = "data/" + name + ".bin";
  std::string_view bytes(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  MLK_RETURN_IF_ERROR(write_file((fs::path(dir) / rel).string(), bytes));
  json j = spec_json(t.dtype, t.shape);
  j["file"] = rel;
  j["sha256"] = sha256_hex(bytes);
  return j;
}

// `read`: the data files read so far. A set names each file once (as
// write_candidate_set writes them); a file named again is refused, so that a
// small pack cannot decode into copies of one large file without bound
// (review 7 of issue 49).
Expected<HostTensor> read_tensor(const json& j, const std::string& dir, const std::string& where,
                                 std::set<std::string>& read) {
  auto spec = parse_spec(j, where);
  if (!spec.ok()) return spec.status();
  Fields f(j, where);
  auto rel = f.get<std::string>("file");
  auto digest = f.get<std::string>("sha256");
  MLK_RETURN_IF_ERROR(f.status());
  if (rel.rfind("data/", 0) != 0 || !plain_name(rel.substr(5)))
    return Status::InvalidArgument(where + ": `file` must be data/NAME, not `" + rel + "`");
  if (!read.insert(rel).second) return Status::InvalidArgument(where + ": " + rel + " is named by another tensor too");
  // The file's size against the declared shape before anything of that
  // shape is allocated: a set's header may claim any extents.
  int64_t need = (dtype_bits(spec->dtype) + 7) / 8;
  for (int64_t e : spec->shape) need *= e;
  auto bytes = read_file((fs::path(dir) / rel).string());
  if (!bytes.ok()) return bytes.status();
  if (static_cast<int64_t>(bytes->size()) != need)
    return Status::Corruption(where + ": " + rel + " holds " + std::to_string(bytes->size()) + " bytes, its " +
                              dtype_name(spec->dtype) + " shape needs " + std::to_string(need));
  if (sha256_hex(*bytes) != digest) return Status::Corruption(where + ": " + rel + " does not match its sha256");
  HostTensor t(spec->dtype, spec->shape);
  std::copy(bytes->begin(), bytes->end(), t.bytes.begin());
  return t;
}

Expected<json> read_json_file(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return text.status();
  std::string why;
  json j = parse_json(*text, &why);
  if (j.is_discarded()) return Status::InvalidArgument(path + ": not JSON: " + why);
  return j;
}

}  // namespace

Status write_candidate_set(const CandidateSet& set, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "data", ec);
  if (ec) return Status::IOError("cannot create " + dir + "/data: " + ec.message());
  json cases = json::array();
  for (size_t i = 0; i < set.cases.size(); ++i) {
    const CandidateCase& c = set.cases[i];
    json inputs = json::array();
    for (size_t k = 0; k < c.inputs.size(); ++k) {
      auto t = write_tensor(c.inputs[k], dir, "case" + std::to_string(i) + "_in" + std::to_string(k));
      if (!t.ok()) return t.status();
      inputs.push_back(*t);
    }
    auto want = write_tensor(c.expected, dir, "case" + std::to_string(i) + "_expected");
    if (!want.ok()) return want.status();
    cases.push_back({{"name", c.name}, {"dims", c.dims}, {"inputs", inputs}, {"expected", *want},
                     {"rtol", c.tol.rtol}, {"atol", c.tol.atol}, {"policy_outliers", c.tol.policy_outliers}});
  }
  json inputs = json::array();
  for (const TensorSpec& s : set.timing_inputs) inputs.push_back(spec_json(s.dtype, s.shape));
  json cands = json::array();
  for (const Candidate& c : set.candidates)
    cands.push_back({{"id", c.id}, {"origin", c.origin}, {"schedule", json::parse(c.schedule_json)},
                     {"schedule_hash", c.schedule_hash}, {"estimate_ms", c.estimate_ms},
                     {"library_sha256", c.library_sha256}});
  json j = {{"format", kCandidateSetFormat},
            {"fn", set.fn},
            {"profile", set.profile},
            {"ir_hash", set.ir_hash},
            {"dims", set.dims},
            {"timing", {{"inputs", inputs},
                        {"output", spec_json(set.timing_output.dtype, set.timing_output.shape)},
                        {"fill", "uniform [-1, 1), drawn by the runner"},
                        {"warmup", set.warmup},
                        {"min_reps", set.min_reps},
                        {"max_reps", set.max_reps},
                        {"min_time_s", set.min_time_s}}},
            {"cases", cases},
            {"cases_record", json::parse(set.cases_record.empty() ? "{}" : set.cases_record)},
            {"candidates", cands}};
  return write_file((fs::path(dir) / "candidates.json").string(), j.dump(2) + "\n");
}

Expected<std::string> candidate_set_digest(const std::string& dir) {
  auto text = read_file((fs::path(dir) / "candidates.json").string());
  if (!text.ok()) return text.status();
  return sha256_hex(*text);
}

Expected<CandidateSet> read_candidate_set(const std::string& dir) {
  const std::string path = (fs::path(dir) / "candidates.json").string();
  auto j = read_json_file(path);
  if (!j.ok()) return j.status();
  Fields f(*j, path);
  if (f.get<std::string>("format") != kCandidateSetFormat)
    return Status::InvalidArgument(path + ": not a candidate set (`format` is not " + kCandidateSetFormat + ")");
  CandidateSet s;
  s.fn = f.get<std::string>("fn");
  s.profile = f.get<std::string>("profile");
  s.ir_hash = f.get<std::string>("ir_hash");
  s.dims = f.get<DimEnv>("dims");
  const json& timing = f.at("timing");
  const json& cases = f.at("cases");
  const json& cands = f.at("candidates");
  MLK_RETURN_IF_ERROR(f.status());
  if (j->contains("cases_record") && (*j)["cases_record"].is_object()) s.cases_record = (*j)["cases_record"].dump();
  Fields t(timing, path + ": timing");
  s.warmup = t.get<int>("warmup");
  s.min_reps = t.get<int>("min_reps");
  s.max_reps = t.get<int>("max_reps");
  s.min_time_s = t.get<double>("min_time_s");
  const json& ins = t.at("inputs");
  const json& out = t.at("output");
  MLK_RETURN_IF_ERROR(t.status());
  if (s.warmup < 0 || s.min_reps < 1 || s.max_reps < s.min_reps || !(s.min_time_s >= 0 && s.min_time_s < 3600))
    return Status::InvalidArgument(path + ": timing: warmup, min_reps, max_reps or min_time_s out of range");
  if (!ins.is_array() || !cases.is_array() || !cands.is_array())
    return Status::InvalidArgument(path + ": `timing.inputs`, `cases` and `candidates` must be arrays");
  for (size_t i = 0; i < ins.size(); ++i) {
    auto spec = parse_spec(ins[i], path + ": timing.inputs[" + std::to_string(i) + "]");
    if (!spec.ok()) return spec.status();
    s.timing_inputs.push_back(*spec);
  }
  auto spec = parse_spec(out, path + ": timing.output");
  if (!spec.ok()) return spec.status();
  s.timing_output = *spec;
  std::set<std::string> read;  // data files read (read_tensor)
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string where = path + ": cases[" + std::to_string(i) + "]";
    Fields c(cases[i], where);
    CandidateCase cc;
    cc.name = c.get<std::string>("name");
    cc.dims = c.get<DimEnv>("dims");
    cc.tol.rtol = c.get<double>("rtol");
    cc.tol.atol = c.get<double>("atol");
    if (cases[i].is_object() && cases[i].contains("policy_outliers")) cc.tol.policy_outliers = c.get<bool>("policy_outliers");
    const json& inputs = c.at("inputs");
    const json& want = c.at("expected");
    MLK_RETURN_IF_ERROR(c.status());
    if (!inputs.is_array() || inputs.size() != s.timing_inputs.size())
      return Status::InvalidArgument(where + ": `inputs` must list one tensor per parameter (" +
                                     std::to_string(s.timing_inputs.size()) + ")");
    for (size_t k = 0; k < inputs.size(); ++k) {
      auto in = read_tensor(inputs[k], dir, where + ".inputs[" + std::to_string(k) + "]", read);
      if (!in.ok()) return in.status();
      cc.inputs.push_back(std::move(*in));
    }
    auto w = read_tensor(want, dir, where + ".expected", read);
    if (!w.ok()) return w.status();
    cc.expected = std::move(*w);
    s.cases.push_back(std::move(cc));
  }
  for (size_t i = 0; i < cands.size(); ++i) {
    const std::string where = path + ": candidates[" + std::to_string(i) + "]";
    Fields c(cands[i], where);
    Candidate k;
    k.id = c.get<std::string>("id");
    k.origin = c.get<std::string>("origin");
    k.schedule_hash = c.get<std::string>("schedule_hash");
    k.estimate_ms = c.get<double>("estimate_ms");
    k.library_sha256 = c.get<std::string>("library_sha256");
    const json& sched = c.at("schedule");
    MLK_RETURN_IF_ERROR(c.status());
    if (!plain_name(k.id)) return Status::InvalidArgument(where + ": `id` must be a plain folder name, not `" + k.id + "`");
    k.schedule_json = sched.dump();
    s.candidates.push_back(std::move(k));
  }
  if (s.candidates.empty()) return Status::InvalidArgument(path + ": no candidates");
  return s;
}

namespace {

constexpr std::string_view kPackMagic = "mlk-candidate-pack 1\n";

// "candidates.json", "data/x.bin" or "c00/libf.so": one or two plain names.
bool pack_path(const std::string& p) {
  const size_t slash = p.find('/');
  if (slash == std::string::npos) return plain_name(p);
  return plain_name(p.substr(0, slash)) && plain_name(p.substr(slash + 1));
}

}  // namespace

Expected<std::string> pack_candidate_set(const std::string& dir) {
  json files = json::array();
  std::string body;
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) paths.push_back(fs::relative(e.path(), dir, ec).generic_string());
  if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
  std::sort(paths.begin(), paths.end());
  for (const std::string& p : paths) {
    if (!pack_path(p)) return Status::InvalidArgument(dir + ": `" + p + "` is not a path a candidate set holds");
    auto bytes = read_file((fs::path(dir) / p).string());
    if (!bytes.ok()) return bytes.status();
    files.push_back({{"path", p}, {"size", bytes->size()}});
    body += *bytes;
  }
  const std::string header = json{{"files", files}}.dump();
  return std::string(kPackMagic) + std::to_string(header.size()) + "\n" + header + body;
}

Status unpack_candidate_set(std::string_view pack, const std::string& dir) {
  auto bad = [](const std::string& what) { return Status::InvalidArgument("a candidate pack: " + what); };
  if (pack.substr(0, kPackMagic.size()) != kPackMagic) return bad("it does not start with `mlk-candidate-pack 1`");
  pack.remove_prefix(kPackMagic.size());
  const size_t nl = pack.find('\n');
  if (nl == std::string_view::npos || nl == 0 || nl > 9) return bad("no header length");
  size_t header_len = 0;
  for (char c : pack.substr(0, nl)) {
    if (c < '0' || c > '9') return bad("the header length is not a number");
    header_len = header_len * 10 + static_cast<size_t>(c - '0');
  }
  pack.remove_prefix(nl + 1);
  if (header_len > pack.size()) return bad("the header is longer than the pack");
  std::string why;
  json h = parse_json(pack.substr(0, header_len), &why);
  pack.remove_prefix(header_len);
  if (!h.is_object() || !h.contains("files") || !h["files"].is_array()) return bad("the header has no `files` list" + (why.empty() ? "" : ": " + why));
  std::vector<std::pair<std::string, size_t>> files;
  size_t total = 0;
  for (const json& f : h["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned())
      return bad("a file entry needs a string `path` and a size");
    const std::string p = f["path"].get<std::string>();
    const size_t n = f["size"].get<size_t>();
    if (!pack_path(p)) return bad("`" + p + "` is not a plain relative path");
    if (n > pack.size() - total) return bad("the files' sizes add up to more than the pack holds");
    total += n;
    files.push_back({p, n});
  }
  if (total != pack.size()) return bad("the files' sizes add up to less than the pack holds");
  for (const auto& [p, n] : files) {
    std::error_code ec;
    fs::create_directories((fs::path(dir) / p).parent_path(), ec);
    MLK_RETURN_IF_ERROR(write_file((fs::path(dir) / p).string(), pack.substr(0, n)));
    pack.remove_prefix(n);
  }
  return Status::Ok();
}

std::string measurements_json(const Measurements& m) {
  json results = json::array();
  for (const CandidateResult& r : m.results)
    results.push_back({{"id", r.id},
                       {"schedule_hash", r.schedule_hash},
                       {"library_sha256", r.library_sha256},
                       {"verdict", r.verdict},
                       {"detail", r.detail},
                       {"median_ms", r.median_ms},
                       {"times_ms", r.times_ms},
                       {"max_abs_error", r.max_abs_error},
                       {"max_rel_error", r.max_rel_error}});
  json j = {{"format", kMeasurementsFormat}, {"set_sha256", m.set_sha256}, {"fn", m.fn},
            {"profile", m.profile}, {"dims", m.dims}, {"device", m.device}, {"runner", m.runner},
            {"timing", m.timing}, {"results", results}};
  return dump_json(j);
}

Expected<Measurements> parse_measurements(const std::string& text, const std::string& where) {
  std::string why;
  json j = parse_json(text, &why);
  if (j.is_discarded()) return Status::InvalidArgument(where + ": not JSON: " + why);
  Fields f(j, where);
  if (f.get<std::string>("format") != kMeasurementsFormat)
    return Status::InvalidArgument(where + ": not measurements (`format` is not " + kMeasurementsFormat + ")");
  Measurements m;
  m.set_sha256 = f.get<std::string>("set_sha256");
  m.fn = f.get<std::string>("fn");
  m.profile = f.get<std::string>("profile");
  m.dims = f.get<DimEnv>("dims");
  m.device = f.get<std::string>("device");
  m.runner = f.get<std::string>("runner");
  m.timing = f.get<std::string>("timing");
  const json& results = f.at("results");
  MLK_RETURN_IF_ERROR(f.status());
  if (!results.is_array()) return Status::InvalidArgument(where + ": `results` must be an array");
  for (size_t i = 0; i < results.size(); ++i) {
    Fields r(results[i], where + ": results[" + std::to_string(i) + "]");
    CandidateResult c;
    c.id = r.get<std::string>("id");
    c.schedule_hash = r.get<std::string>("schedule_hash");
    c.library_sha256 = r.get<std::string>("library_sha256");
    c.verdict = r.get<std::string>("verdict");
    c.detail = r.get<std::string>("detail");
    c.median_ms = r.get<double>("median_ms");
    c.times_ms = r.get<std::vector<double>>("times_ms");
    c.max_abs_error = r.get<double>("max_abs_error");
    c.max_rel_error = r.get<double>("max_rel_error");
    MLK_RETURN_IF_ERROR(r.status());
    if (c.verdict != "ok" && c.verdict != "wrong" && c.verdict != "error")
      return Status::InvalidArgument(where + ": results[" + std::to_string(i) + "]: unknown verdict `" + c.verdict + "`");
    if (c.verdict == "ok" && !(c.median_ms > 0 && c.median_ms < 1e9))
      return Status::InvalidArgument(where + ": results[" + std::to_string(i) + "]: an ok result needs a positive median_ms");
    m.results.push_back(std::move(c));
  }
  return m;
}

}  // namespace mlk
