#include "lang/ir_printer.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <set>

#include "base/sha256.h"

namespace mlk::ir {
namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// "[B, S] (x: Tensor[F32, [B, S]], ..) -> T": the dims, parameters and
// result types; several results print as a tuple. `as_written`: a rank-0
// type as `Scalar[F32]` (for people; the hashed text keeps Tensor[F32, []]).
std::string interface_text(const Function& f, bool as_written = false) {
  auto type = [&](const Type& t) {
    return as_written && t.shape.empty() ? std::string("Scalar[") + dtype_name(t.dtype) + "]" : t.str();
  };
  std::string out = "[";
  for (size_t i = 0; i < f.dim_vars.size(); ++i) out += (i ? ", " : "") + f.dim_vars[i];
  out += "] (";
  for (size_t i = 0; i < f.params.size(); ++i) out += (i ? ", " : "") + f.params[i].name + ": " + type(f.params[i].type);
  std::string rt = type(f.result_type);
  if (!f.more_results.empty()) {
    for (const Result& r : f.more_results) rt += ", " + type(r.type);
    rt = "(" + rt + ")";
  }
  return out + ") -> " + rt;
}

std::string refinements_text(const Function& f) {
  std::string out;
  for (size_t i = 0; i < f.refinements.size(); ++i) out += (i ? ", " : "") + f.refinements[i].str();
  return out;
}

class Printer {
 public:
  std::string run(const Function& f) {
    out_ = "fn " + f.name + " " + interface_text(f) + (f.is_public ? " public" : "") + "\n";
    // Several results print as a tuple, in the signature and at `return`.
    std::string ret_open = f.more_results.empty() ? "" : "(", ret_close = f.more_results.empty() ? "" : ")";
    if (!f.refinements.empty()) out_ += "  where [" + refinements_text(f) + "]\n";
    std::string ret;
    for (const Result& r : f.results()) ret += (ret.empty() ? "" : ", ") + visit(r.body);
    out_ += "  return " + ret_open + ret + ret_close + "\n";
    return out_;
  }

 private:
  std::string visit(const NodeRef& n) {
    auto it = ids_.find(n.get());
    if (it != ids_.end()) return it->second;
    std::vector<std::string> ops;
    for (const auto& o : n->operands) ops.push_back(visit(o));
    std::string id = "%" + std::to_string(ids_.size());
    ids_[n.get()] = id;
    std::string line = "  " + id + " = " + op_name(n->op);
    if (n->op == Op::kParam) line += " " + std::to_string(n->index);
    if (n->op == Op::kCall) {
      line += " @" + n->callee + "[";
      for (size_t i = 0; i < n->dims.size(); ++i) line += (i ? ", " : "") + n->dims[i].str();
      line += "]";
    }
    for (size_t i = 0; i < ops.size(); ++i) line += (i ? ", " : " ") + ops[i];
    if (!n->ints.empty()) line += " ints=" + ints_str(n->ints);
    if (n->op != Op::kCall && !n->dims.empty()) line += " dims=" + shape_str(n->dims);
    if (!n->literal.empty()) line += " value=" + canonical_literal(n->literal, n->type.dtype);
    line += " : " + n->type.str() + "\n";
    out_ += line;
    return id;
  }

  std::string out_;
  std::map<const Node*, std::string> ids_;
};

void collect_callees(const NodeRef& n, std::set<std::string>& out, std::set<const Node*>& seen) {
  if (!seen.insert(n.get()).second) return;
  if (n->op == Op::kCall) out.insert(n->callee);
  for (const auto& o : n->operands) collect_callees(o, out, seen);
}

}  // namespace

std::string canonical_literal(const std::string& text, DType t) {
  if (text == "true" || text == "false") return text;
  bool integral = !is_float(t) && text.find_first_of(".eE") == std::string::npos;
  if (integral) {
    int64_t v;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && p == text.data() + text.size()) return std::to_string(v);
  }
  double d = std::strtod(text.c_str(), nullptr);
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  // Keep floats visibly floating (1.0 stays distinct from the integer 1).
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string print_function(const Function& f) { return Printer().run(f); }

std::string print_signature(const Function& f) {
  std::string out = f.name + " " + interface_text(f, /*as_written=*/true);
  return f.refinements.empty() ? out : out + " where [" + refinements_text(f) + "]";
}

std::string print_module(const Module& m) {
  std::vector<const Function*> fs;
  for (const auto& f : m.functions) fs.push_back(&f);
  std::sort(fs.begin(), fs.end(), [](const Function* a, const Function* b) { return a->name < b->name; });
  std::string out;
  for (const Function* f : fs) out += print_function(*f) + "\n";
  for (const auto& t : m.tunes) {
    out += "tune " + t.function + " [";
    bool first = true;
    for (const auto& [k, v] : t.dims) {
      out += (first ? "" : ", ") + k + " = " + std::to_string(v);
      first = false;
    }
    out += "]\n";
  }
  return out;
}

std::string function_hash(const Module& m, const Function& f) {
  std::set<std::string> callees;
  std::set<const Node*> seen;
  for (const Result& r : f.results()) collect_callees(r.body, callees, seen);
  std::string text = print_function(f);
  for (const auto& c : callees) {
    const Function* g = m.find(c);
    // The checker forbids recursion only implicitly (a callee must be checked);
    // a self-call hashes by name to stay finite.
    text += "callee " + c + " " + (g && g != &f ? function_hash(m, *g) : std::string("self")) + "\n";
  }
  return sha256_hex(text);
}

std::string module_hash(const Module& m) { return sha256_hex(print_module(m)); }

}  // namespace mlk::ir
