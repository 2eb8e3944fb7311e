#include "targets/linked_toolchain.h"

#include <Halide.h>

#include "mlk_toolchain_versions.h"

// The headers mlk compiles against are those the configure step read.
static_assert(HALIDE_VERSION_MAJOR == MLK_HALIDE_VERSION_MAJOR && HALIDE_VERSION_MINOR == MLK_HALIDE_VERSION_MINOR &&
                  HALIDE_VERSION_PATCH == MLK_HALIDE_VERSION_PATCH,
              "Halide.h is not the version recorded at configure time: re-run cmake");

namespace mlk {

std::string linked_llvm_version() {
  const int v = Halide::Internal::get_llvm_version();  // e.g. 211 for 21.1
  return std::to_string(v / 10) + "." + std::to_string(v % 10);
}

}  // namespace mlk
