#include "bench/openblas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace mlk::bench {

namespace {

// cblas.h's enums, by value (the header is not needed at build time).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a,
                         int lda, const float* b, int ldb, float beta, float* c, int ldc);
using ConfigFn = char* (*)();

struct Library {
  SgemmFn sgemm = nullptr;
  std::string description;  // or why not
};

const Library& library() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
      void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (!h) continue;
      lib.sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
      auto config = reinterpret_cast<ConfigFn>(dlsym(h, "openblas_get_config"));
      auto corename = reinterpret_cast<ConfigFn>(dlsym(h, "openblas_get_corename"));
      if (!lib.sgemm) {
        lib.description = std::string(name) + " has no cblas_sgemm";
        return;
      }
      // The kernel OpenBLAS picked for this CPU (or that $OPENBLAS_CORETYPE forced).
      const char* forced = std::getenv("OPENBLAS_CORETYPE");
      lib.description = std::string(config ? config() : "OpenBLAS") + " (" + name + ", core " +
                        (corename ? corename() : "unknown") +
                        (forced && *forced ? std::string(", forced by OPENBLAS_CORETYPE=") + forced : "") + ")";
      return;
    }
    lib.description = "OpenBLAS not found (libopenblas.so.0; on Debian: apt-get install libopenblas0)";
  });
  return lib;
}

const ir::Node* param_of(const ir::NodeRef& n) { return n && n->op == ir::Op::kParam ? n.get() : nullptr; }

}  // namespace

std::optional<MatmulShape> match_matmul(const ir::Function& f, const DimEnv& env) {
  const ir::NodeRef& body = f.body;
  if (!body || body->op != ir::Op::kMatmul || body->operands.size() != 2 || body->type.dtype != DType::F32) return std::nullopt;
  const ir::Node* a = param_of(body->operands[0]);
  const ir::NodeRef& bop = body->operands[1];
  const ir::Node* b = param_of(bop);
  MatmulShape s;
  if (!b && bop->op == ir::Op::kTranspose && bop->operands.size() == 1) {
    b = param_of(bop->operands[0]);
    const auto& perm = bop->ints;
    size_t r = perm.size();
    bool swap_last = r >= 2 && perm[r - 1] == static_cast<int64_t>(r - 2) && perm[r - 2] == static_cast<int64_t>(r - 1);
    for (size_t i = 0; i + 2 < r; ++i) swap_last = swap_last && perm[i] == static_cast<int64_t>(i);
    if (!swap_last) return std::nullopt;
    s.trans_b = true;
  }
  if (!a || !b || a->type.dtype != DType::F32 || b->type.dtype != DType::F32) return std::nullopt;
  auto as = concrete_shape(a->type.shape, env), bs = concrete_shape(b->type.shape, env);
  if (!as.ok() || !bs.ok() || as->size() != bs->size() || as->size() < 2 || as->size() > 3) return std::nullopt;
  size_t r = as->size();
  if (r == 3) {
    if ((*as)[0] != (*bs)[0]) return std::nullopt;
    s.batch = (*as)[0];
  }
  s.m = (*as)[r - 2];
  s.k = (*as)[r - 1];
  s.n = s.trans_b ? (*bs)[r - 2] : (*bs)[r - 1];
  if ((s.trans_b ? (*bs)[r - 1] : (*bs)[r - 2]) != s.k) return std::nullopt;
  if (s.m > INT32_MAX || s.n > INT32_MAX || s.k > INT32_MAX) return std::nullopt;
  s.a_param = a->index;
  s.b_param = b->index;
  return s;
}

Expected<MatmulFn> openblas_matmul(const MatmulShape& s) {
  const Library& lib = library();
  if (!lib.sgemm) return Status::Unsupported(lib.description);
  SgemmFn sgemm = lib.sgemm;
  return MatmulFn([s, sgemm](const std::vector<HostTensor>& in, HostTensor& out) -> Status {
    const float* a = reinterpret_cast<const float*>(in[static_cast<size_t>(s.a_param)].bytes.data());
    const float* b = reinterpret_cast<const float*>(in[static_cast<size_t>(s.b_param)].bytes.data());
    float* c = reinterpret_cast<float*>(out.bytes.data());
    const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
    for (int64_t i = 0; i < s.batch; ++i)
      sgemm(kRowMajor, kNoTrans, s.trans_b ? kTrans : kNoTrans, m, n, k, 1.0f, a + i * s.m * s.k, k,
            b + i * s.k * s.n, s.trans_b ? k : n, 0.0f, c + i * s.m * s.n, n);
    return Status::Ok();
  });
}

std::string openblas_description() { return library().description; }

}  // namespace mlk::bench
