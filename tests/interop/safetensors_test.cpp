// Tests for interop/safetensors: round trips, accepted edge cases, and one test
// per rejection (R1..R10 of interop-facts.md B2 plus our stricter rules), each
// asserting the message text. Malformed files are built as byte vectors here.
#include "interop/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace mlk::safetensors {
namespace {

using ::testing::HasSubstr;
using Bytes = std::vector<uint8_t>;

// u64 LE length of `header` (or `n` when given), the header, then `data`.
Bytes Make(const std::string& header, const Bytes& data = {}, std::optional<uint64_t> n = std::nullopt) {
  const uint64_t len = n.value_or(header.size());
  Bytes b;
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(len >> (8 * i)));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// The error message of parsing `b`; fails the test if it parses.
std::string Err(const Bytes& b) {
  Expected<File> f = File::FromBytes(b);
  EXPECT_FALSE(f.ok()) << "expected a rejection";
  if (f.ok()) return "";
  EXPECT_EQ(f.status().code(), Status::Code::kCorruption);
  return f.status().message();
}

// An F32 [2, 2] entry called "w" with the given data_offsets text.
std::string W(const std::string& offsets) {
  return R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":)" + offsets + "}}";
}

template <typename T>
std::span<const uint8_t> AsBytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

class TempDir {
 public:
  TempDir() {
    std::string t = ::testing::TempDir() + "st_test_XXXXXX";
    path_ = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  size_t count() const {
    return std::distance(std::filesystem::directory_iterator(path_), std::filesystem::directory_iterator());
  }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------
// Round trips and accepted files

TEST(Safetensors, RoundTripThroughFile) {
  const std::vector<float> f32 = {1.5f, -2.0f, NAN, INFINITY, 0.0f, 3.0f};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC000};
  const std::vector<int64_t> i64 = {-1, 0, int64_t{1} << 40};
  const std::vector<uint8_t> b = {1, 0, 1};
  const std::vector<double> scalar = {3.25};
  const std::vector<TensorToWrite> in = {
      {"z.f32", DType::F32, {2, 3}, AsBytes(f32)}, {"a.bf16", DType::BF16, {2}, AsBytes(bf16)},
      {"i", DType::I64, {3}, AsBytes(i64)},        {"mask", DType::BOOL, {3}, AsBytes(b)},
      {"s", DType::F64, {}, AsBytes(scalar)},      {"empty", DType::I32, {0, 4}, {}},
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "h\u00e9llo \"q\""}};
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  ASSERT_TRUE(Write(path, in, meta).ok());
  EXPECT_EQ(dir.count(), 1u) << "the temporary file must be gone";

