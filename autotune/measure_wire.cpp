#include "autotune/measure_wire.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include "base/json.h"

namespace mlk::tune {

using nlohmann::json;

namespace {

// Version 1: the program as written. Version 2: under a precision policy
// ("precision" in the header), which a worker of version 1 would not apply,
// so such a worker refuses it instead of measuring the wrong program.
constexpr std::string_view kMagic = "mlk-measure-setup 1\n";
constexpr std::string_view kMagic2 = "mlk-measure-setup 2\n";
constexpr size_t kMaxHeader = size_t{64} << 20;

json tensor_ref(const HostTensor& t, std::string& data) {
  json j = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"offset", data.size()}, {"bytes", t.bytes.size()}};
  data.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return j;
}

// `left`: the data's bytes not yet decoded. An encoded setup stores each
// tensor's bytes once, so the tensors together hold at most the data's
// size; tensors that share bytes could make a small setup decode into
// terabytes in the worker (review 7 of issue 49), and are refused.
Expected<HostTensor> tensor_of(const json& j, std::string_view data, uint64_t& left, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("measurement setup: " + where + ": " + why);
  };
  if (!j.is_object() || !j.contains("dtype") || !j["dtype"].is_string() || !j.contains("shape") ||
      !j["shape"].is_array() || !j.contains("offset") || !j["offset"].is_number_unsigned() || !j.contains("bytes") ||
      !j["bytes"].is_number_unsigned())
    return bad("a tensor needs dtype, shape, offset and bytes");
  auto dt = parse_dtype(j["dtype"].get<std::string>());
  if (!dt) return bad("unknown dtype `" + j["dtype"].get<std::string>() + "`");
  HostTensor t;
  t.dtype = *dt;
  uint64_t n = 1;
  for (const auto& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 40))
      return bad("a dimension is not a non-negative integer");
    t.shape.push_back(d.get<int64_t>());
    const uint64_t dim = static_cast<uint64_t>(d.get<int64_t>()), limit = uint64_t{1} << 40;
    if (dim != 0 && n > limit / dim) return bad("the shape is too large");  // checked before multiplying: no wrap
    n *= dim;
  }
  uint64_t off = j["offset"].get<uint64_t>(), size = j["bytes"].get<uint64_t>();
  if (size != n * t.elem_size())
    return bad(std::to_string(size) + " bytes do not hold shape " + t.shape_str() + " of " + dtype_name(t.dtype));
  if (off > data.size() || size > data.size() - off)
    return bad("bytes " + std::to_string(off) + "+" + std::to_string(size) + " lie past the end of the data (" +
               std::to_string(data.size()) + " bytes)");
  if (size > left)
    return bad("the tensors hold more bytes than the setup's data (" + std::to_string(data.size()) +
               "): tensors may not share bytes");
  left -= size;
  t.bytes.assign(reinterpret_cast<const uint8_t*>(data.data() + off), reinterpret_cast<const uint8_t*>(data.data() + off + size));
  return t;
}

Expected<std::vector<HostTensor>> tensors_of(const json& j, std::string_view data, uint64_t& left,
                                             const std::string& where) {
  if (!j.is_array()) return Status::InvalidArgument("measurement setup: " + where + " is not a list of tensors");
  std::vector<HostTensor> out;
  for (size_t i = 0; i < j.size(); ++i) {
    auto t = tensor_of(j[i], data, left, where + " #" + std::to_string(i));
    if (!t.ok()) return t.status();
    out.push_back(std::move(*t));
  }
  return out;
}

Status read_header(std::string_view bytes, json& header, std::string_view& data) {
  auto bad = [](const std::string& why) { return Status::InvalidArgument("measurement setup: " + why); };
  if (bytes.substr(0, kMagic.size()) != kMagic && bytes.substr(0, kMagic2.size()) != kMagic2)
    return bad("it does not start with `mlk-measure-setup 1` or `2` (not a setup, or of another mlk version)");
  size_t nl = bytes.find('\n', kMagic.size());
  if (nl == std::string_view::npos || nl - kMagic.size() > 12 || nl == kMagic.size())
    return bad("no header length after the first line");
  size_t len = 0;
  for (char c : bytes.substr(kMagic.size(), nl - kMagic.size())) {
    if (c < '0' || c > '9') return bad("the header length is not a number");
    len = len * 10 + static_cast<size_t>(c - '0');
  }
  if (len > kMaxHeader || len > bytes.size() - nl - 1)
    return bad("the header length " + std::to_string(len) + " is past the end of the setup (" +
               std::to_string(bytes.size()) + " bytes)");
  header = parse_json(bytes.substr(nl + 1, len));
  if (!header.is_object()) return bad("the header is not a JSON object");
  data = bytes.substr(nl + 1 + len);
  return Status::Ok();
}

}  // namespace

