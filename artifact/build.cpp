// Ahead-of-time compilation of one function for one profile into an artifact
// directory (see docs/artifacts.md for the layout and the manifest).
#include "artifact/build.h"
#include "lang/c_declarations.h"
#include "base/files.h"
#include "base/time.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "lang/ir_printer.h"
#include "lang/precision.h"
#include "base/sha256.h"
#include "scheduler/compile.h"
#include "scheduler/rules.h"  // kScheduleSpaceVersion
#include "artifact/cuda_entry.h"
#include "targets/toolchain.h"
#include "base/json.h"

namespace mlk {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Runs a command; returns its exit status and combined output.
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "cannot run: " + cmd};
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

std::string q(const std::string& s) { return "'" + s + "'"; }

const char* abi_dtype(DType t) {
  switch (t) {
    case DType::F16: return "MLK_F16";
    case DType::BF16: return "MLK_BF16";
    case DType::F32: return "MLK_F32";
    case DType::F64: return "MLK_F64";
    case DType::I8: return "MLK_I8";
    case DType::I16: return "MLK_I16";
    case DType::I32: return "MLK_I32";
    case DType::I64: return "MLK_I64";
    case DType::U8: return "MLK_U8";
    case DType::Bool: return "MLK_BOOL";
  }
  return "?";
}

// halide_type_code_t and bits of a dtype's storage.
std::pair<int, int> halide_code(DType t) {
  switch (t) {
    case DType::F16: return {2, 16};
    case DType::BF16: return {4, 16};
    case DType::F32: return {2, 32};
    case DType::F64: return {2, 64};
    case DType::I8: return {0, 8};
    case DType::I16: return {0, 16};
    case DType::I32: return {0, 32};
    case DType::I64: return {0, 64};
    case DType::U8: case DType::Bool: return {1, 8};
  }
  return {0, 0};
}

// C identifiers in the wrapper. Every identifier derived from a .tl name is
// prefixed: dimension `NAME` is the local `mlk_d_NAME`, so names such as `b`,
// `out`, `dims`, `int` or `errno` never meet a C keyword, a libc macro or one
// of the wrapper's own names. (Parameter names appear only inside string
// literals.) The wrapper's own file-scope names start with `mlkabi_`, which
// no entry `mlk_FN` and no prefixed local can spell; its locals (b, d, rc, i
// and the entry's parameters) have no `mlk_` prefix at all.
std::string c_dim_var(const std::string& name) { return "mlk_d_" + name; }

// Text for inside a C string literal used as a printf format: quotes,
// backslashes and `%` escaped (user names are identifiers, but the wrapper
// does not rely on it).
std::string c_fmt_text(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '%') out += '%';
    out += ch;
  }
  return out;
}

// A Dim as a C int64_t expression over the prefixed dimension locals.
// Quotients divide through mlkabi_div, which yields 0 for a zero divisor
// (the extent check then fails instead of trapping).
std::string c_dim_expr(const Dim& d) {
  if (d.terms().empty()) return "((int64_t)0)";
  std::string s;
  for (const Dim::Term& t : d.terms()) {
    std::string term;
    if (t.coef != 1 || t.atoms.empty())
      term = t.coef == INT64_MIN ? "(-9223372036854775807LL - 1)" : "(int64_t)" + std::to_string(t.coef) + "LL";
    for (const Dim::Atom& a : t.atoms)
      term += (term.empty() ? "" : " * ") + (a.quot ? "mlkabi_div(" + c_dim_expr(a.quot->num) + ", " +
                                                          c_dim_expr(a.quot->den) + ")"
                                                    : c_dim_var(a.key));
    s += (s.empty() ? "(" : " + (") + term + ")";
  }
  return "(" + s + ")";
}

// The C entry of `f` (targets/abi.h): mlk_NAME, or mlk_NAME_results for a fn
// with several results.
std::string entry_symbol(const ir::Function& f) {
  return "mlk_" + f.name + (f.more_results.empty() ? "" : "_results");
}

// The C statements of the wrapper's mlkabi_run that check f's refinements
// over the dimension locals, each returning MLK_ERR_REFINEMENT (with the
// refinement in mlk_last_error) when it does not hold.
std::string refinement_checks(const ir::Function& f) {
  std::ostringstream c;
  for (const Pred& r : f.refinements) {
    std::string l = c_dim_expr(r.lhs), rr = c_dim_expr(r.rhs);
    std::string cond;
    switch (r.op) {
      // x mod -1 = 0 for every x; testing it apart keeps INT64_MIN % -1 from trapping.
      case Pred::Op::kModZero: cond = rr + " != 0 && (" + rr + " == -1 || " + l + " % " + rr + " == 0)"; break;
      case Pred::Op::kEq: cond = l + " == " + rr; break;
      case Pred::Op::kNe: cond = l + " != " + rr; break;
      case Pred::Op::kLt: cond = l + " < " + rr; break;
      case Pred::Op::kLe: cond = l + " <= " + rr; break;
      case Pred::Op::kGt: cond = l + " > " + rr; break;
      case Pred::Op::kGe: cond = l + " >= " + rr; break;
    }
    c << "  if (!(" << cond << ")) { snprintf(mlkabi_err, sizeof mlkabi_err, \"refinement `" << c_fmt_text(r.str())
      << "` does not hold\"); return MLK_ERR_REFINEMENT; }\n";
  }
  return c.str();
}

