#include "runtime/isolated_run.h"

#include <nlohmann/json.hpp>

#include "artifact/loaded.h"
#include "runtime/guarded_call.h"

namespace mlk::rt {

using json = nlohmann::json;

namespace {

json tensor_head(const HostTensor& t, bool with_bytes) {
  json j{{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}};
  if (with_bytes) j["bytes"] = t.bytes.size();
  return j;
}

// A tensor described by `j`; its bytes (when `data`) taken from `rest`.
Expected<HostTensor> read_tensor(const json& j, std::string_view* rest, bool data) {
  if (!j.is_object() || !j.contains("dtype") || !j["dtype"].is_string() || !j.contains("shape") || !j["shape"].is_array())
    return Status::InvalidArgument("a tensor of the request has no dtype or shape");
  auto dt = parse_dtype(j["dtype"].get<std::string>());
  if (!dt) return Status::InvalidArgument("a tensor of the request has an unknown dtype");
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (const json& e : j["shape"]) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > (int64_t{1} << 40))
      return Status::InvalidArgument("a tensor of the request has a bad extent");
    shape.push_back(e.get<int64_t>());
    n *= shape.back();
    if (n > (int64_t{1} << 40)) return Status::InvalidArgument("a tensor of the request is too large");
  }
  HostTensor t;
  t.dtype = *dt;
  t.shape = shape;
  const size_t size = static_cast<size_t>(n) * t.elem_size();
  if (!data) {
    t.bytes.assign(size, 0);
    return t;
  }
  if (j.value("bytes", json()) != json(size) || rest->size() < size)
    return Status::InvalidArgument("a tensor of the request is cut short");
  t.bytes.assign(rest->begin(), rest->begin() + static_cast<ptrdiff_t>(size));
  rest->remove_prefix(size);
  return t;
}

}  // namespace

std::string encode_isolated(const IsolatedRequest& r) {
  json head{{"mode", r.mode == IsolatedRequest::Mode::kGuarded ? "guarded" : "outputs"},
            {"fn", r.fn}, {"dims", r.dims}, {"names", r.names},
            {"files", json::array()}, {"inputs", json::array()}, {"outputs", json::array()}};
  for (const auto& [name, bytes] : r.files) head["files"].push_back({{"name", name}, {"bytes", bytes.size()}});
  for (const auto& list : r.inputs) {
    json l = json::array();
    for (const HostTensor& t : list) l.push_back(tensor_head(t, true));
    head["inputs"].push_back(l);
  }
  for (const HostTensor& t : r.outputs) head["outputs"].push_back(tensor_head(t, false));
  std::string out = head.dump() + "\n";
  for (const auto& [name, bytes] : r.files) out += bytes;
  for (const auto& list : r.inputs)
    for (const HostTensor& t : list) out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return out;
}

Expected<IsolatedRequest> decode_isolated(std::string_view bytes) {
  const size_t nl = bytes.find('\n');
  if (nl == std::string_view::npos) return Status::InvalidArgument("the request has no header line");
  json head = json::parse(bytes.substr(0, nl), nullptr, false);
  std::string_view rest = bytes.substr(nl + 1);
  if (!head.is_object() || !head.contains("files") || !head["files"].is_array() || !head.contains("inputs") ||
      !head["inputs"].is_array() || !head.contains("outputs") || !head["outputs"].is_array())
    return Status::InvalidArgument("the request's header is not the runner's");
  IsolatedRequest r;
  try {
    r.mode = head.at("mode").get<std::string>() == "guarded" ? IsolatedRequest::Mode::kGuarded
                                                            : IsolatedRequest::Mode::kOutputs;
    r.fn = head.at("fn").get<std::string>();
    r.dims = head.at("dims").get<DimEnv>();
    r.names = head.at("names").get<std::vector<std::string>>();
    for (const json& f : head["files"]) {
      const size_t n = f.at("bytes").get<size_t>();
      if (rest.size() < n) return Status::InvalidArgument("a file of the request is cut short");
      r.files[f.at("name").get<std::string>()] = std::string(rest.substr(0, n));
      rest.remove_prefix(n);
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("the request's header is malformed: ") + e.what());
  }
  for (const json& l : head["inputs"]) {
    if (!l.is_array()) return Status::InvalidArgument("an input list of the request is not a list");
    std::vector<HostTensor> list;
    for (const json& t : l) {
      auto got = read_tensor(t, &rest, true);
      if (!got.ok()) return got.status();
      list.push_back(std::move(*got));
    }
    r.inputs.push_back(std::move(list));
  }
  for (const json& t : head["outputs"]) {
    auto got = read_tensor(t, &rest, false);
    if (!got.ok()) return got.status();
    r.outputs.push_back(std::move(*got));
  }
  if (!rest.empty()) return Status::InvalidArgument("the request has bytes past its last tensor");
  if (r.outputs.size() != r.inputs.size() || (r.mode == IsolatedRequest::Mode::kGuarded && r.inputs.size() != 1))
    return Status::InvalidArgument("the request's input lists and results do not pair up");
  return r;
}

std::string run_isolated(const IsolatedRequest& r) {
  const std::string failed(1, kIsolatedFailed);
  if (r.mode == IsolatedRequest::Mode::kGuarded)
    return guarded_call({r.files, r.fn, r.dims, r.inputs[0], r.outputs[0], r.names}).empty()
               ? std::string(1, kIsolatedOk)
               : failed;
  auto art = LoadedArtifact::LoadFiles(r.files);
  if (!art.ok()) return failed;
  std::string answer(1, kIsolatedOk);
  for (size_t s = 0; s < r.inputs.size(); ++s) {
    std::vector<mlk_tensor_t> args;
    for (const HostTensor& t : r.inputs[s])
      args.push_back({const_cast<uint8_t*>(t.bytes.data()), abi_dtype(t.dtype), static_cast<int32_t>(t.shape.size()),
                      t.shape.data(), nullptr});
    HostTensor out = r.outputs[s];
    mlk_tensor_t o{out.bytes.data(), abi_dtype(out.dtype), static_cast<int32_t>(out.shape.size()), out.shape.data(),
                   nullptr};
    if (!(*art)->Call(args, o, r.dims, r.fn).ok()) return failed;
    for (int64_t i = 0; i < out.numel(); ++i) {
      const double v = out.get(i);
      answer.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  return answer;
}

}  // namespace mlk::rt
