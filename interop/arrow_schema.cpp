// A Dataframe parameter's declaration for the Arrow reader (interop/arrow_schema.h).
#include "interop/arrow_schema.h"

namespace mlk::arrow_ipc {

namespace {

Refinement::Op op_of(ir::ColumnRule::Op op) {
  switch (op) {
    case ir::ColumnRule::Op::kEq: return Refinement::Op::kEq;
    case ir::ColumnRule::Op::kNe: return Refinement::Op::kNe;
    case ir::ColumnRule::Op::kLt: return Refinement::Op::kLt;
    case ir::ColumnRule::Op::kLe: return Refinement::Op::kLe;
    case ir::ColumnRule::Op::kGt: return Refinement::Op::kGt;
    case ir::ColumnRule::Op::kGe: return Refinement::Op::kGe;
  }
  return Refinement::Op::kGe;
}

}  // namespace

SchemaDecl schema_of(const ir::Frame& frame, const std::map<std::string, int64_t>& dims) {
  SchemaDecl decl;
  decl.dims = dims;
  decl.rows_dim = frame.rows.str();
  if (auto v = frame.rows.eval({})) decl.dims[decl.rows_dim] = *v;
  for (const ir::FrameColumn& fc : frame.columns) {
    ColumnDecl c;
    c.name = fc.name;
    c.dtype = fc.dtype;
    c.nullable = fc.nullable;
    if (fc.list_size) {
      if (auto v = fc.list_size->eval({})) {
        c.list_size = *v;
      } else {
        c.any_list_size = true;
        c.list_dim = fc.list_size->str();
      }
    }
    if (fc.categories) {
      c.category = true;
      if (auto v = fc.categories->eval({})) c.categories = *v;
      else c.category_dim = fc.categories->str();
    }
    for (const ir::ColumnRule& r : fc.rules) {
      Refinement ref;
      ref.op = op_of(r.op);
      ref.bound = r.literal;
      ref.bound_name = r.dim.empty() ? r.text : r.dim;
      ref.bound_dim = r.dim;
      c.refinements.push_back(std::move(ref));
    }
    decl.columns.push_back(std::move(c));
  }
  return decl;
}

}  // namespace mlk::arrow_ipc
