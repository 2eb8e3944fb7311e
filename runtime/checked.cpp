// A tensor checked once against a written type (runtime/checked.h).
#include "runtime/checked.h"

#include <set>

#include "lang/frontend.h"
#include "runtime/boundary.h"
#include "lang/lexer.h"

namespace mlk::rt {

namespace {

// The fn and parameter check_type makes up for a type, and how a message of
// bind_dims reads in the caller's terms: the tensor and the type, not a
// parameter and a fn it never wrote, and dims as the `dims` it passes.
constexpr const char* kFn = "mlk_checked_type";
constexpr const char* kParam = "mlk_checked_tensor";

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

std::string in_callers_terms(std::string m) {
  replace_all(m, std::string(kParam) + ".shape[", "the tensor's shape[");
  replace_all(m, "(given by --dims)", "(given in dims)");
  replace_all(m, "bound by --dims", "bound by dims");
  replace_all(m, "`" + std::string(kFn) + "` has no dimension", "the type has no dimension");
  replace_all(m, " of `" + std::string(kFn) + "`", " of the type");
  // "is bound by no input; give it with --dims H=VALUE"
  const std::string hint = "is bound by no input; give it with --dims ";
  if (size_t at = m.find(hint); at != std::string::npos) {
    const std::string name = m.substr(at + hint.size(), m.find('=', at + hint.size()) - at - hint.size());
    m = m.substr(0, at) + "is not an extent of the tensor; give its value in dims (dims={\"" + name + "\": VALUE})";
  }
  return m;
}

}  // namespace

Expected<CheckedType> check_type(const std::string& type, DLDataType dtype, const std::vector<int64_t>& shape,
                                 const DimEnv& given) {
  // The type as the one parameter of a fn over every name it mentions.
  std::vector<std::string> names;
  {
    SourceFile f("type", type);
    DiagnosticSink quiet;
    std::set<std::string> seen;
    int depth = 0;
    for (const Token& t : lex(f, quiet)) {
      // Only what a Tensor or Scalar type is written with: nothing that ends it or starts another item.
      static const std::set<Tok> kNotInAType = {Tok::kFn,     Tok::kPublic, Tok::kLet,    Tok::kTune,   Tok::kRecord,
                                                Tok::kImport, Tok::kString, Tok::kArrow,  Tok::kLBrace,
                                                Tok::kRBrace, Tok::kError};
      depth += t.kind == Tok::kLParen ? 1 : t.kind == Tok::kRParen ? -1 : 0;  // `(S + 1) * 2`, never a `)` more
      if (kNotInAType.count(t.kind) || depth < 0)
        return Status::Usage("`" + type + "` is not a Tensor or Scalar type: `" + t.text + "`");
      if (t.kind == Tok::kIdent && seen.insert(t.text).second) names.push_back(t.text);
    }
  }
  std::string dims;
  for (const auto& n : names) dims += (dims.empty() ? "" : ", ") + n;
  const std::string text = std::string("fn ") + kFn + " [" + dims + "](" + kParam + ": " + type + ") -> Scalar[F32] = 0.0\n";
  FrontendResult r = compile_source("type", text);
  if (!r.ok() || r.module.functions.size() != 1 || !r.module.functions.front().frames.empty() ||
      r.module.functions.front().params.size() != 1) {
    if (r.diagnostics.empty()) return Status::Usage("type `" + type + "`: not one tensor type");
    // Where in the type the first problem is (1-based), past its end for
    // one that ends too soon (a missing `]`): never a column of the fn
    // made up around it.
    const Diagnostic& d = r.diagnostics.front();
    const size_t start = text.find(std::string(kParam) + ": ") + std::string(kParam).size() + 2;
    size_t col = d.span.begin >= start ? d.span.begin - start + 1 : 1;
    std::string message = d.message;
    if (col > type.size()) {
      col = type.size() + 1;
      if (size_t f = message.rfind(", found "); f != std::string::npos) message = message.substr(0, f) + ", found the end of the type";
    }
    return Status::Usage("type `" + type + "`, column " + std::to_string(col) + ": " + message);
  }
  const ir::Function& fn = r.module.functions.front();
  const ir::Type& t = fn.params.front().type;
  const DLDataType want = to_dl(t.dtype);
  if (dtype.code != want.code || dtype.bits != want.bits || dtype.lanes != want.lanes)
    return Status::Usage("a " + dl_dtype_name(dtype) + " tensor, but the type `" + type + "` is " + dtype_name(t.dtype));
  if (shape.size() != t.shape.size())
    return Status::Usage("a rank-" + std::to_string(shape.size()) + " tensor, but the type `" + type + "` has rank " +
                         std::to_string(t.shape.size()));
  auto env = bind_dims(fn, {shape}, given);
  if (!env.ok()) return Status::Usage("type `" + type + "`: " + in_callers_terms(env.status().message()));
  CheckedType out;
  out.type = t.str();
  for (const auto& p : fn.refinements) out.refinements.push_back(p.str());
  out.dims = std::move(env).value();
  out.dtype = dtype;
  out.shape = shape;
  return out;
}

Proven Checked::proven(size_t arg) const { return {arg, type.refinements, type.dims, type.dtype, type.shape}; }

Expected<Checked> check(const DLTensor& t, const std::string& type, const DimEnv& given) {
  if (t.ndim < 0) return Status::Usage("the checked tensor has rank " + std::to_string(t.ndim));
  if (t.ndim > 0 && !t.shape) return Status::Usage("the checked tensor: shape is NULL");
  auto r = check_type(type, t.dtype, std::vector<int64_t>(t.shape, t.shape + t.ndim), given);
  if (!r.ok()) return r.status();
  return Checked{t, std::move(r).value()};
}

CallArgs& CallArgs::add(const DLTensor* t) {
  tensors.push_back(t);
  return *this;
}

CallArgs& CallArgs::add(const Checked& h) {
  proven.push_back(h.proven(tensors.size()));
  tensors.push_back(&h.tensor);
  return *this;
}

}  // namespace mlk::rt
