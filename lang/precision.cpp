#include "lang/precision.h"

#include <map>
#include <set>

#include "lang/ir_build.h"
#include "lang/ir_verify.h"

namespace mlk {

Expected<Precision> parse_precision(const std::string& name) {
  if (name == "f32") return Precision::kF32;
  if (name == "bf16") return Precision::kBF16;
  if (name == "f16") return Precision::kF16;
  return Status::InvalidArgument("precision `" + name + "`: expected f32, bf16 or f16");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kF32: return "f32";
    case Precision::kBF16: return "bf16";
    case Precision::kF16: return "f16";
  }
  return "?";
}

std::string precision_flag_text(Precision p) {
  return p == Precision::kF32 ? "" : std::string(" --precision ") + precision_name(p);
}

namespace {

// Rebuilds a body bottom-up; a node none of whose operands changed, and that
// is not itself rewritten, is kept as it is.
class Rewriter {
 public:
  explicit Rewriter(DType narrow) : narrow_(narrow) {}

  ir::NodeRef operator()(const ir::NodeRef& n) {
    if (auto it = done_.find(n.get()); it != done_.end()) return it->second;
    std::vector<ir::NodeRef> ops;
    bool changed = false;
    for (const auto& o : n->operands) {
      ops.push_back((*this)(o));
      changed = changed || ops.back() != o;
    }
    ir::NodeRef out = n;
    if (n->op == ir::Op::kMatmul && n->type.dtype == DType::F32 && ops[0]->type.dtype == DType::F32) {
      out = irb::matmul_f32(irb::cast(ops[0], narrow_), irb::cast(ops[1], narrow_));
    } else if (changed) {
      ir::Node copy = *n;
      copy.operands = std::move(ops);
      out = ir::make(std::move(copy));
    }
    return done_[n.get()] = out;
  }

 private:
  DType narrow_;
  std::map<const ir::Node*, ir::NodeRef> done_;
};

}  // namespace

ir::Module with_precision(const ir::Module& m, Precision p) {
  if (p == Precision::kF32) return m;
  ir::Module out = m;
  Rewriter rw(p == Precision::kBF16 ? DType::BF16 : DType::F16);
  for (ir::Function& f : out.functions) {
    f.body = rw(f.body);
    for (ir::Result& r : f.more_results) r.body = rw(r.body);  // one memo: shared nodes stay shared
  }
  ir::debug_verify(out, "precision");
  return out;
}

namespace {

// The narrow dtype of a widening product in `n`'s DAG or a callee's, else F32.
DType widening_dtype(const ir::Module& m, const ir::NodeRef& n, std::set<const ir::Node*>& seen) {
  if (!seen.insert(n.get()).second) return DType::F32;
  if (n->op == ir::Op::kMatmul && n->type.dtype == DType::F32 && n->operands[0]->type.dtype != DType::F32)
    return n->operands[0]->type.dtype;
  if (n->op == ir::Op::kCall)
    if (const ir::Function* callee = m.find(n->callee))
      if (DType d = widening_dtype(m, callee->body, seen); d != DType::F32) return d;
  for (const auto& o : n->operands)
    if (DType d = widening_dtype(m, o, seen); d != DType::F32) return d;
  return DType::F32;
}

}  // namespace

Precision precision_of(const ir::Module& m, const ir::Function& f) {
  std::set<const ir::Node*> seen;
  DType d = DType::F32;
  for (const ir::Result& r : f.results())
    if (d == DType::F32) d = widening_dtype(m, r.body, seen);
  switch (d) {
    case DType::BF16: return Precision::kBF16;
    case DType::F16: return Precision::kF16;
    default: return Precision::kF32;
  }
}

DType judged_dtype(const ir::Module& m, const ir::Function& f, DType result) {
  if (result != DType::F32) return result;
  switch (precision_of(m, f)) {
    case Precision::kBF16: return DType::BF16;
    case Precision::kF16: return DType::F16;
    default: return result;
  }
}

}  // namespace mlk