// Halide's parallel loops on the host process's OpenMP team where it has
// one (PyTorch's), else on Halide's own pool (targets/omp_par_for.h): the
// runtime's halide_do_par_for is weak, this one replaces it.
std::string omp_wrapper_support() {
  return std::string("/* Parallel loops on the process's OpenMP team where it has one (PyTorch's). */\n") +
         omp_par_for_text() +
         "\nint halide_do_par_for(void* user_context, halide_task_t f, int min, int size, uint8_t* closure) {\n"
         "  struct mlk_omp_team_t team;\n"
         "  return mlk_omp_team(&team) ? mlk_omp_do_par_for(&team, user_context, f, min, size, closure)\n"
         "                             : halide_default_do_par_for(user_context, f, min, size, closure);\n}\n\n";
}

// The fixed part of the C wrapper, after its includes: the error buffer,
// halide_error, mlk_abi_version and mlk_last_error, the scratch cache behind
// halide_malloc/halide_free, (for a CUDA profile, `gpu`) the CUDA support,
// mlkabi_div and mlkabi_fill (an mlk_tensor_t checked into a halide_buffer_t).
std::string wrapper_support(bool gpu) {
  std::ostringstream c;
  c << "static __thread char mlkabi_err[512];\n"
    << "/* Halide's runtime reports errors here; keep the message for mlk_last_error(). */\n"
    << "void halide_error(void* user_context, const char* msg) {\n"
    << "  (void)user_context;\n  snprintf(mlkabi_err, sizeof mlkabi_err, \"%s\", msg);\n"
    << "  size_t n = strlen(mlkabi_err);\n  while (n && mlkabi_err[n - 1] == '\\n') mlkabi_err[--n] = 0;\n}\n"
    << "__attribute__((weak, visibility(\"default\"))) int mlk_abi_version(void) { return MLK_ABI_VERSION; }\n"
    << "__attribute__((weak, visibility(\"default\"))) const char* mlk_last_error(void) { return mlkabi_err; }\n\n"
    << "/* halide_malloc/halide_free keep large scratch blocks between calls. */\n"
    << scratch_cache_text() << "\n"
    << "void* halide_malloc(void* user_context, size_t n) { (void)user_context; return mlk_scratch_get(n); }\n"
    << "void halide_free(void* user_context, void* p) { (void)user_context; mlk_scratch_put(p); }\n"
    << "__attribute__((destructor)) static void mlkabi_scratch_fini(void) { mlk_scratch_release(); }\n\n"
    << (gpu ? std::string() : omp_wrapper_support())
    << (gpu ? cuda_wrapper_support() : std::string())
    << "static int64_t mlkabi_div(int64_t a, int64_t b) { return b == 0 || (b == -1 && a == INT64_MIN) ? 0 : a / b; }\n\n"
    << "static int mlkabi_fill(const mlk_tensor_t* t, int dtype, int rank, int code, int bits, halide_buffer_t* b,\n"
    << "                       halide_dimension_t* d, const char* what) {\n"
    << "  if (!t || !t->data) { snprintf(mlkabi_err, sizeof mlkabi_err, \"%s: null tensor\", what); return MLK_ERR_NULL; }\n"
    << "  if (t->dtype != dtype) { snprintf(mlkabi_err, sizeof mlkabi_err, \"%s: dtype %d, expected %d\", what, t->dtype, dtype); return MLK_ERR_DTYPE; }\n"
    << "  if (t->rank != rank) { snprintf(mlkabi_err, sizeof mlkabi_err, \"%s: rank %d, expected %d\", what, t->rank, rank); return MLK_ERR_RANK; }\n"
    << "  memset(b, 0, sizeof *b);\n"
    << "  b->host = (uint8_t*)t->data;\n"
    << "  b->type.code = (uint8_t)code; b->type.bits = (uint8_t)bits; b->type.lanes = 1;\n"
    << "  b->dimensions = rank; b->dim = d;\n"
    << "  b->flags = 1; /* halide_buffer_flag_host_dirty: the data is on the host */\n"
    << "  int64_t stride = 1;\n"
    << "  for (int i = rank - 1; i >= 0; --i) {\n"
    << "    int64_t e = t->shape[i], s = t->strides ? t->strides[i] : stride;\n"
    << "    if (e < 1 || e > 2147483647 || s < -2147483647 || s > 2147483647) {\n"
    << "      snprintf(mlkabi_err, sizeof mlkabi_err, \"%s: axis %d extent %lld or stride %lld outside int32\", what, i, (long long)e, (long long)s);\n"
    << "      return MLK_ERR_EXTENT;\n    }\n"
    << "    d[rank - 1 - i].min = 0; d[rank - 1 - i].extent = (int32_t)e; d[rank - 1 - i].stride = (int32_t)s;\n"
    << "    d[rank - 1 - i].flags = 0;\n"
    << "    stride *= e;\n  }\n  return MLK_OK;\n}\n\n";
  return c.str();
}

// The C wrapper: mlk ABI -> Halide's AOT entry point.
// For a CUDA profile (`gpu`) it also exports mlk_NAME_cuda (targets/abi.h),
// with the CUDA half from artifact/cuda_entry.h.
// Code in AMX tiles: Linux gives their state to a process that asks
// (targets/amx.h); the library asks at its first call (not when loaded: a
// process that loads it and never calls it keeps its signal frames), and
// its entry refuses to run, saying why, where the answer was no.
std::string amx_support() {
  return "#include <errno.h>\n#include <pthread.h>\n#include <sys/syscall.h>\n#include <unistd.h>\n"
         "/* This kernel runs in AMX tiles: ask Linux for their state (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). */\n"
         "static pthread_once_t mlkabi_amx_once = PTHREAD_ONCE_INIT;\n"
         "static int mlkabi_amx_errno;\n"
         "static void mlkabi_amx_init(void) {\n"
         "  mlkabi_amx_errno = syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 0 : errno;\n}\n\n";
}

