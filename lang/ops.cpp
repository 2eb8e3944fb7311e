// The op registry's rows as data (lang/ops.def), and lookups by name.
#include "lang/ops.h"

#include <map>

#include "base/status.h"

namespace mlk::ir {
namespace {

constexpr OpInfo kOps[] = {
#define MLK_OP(ID, NAME, ARITY, CALL, ...) {Op::ID, NAME, ARITY, OpCall::CALL},
#include "lang/ops.def"
#undef MLK_OP
};

constexpr bool rows_in_order() {
  for (size_t i = 0; i < kOpCount; ++i)
    if (static_cast<size_t>(kOps[i].op) != i) return false;
  return true;
}
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kOpCount && rows_in_order(), "kOps follows ops.def");

}  // namespace

const OpInfo& op_info(Op op) {
  size_t i = static_cast<size_t>(op);
  MLK_CHECK(i < kOpCount, "op_info: not an op");
  return kOps[i];
}

const char* op_name(Op op) { return op_info(op).name; }

std::optional<Op> builtin_op(const std::string& name) {
  static const std::map<std::string, Op> by_name = [] {
    std::map<std::string, Op> m;
    for (const OpInfo& o : kOps)
      if (o.call == OpCall::kBuiltin) m.emplace(o.name, o.op);
    return m;
  }();
  auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

}  // namespace mlk::ir
