#include "lang/c_declarations.h"

#include <algorithm>
#include <cctype>

#include "base/columns.h"
#include "lang/ir_printer.h"

namespace mlk {

namespace {

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

std::string dtype_enum(DType t) {
  std::string n = dtype_name(t);
  for (char& c : n) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "MLK_" + n;
}

}  // namespace

std::string c_declarations(const ir::Function& f, const CHeaderOptions& o) {
  const std::string& n = f.name;
  const bool several = !f.more_results.empty();
  std::string s = "/* mlk kernel " + ir::print_signature(f) + "\n *\n";
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < f.params.size(); ++i)
    rows.push_back({"args[" + std::to_string(i) + "]", f.params[i].name, dtype_enum(f.params[i].type.dtype),
                    shape_text(f.params[i].type.shape)});
  const auto results = f.results();
  for (size_t i = 0; i < results.size(); ++i)
    rows.push_back({several ? "outs[" + std::to_string(i) + "]" : std::string("out"), "",
                    dtype_enum(results[i].type.dtype), shape_text(results[i].type.shape)});
  s += aligned_columns(rows, " *   ");
  std::string dims;
  for (size_t i = 0; i < o.unbound_dims.size(); ++i)
    dims += (i ? ", " : "") + std::string("dims[") + std::to_string(i) + "] = " + o.unbound_dims[i];
  s += " *   dims: " + (dims.empty() ? std::string("none (every dimension is an extent of a parameter; pass NULL, 0)")
                                      : dims) + "\n";
  if (!f.refinements.empty()) {
    std::string r;
    for (size_t i = 0; i < f.refinements.size(); ++i) r += (i ? ", " : "") + f.refinements[i].str();
    s += " *   refinements: " + r + " (checked by the entry: MLK_ERR_REFINEMENT)\n";
  }
  s += " */\n";
  if (several)
    s += "int mlk_" + n + "_results(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* outs, int32_t nouts,\n"
         "    const int64_t* dims, int32_t ndims);\n";
  else
    s += "int mlk_" + n + "(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* out, const int64_t* dims,\n"
         "    int32_t ndims);\n";
  if (o.cuda)
    s += "int mlk_" + n + "_cuda(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* out, const int64_t* dims,\n"
         "    int32_t ndims, const mlk_cuda_call_t* call);\n";
  if (o.packed)
    s += "int mlk_" + n + "_pack(int32_t which, const mlk_tensor_t* args, int32_t nargs, const int64_t* dims,\n"
         "    int32_t ndims, mlk_tensor_t* packed, int64_t* shape);\n"
         "int mlk_" + n + "_packed(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* outs, int32_t nouts,\n"
         "    const int64_t* dims, int32_t ndims, const mlk_tensor_t* packed, int32_t npacked);\n";
  return s;
}

std::string c_header(const ir::Function& f, const CHeaderOptions& o) {
  std::string guard = "MLK_KERNEL_" + f.name + "_H";
  for (char& c : guard) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "/* " + f.name + ".h: the C entry of the mlk kernel `" + f.name +
         "`, written by `mlk build` (the ABI: mlk_abi.h, beside it). */\n"
         "#ifndef " + guard + "\n#define " + guard + "\n\n#include \"mlk_abi.h\"\n\n"
         "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n" + c_declarations(f, o) +
         "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* " + guard + " */\n";
}

std::string signature_snapshot(const ir::Module& m) {
  std::string out;
  for (const auto& f : m.functions) {
    if (!f.is_public) continue;
    // The `dims` array an artifact reads is in name order (the compile
    // driver's, manifest.json's unbound_dims), not the fn's declaration order.
    std::vector<std::string> dims = f.unbound_dims();
    std::sort(dims.begin(), dims.end());
    out += (out.empty() ? "" : "\n") + c_declarations(f, {.unbound_dims = dims});
  }
  return out;
}

namespace {

// A snapshot's blocks by fn name (the word after "/* mlk kernel "), in order.
std::vector<std::pair<std::string, std::vector<std::string>>> blocks(const std::string& text) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  static const std::string kHead = "/* mlk kernel ";
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a snapshot kept with CRLF line ends
    if (line.rfind(kHead, 0) == 0 || out.empty()) {  // lines before the first fn: a block named ""
      std::string rest = line.rfind(kHead, 0) == 0 ? line.substr(kHead.size()) : "";
      out.push_back({rest.substr(0, rest.find(' ')), {}});
    }
    if (!line.empty()) out.back().second.push_back(line);
  }
  return out;
}

}  // namespace

std::string snapshot_changes(const std::string& before, const std::string& now) {
  if (before == now) return "";
  const auto old_blocks = blocks(before), new_blocks = blocks(now);
  auto find = [](const auto& bs, const std::string& name) -> const std::vector<std::string>* {
    for (const auto& [n, lines] : bs)
      if (n == name) return &lines;
    return nullptr;
  };
  std::string out;
  for (const auto& [name, lines] : new_blocks) {
    const auto* old = find(old_blocks, name);
    if (name.empty()) {
      if (old ? *old != lines : !lines.empty()) out += "the lines before the first fn differ\n";
      continue;
    }
    if (!old) {
      out += "`" + name + "` is new\n";
      continue;
    }
    if (*old == lines) continue;
    out += "`" + name + "` changed:\n";
    for (size_t i = 0; i < std::max(old->size(), lines.size()); ++i) {
      const std::string a = i < old->size() ? (*old)[i] : "", b = i < lines.size() ? lines[i] : "";
      if (a == b) continue;
      if (i < old->size()) out += "  - " + a + "\n";
      if (i < lines.size()) out += "  + " + b + "\n";
    }
  }
  for (const auto& [name, lines] : old_blocks)
    if (!find(new_blocks, name)) out += name.empty() ? "the lines before the first fn differ\n" : "`" + name + "` was removed\n";
  // Equal blocks in another order, or text outside every block.
  return out.empty() ? "the fns are the same but the text differs (their order, or lines outside them)\n" : out;
}

}  // namespace mlk
