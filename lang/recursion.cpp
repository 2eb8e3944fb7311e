#include "lang/recursion.h"

#include <functional>
#include <map>
#include <set>

namespace mlk {
namespace {

void callees(const ir::NodeRef& n, std::set<std::string>& out, std::set<const ir::Node*>& seen) {
  if (!seen.insert(n.get()).second) return;
  if (n->op == ir::Op::kCall) out.insert(n->callee);
  for (const auto& o : n->operands) callees(o, out, seen);
}

}  // namespace

void reject_recursion(const ast::Program& program, ir::Module& module, DiagnosticSink& sink) {
  std::map<std::string, std::set<std::string>> graph;
  for (const auto& f : module.functions) {
    std::set<const ir::Node*> seen;
    for (const ir::Result& r : f.results()) callees(r.body, graph[f.name], seen);
  }
  std::set<std::string> on_cycle;
  for (const auto& f : program.functions) {
    if (!graph.count(f.name) || on_cycle.count(f.name)) continue;
    // Depth-first search for a path back to f.
    std::vector<std::string> path;
    std::set<std::string> visited;
    std::function<bool(const std::string&)> dfs = [&](const std::string& g) {
      for (const auto& c : graph[g]) {
        if (c == f.name) return path.push_back(c), true;
        if (!graph.count(c) || !visited.insert(c).second) continue;
        path.push_back(c);
        if (dfs(c)) return true;
        path.pop_back();
      }
      return false;
    };
    if (!dfs(f.name)) continue;
    std::string chain = f.name;
    for (const auto& p : path) chain += " -> " + p;
    sink.error(DiagKind::Recursion, f.name_span,
               "`" + f.name + "` is recursive (" + chain + "); .tl fns are inlined, so calls must not form a cycle");
    on_cycle.insert(f.name);
    for (const auto& p : path) on_cycle.insert(p);
  }
  std::erase_if(module.functions, [&](const ir::Function& f) { return on_cycle.count(f.name) > 0; });
}

}  // namespace mlk