std::string amx_check() {
  return "  pthread_once(&mlkabi_amx_once, mlkabi_amx_init);\n"
         "  if (mlkabi_amx_errno != 0) {\n"
         "    snprintf(mlkabi_err, sizeof mlkabi_err, \"this kernel uses AMX tiles, and Linux refused the process their "
         "state (arch_prctl ARCH_REQ_XCOMP_PERM: %s%s)\", strerror(mlkabi_amx_errno),\n"
         "             mlkabi_amx_errno == EINVAL ? \"; a CPU without AMX, or Linux before 5.16\" : \"\");\n"
         "    return MLK_ERR_CPU;\n  }\n";
}

// The C statements that fill the packed weights' buffers pb[] before the
// inner entry runs (CompiledObject::packs): from `packed` (npacked tensors,
// as mlk_NAME_packed takes them) when given, else each packed into scratch
// now; with pack_only >= 0, only that pack, into `out` (or its shape into
// pack_shape when out is NULL), and return. `dims_args` is the inner
// entries' dimension arguments.
std::string pack_statements(const std::vector<CompiledObject::PackEntry>& packs, size_t nargs,
                            const std::string& dims_args) {
  std::ostringstream c;
  const size_t np = packs.size();
  c << "  halide_buffer_t pb[" << np << "];\n  halide_dimension_t pd[" << np << "][4];\n  void* ps[" << np
    << "] = {0};\n  int64_t pshape[" << np << "][4];\n";
  for (size_t k = 0; k < np; ++k) {  // scheduler/packed.h, packed_shape
    const auto& e = packs[k];
    const std::string n = "(" + c_dim_expr(e.n) + ")", at = "  pshape[" + std::to_string(k) + "]";
    c << at << "[0] = 1;\n" << at << "[1] = (" << c_dim_expr(e.k) << " + " << e.k_quantum - 1 << ") / " << e.k_quantum
      << " * " << e.k_quantum / 2 << ";\n" << at << "[2] = (" << n << " + " << e.n_quantum - 1 << ") / " << e.n_quantum
      << " * " << e.n_quantum << ";\n"
      << at << "[3] = 2;\n";
  }
  auto run_pack = [&](size_t k, const std::string& into) {
    std::string call = "mlkabi_packed_" + std::to_string(k) + "(";
    for (size_t i = 0; i < nargs; ++i) call += "&b[" + std::to_string(i) + "], ";
    return call + dims_args + into + ")";
  };
  c << "  if (pack_only >= 0) {\n"
    << "    if (pack_only >= " << np << ") { snprintf(mlkabi_err, sizeof mlkabi_err, \"weight pack %d of " << np
    << "\", (int)pack_only); return MLK_ERR_NARGS; }\n"
    << "    if (!out) { memcpy(pack_shape, pshape[pack_only], sizeof pshape[0]); return MLK_OK; }\n"
    << "    if ((rc = mlkabi_fill_packed(out, pshape[pack_only], &pb[0], pd[0], \"the packed weight\"))) return rc;\n"
    << "    switch (pack_only) {\n";
  for (size_t k = 0; k < np; ++k) c << "      case " << k << ": rc = " << run_pack(k, "&pb[0]") << "; break;\n";
  c << "    }\n    if (rc != 0 && !mlkabi_err[0]) snprintf(mlkabi_err, sizeof mlkabi_err, \"Halide error %d\", rc);\n"
    << "    return rc;\n  }\n"
    << "  if (packed && npacked != " << np << ") { snprintf(mlkabi_err, sizeof mlkabi_err, \"" << np
    << " packed weights, got %d\", (int)npacked); return MLK_ERR_NARGS; }\n"
    << "  for (int k = 0; k < " << np << "; ++k) {\n"
    << "    if (packed) {\n"
    << "      if ((rc = mlkabi_fill_packed(&packed[k], pshape[k], &pb[k], pd[k], \"a packed weight\"))) return rc;\n"
    << "      continue;\n    }\n"
    << "    if (pshape[k][1] < 1 || pshape[k][2] < 1 || pshape[k][1] > 1073741823 / pshape[k][2]) {\n"
    << "      snprintf(mlkabi_err, sizeof mlkabi_err, \"a packed weight of %lld x %lld pairs is outside int32\",\n"
    << "               (long long)pshape[k][1], (long long)pshape[k][2]);\n"
    << "      rc = MLK_ERR_EXTENT;\n      break;\n    }\n"
    << "    mlk_tensor_t t = {0, MLK_BF16, 4, pshape[k], 0};\n"
    << "    t.data = ps[k] = mlk_scratch_get((size_t)pshape[k][1] * (size_t)pshape[k][2] * 4);\n"
    << "    if (!ps[k]) { rc = MLK_ERR_ALLOC; snprintf(mlkabi_err, sizeof mlkabi_err, \"no memory for a packed weight\"); break; }\n"
    << "    if ((rc = mlkabi_fill_packed(&t, pshape[k], &pb[k], pd[k], \"a packed weight\"))) break;\n"
    << "    switch (k) {\n";
  for (size_t k = 0; k < np; ++k)
    c << "      case " << k << ": rc = " << run_pack(k, "&pb[" + std::to_string(k) + "]") << "; break;\n";
  c << "    }\n    if (rc != 0) break;\n  }\n";
  return c.str();
}

