// Example: all-MiniLM-L6-v2 served from C++ through the runtime's C++ API
// (runtime/model.h): the program minilm.tl, whose entry fn `encode` says
// what runs and whose records say where each weight is (the binding is
// derived from them), and the safetensors weights, loaded once; then each batch of token ids read
// from stdin is embedded with one call.
//
//   minilm_serve PROGRAM.tl WEIGHTS.safetensors [CACHE] [TARGETS]
//   minilm_serve examples/minilm/minilm.tl model.safetensors "" host < ids.txt
//
// Input: one sentence per line, its token ids (BERT WordPiece ids, [CLS]
// first and [SEP] last) separated by spaces; an empty line ends a batch, as
// does the end of input. The lines of a batch are padded to the longest with
// id 0 and masked. Output: per sentence one line, the 384 numbers of its
// embedding (unit length). Exit status 0, or 1 with the error on stderr.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/model.h"
#include "runtime/runtime.h"

namespace {

DLTensor tensor(void* data, DLDataType dtype, std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = shape.data();
  return t;  // strides NULL: compact row-major
}

int fail(const std::string& what, const mlk::Status& s) {
  std::fprintf(stderr, "minilm_serve: %s: %s\n", what.c_str(), s.message().c_str());
  return 1;
}

// Embeds one batch of sentences (token ids) and prints one line per sentence.
int embed(const mlk::rt::Model& model, const std::vector<std::vector<int64_t>>& batch) {
  int64_t b = static_cast<int64_t>(batch.size()), s = 0;
  for (const auto& row : batch) s = std::max<int64_t>(s, static_cast<int64_t>(row.size()));
  std::vector<int64_t> ids(b * s, 0), mask(b * s, 0), shape{b, s};
  for (int64_t r = 0; r < b; ++r)
    for (size_t j = 0; j < batch[r].size(); ++j) {
      ids[r * s + j] = batch[r][j];
      mask[r * s + j] = 1;
    }
  DLTensor t_ids = tensor(ids.data(), {kDLInt, 64, 1}, shape), t_mask = tensor(mask.data(), {kDLInt, 64, 1}, shape);
  auto call = model.Prepare({&t_ids, &t_mask});
  if (!call.ok()) return fail("batch", call.status());
  std::vector<int64_t> out_shape = mlk::rt::Model::OutputShape(**call);
  std::vector<float> out(out_shape[0] * out_shape[1]);
  DLTensor t_out = tensor(out.data(), {kDLFloat, 32, 1}, out_shape);
  if (mlk::Status st = model.Run(**call, &t_out); !st.ok()) return fail("batch", st);
  for (int64_t r = 0; r < out_shape[0]; ++r) {
    for (int64_t d = 0; d < out_shape[1]; ++d) std::printf(d ? " %.8g" : "%.8g", out[r * out_shape[1] + d]);
    std::printf("\n");
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: minilm_serve PROGRAM.tl WEIGHTS.safetensors [CACHE] [TARGETS]\n");
    return 2;
  }
  auto rt = mlk::rt::Runtime::Open({argc > 3 ? argv[3] : "", "default", ""});
  if (!rt.ok()) return fail("the artifact cache", rt.status());
  auto policy = mlk::rt::TargetPolicy::Parse(argc > 4 ? argv[4] : "host");
  if (!policy.ok()) return fail("the targets", policy.status());
  auto model = mlk::rt::Model::Load(std::shared_ptr<mlk::rt::Runtime>(std::move(rt).value()), 
                                    {argv[1], "", argv[2], "encode", {}}, *policy);
  if (!model.ok()) return fail("the model", model.status());

  std::vector<std::vector<int64_t>> batch;
  std::string line;
  int line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    std::istringstream in(line);
    std::vector<int64_t> row;
    std::string word;
    while (in >> word) {
      char* end = nullptr;
      long long v = std::strtoll(word.c_str(), &end, 10);
      if (word.empty() || *end != '\0') {
        std::fprintf(stderr, "minilm_serve: line %d: `%s` is not a token id\n", line_no, word.c_str());
        return 1;
      }
      row.push_back(v);
    }
    if (!row.empty()) {
      batch.push_back(std::move(row));
      continue;
    }
    if (!batch.empty() && embed(**model, batch) != 0) return 1;
    batch.clear();
  }
  if (!batch.empty() && embed(**model, batch) != 0) return 1;
  return 0;
}
