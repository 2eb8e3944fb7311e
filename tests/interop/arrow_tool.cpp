// arrow_tool: the Arrow IPC reader (interop/arrow_reader.h) as a command, for
// tests/interop/arrow_stream_test.py, which writes the streams with pyarrow.
//
//   arrow_tool read STREAM.arrows SCHEMA_JSON [--allow-compressed]
//
// SCHEMA_JSON declares the columns in order:
//   [{"name": "x", "type": "I32", "list": 4, "nullable": true, "where": [[">=", 1], ["<", 9, "D"]]}]
// ("list", "nullable", "where" optional; a third element of a rule is its
// bound's name; "category": "K" or 3 makes a Category[I32, K] column). On
// success prints one JSON object: rows, batches, dims, and per column its
// name, dtype, shape, values (row-major; I64 exactly; non-finite floats as
// the strings "nan", "inf", "-inf"), when nullable, valid (0/1), and for a
// Category its dictionary.
// Exit 0; on a refused stream the message on stderr and exit 1; exit 2 on
// bad usage.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "interop/arrow_reader.h"

using namespace mlk;
using namespace mlk::arrow_ipc;
using nlohmann::json;

namespace {

Refinement::Op parse_op(const std::string& s) {
  if (s == "=") return Refinement::Op::kEq;
  if (s == "!=") return Refinement::Op::kNe;
  if (s == "<") return Refinement::Op::kLt;
  if (s == "<=") return Refinement::Op::kLe;
  if (s == ">") return Refinement::Op::kGt;
  if (s == ">=") return Refinement::Op::kGe;
  throw std::runtime_error("unknown operator " + s);
}

SchemaDecl parse_decl(const json& j) {
  SchemaDecl d;
  for (const json& c : j) {
    ColumnDecl col;
    col.name = c.at("name").get<std::string>();
    auto t = parse_dtype(c.at("type").get<std::string>());
    if (!t) throw std::runtime_error("unknown dtype " + c.at("type").get<std::string>());
    col.dtype = *t;
    if (c.contains("list")) col.list_size = c["list"].get<int64_t>();
    if (c.contains("category")) {  // Category[I32, K]: "K" binds a dimension, an integer fixes the size
      col.category = true;
      if (c["category"].is_string()) col.category_dim = c["category"].get<std::string>();
      else col.categories = c["category"].get<int64_t>();
    }
    col.nullable = c.value("nullable", false);
    for (const json& r : c.value("where", json::array())) {
      Refinement ref;
      ref.op = parse_op(r.at(0).get<std::string>());
      ref.bound = r.at(1).get<double>();
      if (r.size() > 2) ref.bound_name = r.at(2).get<std::string>();
      col.refinements.push_back(ref);
    }
    d.columns.push_back(col);
  }
  return d;
}

json value_json(const HostTensor& t, int64_t i) {
  if (t.dtype == DType::I64) {
    int64_t v;
    std::memcpy(&v, t.bytes.data() + 8 * i, 8);
    return v;
  }
  double v = t.get(i);
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "read") {
    std::fprintf(stderr, "usage: arrow_tool read STREAM.arrows SCHEMA_JSON [--allow-compressed]\n");
    return 2;
  }
  SchemaDecl decl;
  try {
    decl = parse_decl(json::parse(argv[3]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "arrow_tool: bad SCHEMA_JSON: %s\n", e.what());
    return 2;
  }
  ReadOptions options;
  options.allow_compressed_bodies = argc > 4 && std::string(argv[4]) == "--allow-compressed";
  auto table = read_stream_file(argv[2], decl, options);
  if (!table.ok()) {
    std::fprintf(stderr, "%s\n", table.status().message().c_str());
    return 1;
  }
  json out = {{"rows", table->rows}, {"batches", table->batches}, {"dims", table->dims}, {"columns", json::array()}};
  for (const Column& c : table->columns) {
    json col = {{"name", c.name}, {"dtype", dtype_name(c.values.dtype)}, {"shape", c.values.shape}};
    json values = json::array();
    for (int64_t i = 0; i < c.values.numel(); ++i) values.push_back(value_json(c.values, i));
    col["values"] = values;
    if (c.dictionary) col["dictionary"] = *c.dictionary;
    if (c.valid) {
      json valid = json::array();
      for (uint8_t b : c.valid->bytes) valid.push_back(static_cast<int>(b));
      col["valid"] = valid;
    }
    out["columns"].push_back(col);
  }
  std::cout << out.dump() << "\n";
  return 0;
}