// The declarations of the pack entries (in <fn>_pack<k>.o) and the check of
// a packed tensor: BF16, rank 4, dense, of the extents in `shape`.
std::string pack_support(const std::vector<CompiledObject::PackEntry>& packs, size_t nargs,
                         const std::vector<std::string>& unbound) {
  std::ostringstream c;
  auto [bcode, bbits] = halide_code(DType::BF16);
  for (size_t k = 0; k < packs.size(); ++k) {
    c << "int " << packs[k].entry << "(";
    for (size_t i = 0; i < nargs; ++i) c << "struct halide_buffer_t*, ";
    for (size_t i = 0; i < unbound.size(); ++i) c << "int32_t, ";
    c << "struct halide_buffer_t*);\n#define mlkabi_packed_" << k << " " << packs[k].entry << "\n";
  }
  c << "static int mlkabi_fill_packed(const mlk_tensor_t* t, const int64_t* shape, halide_buffer_t* b, halide_dimension_t* d,\n"
    << "                              const char* what) {\n"
    << "  int rc = mlkabi_fill(t, MLK_BF16, 4, " << bcode << ", " << bbits << ", b, d, what);\n"
    << "  if (rc) return rc;\n"
    << "  int64_t stride = 1;\n"
    << "  for (int i = 3; i >= 0; --i) {\n"
    << "    if (t->shape[i] != shape[i] || (t->strides && t->strides[i] != stride)) {\n"
    << "      snprintf(mlkabi_err, sizeof mlkabi_err, \"%s: shape [%lld, %lld, %lld, %lld], expected dense [%lld, %lld, %lld, 2]\",\n"
    << "               what, (long long)t->shape[0], (long long)t->shape[1], (long long)t->shape[2], (long long)t->shape[3],\n"
    << "               (long long)shape[0], (long long)shape[1], (long long)shape[2]);\n"
    << "      return MLK_ERR_SHAPE;\n    }\n"
    << "    stride *= shape[i];\n  }\n"
    << "  return MLK_OK;\n}\n\n";
  return c.str();
}

// The exported entries of a kernel that reads weights packed (docs/artifacts.md,
// "Packed weights"): mlk_NAME_pack and mlk_NAME_packed, over mlkabi_run.
std::string packed_entries(const ir::Function& f, size_t nr) {
  std::ostringstream c;
  c << "\n/* Packed weights (docs/artifacts.md): weight pack `which` of the arguments into `packed`, or its shape\n"
    << "   into shape[4] when packed is NULL; and the entry on packed weights given. */\n"
    << "__attribute__((visibility(\"default\")))\n"
    << "int mlk_" << f.name << "_pack(int32_t which, const mlk_tensor_t* args, int32_t nargs, const int64_t* dims,\n"
    << "    int32_t ndims, mlk_tensor_t* packed, int64_t* shape) {\n"
    << "  if (which < 0) { snprintf(mlkabi_err, sizeof mlkabi_err, \"weight pack %d\", (int)which); return MLK_ERR_NARGS; }\n"
    << "  if (!packed && !shape) { snprintf(mlkabi_err, sizeof mlkabi_err, \"mlk_" << c_fmt_text(f.name)
    << "_pack: neither packed nor shape\"); return MLK_ERR_NULL; }\n"
    << "  return mlkabi_run(args, nargs, packed, dims, ndims, NULL, NULL, 0, which, shape);\n}\n\n"
    << "__attribute__((visibility(\"default\")))\n"
    << "int mlk_" << f.name << "_packed(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* outs, int32_t nouts,\n"
    << "    const int64_t* dims, int32_t ndims, const mlk_tensor_t* packed, int32_t npacked) {\n"
    << "  if (nouts != " << nr << ") {\n"
    << "    snprintf(mlkabi_err, sizeof mlkabi_err, \"" << c_fmt_text(f.name) << " has " << nr
    << " results, got %d outputs\", (int)nouts);\n    return MLK_ERR_NARGS;\n  }\n"
    << "  if (!packed) { snprintf(mlkabi_err, sizeof mlkabi_err, \"mlk_" << c_fmt_text(f.name)
    << "_packed: packed is NULL\"); return MLK_ERR_NULL; }\n"
    << "  return mlkabi_run(args, nargs, outs, dims, ndims, NULL, packed, npacked, -1, NULL);\n}\n";
  return c.str();
}