  Expected<File> f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->metadata(), meta);
  ASSERT_EQ(f->tensors().size(), in.size());
  for (const TensorToWrite& t : in) {
    const TensorView* v = f->find(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_EQ(v->dtype, t.dtype);
    EXPECT_EQ(v->shape, t.shape);
    ASSERT_EQ(v->nbytes, t.data.size());
    if (v->nbytes > 0) {
      EXPECT_EQ(std::memcmp(v->data, t.data.data(), v->nbytes), 0) << t.name;
    }
    EXPECT_TRUE(v->aligned) << t.name;
  }
  EXPECT_EQ(f->find("nope"), nullptr);
  EXPECT_EQ(f->tensors().front().name, "a.bf16");  // sorted by name

  // The file holds exactly what Serialize produces, and its header is padded.
  Expected<Bytes> bytes = Serialize(in, meta);
  ASSERT_TRUE(bytes.ok());
  std::ifstream is(path, std::ios::binary);
  const Bytes on_disk((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, *bytes);
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, WriterOrdersByDescendingAlignmentThenName) {
  const std::vector<uint8_t> u8 = {1};
  const std::vector<double> f64 = {1.0};
  const std::vector<uint16_t> f16 = {1, 2};
  Expected<Bytes> bytes = Serialize({{"b", DType::U8, {1}, AsBytes(u8)},
                                     {"c", DType::F16, {2}, AsBytes(f16)},
                                     {"a", DType::U8, {1}, AsBytes(u8)},
                                     {"d", DType::F64, {1}, AsBytes(f64)}});
  ASSERT_TRUE(bytes.ok());
  Expected<File> f = File::FromBytes(*bytes);
  ASSERT_TRUE(f.ok());
  const uint8_t* base = f->find("d")->data;
  EXPECT_EQ(f->find("c")->data - base, 8);
  EXPECT_EQ(f->find("a")->data - base, 12);
  EXPECT_EQ(f->find("b")->data - base, 13);
}

TEST(Safetensors, MovedFileKeepsViewsValid) {
  const std::vector<float> v = {7.0f};
  Expected<Bytes> bytes = Serialize({{"x", DType::F32, {1}, AsBytes(v)}});
  ASSERT_TRUE(bytes.ok());
  Expected<File> f = File::FromBytes(*bytes);
  ASSERT_TRUE(f.ok());
  File moved = std::move(*f);
  float got;
  std::memcpy(&got, moved.find("x")->data, 4);
  EXPECT_EQ(got, 7.0f);
}

TEST(Safetensors, AcceptsEmptyHeader) {
  for (const std::string h : {"{}", "{}      ", "{ }"}) {
    Expected<File> f = File::FromBytes(Make(h));
    ASSERT_TRUE(f.ok()) << h << ": " << f.status().message();
    EXPECT_TRUE(f->tensors().empty());
    EXPECT_TRUE(f->metadata().empty());
  }
}

TEST(Safetensors, AcceptsZeroSizeRankZeroAndSubByteWholeBytes) {
  const std::string h = R"({"__metadata__":{},"e":{"dtype":"F32","shape":[3,0],"data_offsets":[0,0]},)"
                        R"("e2":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                        R"("s":{"dtype":"I16","shape":[],"data_offsets":[0,2]},)"
                        R"("f4":{"dtype":"F4","shape":[2],"data_offsets":[2,3]},)"
                        R"("f6":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[3,6]}})";
  Expected<File> f = File::FromBytes(Make(h, {0x34, 0x12, 0xAB, 1, 2, 3}));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->find("e")->nbytes, 0u);
  EXPECT_EQ(f->find("e")->shape, (std::vector<int64_t>{3, 0}));
  EXPECT_TRUE(f->find("s")->shape.empty());
  EXPECT_EQ(f->find("s")->nbytes, 2u);
  EXPECT_EQ(f->find("f4")->data[0], 0xAB);
  EXPECT_EQ(f->find("f6")->nbytes, 3u);
}

TEST(Safetensors, ReportsMisalignedData) {
  // A 9-byte header puts the buffer at offset 17 of an aligned allocation.
  const std::string h = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const std::string padded = h + std::string(9 - h.size() % 8, ' ');  // N % 8 == 1
  Expected<File> f = File::FromBytes(Make(padded, {0, 0, 0x80, 0x3F}));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_FALSE(f->find("x")->aligned);
}

// ---------------------------------------------------------------------------
// Reference rejections R1..R10

TEST(Safetensors, R1FileShorterThan8Bytes) {
  EXPECT_THAT(Err({1, 0, 0}), HasSubstr("file is 3 bytes, shorter than the 8-byte header length"));
  EXPECT_THAT(Err({}), HasSubstr("file is 0 bytes"));
}

TEST(Safetensors, R2HeaderTooLarge) {
  EXPECT_THAT(Err(Make("{}", {}, 100'000'001)), HasSubstr("header length 100000001 exceeds the limit of 100000000"));
  EXPECT_THAT(Err(Make("{}", {}, UINT64_MAX)), HasSubstr("exceeds the limit"));
}

TEST(Safetensors, R3HeaderPastEndOfFile) {
  EXPECT_THAT(Err(Make("{}", {}, 3)), HasSubstr("header length 3 runs past the end of the 10-byte file"));
}

TEST(Safetensors, R4HeaderNotUtf8) {
  EXPECT_THAT(Err(Make("{\"\xff\":1}")), HasSubstr("header is not valid UTF-8 (invalid byte at header offset 2)"));
  EXPECT_THAT(Err(Make("{\"\xC0\x80\":1}")), HasSubstr("not valid UTF-8"));      // overlong NUL
  EXPECT_THAT(Err(Make("{\"\xED\xA0\x80\":1}")), HasSubstr("not valid UTF-8"));  // surrogate
  EXPECT_THAT(Err(Make("{\"\xE2\x82\"}")), HasSubstr("not valid UTF-8"));        // cut short
}

TEST(Safetensors, R5BadJson) {
  EXPECT_THAT(Err(Make("{\"w\":")), HasSubstr("header is not valid JSON: parse error"));
  EXPECT_THAT(Err(Make("{} x")), HasSubstr("header is not valid JSON"));  // junk after the object
  // nlohmann stops at a NUL byte; the reader must not ignore what follows it.
  EXPECT_THAT(Err(Make(std::string("{}\0\0", 4))), HasSubstr("header is not valid JSON: NUL byte at header offset 2"));
  EXPECT_THAT(Err(Make(std::string("{\"a\0\":1}", 8))), HasSubstr("NUL byte at header offset 3"));
}

TEST(Safetensors, R5FieldTypes) {
  EXPECT_THAT(Err(Make(W("[-1,16]"))), HasSubstr("tensor \"w\": data_offsets must be non-negative integers below 2^64, got -1"));
  EXPECT_THAT(Err(Make(W("[0,16.0]"))), HasSubstr("data_offsets must be non-negative integers below 2^64, got 16.0"));
  EXPECT_THAT(Err(Make(W("[0]"))), HasSubstr("data_offsets must hold exactly 2 integers [BEGIN, END], got 1"));
  EXPECT_THAT(Err(Make(W("[0,8,16]"))), HasSubstr("data_offsets must hold exactly 2 integers"));
  EXPECT_THAT(Err(Make(W("\"0,16\""))), HasSubstr("data_offsets must be an array [BEGIN, END], got \"0,16\""));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"F128","shape":[],"data_offsets":[0,0]}})")),
              HasSubstr("tensor \"w\": unknown dtype \"F128\""));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"f32","shape":[],"data_offsets":[0,0]}})")), HasSubstr("unknown dtype \"f32\""));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":4,"shape":[],"data_offsets":[0,0]}})")),
              HasSubstr("tensor \"w\": dtype must be a string, got 4"));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[2.5],"data_offsets":[0,0]}})")),
              HasSubstr("tensor \"w\": shape dimension 0 is 2.5; dimensions must be non-negative integers"));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[1e30],"data_offsets":[0,0]}})")), HasSubstr("shape dimension 0 is 1e30"));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[[1]],"data_offsets":[0,0]}})")),
              HasSubstr("shape dimension 0 is an array"));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":3,"data_offsets":[0,0]}})")),
              HasSubstr("tensor \"w\": shape must be an array of non-negative integers, got 3"));
  EXPECT_THAT(Err(Make(R"({"w":[1,2]})")), HasSubstr("tensor \"w\": entry must be an object with dtype, shape and data_offsets, got an array"));
}

