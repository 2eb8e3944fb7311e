// The reference interpreter's driver: input checks, dimension binding, the
// walk over each function's DAG (every node once, freed after its last use),
// calls, and the limits on extents and element counts. The kernels are in
// interpreter_ops.cpp and interpreter_structural.cpp.
#include "lang/interpreter.h"

#include <cstring>
#include <memory>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "lang/interpreter_ops.h"

namespace mlk {
namespace {

using interp::Value;
using ValueRef = std::shared_ptr<const Value>;

// Calls cannot recurse in a checked module; this bounds a malformed one.
constexpr int kMaxCallDepth = 64;

// The element count of `shape` (extents >= 1), or kMaxInterpreterElements + 1
// when it is larger, without overflowing.
int64_t capped_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d > 0 && n > kMaxInterpreterElements / d) return kMaxInterpreterElements + 1;
    n *= d;
  }
  return n;
}

std::string dims_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t k = 0; k < s.size(); ++k) r += (k ? ", " : "") + std::to_string(s[k]);
  return r + "]";
}

Status too_big(const std::string& what, const std::vector<int64_t>& shape) {
  return Status::InvalidArgument(what + " would have shape " + dims_str(shape) +
                                 ", more than the interpreter's limit of 2^31 elements; use smaller dimensions");
}

// Post-order of the DAG under `roots`, each node once, without recursion.
std::vector<const ir::Node*> topo_order(const std::vector<const ir::Node*>& roots) {
  std::vector<const ir::Node*> order;
  std::unordered_set<const ir::Node*> seen;
  std::vector<std::pair<const ir::Node*, size_t>> stack;  // node, next operand
  for (const ir::Node* root : roots) {  // one walk per root: a root may be below another
    if (!seen.insert(root).second) continue;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->operands.size()) {
        const ir::Node* c = n->operands[next++].get();
        if (seen.insert(c).second) stack.push_back({c, 0});  // invalidates n, next: loop again
        continue;
      }
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

class Evaluator {
 public:
  explicit Evaluator(const ir::Module& m) : m_(m) {}

  // Evaluates `f` with parameters `args` under the bound dimensions `env`:
  // the value of each of its results.
  Expected<std::vector<ValueRef>> call(const ir::Function& f, const std::vector<ValueRef>& args, const DimEnv& env,
                                       int depth) {
    MLK_CHECK(f.body != nullptr && args.size() == f.params.size(), "call of a malformed function");
    std::vector<const ir::Node*> roots;
    for (const ir::Result& r : f.results()) roots.push_back(r.body.get());
    std::vector<const ir::Node*> order = topo_order(roots);
    std::unordered_map<const ir::Node*, int> uses;
    for (const ir::Node* n : roots) ++uses[n];  // results are never freed
    for (const ir::Node* n : order)
      for (const auto& o : n->operands) ++uses[o.get()];
    std::unordered_map<const ir::Node*, ValueRef> memo;
    for (const ir::Node* n : order) {
      std::vector<ValueRef> operands;
      for (const auto& o : n->operands) operands.push_back(memo.at(o.get()));
      auto v = node(f, *n, operands, args, env, depth);
      if (!v) return v.status();
      memo[n] = std::move(*v);
      for (const auto& o : n->operands)
        if (--uses[o.get()] == 0) memo.erase(o.get());  // its last use: free it
    }
    std::vector<ValueRef> results;
    for (const ir::Result& r : f.results()) {
      results.push_back(memo.at(r.body.get()));
      MLK_CHECK(results.back()->dtype == r.type.dtype, "result dtype differs from the declared one");
    }
    return results;
  }

 private:
  Expected<ValueRef> node(const ir::Function& f, const ir::Node& n, const std::vector<ValueRef>& operands,
                          const std::vector<ValueRef>& args, const DimEnv& env, int depth) {
    auto shape = concrete_shape(n.type.shape, env);
    if (!shape)
      return Status::InvalidArgument("in `" + f.name + "`, the result of `" + ir::op_name(n.op) + "` " +
                                     n.type.str() + ": " + shape.status().message());
    if (capped_numel(*shape) > kMaxInterpreterElements)
      return too_big("in `" + f.name + "`, the result of `" + std::string(ir::op_name(n.op)) + "`", *shape);
    std::vector<const Value*> in;
    for (const auto& o : operands) in.push_back(o.get());
    Expected<Value> v = Status::Internal("unset");
    switch (n.op) {
      case ir::Op::kParam: {
        MLK_CHECK(n.index >= 0 && static_cast<size_t>(n.index) < args.size(), "parameter index");
        const ValueRef& a = args[static_cast<size_t>(n.index)];
        MLK_CHECK(a->dtype == n.type.dtype && a->shape == *shape, "parameter value differs from its type");
        return a;
      }
      case ir::Op::kCall: {
        auto r = call_node(f, n, operands, env, depth);
        if (r) MLK_CHECK((*r)->dtype == n.type.dtype && (*r)->shape == *shape, "call result differs from its type");
        return r;
      }
      default: {
        interp::Kernel k = interp::kernel_of(n.op);
        MLK_CHECK(k != nullptr, "interpret: an op without a kernel");
        v = k(n, in, *shape, env);
        break;
      }
    }
    if (!v) return v.status();
    MLK_CHECK(v->dtype == n.type.dtype && v->shape == *shape, "kernel result differs from the node's type");
    return std::make_shared<const Value>(std::move(*v));
  }

  // The callee's dimensions are the call's `dims` evaluated here; bind_dims
  // then re-checks the operands' shapes and the callee's refinements, which
  // also catches inferred dimensions the checker did not prove >= 1.
  Expected<ValueRef> call_node(const ir::Function& f, const ir::Node& n, const std::vector<ValueRef>& operands,
                               const DimEnv& env, int depth) {
    const ir::Function* g = m_.find(n.callee);
    if (!g) return Status::NotFound("`" + f.name + "` calls `" + n.callee + "`, which is not in the module");
    if (depth >= kMaxCallDepth)
      return Status::InvalidArgument("calls nested deeper than " + std::to_string(kMaxCallDepth) + " at `" + g->name +
                                     "` (a recursive call?)");
    MLK_CHECK(n.dims.size() == g->dim_vars.size() && operands.size() == g->params.size(), "call arity");
    std::string where = "at the call of `" + g->name + "` in `" + f.name + "`: ";
    DimEnv given;
    for (size_t k = 0; k < n.dims.size(); ++k) {
      auto v = n.dims[k].eval(env);
      if (!v)
        return Status::InvalidArgument(where + "dimension " + g->dim_vars[k] + " = `" + n.dims[k].str() +
                                       "` cannot be evaluated");
      given[g->dim_vars[k]] = *v;
    }
    std::vector<std::vector<int64_t>> shapes;
    for (size_t k = 0; k < operands.size(); ++k) {
      MLK_CHECK(operands[k]->dtype == g->params[k].type.dtype, "call operand dtype");
      shapes.push_back(operands[k]->shape);
    }
    auto genv = bind_dims(*g, shapes, given);
    if (!genv) return Status::InvalidArgument(where + genv.status().message());
    auto r = call(*g, operands, *genv, depth + 1);
    if (!r) return r.status();
    return (*r)[0];  // a callee has one result (the checker refuses other calls)
  }

  const ir::Module& m_;
};

Value to_value(const HostTensor& t) {
  Value v(t.dtype, t.shape);
  for (int64_t k = 0; k < v.numel(); ++k) {
    if (v.floating()) {
      v.f[k] = t.get(k);
    } else if (t.dtype == DType::I64) {  // beyond 2^53 a double would round
      std::memcpy(&v.i[k], t.bytes.data() + k * 8, 8);
    } else {
      v.i[k] = static_cast<int64_t>(t.get(k));
    }
  }
  return v;
}

HostTensor to_host(const Value& v) {
  HostTensor t(v.dtype, v.shape);
  for (int64_t k = 0; k < v.numel(); ++k) {
    if (v.floating()) t.set(k, v.f[k]);
    else if (v.dtype == DType::I64) std::memcpy(t.bytes.data() + k * 8, &v.i[k], 8);
    else t.set(k, static_cast<double>(v.i[k]));
  }
  return t;
}

}  // namespace

