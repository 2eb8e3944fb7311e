// A tiny CLI over interop/safetensors for the Python peer test:
//   safetensors_tool dump FILE   one JSON line for __metadata__, then one per tensor
//                                (name, dtype, shape, nbytes, FNV-1a 64 of the bytes, aligned)
//   safetensors_tool write FILE  writes the fixed tensor set that the peer test expects
// Errors go to stderr; the exit code is Status::exit_code().
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "interop/safetensors.h"

namespace st = mlk::safetensors;

static_assert(std::endian::native == std::endian::little, "the fixed tensor set is built with memcpy");

namespace {

std::string Fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

template <typename T>
std::vector<uint8_t> Raw(std::initializer_list<T> values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

mlk::Status Dump(const std::string& path) {
  mlk::Expected<st::File> f = st::File::Open(path);
  if (!f.ok()) return f.status();
  std::printf("%s\n", nlohmann::json{{"metadata", f->metadata()}}.dump().c_str());
  for (const st::TensorView& t : f->tensors()) {
    nlohmann::json line = {{"name", t.name},       {"dtype", st::dtype_name(t.dtype)},
                           {"shape", t.shape},     {"nbytes", t.nbytes},
                           {"fnv1a64", Fnv1a64(t.data, t.nbytes)}, {"aligned", t.aligned}};
    std::printf("%s\n", line.dump().c_str());
  }
  return mlk::Status::Ok();
}

// Keep in sync with expected_set() in safetensors_peer_test.py.
mlk::Status WriteFixed(const std::string& path) {
  const std::vector<std::pair<std::vector<uint8_t>, st::TensorToWrite>> set = [] {
    std::vector<std::pair<std::vector<uint8_t>, st::TensorToWrite>> s;
    auto add = [&](std::string name, st::DType d, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
      s.push_back({std::move(bytes), {std::move(name), d, std::move(shape), {}}});
    };
    add("a.f32", st::DType::F32, {2, 3}, Raw<float>({0, 1, 2, 3, 4, 5}));
    add("b.f16", st::DType::F16, {4}, Raw<uint16_t>({0x3C00, 0x4000, 0xB800, 0x7C00}));
    add("c.bf16", st::DType::BF16, {2}, Raw<uint16_t>({0x3F80, 0xC000}));
    add("d.i64", st::DType::I64, {3}, Raw<int64_t>({-1, 0, int64_t{1} << 40}));
    add("e.u8", st::DType::U8, {2, 2}, Raw<uint8_t>({1, 2, 3, 4}));
    add("f.bool", st::DType::BOOL, {3}, Raw<uint8_t>({1, 0, 1}));
    add("g.scalar", st::DType::F64, {}, Raw<double>({3.5}));
    add("h.empty", st::DType::I32, {0, 4}, {});
    add("i.f8", st::DType::F8_E4M3, {2}, Raw<uint8_t>({0x38, 0xB8}));
    add("j.nan", st::DType::F32, {2}, Raw<float>({NAN, -INFINITY}));
    add("k.u16", st::DType::U16, {2}, Raw<uint16_t>({1, 65535}));
    add("l.i8", st::DType::I8, {1}, Raw<int8_t>({-7}));
    return s;
  }();
  std::vector<st::TensorToWrite> tensors;
  for (const auto& [bytes, t] : set) {
    tensors.push_back(t);
    tensors.back().data = bytes;
  }
  return st::Write(path, tensors, {{"format", "np"}, {"producer", "mlk safetensors_tool"}});
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc == 3 ? argv[1] : "";
  mlk::Status s = cmd == "dump"    ? Dump(argv[2])
                  : cmd == "write" ? WriteFixed(argv[2])
                                   : mlk::Status::Usage("usage: safetensors_tool dump|write FILE");
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.message().c_str());
  return s.exit_code();
}
