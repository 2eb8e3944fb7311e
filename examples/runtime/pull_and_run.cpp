// Example: a C++ program that pulls a pretuned rmsnorm kernel (examples/norms.tl)
// from the artifact cache — a `mlk serve` URL or a store file — through the
// runtime's C ABI, runs it on DLPack tensors, and checks it against a plain
// loop.
//
//   mlk_pull_and_run CACHE PROGRAM.tl [TARGETS] [B S D]
//   mlk_pull_and_run http://127.0.0.1:8080 examples/norms.tl host 1 128 4096
//
// The token for a server comes from $MLK_TOKEN. Exit status 0 when the kernel
// ran and agreed with the loop, 1 otherwise (with mlk_runtime_last_error()).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <mlk/mlk_runtime.h>  // installed as include/mlk/ (cmake --install); in the build tree, build/include/mlk/

namespace {

DLTensor f32_tensor(float* data, int ndim, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  return t;
}

int fail(const char* what) {
  std::fprintf(stderr, "mlk_pull_and_run: %s: %s\n", what, mlk_runtime_last_error());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4 && argc != 7) {
    std::fprintf(stderr, "usage: %s CACHE PROGRAM.tl [TARGETS] [B S D]\n", argv[0]);
    return 2;
  }
  const char* targets = argc >= 4 ? argv[3] : "host";
  int64_t B = argc == 7 ? std::atoll(argv[4]) : 1, S = argc == 7 ? std::atoll(argv[5]) : 128,
          D = argc == 7 ? std::atoll(argv[6]) : 4096;

  mlk_runtime_t* rt = nullptr;
  if (mlk_runtime_open(argv[1], nullptr, nullptr, &rt) != MLK_RT_OK) return fail("open");
  std::string dims = "B=" + std::to_string(B) + ",S=" + std::to_string(S) + ",D=" + std::to_string(D);
  mlk_kernel_t* k = nullptr;
  if (mlk_runtime_get_kernel(rt, argv[2], nullptr, "rmsnorm", targets, dims.c_str(), &k) != MLK_RT_OK) {
    int rc = fail("get_kernel");
    mlk_runtime_close(rt);
    return rc;
  }
  std::printf("selected: %s\n", mlk_kernel_selection(k));

  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> x(B * S * D), w(D), y(B * S * D);
  for (auto& v : x) v = nd(rng);
  for (auto& v : w) v = nd(rng);
  float eps = 1e-6f;
  int64_t xs[3] = {B, S, D}, ws[1] = {D};
  DLTensor tx = f32_tensor(x.data(), 3, xs), tw = f32_tensor(w.data(), 1, ws), te = f32_tensor(&eps, 0, nullptr);
  DLTensor ty = f32_tensor(y.data(), 3, xs);
  const DLTensor* args[3] = {&tx, &tw, &te};
  if (mlk_kernel_run(k, args, 3, &ty) != MLK_RT_OK) {
    int rc = fail("run");
    mlk_runtime_close(rt);
    return rc;
  }

  double max_err = 0;
  for (int64_t r = 0; r < B * S; ++r) {
    double ms = 0;
    for (int64_t d = 0; d < D; ++d) ms += double(x[r * D + d]) * x[r * D + d];
    double inv = 1.0 / std::sqrt(ms / D + eps);
    for (int64_t d = 0; d < D; ++d) {
      double want = x[r * D + d] * inv * w[d];
      max_err = std::fmax(max_err, std::fabs(want - y[r * D + d]) / (1.0 + std::fabs(want)));
    }
  }
  mlk_runtime_close(rt);
  std::printf("rmsnorm [%lld, %lld, %lld]: max relative error %.3g\n", (long long)B, (long long)S, (long long)D, max_err);
  return max_err < 1e-4 ? 0 : 1;
}
