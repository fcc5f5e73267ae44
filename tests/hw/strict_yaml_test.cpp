#include "hw/strict_yaml.h"

#include <gtest/gtest.h>

namespace ptsim::hw {
namespace {

TEST(StrictYaml, ClosestMatchByEditDistance) {
  // "tensor_paralel" is one insertion from "tensor_parallel", many from the rest.
  EXPECT_EQ(closest_match("tensor_paralel", {"pipeline_parallel", "tensor_parallel", "zero_stage"}), "tensor_parallel");
  EXPECT_EQ(closest_match("x", {}), "");
}

TEST(StrictYaml, UnknownKeyNamesTheKeyTheSuggestionAndTheLine) {
  const YAML::Node n = YAML::Load("bandwidth: 1\nlatancy: 2\n");
  const auto u = unknown_key(n, {"bandwidth", "latency"});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->key, "latancy");
  EXPECT_EQ(u->suggestion, "latency");
  EXPECT_EQ(u->line, 2);
  EXPECT_FALSE(unknown_key(n, {"bandwidth", "latancy"}));
  EXPECT_FALSE(unknown_key(YAML::Load("[1, 2]"), {"a"}));  // not a mapping: nothing to check
}

}  // namespace
}  // namespace ptsim::hw