TEST(Safetensors, R5NegativeShape) {
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}})")),
              HasSubstr("tensor \"w\": shape dimension 1 is -1; dimensions must be non-negative integers"));
}

TEST(Safetensors, R5NonStringMetadata) {
  EXPECT_THAT(Err(Make(R"({"__metadata__":{"k":1}})")), HasSubstr("__metadata__ value for key \"k\" must be a string, got 1"));
  EXPECT_THAT(Err(Make(R"({"__metadata__":{"k":{"a":"b"}}})")), HasSubstr("must be a string, got an object"));
  EXPECT_THAT(Err(Make(R"({"__metadata__":{"k":null}})")), HasSubstr("must be a string, got null"));
  EXPECT_THAT(Err(Make(R"({"__metadata__":null})")), HasSubstr("__metadata__ must be an object mapping strings to strings, got null"));
  EXPECT_THAT(Err(Make(R"({"__metadata__":["a"]})")), HasSubstr("got an array"));
}

TEST(Safetensors, R6FirstTensorMustStartAtZero) {
  EXPECT_THAT(Err(Make(W("[4,20]"), Bytes(20))),
              HasSubstr("tensor \"w\": data_offsets [4, 20) leave a gap: the first tensor must begin at 0"));
}

TEST(Safetensors, R6GapAndOverlap) {
  const std::string two = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":)";
  EXPECT_THAT(Err(Make(two + "[5,9]}}", Bytes(9))),
              HasSubstr("tensor \"b\": data_offsets [5, 9) leave a gap after tensor \"a\", which ends at 4"));
  EXPECT_THAT(Err(Make(two + "[2,6]}}", Bytes(6))),
              HasSubstr("tensor \"b\": data_offsets [2, 6) overlap tensor \"a\", which ends at 4"));
  EXPECT_THAT(Err(Make(two + "[0,4]}}", Bytes(4))), HasSubstr("overlap tensor"));  // aliasing
}