std::string wrapper_source(const ir::Function& f, const std::vector<std::string>& unbound, const std::string& hname,
                           bool gpu, bool amx, const std::vector<CompiledObject::PackEntry>& packs) {
  std::ostringstream c;
  const size_t n = f.params.size();
  const std::vector<ir::Result> results = f.results();
  const size_t nr = results.size();  // `out` holds one tensor per result
  size_t max_rank = 1;
  for (const auto& r : results) max_rank = std::max(max_rank, r.type.shape.size());
  for (const auto& p : f.params) max_rank = std::max(max_rank, p.type.shape.size());
  c << "/* Generated by mlk build: the C ABI entry of `" << f.name << "`. */\n"
    << "#define _GNU_SOURCE /* dl_iterate_phdr (targets/omp_par_for.h) */\n"
    << "#include <stdio.h>\n#include <string.h>\n#include \"mlk_abi.h\"\n#include \"" << f.name << "_halide.h\"\n\n"
    << wrapper_support(gpu) << (amx ? amx_support() : std::string())
    << (packs.empty() ? std::string() : pack_support(packs, n, unbound))
    << "/* packed: the packed weights, or NULL (packed now); pack_only >= 0: that pack into out (its shape into\n"
    << "   pack_shape when out is NULL), nothing else. */\n"
    << "static int mlkabi_run(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* out, const int64_t* dims, int32_t ndims,\n"
    << "                      const mlk_cuda_call_t* call, const mlk_tensor_t* packed, int32_t npacked, int32_t pack_only,\n"
    << "                      int64_t* pack_shape) {\n"
    << "  mlkabi_err[0] = 0;\n  (void)call;\n  (void)packed;\n  (void)npacked;\n  (void)pack_shape;\n"
    << (amx ? amx_check() : std::string())
    << "  if (nargs != " << n << " || ndims != " << unbound.size() << ") {\n"
    << "    snprintf(mlkabi_err, sizeof mlkabi_err, \"" << c_fmt_text(f.name) << " takes " << n << " tensors and "
    << unbound.size() << " dims, got %d and %d\", (int)nargs, (int)ndims);\n    return MLK_ERR_NARGS;\n  }\n"
    << "  halide_buffer_t b[" << n + nr << "];\n  halide_dimension_t d[" << n + nr << "][" << max_rank << "];\n  int rc;\n";
  for (size_t i = 0; i < n; ++i) {
    auto [code, bits] = halide_code(f.params[i].type.dtype);
    c << "  if ((rc = mlkabi_fill(&args[" << i << "], " << abi_dtype(f.params[i].type.dtype) << ", "
      << f.params[i].type.shape.size() << ", " << code << ", " << bits << ", &b[" << i << "], d[" << i << "], \""
      << c_fmt_text(f.params[i].name) << "\"))) return rc;\n";
  }
  auto result_name = [&](size_t k) { return nr == 1 ? std::string("output") : "output " + std::to_string(k); };
  for (size_t k = 0; k < nr; ++k) {
    auto [code, bits] = halide_code(results[k].type.dtype);
    c << "  if (pack_only < 0 && (rc = mlkabi_fill(&out[" << k << "], " << abi_dtype(results[k].type.dtype) << ", "
      << results[k].type.shape.size() << ", " << code << ", " << bits << ", &b[" << n + k << "], d[" << n + k
      << "], \"" << result_name(k) << "\"))) return rc;\n";
  }
  // Dimension variables from their first bare-variable extent (or dims[]),
  // then every extent and refinement checked against the signature.
  std::set<std::string> bound;
  for (size_t k = 0; k < unbound.size(); ++k) {
    c << "  const int64_t " << c_dim_var(unbound[k]) << " = dims[" << k << "];\n";
    bound.insert(unbound[k]);
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t ax = 0; ax < f.params[i].type.shape.size(); ++ax) {
      const auto& t = f.params[i].type.shape[ax].terms();
      if (t.size() == 1 && t[0].coef == 1 && t[0].atoms.size() == 1 && !t[0].atoms[0].quot &&
          bound.insert(t[0].atoms[0].key).second)
        c << "  const int64_t " << c_dim_var(t[0].atoms[0].key) << " = args[" << i << "].shape[" << ax << "];\n";
    }
  for (const auto& v : f.dim_vars) c << "  (void)" << c_dim_var(v) << ";\n";
  c << refinement_checks(f);
  auto check_extents = [&](const std::string& arr, const std::string& what, const Shape& shape) {
    for (size_t ax = 0; ax < shape.size(); ++ax) {
      const std::string e = c_dim_expr(shape[ax]);
      c << "  if (" << arr << ".shape[" << ax << "] != " << e << ") { snprintf(mlkabi_err, sizeof mlkabi_err, \""
        << c_fmt_text(what) << ".shape[" << ax << "] = %lld but " << c_fmt_text(shape[ax].str())
        << " = %lld\", (long long)" << arr << ".shape[" << ax << "], (long long)" << e << "); return MLK_ERR_SHAPE; }\n";
    }
  };
  for (size_t i = 0; i < n; ++i) check_extents("args[" + std::to_string(i) + "]", f.params[i].name, f.params[i].type.shape);
  c << "  if (pack_only < 0) {\n";
  for (size_t k = 0; k < nr; ++k)
    check_extents("out[" + std::to_string(k) + "]", result_name(k), results[k].type.shape);
  c << "  }\n";
  std::string dims_args;
  for (size_t i = 0; i < unbound.size(); ++i) dims_args += "(int32_t)dims[" + std::to_string(i) + "], ";
  if (packs.empty()) c << "  if (pack_only >= 0) { snprintf(mlkabi_err, sizeof mlkabi_err, \"no packed weights\"); return MLK_ERR_NARGS; }\n";
  else c << pack_statements(packs, n, dims_args) << "  if (rc == 0) {\n";
  if (gpu) c << cuda_wrapper_before(n);
  c << "  rc = " << hname << "(";
  for (size_t i = 0; i < n; ++i) c << "&b[" << i << "], ";
  for (size_t k = 0; k < packs.size(); ++k) c << "&pb[" << k << "], ";
  c << dims_args;
  for (size_t k = 0; k < nr; ++k) c << (k ? ", " : "") << "&b[" << n + k << "]";
  c << ");\n";
  if (!packs.empty())
    c << "  }\n  for (int k = 0; k < " << packs.size() << "; ++k)\n    if (ps[k]) mlk_scratch_put(ps[k]);\n";
  if (gpu) {
    c << cuda_wrapper_after(n);  // build_artifact refuses several results for CUDA
  } else {
    for (size_t k = 0; k < nr; ++k) c << "  if (rc == 0) rc = halide_copy_to_host(NULL, &b[" << n + k << "]);\n";
    c << "  for (int i = 0; i < " << n + nr << "; ++i) halide_device_free(NULL, &b[i]);\n";
  }
  c << "  if (rc != 0 && !mlkabi_err[0]) snprintf(mlkabi_err, sizeof mlkabi_err, \"Halide error %d\", rc);\n"
    << "  return rc;\n}\n\n"
    << "__attribute__((visibility(\"default\")))\n";
  if (nr == 1) {
    c << "int " << entry_symbol(f) << "(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* out, const int64_t* dims, int32_t ndims) {\n"
      << "  return mlkabi_run(args, nargs, out, dims, ndims, NULL, NULL, 0, -1, NULL);\n}\n";
  } else {
    // Several results: an entry of its own, which takes their count, so that
    // a caller of the one-result entry finds no symbol instead of passing
    // one tensor where several are read.
    c << "int " << entry_symbol(f) << "(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* outs, int32_t nouts,\n"
      << "    const int64_t* dims, int32_t ndims) {\n"
      << "  if (nouts != " << nr << ") {\n"
      << "    snprintf(mlkabi_err, sizeof mlkabi_err, \"" << c_fmt_text(f.name) << " has " << nr
      << " results, got %d outputs\", (int)nouts);\n    return MLK_ERR_NARGS;\n  }\n"
      << "  return mlkabi_run(args, nargs, outs, dims, ndims, NULL, NULL, 0, -1, NULL);\n}\n";
  }
  if (!packs.empty()) c << packed_entries(f, nr);
  if (gpu)
    c << "\n__attribute__((visibility(\"default\")))\n"
      << "int mlk_" << f.name << "_cuda(const mlk_tensor_t* args, int32_t nargs, mlk_tensor_t* out, const int64_t* dims,\n"
      << "    int32_t ndims, const mlk_cuda_call_t* call) {\n"
      << "  if (!call) { snprintf(mlkabi_err, sizeof mlkabi_err, \"mlk_" << c_fmt_text(f.name)
      << "_cuda: call is NULL\"); return MLK_ERR_NULL; }\n"
      << "  return mlkabi_run(args, nargs, out, dims, ndims, call, NULL, 0, -1, NULL);\n}\n";
  return c.str();
}

