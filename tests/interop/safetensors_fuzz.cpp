// libFuzzer target for the safetensors reader: arbitrary bytes must never crash
// it, and any file it accepts must survive Serialize -> FromBytes unchanged.
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address -I. interop/safetensors.cpp \
//       tests/interop/safetensors_fuzz.cpp -o /tmp/st_fuzz && /tmp/st_fuzz -max_total_time=60
#include <cstring>

#include "interop/safetensors.h"

using mlk::Expected;
using namespace mlk::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Expected<File> f = File::FromBytes(std::vector<uint8_t>(data, data + size));
  if (!f.ok()) {
    MLK_CHECK(!f.status().message().empty(), "rejection without a message");
    return 0;
  }
  std::vector<TensorToWrite> out;
  volatile uint8_t sink = 0;
  for (const TensorView& t : f->tensors()) {
    for (size_t i = 0; i < t.nbytes; ++i) sink = sink ^ t.data[i];  // lets ASan check the bounds
    out.push_back({t.name, t.dtype, t.shape, {t.data, t.nbytes}});
  }
  Expected<std::vector<uint8_t>> bytes = Serialize(out, f->metadata());
  MLK_CHECK(bytes.ok(), "an accepted file failed to serialize");
  Expected<File> g = File::FromBytes(std::move(*bytes));
  MLK_CHECK(g.ok(), "a serialized file was rejected");
  MLK_CHECK(g->metadata() == f->metadata(), "metadata changed in a round trip");
  MLK_CHECK(g->tensors().size() == f->tensors().size(), "tensor count changed in a round trip");
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const TensorView &a = f->tensors()[i], &b = g->tensors()[i];
    MLK_CHECK(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes,
              "tensor changed in a round trip");
    MLK_CHECK(a.nbytes == 0 || std::memcmp(a.data, b.data, a.nbytes) == 0, "data changed in a round trip");
    MLK_CHECK(b.aligned, "Serialize produced misaligned data");
  }
  return 0;
}