TEST(Safetensors, R6EndBeforeBegin) {
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", Bytes(4))),
              HasSubstr("tensor \"w\": data_offsets [4, 0) end before they begin"));
}

TEST(Safetensors, R7SizeOverflow) {
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})")),
              HasSubstr("tensor \"w\": F32 [4294967296, 4294967296] overflows: its size in bits does not fit in 64 bits"));
  // Elements fit, bits do not.
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"F64","shape":[1152921504606846976],"data_offsets":[0,0]}})")),
              HasSubstr("overflows"));
  // Checked left to right like the reference, so a later 0 does not rescue it.
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})")),
              HasSubstr("overflows"));
  // No overflow, but a dimension that int64 cannot hold.
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[0,9223372036854775808],"data_offsets":[0,0]}})")),
              HasSubstr("tensor \"w\": shape dimension 1 is 9223372036854775808, above 2^63-1"));
}

TEST(Safetensors, R8NotWholeBytes) {
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", Bytes(2))),
              HasSubstr("tensor \"w\": F4 [3] holds 12 bits, not a whole number of bytes"));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"F6_E3M2","shape":[1],"data_offsets":[0,1]}})", Bytes(1))),
              HasSubstr("F6_E3M2 [1] holds 6 bits"));
}

TEST(Safetensors, R9SizeMismatch) {
  EXPECT_THAT(Err(Make(W("[0,12]"), Bytes(12))), HasSubstr("safetensors: tensor \"w\": data_offsets [0, 12) hold 12 bytes but F32 [2, 2] needs 16"));
}

TEST(Safetensors, R10TrailingBytes) {
  EXPECT_THAT(Err(Make(W("[0,16]"), Bytes(17))), HasSubstr("file has 1 trailing bytes after the last tensor's data"));
  EXPECT_THAT(Err(Make("{}", Bytes(3))), HasSubstr("file has 3 trailing bytes"));
}

TEST(Safetensors, R10Truncated) {
  EXPECT_THAT(Err(Make(W("[0,16]"), Bytes(15))),
              HasSubstr("file is truncated: tensor data ends at byte 16 of the data buffer, which holds only 15 bytes"));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[2305843009213693951],"data_offsets":[0,2305843009213693951]}})")),
              HasSubstr("file is truncated"));
}

// ---------------------------------------------------------------------------
// Rules the reference does not enforce

TEST(Safetensors, RejectsDuplicateKeys) {
  const std::string e = R"({"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  EXPECT_THAT(Err(Make("{\"w\":" + e + ",\"w\":" + e + "}")), HasSubstr("header has duplicate key \"w\""));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","dtype":"U8","shape":[0],"data_offsets":[0,0]}})")),
              HasSubstr("tensor \"w\": duplicate field \"dtype\""));
  EXPECT_THAT(Err(Make(R"({"__metadata__":{"k":"a","k":"b"}})")), HasSubstr("__metadata__ has duplicate key \"k\""));
  EXPECT_THAT(Err(Make(R"({"__metadata__":{},"__metadata__":{}})")), HasSubstr("header has duplicate key \"__metadata__\""));
  // Escapes that spell the same key are still duplicates.
  EXPECT_THAT(Err(Make("{\"w\":" + e + ",\"\\u0077\":" + e + "}")), HasSubstr("duplicate key \"w\""));
}

TEST(Safetensors, RejectsUnknownAndMissingFields) {
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"extra":1}})")),
              HasSubstr("tensor \"w\": unknown field \"extra\"; an entry has exactly dtype, shape and data_offsets"));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","data_offsets":[0,0]}})")), HasSubstr("tensor \"w\": missing field \"shape\""));
  EXPECT_THAT(Err(Make(R"({"w":{"shape":[0],"data_offsets":[0,0]}})")), HasSubstr("missing field \"dtype\""));
  EXPECT_THAT(Err(Make(R"({"w":{"dtype":"U8","shape":[0]}})")), HasSubstr("missing field \"data_offsets\""));
}

