#include "runtime/status_macros.h"

#include <memory>
#include <utility>

#include "gtest/gtest.h"

namespace stepc {
namespace {

absl::Status FailWhen(bool fail) {
  return fail ? absl::InvalidArgumentError("bad") : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(bool fail, int value) {
  if (fail) return absl::NotFoundError("none");
  return std::make_unique<int>(value);
}

absl::Status Chain(bool fail_first, bool fail_second, int* reached) {
  STEPC_RETURN_IF_ERROR(FailWhen(fail_first));
  *reached = 1;
  STEPC_RETURN_IF_ERROR(FailWhen(fail_second));
  *reached = 2;
  return absl::OkStatus();
}

absl::StatusOr<int> Sum(bool fail_a, bool fail_b) {
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<int> a, MakeInt(fail_a, 3));
  STEPC_ASSIGN_OR_RETURN(auto b, MakeInt(fail_b, 4));  // two on one function
  return *a + *b;
}

TEST(StatusMacros, ReturnIfErrorStopsAtTheFirstError) {
  int reached = 0;
  EXPECT_EQ(Chain(true, false, &reached).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reached, 0);
  EXPECT_EQ(Chain(false, true, &reached).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reached, 1);
  EXPECT_TRUE(Chain(false, false, &reached).ok());
  EXPECT_EQ(reached, 2);
}

TEST(StatusMacros, AssignOrReturnMovesValuesAndPropagatesErrors) {
  absl::StatusOr<int> ok = Sum(false, false);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 7);
  EXPECT_EQ(Sum(true, false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Sum(false, true).status().code(), absl::StatusCode::kNotFound);
}

// What every native API's STEPC_<API>_RETURN_IF_ERROR reports: the call,
// where it was made, and the library's own text, under the given code.
TEST(StatusMacros, NativeCallErrorNamesCallFileAndLine) {
  absl::Status s = NativeCallError(absl::StatusCode::kUnavailable, "ncclAllReduce(...)",
                                   "runtime/x.cc", 42, "unhandled system error");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "ncclAllReduce(...) failed at runtime/x.cc:42: unhandled system error");
}

}  // namespace
}  // namespace stepc
