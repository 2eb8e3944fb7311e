// The request `mlk verify --sign` sends its sandboxed runner
// (runtime/isolated_run.h): what is encoded decodes the same, and a request
// cut short, padded or mismatched is refused, never read past its end.
#include "runtime/isolated_run.h"

#include <gtest/gtest.h>

namespace mlk::rt {
namespace {

IsolatedRequest sample() {
  HostTensor a(DType::F32, {2, 3}), b(DType::I32, {4});
  for (int64_t i = 0; i < a.numel(); ++i) a.set(i, 0.5 * static_cast<double>(i));
  for (int64_t i = 0; i < b.numel(); ++i) b.set(i, static_cast<double>(i));
  return {.mode = IsolatedRequest::Mode::kOutputs, .files = {{"manifest.json", "{}"}, {"lib.so", std::string("\0\1\2\n", 4)}},
          .fn = "f", .dims = {{"N", 3}}, .inputs = {{a, b}, {a, b}}, .outputs = {HostTensor(DType::F16, {3}), HostTensor(DType::F16, {3})}};
}

TEST(IsolatedRun, RoundTrips) {
  const IsolatedRequest r = sample();
  auto got = decode_isolated(encode_isolated(r));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->files, r.files);
  EXPECT_EQ(got->fn, "f");
  EXPECT_EQ(got->dims, r.dims);
  ASSERT_EQ(got->inputs.size(), 2u);
  EXPECT_EQ(got->inputs[1][0].bytes, r.inputs[1][0].bytes);
  EXPECT_EQ(got->inputs[1][1].dtype, DType::I32);
  EXPECT_EQ(got->outputs[0].shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(got->outputs[0].dtype, DType::F16);
}

TEST(IsolatedRun, RefusesEveryCutAndPadding) {
  const std::string bytes = encode_isolated(sample());
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(decode_isolated(bytes.substr(0, n)).ok()) << "cut at " << n;
  auto padded = decode_isolated(bytes + "x");
  ASSERT_FALSE(padded.ok());
  EXPECT_NE(padded.status().message().find("bytes past its last tensor"), std::string::npos) << padded.status().message();
}

TEST(IsolatedRun, RefusesListsThatDoNotPairUp) {
  IsolatedRequest r = sample();
  r.mode = IsolatedRequest::Mode::kGuarded;  // a guarded request is one call
  auto got = decode_isolated(encode_isolated(r));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("do not pair up"), std::string::npos) << got.status().message();
}

TEST(IsolatedRun, AnArtifactThatCannotLoadAnswersOneFailureByte) {
  EXPECT_EQ(run_isolated(sample()), std::string(1, kIsolatedFailed));
}

}  // namespace
}  // namespace mlk::rt