Expected<std::string> encode_setup(const MeasureSetup& s, const std::string& source, const std::string& source_name,
                                   const std::string& precision) {
  std::string data;
  json timing = json::array();
  for (const auto& set : s.timing) {
    json one = json::array();
    for (const auto& t : set) one.push_back(tensor_ref(t, data));
    timing.push_back(one);
  }
  json verify = json::array();
  for (const auto& c : s.verify) {
    json in = json::array();
    for (const auto& t : c.inputs) in.push_back(tensor_ref(t, data));
    json refs = json::array();
    for (size_t i = 0; i < c.references.size(); ++i)
      refs.push_back({{"tensor", tensor_ref(c.references[i], data)}, {"rtol", c.tols[i].rtol}, {"atol", c.tols[i].atol},
                      {"policy_outliers", c.tols[i].policy_outliers}});
    verify.push_back({{"name", c.name}, {"shape", c.shape}, {"set", c.set}, {"dims", c.dims}, {"inputs", in},
                      {"references", refs}});
  }
  json h = {{"source", source}, {"source_name", source_name}, {"precision", precision}, {"fn", s.fn}, {"target", s.target},
            {"dims", s.dims}, {"min_time_s", s.min_time_s}, {"min_reps", s.min_reps}, {"max_reps", s.max_reps},
            {"timing", timing}, {"verify", verify}};
  std::string head = h.dump();
  return std::string(precision == "f32" ? kMagic : kMagic2) + std::to_string(head.size()) + "\n" + head + data;
}

Expected<DecodedSetup> decode_setup(std::string_view bytes) {
  json h;
  std::string_view data;
  MLK_RETURN_IF_ERROR(read_header(bytes, h, data));
  auto bad = [](const std::string& why) { return Status::InvalidArgument("measurement setup: " + why); };
  DecodedSetup d;
  uint64_t left = data.size();
  try {
    d.source = h.at("source").get<std::string>();
    d.source_name = h.at("source_name").get<std::string>();
    if (h.contains("precision")) d.precision = h.at("precision").get<std::string>();
    d.setup.fn = h.at("fn").get<std::string>();
    d.setup.target = h.at("target").get<std::string>();
    d.setup.dims = h.at("dims").get<DimEnv>();
    d.setup.min_time_s = h.at("min_time_s").get<double>();
    d.setup.min_reps = h.at("min_reps").get<int>();
    d.setup.max_reps = h.at("max_reps").get<int>();
    if (!h.at("timing").is_array() || h["timing"].empty()) return bad("no timing input sets");
    for (size_t i = 0; i < h["timing"].size(); ++i) {
      auto set = tensors_of(h["timing"][i], data, left, "timing set " + std::to_string(i));
      if (!set.ok()) return set.status();
      d.setup.timing.push_back(std::move(*set));
    }
    if (!h.at("verify").is_array() || h["verify"].empty()) return bad("no verification cases");
    for (const auto& c : h["verify"]) {
      VerifyCase v;
      v.name = c.at("name").get<std::string>();
      v.shape = c.at("shape").get<std::string>();
      v.set = c.at("set").get<int>();
      v.dims = c.at("dims").get<DimEnv>();
      auto in = tensors_of(c.at("inputs"), data, left, "the inputs of `" + v.name + "`");
      if (!in.ok()) return in.status();
      v.inputs = std::move(*in);
      const json& refs = c.at("references");
      if (!refs.is_array() || refs.empty() || refs.size() > 64) return bad("`" + v.name + "` has no references");
      for (const auto& r : refs) {
        auto ref = tensor_of(r.at("tensor"), data, left, "a reference of `" + v.name + "`");
        if (!ref.ok()) return ref.status();
        v.references.push_back(std::move(*ref));
        v.tols.push_back(Tolerance{r.at("rtol").get<double>(), r.at("atol").get<double>(),
                                   r.value("policy_outliers", false)});
      }
      d.setup.verify.push_back(std::move(v));
    }
  } catch (const json::exception& e) {
    return bad(std::string("the header lacks a field or has one of the wrong type (") + e.what() + ")");
  }
  if (d.setup.fn.empty() || d.source.empty()) return bad("no fn or no source");
  return d;
}

std::string measurement_json(const Measurement& m) {
  return json{{"verdict", verdict_name(m.verdict)}, {"detail", m.detail},          {"compile_ms", m.compile_ms},
              {"median_ms", m.median_ms},           {"times_ms", m.times_ms},      {"max_abs_error", m.max_abs_error},
              {"max_rel_error", m.max_rel_error}}
      .dump();
}

Expected<Measurement> parse_measurement(const std::string& text) {
  json j = parse_json(text);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("measurement result: " + why + " in `" + text.substr(0, 120) + "`");
  };
  if (!j.is_object()) return bad("not a JSON object");
  Measurement m;
  try {
    std::string v = j.at("verdict").get<std::string>();
    bool known = false;
    for (auto k : {Measurement::Verdict::kOk, Measurement::Verdict::kWrong, Measurement::Verdict::kCrash,
                   Measurement::Verdict::kTimeout, Measurement::Verdict::kError})
      if (v == verdict_name(k)) {
        m.verdict = k;
        known = true;
      }
    if (!known) return bad("unknown verdict `" + v + "`");
    m.detail = j.value("detail", "");
    m.compile_ms = j.value("compile_ms", 0.0);
    m.median_ms = j.at("median_ms").get<double>();
    m.times_ms = j.value("times_ms", std::vector<double>{});
    m.max_abs_error = j.value("max_abs_error", 0.0);
    m.max_rel_error = j.value("max_rel_error", 0.0);
  } catch (const json::exception& e) {
    return bad(std::string("a field is missing or of the wrong type (") + e.what() + ")");
  }
  if (m.ok() && !(m.median_ms > 0)) return bad("verdict ok without a positive median_ms");
  return m;
}

}  // namespace mlk::tune
