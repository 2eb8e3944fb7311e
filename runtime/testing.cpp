#include "runtime/testing.h"

#include "lang/precision.h"

#include <algorithm>
#include <set>
#include <string>

#include "lang/compare.h"

namespace mlk::rt {

namespace {

// The longest reduction below `n` (and whether erf is reached), with the
// dims of the fn `n` belongs to in `env`; callees are walked with their own.
struct Walk {
  explicit Walk(const ir::Module& mod) : m(mod) {}
  const ir::Module& m;
  int64_t longest = 1;
  bool erf = false;
  Status status;

  int64_t extent(const ir::NodeRef& operand, int64_t axis, const DimEnv& env) {
    auto v = operand->type.shape[static_cast<size_t>(axis)].eval(env);
    if (!v) {
      status = Status::InvalidArgument("dimension `" + operand->type.shape[static_cast<size_t>(axis)].str() +
                                       "` is not given (pass every dimension variable)");
      return 1;
    }
    return *v;
  }

  void fn(const ir::Function& f, const DimEnv& env) {
    std::set<const ir::Node*> seen;
    node(f.body, env, seen);
  }

  void node(const ir::NodeRef& n, const DimEnv& env, std::set<const ir::Node*>& seen) {
    if (!status.ok() || !seen.insert(n.get()).second) return;
    for (const auto& o : n->operands) node(o, env, seen);
    switch (n->op) {
      case ir::Op::kSum:
      case ir::Op::kMean: {
        int64_t k = 1;
        for (int64_t a : n->ints) k *= extent(n->operands[0], a, env);
        longest = std::max(longest, k);
        break;
      }
      case ir::Op::kMatmul:
        longest = std::max(longest, extent(n->operands[0], static_cast<int64_t>(n->operands[0]->type.shape.size()) - 1, env));
        break;
      case ir::Op::kSoftmax: longest = std::max(longest, extent(n->operands[0], n->ints.at(0), env)); break;
      case ir::Op::kErf: erf = true; break;
      case ir::Op::kCall: {
        const ir::Function* callee = m.find(n->callee);
        if (!callee) {
          status = Status::Internal("call of unknown fn `" + n->callee + "`");
          return;
        }
        DimEnv inner;
        for (size_t i = 0; i < callee->dim_vars.size() && i < n->dims.size(); ++i) {
          auto v = n->dims[i].eval(env);
          if (!v) {
            status = Status::InvalidArgument("dimension `" + n->dims[i].str() + "` of a call of `" + n->callee +
                                             "` is not given (pass every dimension variable)");
            return;
          }
          inner[callee->dim_vars[i]] = *v;
        }
        fn(*callee, inner);
        break;
      }
      default: break;
    }
  }
};

}  // namespace

Envelope envelope_for(DType dtype, int64_t reduction_length, bool through_erf) {
  Envelope e;
  e.dtype = dtype;
  e.reduction_length = std::max<int64_t>(reduction_length, 1);
  e.through_erf = through_erf;
  Tolerance t = tolerance_for(dtype, e.reduction_length);
  e.rtol = t.rtol;
  e.atol = dtype == DType::F64 && through_erf ? std::max(t.atol, kF64ErfAtol) : t.atol;
  return e;
}

Expected<Envelope> envelope_of(const ir::Module& m, const ir::Function& f, const DimEnv& dims) {
  if (!f.more_results.empty())
    return Status::InvalidArgument("`" + f.name + "` has " + std::to_string(f.results().size()) +
                                   " results; an envelope is of a fn with one result");
  for (const auto& d : f.dim_vars)
    if (!dims.count(d)) return Status::InvalidArgument("`" + f.name + "`: dimension `" + d + "` is not given");
  Walk w(m);
  w.fn(f, dims);
  if (!w.status.ok()) {
    if (w.status.code() == Status::Code::kInternal) return w.status;
    return Status::InvalidArgument("`" + f.name + "`: " + w.status.message());
  }
  return envelope_for(judged_dtype(m, f, f.result_type.dtype), w.longest, w.erf);
}

Expected<std::vector<std::vector<int64_t>>> param_shapes(const ir::Function& f, const DimEnv& dims) {
  for (const auto& d : f.dim_vars)
    if (!dims.count(d)) return Status::InvalidArgument("`" + f.name + "`: dimension `" + d + "` is not given");
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& p : f.params) {
    auto s = concrete_shape(p.type.shape, dims);
    if (!s.ok()) return Status::InvalidArgument("`" + f.name + "`, parameter `" + p.name + "`: " + s.status().message());
    shapes.push_back(std::move(*s));
  }
  auto bound = bind_dims(f, shapes, dims);  // the refinements, and every extent in range
  if (!bound.ok()) return Status::InvalidArgument("`" + f.name + "`: " + bound.status().message());
  return shapes;
}

}  // namespace mlk::rt
