// DLPack as the runtime consumes and exports it (runtime/dlpack.h): every
// consumed tensor's deleter runs exactly once, on success and on each refusal;
// versioned records of another major version, or of 1.2+ without strides, are
// refused; READ_ONLY is refused as an output; exports are compact with
// non-NULL strides, byte_offset 0, 64-byte alignment, and free their buffer
// once the last holder lets go. Also the envelopes of runtime/testing.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "lang/compare.h"
#include "runtime/dlpack.h"
#include "runtime/testing.h"
#include "tests/test_support.h"

namespace mlk::rt {
namespace {

using ::testing::HasSubstr;

// A producer's record with a deleter that counts its calls.
int g_legacy_deleted = 0;
int g_versioned_deleted = 0;
float g_data[6] = {1, 2, 3, 4, 5, 6};
int64_t g_shape[2] = {2, 3};

DLTensor host_tensor() {
  DLTensor t{};
  t.data = g_data;
  t.device = {kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = g_shape;
  return t;
}

DLManagedTensor legacy_record() {
  DLManagedTensor m{};
  m.dl_tensor = host_tensor();
  m.deleter = [](DLManagedTensor*) { ++g_legacy_deleted; };
  return m;
}

DLManagedTensorVersioned versioned_record(uint32_t major, uint32_t minor, uint64_t flags = 0) {
  DLManagedTensorVersioned m{};
  m.version = {major, minor};
  m.flags = flags;
  m.dl_tensor = host_tensor();
  m.deleter = [](DLManagedTensorVersioned*) { ++g_versioned_deleted; };
  return m;
}

class DLPackTest : public ::testing::Test {
 protected:
  void SetUp() override { g_legacy_deleted = g_versioned_deleted = 0; }
};

TEST_F(DLPackTest, LegacyDeleterRunsOnceWhenTheOwnerGoes) {
  DLManagedTensor rec = legacy_record();
  {
    auto c = ConsumedTensor::Adopt(&rec, "argument 0 `x` of `f`");
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->tensor(), &rec.dl_tensor);
    EXPECT_FALSE(c->versioned());
    EXPECT_FALSE(c->read_only());
    ConsumedTensor moved = std::move(*c);  // a move hands the duty over, it does not double it
    ConsumedTensor again = std::move(moved);
    EXPECT_EQ(g_legacy_deleted, 0);
  }
  EXPECT_EQ(g_legacy_deleted, 1);
}

TEST_F(DLPackTest, VersionedDeleterRunsOnce) {
  DLManagedTensorVersioned rec = versioned_record(1, 1);
  {
    auto c = ConsumedTensor::Adopt(&rec, "x");
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_TRUE(c->versioned());
    EXPECT_EQ(c->tensor(), &rec.dl_tensor);
    EXPECT_TRUE(c->CheckWritable("the output").ok());
  }
  EXPECT_EQ(g_versioned_deleted, 1);
}

TEST_F(DLPackTest, AnotherMajorVersionIsDeletedUnreadAndRefused) {
  DLManagedTensorVersioned rec = versioned_record(2, 0);
  rec.dl_tensor.ndim = -7;  // nothing past the version may be read
  auto c = ConsumedTensor::Adopt(&rec, "argument 1 `w` of `rmsnorm`");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "argument 1 `w` of `rmsnorm`: DLPack version 2.0, but mlk reads DLPack 1.x (major version 1)");
  EXPECT_EQ(g_versioned_deleted, 1);
}

TEST_F(DLPackTest, NullStridesAreRefusedFromVersion1_2) {
  DLManagedTensorVersioned rec = versioned_record(1, 2);
  auto c = ConsumedTensor::Adopt(&rec, "x");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "x: strides are NULL, which DLPack 1.2 does not allow (from 1.2 on, strides are required when ndim > 0)");
  EXPECT_EQ(g_versioned_deleted, 1);
  DLManagedTensorVersioned old = versioned_record(1, 1);  // up to 1.1 NULL means compact
  EXPECT_TRUE(ConsumedTensor::Adopt(&old, "x").ok());
  EXPECT_EQ(g_versioned_deleted, 2);
}

TEST_F(DLPackTest, ReadOnlyIsRefusedAsAnOutputOnly) {
  DLManagedTensorVersioned rec = versioned_record(1, 0, DLPACK_FLAG_BITMASK_READ_ONLY);
  auto c = ConsumedTensor::Adopt(&rec, "x");
  ASSERT_TRUE(c.ok());  // fine as an input
  EXPECT_TRUE(c->read_only());
  Status s = c->CheckWritable("the output of `rmsnorm`");
  EXPECT_EQ(s.message(), "the output of `rmsnorm`: read-only (its producer set the DLPack READ_ONLY flag); mlk "
                         "writes the result there, so pass a writable tensor");
}

TEST_F(DLPackTest, NullRecordsAndNullDeleters) {
  auto c = ConsumedTensor::Adopt(static_cast<DLManagedTensor*>(nullptr), "argument 0");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "argument 0: the DLPack capsule holds a NULL DLManagedTensor");
  DLManagedTensor rec = legacy_record();
  rec.deleter = nullptr;  // allowed: nothing to call
  EXPECT_TRUE(ConsumedTensor::Adopt(&rec, "x").ok());
}

