#include "runtime/derived_binding.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <vector>

namespace mlk::rt {

std::string renamed_key(const std::string& path, const std::map<std::string, std::string>& rename,
                        std::string* matched) {
  for (std::string prefix = path;;) {  // longest first: the whole path, then without its last component
    if (auto it = rename.find(prefix); it != rename.end()) {
      if (matched) *matched = prefix;
      std::string rest = path.substr(prefix.size());
      if (it->second.empty() && !rest.empty()) rest.erase(0, 1);  // "" drops the prefix and its dot
      return it->second + rest;
    }
    const size_t dot = prefix.rfind('.');
    if (dot == std::string::npos) return path;
    prefix.resize(dot);
  }
}

namespace {

std::string q(const std::string& s) { return "`" + s + "`"; }

// What an entry parameter is to the model.
struct ParamUse {
  std::string input;  // a model input (a parameter that is no record)
  std::string key;    // a record leaf: its weights key
};

class Deriver {
 public:
  Deriver(const ir::Module& m, const ir::Function& f, const std::string& program,
          const std::map<std::string, std::string>& rename)
      : m_(m), f_(f), where_(q(f.name) + " of " + program), rename_(rename) {
    uses_.resize(f.params.size());
    b_.file = where_;
    b_.derived = true;
  }

  Expected<Binding> run() {
    MLK_RETURN_IF_ERROR(keys());
    MLK_RETURN_IF_ERROR(inputs());
    if (!f_.more_results.empty())
      return err("the entry of a model has one result; " + q(f_.name) + " has " +
                 std::to_string(1 + f_.more_results.size()));
    if (!f_.body || f_.body->op != ir::Op::kCall)
      return err("the entry of a model is a call of a public fn (its steps); " + q(f_.name) + "'s result is " +
                 (f_.body ? std::string("`") + ir::op_name(f_.body->op) + "`" : std::string("missing")));
    MLK_RETURN_IF_ERROR(visit(f_.body));
    name_results();
    std::set<std::string> bound;
    for (const auto& s : b_.steps)
      for (const auto& [p, k] : s.weights) bound.insert(k);
    for (const auto& u : uses_)
      if (!u.key.empty() && !bound.count(u.key)) b_.unused.push_back(u.key);
    return std::move(b_);
  }

 private:
  Status err(const std::string& what) const { return Status::InvalidArgument(where_ + ": " + what); }

  // Each record leaf's key: its path below its parameter (below the
  // parameter's name when the entry takes several records), after the
  // rename. A rename that matches no path, and two fields on one key, are
  // refused.
  Status keys() {
    for (const auto& [from, to] : rename_) {
      const bool bad_from = from.empty() || from.front() == '.' || from.back() == '.' ||
                            from.find("..") != std::string::npos;
      const bool bad_to = !to.empty() && (to.front() == '.' || to.back() == '.' || to.find("..") != std::string::npos);
      if (bad_from || bad_to)
        return err("rename " + q(from) + " -> " + q(to) + ": each side is a path of `.`-separated names (the key "
                   "side may be empty, to drop the prefix)");
    }
    std::set<std::string> used_renames;
    std::map<std::string, std::string> field_of;  // key -> the field bound to it
    for (const auto& r : f_.records)
      for (int i = 0; i < r.count && i < static_cast<int>(r.paths.size()); ++i) {
        const std::string path = (f_.records.size() > 1 ? r.name + "." : std::string()) + r.paths[i];
        std::string matched;
        const std::string key = renamed_key(path, rename_, &matched);
        if (!matched.empty()) used_renames.insert(matched);
        if (key.empty()) return err("rename " + q(matched) + " -> `` leaves field " + q(r.name + "." + r.paths[i]) + " no key");
        const std::string field = r.name + "." + r.paths[i];
        auto [it, fresh] = field_of.emplace(key, field);
        if (!fresh)
          return err("fields " + q(it->second) + " and " + q(field) + " both bind the key " + q(key) +
                     (rename_.empty() ? "" : " (after the rename)") + "; a weight is one field's");
        uses_[r.first + i].key = key;
      }
    for (const auto& [from, to] : rename_)
      if (!used_renames.count(from))
        return err("rename " + q(from) + " matches no field path of its records (a rename maps a prefix of whole "
                   "`.`-separated names" + std::string(f_.records.size() > 1 ? ", below the record parameter's name" : "") +
                   ")");
    return Status::Ok();
  }

  Status inputs() {
    for (size_t i = 0; i < f_.params.size(); ++i) {
      if (!uses_[i].key.empty()) continue;
      const ir::Param& p = f_.params[i];
      if (p.type.shape.empty())
        return err("parameter " + q(p.name) + " is a Scalar; a model's inputs are tensors (write a constant in the body)");
      uses_[i].input = p.name;
      b_.inputs.push_back(ModelInput{p.name, ""});
    }
    if (f_.records.empty()) return err("the entry of a model takes its weights as a record parameter; " + q(f_.name) + " has none");
    return Status::Ok();
  }