json signature_json(const ir::Function& f, const std::vector<std::string>& unbound) {
  auto shape = [](const Shape& s) {
    json a = json::array();
    for (const Dim& d : s) a.push_back(d.str());
    return a;
  };
  json params = json::array();
  for (const auto& p : f.params) params.push_back({{"name", p.name}, {"dtype", dtype_name(p.type.dtype)}, {"shape", shape(p.type.shape)}});
  json refs = json::array();
  for (const auto& r : f.refinements) refs.push_back(r.str());
  json results = json::array();
  for (const auto& r : f.results()) results.push_back({{"dtype", dtype_name(r.type.dtype)}, {"shape", shape(r.type.shape)}});
  return {{"params", params},
          {"result", results[0]},
          {"results", results},  // every result, in order: `out` holds one tensor per entry
          {"dim_vars", f.dim_vars},
          {"unbound_dims", unbound},
          {"refinements", refs}};
}

// ptxas -v: "Used 12 registers, used 0 barriers, 1024 bytes smem" and
// "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads".
json parse_ptxas(const std::string& out) {
  json kernels = json::array();
  json cur;
  std::istringstream in(out);
  std::string line;
  static const std::regex entry("Compiling entry function '([^']+)'");
  static const std::regex regs("Used ([0-9]+) registers");
  static const std::regex smem("([0-9]+) bytes smem");
  static const std::regex spill("([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      if (!cur.is_null()) kernels.push_back(cur);
      cur = {{"kernel", m[1].str()}, {"registers", 0}, {"shared_bytes", 0}, {"spill_stores", 0}, {"spill_loads", 0}};
    } else if (!cur.is_null()) {
      if (std::regex_search(line, m, regs)) cur["registers"] = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) cur["shared_bytes"] = std::stoi(m[1]);
      if (std::regex_search(line, m, spill)) {
        cur["spill_stores"] = std::stoi(m[1]);
        cur["spill_loads"] = std::stoi(m[2]);
      }
    }
  }
  if (!cur.is_null()) kernels.push_back(cur);
  return kernels;
}


