// arrow_ipc::read_c_stream, the C++ entry point for an ArrowArrayStream, fed
// by a producer written here against the C data interface alone (no
// libarrow): the checks, the messages, zero-copy against one copy, and the
// stream released exactly once whatever the outcome.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "interop/arrow_reader.h"

// The Arrow C data and C stream interfaces (stable ABI; the same guards as
// Arrow's arrow/c/abi.h).
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_NULLABLE 2
struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};
struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};
#endif
#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};
#endif

namespace mlk::arrow_ipc {
namespace {

// One batch: column `a` (int32) and column `v` (fixed_size_list<float>[2]).
struct Batch {
  std::vector<int32_t> a;
  std::vector<float> v;  // 2 per row
  std::vector<uint8_t> a_valid;  // a validity bitmap of `a` (LSB first); empty: none
};

// A producer of a stream of `batches` with the schema {a: int32, v: +w:2 of f}.
struct Producer {
  std::vector<Batch> batches;
  int64_t a_flags = 0;        // ARROW_FLAG_NULLABLE makes `a` nullable
  const char* a_format = "i";  // "l" makes it int64
  int fail_at = -1;           // get_next returns EIO at this batch
  size_t next = 0;
  int releases = 0;
};

struct SchemaNode {
  ArrowSchema self{}, a{}, v{}, item{};
  ArrowSchema* top_children[2];
  ArrowSchema* v_children[1];
};

void release_schema(ArrowSchema* s) {
  delete static_cast<SchemaNode*>(s->private_data);  // children are part of the node
  s->release = nullptr;
}
void release_child_schema(ArrowSchema* s) { s->release = nullptr; }

int get_schema(ArrowArrayStream* st, ArrowSchema* out) {
  auto* p = static_cast<Producer*>(st->private_data);
  auto* n = new SchemaNode;
  n->item = {"f", "item", nullptr, ARROW_FLAG_NULLABLE, 0, nullptr, nullptr, release_child_schema, nullptr};
  n->v_children[0] = &n->item;
  n->v = {"+w:2", "v", nullptr, 0, 1, n->v_children, nullptr, release_child_schema, nullptr};
  n->a = {p->a_format, "a", nullptr, p->a_flags, 0, nullptr, nullptr, release_child_schema, nullptr};
  n->top_children[0] = &n->a;
  n->top_children[1] = &n->v;
  n->self = {"+s", "", nullptr, 0, 2, n->top_children, nullptr, release_schema, n};
  *out = n->self;
  out->private_data = n;
  return 0;
}

struct ArrayNode {
  ArrowArray a{}, v{}, item{};
  ArrowArray* top_children[2];
  ArrowArray* v_children[1];
  const void* top_buffers[1] = {nullptr};
  const void* a_buffers[2];
  const void* v_buffers[1] = {nullptr};
  const void* item_buffers[2];
};

void release_array(ArrowArray* a) {
  delete static_cast<ArrayNode*>(a->private_data);
  a->release = nullptr;
}
void release_child_array(ArrowArray* a) { a->release = nullptr; }

int get_next(ArrowArrayStream* st, ArrowArray* out) {
  auto* p = static_cast<Producer*>(st->private_data);
  if (static_cast<int>(p->next) == p->fail_at) return 5;  // EIO
  if (p->next == p->batches.size()) {
    std::memset(out, 0, sizeof *out);  // end of stream: release == nullptr
    return 0;
  }
  const Batch& b = p->batches[p->next++];
  const int64_t rows = static_cast<int64_t>(b.a.size());
  auto* n = new ArrayNode;
  n->a_buffers[0] = b.a_valid.empty() ? nullptr : b.a_valid.data();
  n->a_buffers[1] = b.a.data();
  int64_t a_nulls = 0;
  for (int64_t r = 0; r < rows && !b.a_valid.empty(); ++r) a_nulls += (b.a_valid[r / 8] >> (r % 8) & 1) == 0;
  n->item_buffers[0] = nullptr;
  n->item_buffers[1] = b.v.data();
  n->item = {2 * rows, 0, 0, 2, 0, n->item_buffers, nullptr, nullptr, release_child_array, nullptr};
  n->v_children[0] = &n->item;
  n->v = {rows, 0, 0, 1, 1, n->v_buffers, n->v_children, nullptr, release_child_array, nullptr};
  n->a = {rows, a_nulls, 0, 2, 0, n->a_buffers, nullptr, nullptr, release_child_array, nullptr};
  n->top_children[0] = &n->a;
  n->top_children[1] = &n->v;
  *out = {rows, 0, 0, 1, 2, n->top_buffers, n->top_children, nullptr, release_array, n};
  return 0;
}

const char* last_error(ArrowArrayStream*) { return "the disk went away"; }

void release_stream(ArrowArrayStream* st) {
  ++static_cast<Producer*>(st->private_data)->releases;
  st->release = nullptr;
}

ArrowArrayStream stream_of(Producer& p) { return {get_schema, get_next, last_error, release_stream, &p}; }

SchemaDecl decl() {
  SchemaDecl d;
  ColumnDecl a;
  a.name = "a";
  a.dtype = DType::I32;
  a.refinements.push_back({Refinement::Op::kGe, 0, "", ""});
  ColumnDecl v;
  v.name = "v";
  v.dtype = DType::F32;
  v.any_list_size = true;
  v.list_dim = "D";
  d.columns = {a, v};
  d.rows_dim = "N";
  return d;
}

Batch batch(int rows, int first) {
  Batch b;
  for (int r = 0; r < rows; ++r) {
    b.a.push_back(first + r);
    b.v.push_back(0.5f * static_cast<float>(first + r));
    b.v.push_back(-1.0f * static_cast<float>(first + r));
  }
  return b;
}

TEST(ArrowCStream, OneBatchIsViewedInPlace) {
  Producer p;
  p.batches = {batch(5, 0)};
  ArrowArrayStream s = stream_of(p);
  ReadOptions o;
  o.zero_copy = true;
  auto t = read_c_stream(&s, decl(), "<c>", o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(p.releases, 1);
  EXPECT_EQ(t->rows, 5);
  EXPECT_EQ(t->dims.at("N"), 5);
  EXPECT_EQ(t->dims.at("D"), 2);
  ASSERT_EQ(t->columns.size(), 2u);
  EXPECT_EQ(t->columns[0].view, reinterpret_cast<const uint8_t*>(p.batches[0].a.data()));
  EXPECT_EQ(t->columns[1].view, reinterpret_cast<const uint8_t*>(p.batches[0].v.data()));
  EXPECT_EQ(t->columns[1].values.shape, (std::vector<int64_t>{5, 2}));
  EXPECT_TRUE(t->columns[1].values.bytes.empty());
}

TEST(ArrowCStream, SeveralBatchesAreCopiedOnce) {
  Producer p;
  p.batches = {batch(3, 0), batch(4, 3)};
  ArrowArrayStream s = stream_of(p);
  ReadOptions o;
  o.zero_copy = true;
  auto t = read_c_stream(&s, decl(), "<c>", o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->rows, 7);
  EXPECT_EQ(t->columns[0].view, nullptr);
  for (int r = 0; r < 7; ++r) {
    EXPECT_EQ(t->columns[0].values.get(r), r);
    EXPECT_EQ(t->columns[1].values.get(2 * r), 0.5 * r);
    EXPECT_EQ(t->columns[1].values.get(2 * r + 1), -1.0 * r);
  }
}

TEST(ArrowCStream, RefusalsNameWhatAndWhere) {
  struct Case {
    std::string name;
    std::function<void(Producer&, SchemaDecl&)> setup;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"refinement", [](Producer& p, SchemaDecl&) { p.batches = {batch(3, 0), batch(3, 3)}; p.batches[1].a[2] = -4; },
       "<c>: a >= 0 fails at row 5: value -4"},
      {"dtype", [](Producer& p, SchemaDecl&) { p.batches = {batch(2, 0)}; p.a_format = "l"; },
       "<c>: column `a`: declared I32, the stream has int64"},
      {"null_in_nullable_field",
       [](Producer& p, SchemaDecl&) {
         p.batches = {batch(3, 0), batch(3, 3)};
         p.a_flags = ARROW_FLAG_NULLABLE;
         p.batches[0].a_valid = {0x07};
         p.batches[1].a_valid = {0x05};  // row 1 of batch 1 is null
       },
       "<c>: column `a` is declared non-nullable, but row 4 is null"},
      {"declared_nullable", [](Producer& p, SchemaDecl& d) { p.batches = {batch(2, 0)}; d.columns[0].nullable = true; },
       "<c>: column `a`: declared nullable, the stream's field is non-nullable"},
      // Every column that differs, at once; a list size by the dim declared for it.
      {"every_column",
       [](Producer& p, SchemaDecl& d) {
         p.batches = {batch(2, 0)};
         p.a_format = "l";
         d.columns[1].dtype = DType::F16;
       },
       "<c>: 2 columns differ from the declaration: column `a`: declared I32, the stream has int64; column `v`: "
       "declared FixedSizeList[F16, D], the stream has fixed_size_list<item: float>[2]"},
      {"list_size", [](Producer& p, SchemaDecl& d) { p.batches = {batch(2, 0)}; d.dims["D"] = 3; },
       "<c>: column `v`: declared FixedSizeList[F32, D] with D = 3, the stream has fixed_size_list<item: float>[2]"},
      {"rows", [](Producer& p, SchemaDecl& d) { p.batches = {batch(2, 0)}; d.dims["N"] = 3; },
       "<c>: the stream has 2 rows; the row dimension N is 3"},
      {"producer", [](Producer& p, SchemaDecl&) { p.batches = {batch(2, 0), batch(2, 2)}; p.fail_at = 1; },
       "<c>: batch 1: the producer failed: "},
      {"missing", [](Producer& p, SchemaDecl& d) { p.batches = {batch(2, 0)}; d.columns[0].name = "b"; },
       "<c>: the stream has no column `b` (declared column 0); its columns: a, v"},
  };
  for (const auto& c : cases) {
    Producer p;
    SchemaDecl d = decl();
    c.setup(p, d);
    ArrowArrayStream s = stream_of(p);
    auto t = read_c_stream(&s, d, "<c>");
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_NE(t.status().message().find(c.message), std::string::npos) << c.name << ": " << t.status().message();
    EXPECT_EQ(p.releases, 1) << c.name;
  }
}

// A nullable field (what pyarrow and pandas make by default) for a column
// declared non-nullable: read while its rows hold no null, and viewed in
// place even with a validity bitmap, since every bit is set.
TEST(ArrowCStream, ANullableFieldWithoutNullsIsReadInPlace) {
  Producer p;
  p.batches = {batch(5, 0)};
  p.batches[0].a_valid = {0x1f};
  p.a_flags = ARROW_FLAG_NULLABLE;
  ArrowArrayStream s = stream_of(p);
  ReadOptions o;
  o.zero_copy = true;
  auto t = read_c_stream(&s, decl(), "<c>", o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->rows, 5);
  EXPECT_EQ(t->columns[0].view, reinterpret_cast<const uint8_t*>(p.batches[0].a.data()));
  EXPECT_FALSE(t->columns[0].valid.has_value());
}

// A column declared nullable, viewed (no null in its one batch), still has
// its validity: every row valid.
TEST(ArrowCStream, ANullableColumnViewedInPlaceHasItsValidity) {
  Producer p;
  p.batches = {batch(4, 0)};
  p.a_flags = ARROW_FLAG_NULLABLE;
  SchemaDecl d = decl();
  d.columns[0].nullable = true;
  ArrowArrayStream s = stream_of(p);
  ReadOptions o;
  o.zero_copy = true;
  auto t = read_c_stream(&s, d, "<c>", o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_NE(t->columns[0].view, nullptr);
  ASSERT_TRUE(t->columns[0].valid.has_value());
  EXPECT_EQ(t->columns[0].valid->bytes, (std::vector<uint8_t>{1, 1, 1, 1}));
}

TEST(ArrowCStream, NoStream) {
  auto t = read_c_stream(nullptr, decl(), "<c>");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "<c>: no Arrow C stream (null, or already released)");
  Producer p;
  ArrowArrayStream s = stream_of(p);
  s.release = nullptr;
  auto u = read_c_stream(&s, decl(), "<c>");
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().message(), "<c>: no Arrow C stream (null, or already released)");
}

}  // namespace
}  // namespace mlk::arrow_ipc
