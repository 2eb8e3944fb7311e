#include "base/stats.h"

#include <algorithm>

#include "base/status.h"

namespace mlk {

double median(std::vector<double> x) {
  MLK_CHECK(!x.empty(), "median of no values");
  size_t n = x.size(), mid = n / 2;
  std::nth_element(x.begin(), x.begin() + mid, x.end());
  double hi = x[mid];
  if (n % 2) return hi;
  double lo = *std::max_element(x.begin(), x.begin() + mid);
  return (lo + hi) / 2;
}

}  // namespace mlk
