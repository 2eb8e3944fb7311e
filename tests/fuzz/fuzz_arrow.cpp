// libFuzzer target for the Arrow IPC reader (interop/arrow_reader.h): any
// bytes must give a table or a refusal with a message naming the source,
// never a crash; an accepted table has the declared shapes. Seeds: streams
// pyarrow wrote (tests/fuzz/seeds_arrow/).
#include <cstring>

#include "interop/arrow_reader.h"

using namespace mlk;
using namespace mlk::arrow_ipc;

namespace {

SchemaDecl scenario() {
  SchemaDecl d;
  d.columns.resize(3);
  d.columns[0].name = "user_id";
  d.columns[0].dtype = DType::I64;
  d.columns[1].name = "session_len";
  d.columns[1].dtype = DType::I32;
  d.columns[1].refinements.push_back(Refinement{Refinement::Op::kGe, 1, ""});
  d.columns[2].name = "embedding";
  d.columns[2].dtype = DType::F16;
  d.columns[2].list_size = 4;
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const SchemaDecl decl = scenario();
  for (bool compressed : {false, true}) {
    ReadOptions o;
    o.allow_compressed_bodies = compressed;
    Expected<Table> t = read_stream(std::span<const uint8_t>(data, size), decl, "<fuzz>", o);
    if (!t.ok()) {
      MLK_CHECK(t.status().message().rfind("<fuzz>: ", 0) == 0, "a refusal that does not name the source");
      continue;
    }
    MLK_CHECK(t->columns.size() == 3, "a table without the declared columns");
    MLK_CHECK(t->columns[2].values.shape == std::vector<int64_t>({t->rows, 4}), "embedding is not [rows, 4]");
    MLK_CHECK(t->columns[1].values.numel() == t->rows, "session_len is not [rows]");
    for (int64_t i = 0; i < t->rows; ++i) MLK_CHECK(t->columns[1].values.get(i) >= 1, "a refinement let through");
  }
  return 0;
}