TEST_F(DLPackTest, ExportsAreCompactAlignedAndFreeTheirBufferOnce) {
  const int64_t buffers = live_host_buffers(), exports = live_exports();
  auto b = HostBuffer::Allocate(DType::F32, {2, 3, 4});
  ASSERT_TRUE(b.ok());
  std::shared_ptr<HostBuffer> buf = std::move(*b);  // the only holder
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % 64, 0u);
  EXPECT_EQ(buf->nbytes(), 96u);
  static_cast<float*>(buf->data())[5] = 42.0f;
  DLManagedTensor* legacy = export_legacy(buf);
  DLManagedTensorVersioned* versioned = export_versioned(buf, /*read_only=*/true);
  EXPECT_EQ(live_exports(), exports + 2);
  buf.reset();  // the exports keep the buffer
  EXPECT_EQ(live_host_buffers(), buffers + 1);
  for (const DLTensor* t : {&legacy->dl_tensor, &versioned->dl_tensor}) {
    EXPECT_EQ(t->byte_offset, 0u);
    EXPECT_EQ(t->device.device_type, kDLCPU);
    ASSERT_EQ(t->ndim, 3);
    ASSERT_NE(t->strides, nullptr);
    EXPECT_EQ(std::vector<int64_t>(t->shape, t->shape + 3), (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(std::vector<int64_t>(t->strides, t->strides + 3), (std::vector<int64_t>{12, 4, 1}));
    EXPECT_EQ(t->dtype.code, kDLFloat);
    EXPECT_EQ(t->dtype.bits, 32);
    EXPECT_EQ(static_cast<const float*>(t->data)[5], 42.0f);  // the same bytes: no copy
  }
  EXPECT_EQ(versioned->version.major, 1u);
  EXPECT_EQ(versioned->version.minor, 0u);
  EXPECT_EQ(versioned->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  legacy->deleter(legacy);
  EXPECT_EQ(live_host_buffers(), buffers + 1);
  versioned->deleter(versioned);
  EXPECT_EQ(live_exports(), exports);
  EXPECT_EQ(live_host_buffers(), buffers);
}

TEST_F(DLPackTest, BoolExportsAsUInt8AndBadShapesAreRefused) {
  auto b = HostBuffer::Allocate(DType::Bool, {0});
  ASSERT_TRUE(b.ok());
  DLManagedTensor* m = export_legacy(*b);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLUInt);
  EXPECT_EQ(m->dl_tensor.dtype.bits, 8);
  m->deleter(m);
  auto bad = HostBuffer::Allocate(DType::F32, {4, -1});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "axis 1 extent -1 is outside [0, 2147483647]");
}

// --- envelopes (runtime/testing.h) ------------------------------------------------

TEST(TestingEnvelope, LongestReductionThroughCallsAndErf) {
  ir::Module m = testing_support::load_example("minilm/minilm.tl");
  const ir::Function* layer = m.find("layer");
  ASSERT_NE(layer, nullptr);
  auto e = envelope_of(m, *layer, {{"B", 2}, {"S", 16}, {"D", 384}, {"H", 12}, {"F", 1536}});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->reduction_length, 1536);  // the FFN's second linear, inside a call of `linear`
  EXPECT_TRUE(e->through_erf);           // gelu
  Tolerance t = tolerance_for(DType::F32, 1536);
  EXPECT_EQ(e->rtol, t.rtol);
  EXPECT_EQ(e->atol, t.atol);
  // S long enough to be the softmax axis and the attention's inner product
  e = envelope_of(m, *layer, {{"B", 1}, {"S", 4096}, {"D", 384}, {"H", 12}, {"F", 1536}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->reduction_length, 4096);
  const ir::Function* pool = m.find("pool");
  e = envelope_of(m, *pool, {{"B", 2}, {"S", 16}, {"D", 384}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->reduction_length, 384);  // the norm over D beats the sum over S
  EXPECT_FALSE(e->through_erf);
  auto missing = envelope_of(m, *pool, {{"B", 2}, {"S", 16}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "`pool`: dimension `D` is not given");
}

TEST(TestingEnvelope, F64ThroughErfIsWidened) {
  Envelope e = envelope_for(DType::F64, 1, true);
  EXPECT_EQ(e.atol, kF64ErfAtol);
  EXPECT_EQ(envelope_for(DType::F64, 1, false).atol, tolerance_for(DType::F64, 1).atol);
  EXPECT_EQ(envelope_for(DType::I32, 100, false).atol, 0.0);
}

TEST(TestingEnvelope, ParamShapesAreCheckedLikeACall) {
  ir::Module m = testing_support::load_example("attention.tl");
  const ir::Function* f = m.find("attention");
  ASSERT_NE(f, nullptr);
  auto s = param_shapes(*f, {{"B", 1}, {"S", 8}, {"D", 32}, {"H", 4}});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)[0], (std::vector<int64_t>{1, 8, 32}));
  auto bad = param_shapes(*f, {{"B", 1}, {"S", 8}, {"D", 30}, {"H", 4}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("`attention`: "));
  EXPECT_THAT(bad.status().message(), HasSubstr("D mod H = 0"));
  auto missing = param_shapes(*f, {{"B", 1}, {"S", 8}, {"D", 32}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "`attention`: dimension `H` is not given");
}

}  // namespace
}  // namespace mlk::rt