TEST(Safetensors, RejectsHeaderNotBeginningWithBrace) {
  EXPECT_THAT(Err(Make(" {}")), HasSubstr("header must begin with \"{\" (leading whitespace is not allowed)"));
  EXPECT_THAT(Err(Make("\n{}")), HasSubstr("must begin with"));
  EXPECT_THAT(Err(Make("")), HasSubstr("must begin with"));
  EXPECT_THAT(Err(Make("[]")), HasSubstr("must begin with"));
}

TEST(Safetensors, DeepNestingFailsFast) {
  const std::string deep = "{\"__metadata__\":{\"k\":" + std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_THAT(Err(Make(deep)), HasSubstr("__metadata__ value for key \"k\" must be a string, got an array"));
}

// ---------------------------------------------------------------------------
// Paths and the writer

TEST(Safetensors, OpenErrorsNameThePath) {
  TempDir dir;
  const std::string missing = dir / "missing.safetensors";
  Expected<File> f = File::Open(missing);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr("safetensors: " + missing + ": cannot open"));

  const std::string bad = dir / "bad.safetensors";
  const Bytes b = Make(W("[0,16]"), Bytes(8));
  std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  f = File::Open(bad);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("safetensors: " + bad + ": file is truncated"));

  const std::string tiny = dir / "tiny.safetensors";
  std::ofstream(tiny, std::ios::binary).write("abc", 3);
  f = File::Open(tiny);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr(tiny + ": file is 3 bytes"));

  f = File::Open(dir / "");
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("not a regular file"));
}

TEST(Safetensors, WriterRejectsBadInputAndLeavesTargetUntouched) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  const std::vector<float> four = {1, 2, 3, 4};
  ASSERT_TRUE(Write(path, {{"w", DType::F32, {4}, AsBytes(four)}}).ok());
  const auto before = std::filesystem::file_size(path);

  auto err = [&](const std::vector<TensorToWrite>& t, const std::map<std::string, std::string>& m = {}) {
    const Status s = Write(path, t, m);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    return s.message();
  };
  EXPECT_THAT(err({{"w", DType::F32, {2, 2}, AsBytes(four)}, {"w", DType::F32, {4}, AsBytes(four)}}),
              HasSubstr("tensor \"w\": name is used twice"));
  EXPECT_THAT(err({{"w", DType::F32, {3}, AsBytes(four)}}), HasSubstr("tensor \"w\": data holds 16 bytes but F32 [3] needs 12"));
  EXPECT_THAT(err({{"w", DType::F32, {-4}, AsBytes(four)}}), HasSubstr("has a negative dimension"));
  EXPECT_THAT(err({{"__metadata__", DType::F32, {4}, AsBytes(four)}}), HasSubstr("\"__metadata__\" is reserved"));
  EXPECT_THAT(err({{"bad\xff", DType::F32, {4}, AsBytes(four)}}), HasSubstr("name is not valid UTF-8"));
  EXPECT_THAT(err({{"w", DType::F4, {3}, {}}}), HasSubstr("F4 [3] holds 12 bits, not a whole number of bytes"));
  EXPECT_THAT(err({}, {{"k", "\xC0"}}), HasSubstr("__metadata__ entry \"k\" is not valid UTF-8"));
  EXPECT_EQ(std::filesystem::file_size(path), before);
  EXPECT_EQ(dir.count(), 1u);

  const Status s = Write(dir / "no/such/dir/x.safetensors", {});
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_THAT(s.message(), HasSubstr("cannot create a temporary file"));
}

TEST(Safetensors, WriteReplacesExistingFile) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  const std::vector<float> a = {1}, b = {2, 3};
  ASSERT_TRUE(Write(path, {{"a", DType::F32, {1}, AsBytes(a)}}).ok());
  ASSERT_TRUE(Write(path, {{"b", DType::F32, {2}, AsBytes(b)}}).ok());
  Expected<File> f = File::Open(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->find("a"), nullptr);
  ASSERT_NE(f->find("b"), nullptr);
  EXPECT_EQ(dir.count(), 1u);
}

TEST(Safetensors, DTypeNamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(DType::U64); ++i) {
    const auto d = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
  EXPECT_EQ(parse_dtype("F8_E4M3FNUZ"), DType::F8_E4M3FNUZ);
  EXPECT_EQ(dtype_bits(DType::F4), 4);
  EXPECT_EQ(dtype_alignment(DType::C64), 4u);
  EXPECT_FALSE(parse_dtype("bf16").has_value());
}

}  // namespace
}  // namespace mlk::safetensors
