// The toolchain versions recorded at configure time (targets/toolchain.h,
// what the cache key uses) are those of the Halide library linked in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "targets/linked_toolchain.h"
#include "targets/toolchain.h"

namespace mlk {
namespace {

TEST(Toolchain, TheRecordedLlvmVersionIsTheLinkedLibrarys) {
  EXPECT_THAT(llvm_version(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  EXPECT_EQ(llvm_version(), linked_llvm_version());
}

TEST(Toolchain, TheRecordedHalideVersionIsThreeNumbers) {
  EXPECT_THAT(halide_version(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
}

}  // namespace
}  // namespace mlk
