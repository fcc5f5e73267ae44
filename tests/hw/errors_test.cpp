#include "hw/errors.h"

#include <gtest/gtest.h>

#include <string>

namespace ptsim {
namespace {

TEST(Errors, InputErrorNamesFileKeyWhatAndHint) {
  const InputError e("s.yaml", "parallel.tensor_parallel", "must be >= 1, got 0", "e.g. 8");
  EXPECT_STREQ(e.what(), "s.yaml: parallel.tensor_parallel: must be >= 1, got 0 (e.g. 8)");
  EXPECT_EQ(e.file(), "s.yaml");
  EXPECT_EQ(e.key(), "parallel.tensor_parallel");
  EXPECT_EQ(e.hint(), "e.g. 8");
  // Without a file the message says so instead of starting with ": ".
  EXPECT_STREQ(InputError("", "", "bad").what(), "<input>: bad");
}

TEST(Errors, CheckPassesOrThrowsInternalErrorWithConditionAndDetail) {
  EXPECT_NO_THROW(PTSIM_CHECK(1 + 1 == 2, "never {}", "shown"));
  try {
    const int links = 3;
    PTSIM_CHECK(links < 2, "unknown link {}", links);
    FAIL() << "PTSIM_CHECK did not throw";
  } catch (const InternalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("errors_test.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("check 'links < 2' failed: unknown link 3"), std::string::npos) << msg;
  }
}

TEST(Errors, KindsAreDistinct) {
  // The CLI maps each kind to its own exit code: none may be caught as another.
  EXPECT_THROW(throw ResourceError("no device"), ResourceError);
  EXPECT_FALSE((std::is_base_of_v<std::runtime_error, InternalError>));
  EXPECT_FALSE((std::is_base_of_v<InputError, ResourceError>));
  EXPECT_FALSE((std::is_base_of_v<std::invalid_argument, InputError>));
}

}  // namespace
}  // namespace ptsim