Expected<HostTensor> interpret(const ir::Module& m, const std::string& fn, const std::vector<HostTensor>& inputs,
                               const DimEnv& given) {
  if (const ir::Function* f = m.find(fn); f && !f->more_results.empty())
    return Status::InvalidArgument("`" + fn + "` has " + std::to_string(f->results().size()) +
                                   " results; interpret_all() gives them all");
  auto r = interpret_all(m, fn, inputs, given);
  if (!r) return r.status();
  return std::move((*r)[0]);
}

Expected<std::vector<HostTensor>> interpret_all(const ir::Module& m, const std::string& fn,
                                                const std::vector<HostTensor>& inputs, const DimEnv& given) {
  const ir::Function* f = m.find(fn);
  if (!f) return Status::NotFound("no function `" + fn + "` in the module");
  for (size_t k = 0; k < inputs.size() && k < f->params.size(); ++k)
    if (inputs[k].dtype != f->params[k].type.dtype)
      return Status::InvalidArgument("`" + f->params[k].name + "` must be " + dtype_name(f->params[k].type.dtype) +
                                     ", got " + dtype_name(inputs[k].dtype));
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : inputs) shapes.push_back(t.shape);
  auto env = bind_dims(*f, shapes, given);
  if (!env) return env.status();
  std::vector<ValueRef> args;
  try {
    for (size_t k = 0; k < inputs.size(); ++k) {
      const HostTensor& t = inputs[k];
      int64_t n = capped_numel(t.shape);
      if (n > kMaxInterpreterElements) return too_big("input `" + f->params[k].name + "`", t.shape);
      if (t.bytes.size() != static_cast<size_t>(n) * t.elem_size())
        return Status::InvalidArgument("input `" + f->params[k].name + "` holds " + std::to_string(t.bytes.size()) +
                                       " bytes, but " + dtype_name(t.dtype) + " " + dims_str(t.shape) + " needs " +
                                       std::to_string(static_cast<size_t>(n) * t.elem_size()));
      args.push_back(std::make_shared<const Value>(to_value(t)));
    }
    auto r = Evaluator(m).call(*f, args, *env, 0);
    if (!r) return r.status();
    std::vector<HostTensor> out;
    for (const ValueRef& v : *r) out.push_back(to_host(*v));
    return out;
  } catch (const std::bad_alloc&) {
    return Status::InvalidArgument("the interpreter ran out of memory evaluating `" + fn + "`; use smaller dimensions");
  }
}

}  // namespace mlk
