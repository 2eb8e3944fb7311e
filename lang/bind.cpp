#include "lang/bind.h"

#include <charconv>
#include <set>
#include <sstream>

namespace mlk {

namespace {

bool bare_var(const Dim& d, std::string* name) {
  const auto& t = d.terms();
  if (t.size() != 1 || t[0].coef != 1 || t[0].atoms.size() != 1 || t[0].atoms[0].quot) return false;
  *name = t[0].atoms[0].key;
  return true;
}

std::string axis_name(const ir::Function& f, size_t p, size_t ax) {
  return f.params[p].name + ".shape[" + std::to_string(ax) + "]";
}

}  // namespace

Expected<DimEnv> bind_dims(const ir::Function& f, const std::vector<std::vector<int64_t>>& shapes,
                           const DimEnv& given, const SkipRefinement& skip) {
  if (shapes.size() != f.params.size())
    return Status::InvalidArgument("`" + f.name + "` takes " + std::to_string(f.params.size()) + " inputs, got " +
                                   std::to_string(shapes.size()));
  for (const auto& [k, v] : given) {
    bool known = false;
    for (const auto& d : f.dim_vars) known = known || d == k;
    if (!known) return Status::InvalidArgument("`" + f.name + "` has no dimension `" + k + "` (given by --dims)");
    if (v < 1 || v > kMaxExtent)
      return Status::InvalidArgument("dimension " + k + " = " + std::to_string(v) + " must be in [1, 2147483647]");
  }
  DimEnv env = given;
  std::map<std::string, std::string> origin;
  for (const auto& [k, v] : given) origin[k] = "--dims";
  for (size_t p = 0; p < f.params.size(); ++p) {
    const Shape& want = f.params[p].type.shape;
    if (shapes[p].size() != want.size())
      return Status::InvalidArgument("`" + f.params[p].name + "` must have rank " + std::to_string(want.size()) + " " +
                                     f.params[p].type.str() + ", got rank " + std::to_string(shapes[p].size()));
    for (size_t ax = 0; ax < want.size(); ++ax) {
      int64_t got = shapes[p][ax];
      if (got < 1 || got > kMaxExtent)
        return Status::InvalidArgument(axis_name(f, p, ax) + " = " + std::to_string(got) +
                                       ", but extents must be in [1, 2147483647]");
      std::string v;
      if (!bare_var(want[ax], &v)) continue;
      auto it = env.find(v);
      if (it == env.end()) {
        env[v] = got;
        origin[v] = axis_name(f, p, ax);
      } else if (it->second != got) {
        return Status::InvalidArgument(axis_name(f, p, ax) + " = " + std::to_string(got) + " but " + v + " = " +
                                       std::to_string(it->second) + ", bound by " + origin[v]);
      }
    }
  }
  for (const auto& d : f.dim_vars)
    if (!env.count(d))
      return Status::InvalidArgument("dimension `" + d + "` of `" + f.name +
                                     "` is bound by no input; give it with --dims " + d + "=VALUE");
  // Compound extents (`D / H`, `2 * N`) and refinements, now that all is bound.
  for (size_t p = 0; p < f.params.size(); ++p) {
    const Shape& want = f.params[p].type.shape;
    for (size_t ax = 0; ax < want.size(); ++ax) {
      auto v = want[ax].eval(env);
      if (!v || *v != shapes[p][ax])
        return Status::InvalidArgument(axis_name(f, p, ax) + " = " + std::to_string(shapes[p][ax]) + " but " +
                                       want[ax].str() + " = " + (v ? std::to_string(*v) : "(not a whole number)") +
                                       " here");
    }
  }
  for (const Pred& r : f.refinements) {
    if (skip && skip(r, env)) continue;
    auto holds = r.eval(env);
    if (!holds || !*holds) {
      std::string vals;
      std::set<std::string> vars;
      r.lhs.collect_vars(vars);
      r.rhs.collect_vars(vars);
      for (const auto& v : vars) vals += (vals.empty() ? "" : ", ") + v + " = " + std::to_string(env[v]);
      return Status::InvalidArgument("refinement `" + r.str() + "` of `" + f.name + "` does not hold: " + vals);
    }
  }
  return env;
}

Expected<std::vector<int64_t>> concrete_shape(const Shape& s, const DimEnv& env) {
  std::vector<int64_t> out;
  for (const Dim& d : s) {
    auto v = d.eval(env);
    if (!v || *v < 1 || *v > kMaxExtent)
      return Status::InvalidArgument("extent `" + d.str() + "` = " + (v ? std::to_string(*v) : "(undefined)") +
                                     " is not in [1, 2147483647]");
    out.push_back(*v);
  }
  return out;
}

Expected<DimEnv> parse_dim_list(const std::string& text) {
  DimEnv out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return Status::InvalidArgument("`" + item + "` is not NAME=VALUE");
    std::string name = item.substr(0, eq), val = item.substr(eq + 1);
    int64_t v;
    auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (ec != std::errc() || p != val.data() + val.size() || v < 1)
      return Status::InvalidArgument("`" + item + "` needs a positive integer value");
    if (out.count(name)) return Status::InvalidArgument("`" + name + "` is given twice");
    out[name] = v;
  }
  if (out.empty()) return Status::InvalidArgument("expected NAME=VALUE[,NAME=VALUE...]");
  return out;
}

std::string dims_str(const DimEnv& d) {
  std::string s;
  for (const auto& [k, v] : d) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

}  // namespace mlk
