// The syntax tree the parser builds: a faithful, span-carrying picture of the
// source, with no types. The checker reads it and produces the typed IR
// (lang/ir.h); nothing downstream of the checker sees the AST.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lang/source.h"

namespace mlk::ast {

// A dimension expression as written: `D`, `4096`, `D / H`, `(S + 1) * 2`.
struct DimExpr {
  enum class Kind { kInt, kName, kAdd, kSub, kMul, kDiv };
  Kind kind = Kind::kInt;
  Span span;
  int depth = 1;        // height of the tree below (the parser bounds it)
  long long value = 0;  // kInt
  std::string name;     // kName
  std::unique_ptr<DimExpr> lhs, rhs;
};

// A refinement as written: `D mod H = 0` or `S <= 4096`.
struct Pred {
  enum class Op { kModZero, kEq, kNe, kLt, kLe, kGt, kGe };
  Op op = Op::kEq;
  Span span;
  std::unique_ptr<DimExpr> lhs, rhs;
};

// A value refinement of a Dataframe column as written: `session_len >= 1`,
// `x < D`, `t != -1.5`. The bound is an integer or number literal (with its
// sign) or a name (a dimension, resolved by lang/dataframe.cpp).
struct ColumnRule {
  enum class Bound { kInt, kFloat, kName };
  Pred::Op op = Pred::Op::kGe;  // never kModZero
  Span span, subject_span, bound_span;
  std::string subject;
  Bound bound = Bound::kInt;
  std::string bound_text;  // the literal with its sign, or the name
};

// One column of `Schema{..}`: `name: I32`, `name: Nullable[I32]`,
// `name: FixedSizeList[F16, D]`, each with `where` rules.
struct ColumnDecl {
  Span span, name_span, dtype_span;
  std::string name;
  std::string dtype;  // always a known dtype name (the lexer's kDType)
  bool nullable = false;
  std::unique_ptr<DimExpr> list_size;  // FixedSizeList[dtype, list_size]
  std::unique_ptr<DimExpr> categories;  // Category[dtype, categories]: the codes, K the dictionary's size
  std::vector<ColumnRule> rules;
};

// `Dataframe[N, Schema{..}]` (lang/dataframe.h turns it into tensors).
struct FrameType {
  std::unique_ptr<DimExpr> rows;
  std::vector<ColumnDecl> columns;
};

struct Type {
  Span span;
  Span dtype_span;
  std::string dtype;  // validated by the lexer: always a known dtype name
  std::vector<std::unique_ptr<DimExpr>> shape;
  std::vector<Pred> preds;
  std::unique_ptr<FrameType> frame;  // set for a Dataframe type (dtype, shape unused)
  // A record type (lang/records.h; dtype, shape unused): `Linear[D, 4]` names
  // the record in `record` and its dimension arguments in `record_args`;
  // `Array[T, N]` has `record` "Array", T in `element` and N as its one argument.
  std::string record;
  Span record_span;
  std::vector<std::unique_ptr<DimExpr>> record_args;
  std::unique_ptr<Type> element;
};

// `record Linear [I, O] { w: Tensor[F32, [O, I]], b: Tensor[F32, [O]] }`:
// named fields over the record's dimensions (lang/records.h).
struct Field {
  Span name_span;
  std::string name;
  Type type;
};

struct Record {
  Span span, name_span;
  std::string name;
  std::vector<std::pair<std::string, Span>> dims;
  std::vector<Field> fields;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One expression node. Binary and unary operators keep their operator text in
// `name`; calls keep the callee name. Builtins take non-value arguments
// (dimension lists, axes, dtypes) which are parsed as ordinary expressions and
// interpreted by the checker according to the builtin's signature.
struct Expr {
  // kTuple: `(a, b, ..)`, only the result of a fn with several results.
  enum class Kind { kInt, kFloat, kBool, kName, kDType, kList, kUnary, kBinary, kCall, kTuple };
  Kind kind = Kind::kInt;
  Span span;
  int depth = 1;     // height of the tree below (the parser bounds it)
  std::string name;  // kName, kDType, operator text, callee
  std::string text;  // literal text
  bool bool_value = false;
  std::vector<ExprPtr> args;                // operands, list items, call arguments
  std::vector<std::string> arg_keywords;    // call: "" for positional arguments
  std::vector<Span> arg_keyword_spans;
  // Explicit dimension arguments of a call: f[H=8](x).
  std::vector<std::pair<std::string, std::unique_ptr<DimExpr>>> dim_args;
  std::vector<Span> dim_arg_spans;
  Span callee_span;
};

struct Let {
  Span name_span;
  std::string name;
  std::optional<Type> ascription;
  ExprPtr value;
};

struct Param {
  Span name_span;
  std::string name;
  Type type;
};

struct Function {
  bool is_public = false;
  Span span;       // from `fn` (or `public`) to the end of the body
  Span name_span;
  std::string name;
  std::vector<std::pair<std::string, Span>> dims;
  std::vector<Param> params;
  Type result;                    // the result; of `-> (T, U, ..)`, T
  std::vector<Type> more_results;  // of `-> (T, U, ..)`: U, ..
  std::vector<Let> lets;
  ExprPtr body;        // null when the body failed to parse
  bool signature_complete = false;  // parsed through the `=` before the body
  bool had_syntax_error = false;
};

// `tune NAME [D = 4096, S = 128]`: one shape bucket for a public function.
struct Tune {
  Span span;
  Span name_span;
  std::string name;
  std::vector<std::pair<std::string, long long>> dims;
  std::vector<Span> dim_spans;
};

// `fn g = grad(f, wrt=[w])`, `public fn l, dw = value_and_grad(f, wrt=[w])`,
// `fn fb = vmap(f, axes=[0, none])`: new named fns defined by a program
// transformation of the fn `source` (lang/transforms.h). The arguments after
// the source are keyword arguments, kept as written for the transform to read.
struct Transform {
  bool is_public = false;
  Span span;  // from `fn` (or `public`) to the closing `)`
  std::vector<std::pair<std::string, Span>> names;  // the fns it defines, in order
  std::string kind;  // `grad`, `value_and_grad`, `vmap`
  Span kind_span;
  std::string source;
  Span source_span;
  std::vector<std::string> keywords;
  std::vector<Span> keyword_spans;
  std::vector<ExprPtr> values;
  bool had_error = false;  // reported before the checker (a `wrt` path, an import): its fns are invalid
};

// `import std.nn`, `import std.nn[F64] as nn64`, `import "layers.tl" as layers`
// (lang/modules.h).
struct Import {
  Span span;
  std::string module;  // "std.nn", or the path as written (without quotes)
  bool is_path = false;
  std::string dtype;   // `[F64]`: every F32 of the module becomes this dtype; empty: as written
  std::string alias;   // the name its fns are called by: `as NAME`, else the module's last part
};

struct Program {
  std::vector<Import> imports;
  std::vector<Record> records;
  std::vector<Function> functions;
  std::vector<Tune> tunes;
  std::vector<Transform> transforms;
};

}  // namespace mlk::ast
