// The routes by which mlk ends (base/status.h): exit statuses of Statuses,
// and a failing MLK_CHECK: exit 3 with FILE:LINE, or InternalError inside a
// CheckThrows scope (what a server request holds).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status.h"

namespace mlk {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(Status, ExitCodesNameTheKindOfFailure) {
  EXPECT_EQ(Status::Ok().exit_code(), 0);
  EXPECT_EQ(Status::InvalidArgument("x").exit_code(), 1);
  EXPECT_EQ(Status::NotFound("x").exit_code(), 1);
  EXPECT_EQ(Status::IOError("x").exit_code(), 1);
  EXPECT_EQ(Status::Usage("x").exit_code(), 2);
  EXPECT_EQ(Status::Internal("x").exit_code(), kInternalErrorExit);
  EXPECT_EQ(kInternalErrorExit, 3);
}

int checked_half(int x) {
  MLK_CHECK(x % 2 == 0, "checked_half takes even numbers");
  return x / 2;
}

TEST(Status, AFailedCheckInACheckThrowsScopeThrowsWithItsPlace) {
  EXPECT_EQ(checked_half(4), 2);
  CheckThrows scope;
  try {
    checked_half(3);
    FAIL() << "no InternalError";
  } catch (const InternalError& e) {
    EXPECT_THAT(e.what(), MatchesRegex(".*tests/base/status_test.cpp:[0-9]+: internal error: checked_half takes even "
                                       "numbers \\(x % 2 == 0\\)"));
  }
}

TEST(Status, ScopesNestAndEnd) {
  {
    CheckThrows outer;
    {
      CheckThrows inner;
    }
    EXPECT_THROW(checked_half(1), InternalError);  // the outer scope still holds
  }
  EXPECT_EXIT(checked_half(1), ::testing::ExitedWithCode(kInternalErrorExit),
              "status_test.cpp:[0-9]+: internal error: checked_half takes even numbers \\(x % 2 == 0\\); please "
              "report this bug");
}

TEST(Status, AFailedCheckEndsTheProcessWithExit3NotAnAbort) {
  EXPECT_EXIT(checked_half(7), ::testing::ExitedWithCode(3), "internal error: checked_half takes even numbers");
}

TEST(Status, AnExpectedFromAnOkStatusIsAnInternalError) {
  CheckThrows scope;
  try {
    Expected<int> made(Status::Ok());
    (void)made;
    FAIL() << "accepted";
  } catch (const InternalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("internal error: Expected built from an OK Status"));
  }
}

}  // namespace
}  // namespace mlk
