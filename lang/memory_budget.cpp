#include "lang/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "lang/dtype.h"

namespace mlk {

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  __int128 b = static_cast<__int128>(pages) * page;
  return b > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(b);
}

std::string human_memory(double bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes < 1024) return std::to_string(static_cast<int64_t>(bytes)) + " bytes";
  int u = -1;
  while (bytes >= 1024 && u < 7) {
    bytes /= 1024;
    ++u;
  }
  char b[64];
  std::snprintf(b, sizeof b, "%.1f %s", bytes, kUnits[u]);
  return b;
}

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Bytes of a tensor of `shape` at `dims`, saturating at kMax (then *overflow).
int64_t shape_bytes(const Shape& shape, DType dt, const DimEnv& dims, bool* overflow) {
  int64_t n = std::max(1, dtype_bits(dt) / 8);
  for (const Dim& d : shape) {
    auto v = d.eval(dims);
    int64_t e = v ? std::max<int64_t>(*v, 0) : 0;
    if (e == 0) return 0;
    if (__builtin_mul_overflow(n, e, &n)) {
      *overflow = true;
      // Still 0 when a later extent is 0.
      for (const Dim& rest : shape) {
        auto r = rest.eval(dims);
        if (!r || *r <= 0) return 0;
      }
      return kMax;
    }
  }
  return n;
}

int64_t sat_add(int64_t a, int64_t b, bool* overflow) {
  int64_t s;
  if (__builtin_add_overflow(a, b, &s)) {
    *overflow = true;
    return kMax;
  }
  return s;
}

}  // namespace

TensorBytes tensor_bytes(const ir::Function& f, const DimEnv& dims) {
  TensorBytes t;
  for (const auto& p : f.params) t.inputs = sat_add(t.inputs, shape_bytes(p.type.shape, p.type.dtype, dims, &t.overflow), &t.overflow);
  for (const ir::Result& r : f.results())
    t.result = sat_add(t.result, shape_bytes(r.type.shape, r.type.dtype, dims, &t.overflow), &t.overflow);
  return t;
}

int tuner_timing_sets(int64_t input_bytes) {
  return static_cast<int>(std::clamp<int64_t>((256LL << 20) / std::max<int64_t>(input_bytes, 1), 1, 3));
}

std::string dims_label(const DimEnv& dims) {
  std::string s;
  for (const auto& [k, v] : dims) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

Status check_memory_budget(const ir::Function& f, const DimEnv& dims, int input_sets, int results,
                           const std::string& label, int64_t available) {
  if (available < 0) available = physical_memory_bytes();
  TensorBytes t = tensor_bytes(f, dims);
  // In long double: the estimate itself may exceed 64 bits.
  long double need = static_cast<long double>(t.inputs) * input_sets + static_cast<long double>(t.result) * results;
  if (!t.overflow && (available == 0 || need <= static_cast<long double>(available))) return Status::Ok();
  std::string amount = t.overflow ? "more than " + human_memory(static_cast<double>(kMax)) +
                                        " (the byte count of a tensor overflows 64 bits)"
                                  : "about " + human_memory(static_cast<double>(need));
  std::string parts = t.overflow ? ""
                                 : " (" + std::to_string(input_sets) + " set" + (input_sets == 1 ? "" : "s") +
                                       " of inputs of " + human_memory(static_cast<double>(t.inputs)) + ", " +
                                       std::to_string(results) + " result" + (results == 1 ? "" : "s") + " of " +
                                       human_memory(static_cast<double>(t.result)) + ")";
  std::string has = available > 0 ? "; this machine has " + human_memory(static_cast<double>(available)) + " of memory"
                                   : "";
  return Status::InvalidArgument(label + " needs " + amount + " for the inputs and outputs of `" + f.name + "`" + parts +
                                 has + "; choose smaller dimensions");
}

Status check_tuning_memory(const ir::Function& f, const DimEnv& dims, const std::string& label, int64_t available) {
  TensorBytes t = tensor_bytes(f, dims);
  return check_memory_budget(f, dims, tuner_timing_sets(t.inputs) + 1, 2, label, available);
}

}  // namespace mlk