// Step 3 of build_artifact for a CUDA profile: assembles DIR/FN.ptx into
// DIR/FN.cubin with ptxas for the profile's architecture, where ptxas is
// found. Sets res.ptxas_status and returns the manifest's `ptxas` record
// (its status; when assembled, also arch, ptxas_version and the kernels'
// resource use). InvalidArgument when ptxas rejects the PTX.
Expected<json> run_ptxas(const Profile& prof, const fs::path& dir, const std::string& fn, BuildResult& res) {
  auto tk = find_cuda_toolkit();
  if (!tk || tk->ptxas.empty()) {
    res.ptxas_status = "skipped: ptxas not found";
    return json{{"status", res.ptxas_status}};
  }
  std::string pcmd = q(tk->ptxas) + " -arch=" + prof.ptx_arch + " -v " + q((dir / (fn + ".ptx")).string()) +
                     " -o " + q((dir / (fn + ".cubin")).string());
  auto [prc, pout] = run(pcmd);
  if (prc != 0) return Status::InvalidArgument("ptxas rejected the PTX for " + prof.ptx_arch + ":\n" + pout);
  res.ptxas_status = "assembled for " + prof.ptx_arch;
  return json{{"status", res.ptxas_status}, {"arch", prof.ptx_arch}, {"ptxas_version", tk->version},
              {"kernels", parse_ptxas(pout)}};
}

// The C ABI wrapper of `f` written into `dir` and linked with the compiled
// object(s) into lib<fn>.so, which exports only mlk_* symbols; its file name.
Expected<std::string> link_library(const fs::path& dir, const std::string& fn, const ir::Function& f,
                                   const CompiledObject& obj, bool gpu) {
  MLK_RETURN_IF_ERROR(write_file((dir / "mlk_abi.h").string(), abi_header_text()));
  MLK_RETURN_IF_ERROR(write_file((dir / (fn + ".h")).string(),
                                 c_header(f, {.unbound_dims = obj.unbound_dims, .cuda = gpu, .packed = !obj.packs.empty()})));
  MLK_RETURN_IF_ERROR(write_file((dir / (fn + "_abi.c")).string(),
                                 wrapper_source(f, obj.unbound_dims, obj.inner_entry, gpu, obj.amx_tiles, obj.packs)));
  MLK_RETURN_IF_ERROR(write_file((dir / "exports.map").string(),
                                 "{ global: mlk_abi_version; mlk_last_error; " + entry_symbol(f) + ";" +
                                     (gpu ? " mlk_" + fn + "_cuda;" : "") +
                                     (obj.packs.empty() ? "" : " mlk_" + fn + "_pack; mlk_" + fn + "_packed;") +
                                     " local: *; };\n"));
  std::string pack_objects;
  for (size_t k = 0; k < obj.packs.size(); ++k) pack_objects += " " + q((dir / (fn + "_pack" + std::to_string(k) + ".o")).string());
  const std::string lib = "lib" + fn + ".so";
  const char* cc = std::getenv("CC");
  std::string cmd = std::string(cc && *cc ? cc : "cc") + " -O2 -fPIC -shared -o " + q((dir / lib).string()) + " " +
                    q((dir / (fn + "_abi.c")).string()) + " " + q((dir / (fn + ".o")).string()) + pack_objects +
                    " -Wl,--version-script=" + q((dir / "exports.map").string()) + " -ldl -lpthread -lm";
  auto [rc, out] = run(cmd);
  if (rc != 0) return Status::IOError("linking " + lib + " failed (" + cmd + "):\n" + out);
  return lib;
}

// The manifest's packed_weights record (docs/artifacts.md, "Packed weights").
json packed_record(const ir::Function& f, const std::vector<CompiledObject::PackEntry>& packs) {
  json weights = json::array();
  for (const auto& e : packs)
    weights.push_back({{"param", f.params[e.param].name}, {"index", e.param}, {"k", e.k.str()}, {"n", e.n.str()},
                       {"k_quantum", e.k_quantum}, {"n_quantum", e.n_quantum}});
  return {{"pack_symbol", "mlk_" + f.name + "_pack"}, {"entry_symbol", "mlk_" + f.name + "_packed"},
          {"weights", weights}};
}

// The manifest's `cuda` record of a CUDA artifact in `dir`: its entry symbol,
// the PTX's own .target, how the PTX is loaded, and what the cubin is
// (`ptxas` and `ptxas_status` as run_ptxas left them).
json cuda_record(const Profile& prof, const fs::path& dir, const std::string& fn, const json& ptxas,
                 const std::string& ptxas_status) {
  // What the GPU code is, said plainly (docs/targets.md, "CUDA"): the PTX's
  // own .target, what sm_90 does with it, and the cubin beside it.
  std::string ptx_target;
  if (auto ptx = read_file((dir / (fn + ".ptx")).string()); ptx.ok()) {
    std::smatch tm;
    if (std::regex_search(*ptx, tm, std::regex(R"(\.target\s+(sm_[0-9a-z]+))"))) ptx_target = tm[1].str();
  }
  return {{"entry_symbol", "mlk_" + fn + "_cuda"},
          {"ptx_target", ptx_target},
          {"loaded", "the PTX, JIT-compiled by the driver for the device it runs on (" + prof.ptx_arch +
                         " for this profile) when the artifact is first called"},
          {"cubin", ptxas.contains("kernels") ? fn + ".cubin (ptxas, " + prof.ptx_arch +
                                                   "): stored as a check and for tools, not loaded"
                                             : std::string("none: ") + ptxas_status}};
}

}  // namespace