  // One step per call, after the steps of its arguments. Calls nest at
  // most kMaxDepth deep (a chain of `let`s is a nest).
  static constexpr int kMaxDepth = 2048;
  Status visit(const ir::NodeRef& n, int depth = 0) {
    if (done_.count(n.get())) return Status::Ok();
    if (depth > kMaxDepth)
      return err("its calls nest more than " + std::to_string(kMaxDepth) + " deep; a model is at most that many "
                 "steps in a chain (fold fewer layers)");
    const ir::Function* g = m_.find(n->callee);
    if (!g || !g->is_public)
      return err("it calls " + q(n->callee) + ", which is not public; a model's steps are public fns (their kernels)");
    if (n->operands.size() != g->params.size())
      return err("the call of " + q(g->name) + " has " + std::to_string(n->operands.size()) + " arguments, the fn " +
                 std::to_string(g->params.size()));
    for (const auto& a : n->operands)  // the arguments' steps first, so this step's index is known below
      if (a->op == ir::Op::kCall) MLK_RETURN_IF_ERROR(visit(a, depth + 1));
    BindingStep s;
    s.fn = g->name;
    for (size_t i = 0; i < g->dim_vars.size() && i < n->dims.size(); ++i)
      if (n->dims[i].is_constant()) s.dims[g->dim_vars[i]] = n->dims[i].constant_value();
    for (size_t j = 0; j < n->operands.size(); ++j) {
      const ir::NodeRef& a = n->operands[j];
      const std::string& p = g->params[j].name;
      if (a->op == ir::Op::kCall) {
        s.args[p] = value_of(a.get());
        uses_of_[a.get()].push_back(b_.steps.size());
      } else if (a->op == ir::Op::kParam) {
        const ParamUse& u = uses_.at(a->index);
        if (u.key.empty()) s.args[p] = u.input;
        else s.weights[p] = u.key;
      } else if (a->op == ir::Op::kLiteral && a->type.shape.empty()) {
        s.constants[p] = std::strtod(a->literal.c_str(), nullptr);
      } else {
        return err("argument " + q(p) + " of the call of " + q(g->name) + " is computed (`" + ir::op_name(a->op) +
                   "`); a model's entry passes only its inputs, its records' fields, constants and other calls' "
                   "results: compute inside a public fn");
      }
    }
    done_[n.get()] = b_.steps.size();
    b_.steps.push_back(std::move(s));
    return Status::Ok();
  }

  std::string value_of(const ir::Node* n) const { return "%" + std::to_string(done_.at(n)); }

  // Results named so that a step takes the name (so the buffer) of an
  // argument it reads last: the model then reuses that buffer
  // (runtime/model.h). Names start with `$`, which no input's name does.
  void name_results() {
    std::map<size_t, size_t> last;  // step -> the last step reading its result
    for (const auto& [n, readers] : uses_of_)
      for (size_t r : readers) last[done_.at(n)] = std::max(last[done_.at(n)], r);
    std::vector<std::string> name(b_.steps.size());
    int fresh = 0;
    for (size_t k = 0; k < b_.steps.size(); ++k) {
      BindingStep& s = b_.steps[k];
      std::string reuse;
      for (auto& [p, v] : s.args) {
        if (v.empty() || v[0] != '%') continue;
        const size_t j = std::stoul(v.substr(1));
        v = name[j];
        if (reuse.empty() && last[j] == k) reuse = v;
      }
      name[k] = reuse.empty() ? "$" + std::to_string(fresh++) : reuse;
      s.out = name[k];
    }
  }

  const ir::Module& m_;
  const ir::Function& f_;
  std::string where_;
  const std::map<std::string, std::string>& rename_;
  Binding b_;
  std::vector<ParamUse> uses_;
  std::map<const ir::Node*, size_t> done_;
  std::map<const ir::Node*, std::vector<size_t>> uses_of_;
};

}  // namespace

Expected<Binding> derive_binding(const ir::Module& module, const std::string& program, const std::string& entry,
                                 const std::map<std::string, std::string>& rename) {
  const ir::Function* f = nullptr;
  if (!entry.empty()) {
    f = module.find(entry);
    if (!f) return Status::InvalidArgument(program + " has no fn " + q(entry) + " (the model's entry)");
  } else {
    // The roots: fns that take a record and that no fn calls.
    std::set<std::string> called;
    std::vector<const ir::Node*> stack;
    for (const auto& g : module.functions) {
      if (g.body) stack.push_back(g.body.get());
      for (const auto& r : g.more_results)
        if (r.body) stack.push_back(r.body.get());
    }
    std::set<const ir::Node*> seen;
    while (!stack.empty()) {
      const ir::Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (n->op == ir::Op::kCall) called.insert(n->callee);
      for (const auto& o : n->operands) stack.push_back(o.get());
    }
    std::string found;
    int n = 0;
    for (const auto& g : module.functions)
      if (!g.records.empty() && !called.count(g.name)) {
        found += (found.empty() ? "" : ", ") + q(g.name);
        f = &g;
        ++n;
      }
    if (n == 0)
      return Status::InvalidArgument(program + ": no fn takes a record and is called by no other, so none can be "
                                     "a model's entry (a model's weights are a record parameter of its entry)");
    if (n > 1)
      return Status::InvalidArgument(program + ": several fns could be the model's entry (" + found +
                                     "); name it (entry=)");
  }
  return Deriver(module, *f, program, rename).run();
}

}  // namespace mlk::rt
