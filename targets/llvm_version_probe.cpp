// Configure-time probe (CMakeLists.txt, "Toolchain versions"): prints the
// LLVM version linked into libHalide.so as mlk writes it, major.minor
// ("21.1"), the format of linked_llvm_version() (targets/linked_toolchain.h).
// It declares the one function it calls instead of including Halide.h, which
// is slow to compile.
#include <cstdio>

namespace Halide::Internal {
int get_llvm_version();  // major * 10 + minor, e.g. 211 for 21.1
}  // namespace Halide::Internal

int main() {
  const int v = Halide::Internal::get_llvm_version();
  std::printf("%d.%d", v / 10, v % 10);
  return 0;
}