Expected<BuildResult> build_artifact(const BuildRequest& req) {
  // A missing fn is the compile driver's error; these two are the artifact's.
  const ir::Function* f = req.module->find(req.fn);
  if (f && !f->is_public) return Status::InvalidArgument("`" + req.fn + "` is not public; only public fns are built");
  if (f && (req.fn == "abi_version" || req.fn == "last_error"))
    return Status::InvalidArgument("fn `" + req.fn + "` cannot be built: its entry `mlk_" + req.fn +
                                   "` would be the C ABI's own symbol of that name; rename the fn");
  if (f && req.fn == "mlk_abi")
    return Status::InvalidArgument("fn `mlk_abi` cannot be built: its C header `mlk_abi.h` would be the C ABI's "
                                   "own header; rename the fn");
  const Profile& prof = req.profile;
  const bool gpu = prof.is_gpu();
  if (f && gpu && !f->more_results.empty())
    return Status::Unsupported("`" + req.fn + "` has " + std::to_string(f->results().size()) +
                               " results; CUDA artifacts take fns with one result (build it for a CPU profile)");

  // 1. The compile driver: object file with the Halide runtime, its header,
  // and the PTX for CUDA profiles.
  CompileRequest creq;
  creq.module = req.module;
  creq.fn = req.fn;
  creq.profile = prof;
  creq.schedule = req.schedule ? &*req.schedule : nullptr;
  creq.dims = req.dims;
  creq.pack_weights = req.pack_weights;
  creq.dump_after = req.dump_after;
  creq.dump = req.dump;
  auto obj = compile_object(creq, req.out_dir);
  if (!obj.ok()) return obj.status();
  if (gpu && !obj->packs.empty())  // the products of GPU profiles read no pairs (lower::options_for)
    return Status::Internal("`" + req.fn + "` reads packed weights on " + prof.name + ", which no CUDA entry passes");
  BuildResult res;
  res.schedule = obj->schedule;
  const fs::path dir = fs::absolute(req.out_dir);
  res.dir = dir.string();
  const std::vector<std::string>& unbound = obj->unbound_dims;
  const std::string& target_string = obj->halide_target;
  f = req.module->find(req.fn);  // found: the driver compiled it

  // 2. The C ABI wrapper, linked with the object into a shared library that
  // exports only mlk_* symbols.
  auto lib = link_library(dir, req.fn, *f, *obj, gpu);
  if (!lib.ok()) return lib.status();
  res.library = (dir / *lib).string();

  // 3. ptxas, where it exists: assemble for the profile's architecture.
  json ptxas = nullptr;
  if (gpu) {
    auto assembled = run_ptxas(prof, dir, req.fn, res);
    if (!assembled.ok()) return assembled.status();
    ptxas = std::move(*assembled);
  }

  // 4. The manifest, with the sha256 of every file it lists.
  res.files = {*lib, req.fn + "_halide.h", "mlk_abi.h", req.fn + ".h", req.fn + "_abi.c", req.fn + ".o"};
  for (size_t k = 0; k < obj->packs.size(); ++k) res.files.push_back(req.fn + "_pack" + std::to_string(k) + ".o");
  if (gpu) res.files.push_back(req.fn + ".ptx");
  if (gpu && ptxas.contains("kernels")) res.files.push_back(req.fn + ".cubin");
  // The program itself, so that the directory stands alone: the runtime
  // loads it (Runtime::LoadArtifactDir) and checks it against ir_hash. A
  // module built from text with no readable file (tests, `source_path` only a
  // label) gets no program.tl; the runtime then says so when asked to load it.
  if (!req.source_path.empty()) {
    if (auto text = read_file(req.source_path); text.ok()) {
      MLK_RETURN_IF_ERROR(write_file((dir / "program.tl").string(), *text));
      res.files.push_back("program.tl");
    }
  }
  json files = json::object();
  for (const auto& name : res.files) {
    auto bytes = read_file((dir / name).string());
    if (!bytes.ok()) return bytes.status();
    files[name] = sha256_hex(*bytes);
  }
  auto tk = find_cuda_toolkit();
  json requires_ = {{"cpu_features", gpu ? prof.host_features : prof.features}};
  if (gpu) requires_["cuda_compute_capability"] = prof.compute_capability;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  json m = {
      {"format", "mlk-artifact-1"},
      {"function", req.fn},
      {"entry_symbol", entry_symbol(*f)},
      {"abi_version", 1},
      {"library", *lib},
      {"source", req.source_path},
      {"ir_hash", ir::function_hash(*req.module, *f)},
      {"precision", precision_name(precision_of(*req.module, *f))},
      {"algorithm_hash", obj->algorithm_hash},
      {"signature", signature_json(*f, unbound)},
      {"profile", {{"name", prof.name}, {"kind", prof.kind}, {"halide_target", target_string}}},
      {"requires", requires_},
      {"dims", req.dims},
      {"schedule", json::parse(res.schedule.to_json())},
      {"schedule_hash", res.schedule.hash()},
      {"schedule_space", kScheduleSpaceVersion},
      {"versions", {{"mlk", mlk_version()}, {"halide", halide_version()}, {"llvm", llvm_version()},
                    {"cuda", tk ? tk->version : std::string()}}},
      {"files", files},
      {"ptxas", ptxas},
      {"built_at", now_iso()},
      {"built_on", host},
  };
  if (gpu) {
    m["cuda"] = cuda_record(prof, dir, req.fn, ptxas, res.ptxas_status);
  }
  if (!obj->packs.empty()) m["packed_weights"] = packed_record(*f, obj->packs);
  if (!req.verification_json.empty()) {
    json v = parse_json(req.verification_json);
    if (v.is_discarded()) return Status::Internal("the verification record of `" + req.fn + "` is not JSON");
    m["verification"] = v;
  }
  res.manifest_json = m.dump(2);
  MLK_RETURN_IF_ERROR(write_file((dir / "manifest.json").string(), res.manifest_json + "\n"));
  return res;
}

}  // namespace mlk
