// The input sets of the running levels (verify/levels.h): random values and
// adversarial ones, each scaled to its dtype so that a correct kernel stays
// finite where the reference does.
#include <cmath>
#include <limits>
#include <random>

#include "runtime/testing.h"
#include "verify/levels.h"

namespace mlk::verify {

namespace {

double max_finite(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.38e38;
    case DType::F32: return 3.4e38;
    default: return 1.7e308;
  }
}
double tiny(DType t) {  // a subnormal of the dtype
  switch (t) {
    case DType::F16: return 3e-6;
    case DType::BF16:
    case DType::F32: return 3e-40;
    default: return 3e-310;
  }
}

double value(const std::string& set, DType t, int64_t i, int64_t k, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double large = std::min(1e6, std::sqrt(max_finite(t) / (4.0 * static_cast<double>(k))) / 2);
  if (set == "random") return u(rng);
  if (set == "cancellation") return (i % 2 ? -1.0 : 1.0) * (large / 16) * (1 + 1e-3 * u(rng));
  if (set == "large") return large * u(rng);
  if (set == "subnormal") return tiny(t) * (1 + u(rng));
  return i % 3 == 2 ? 0.5 : 1.0;  // ties: partial sums land half-way between neighbours
}

}  // namespace

const std::vector<std::string>& input_set_names() {
  static const std::vector<std::string> v = {"random", "cancellation", "large", "subnormal", "ties"};
  return v;
}

Expected<std::vector<HostTensor>> make_inputs(const ir::Function& f, const DimEnv& dims, const std::string& set,
                                              int64_t reduction_length, uint64_t seed) {
  auto shapes = rt::param_shapes(f, dims);
  if (!shapes.ok()) return shapes.status();
  std::mt19937_64 rng(seed * 7919 + std::hash<std::string>{}(set));
  std::vector<HostTensor> out;
  for (size_t p = 0; p < f.params.size(); ++p) {
    HostTensor t(f.params[p].type.dtype, (*shapes)[p]);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (is_float(t.dtype)) t.set(i, value(set, t.dtype, i, std::max<int64_t>(reduction_length, 1), rng));
      else t.set(i, set == "random" ? static_cast<double>(i % 2) : 0.0);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace mlk::verify
