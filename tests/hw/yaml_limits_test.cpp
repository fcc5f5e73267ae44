#include "hw/yaml_limits.h"

#include <gtest/gtest.h>

#include <string>

#include "hw/errors.h"

namespace ptsim::hw {
namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(YamlDepth, CountsBlockFlowAndSequenceLevels) {
  EXPECT_EQ(yaml_depth("a: 1\nb: 2\n").depth, 1);
  EXPECT_EQ(yaml_depth("a:\n  b:\n    c: 1\n").depth, 3);
  EXPECT_EQ(yaml_depth("a: [1, [2, {x: 3}]]\n").depth, 4);
  EXPECT_EQ(yaml_depth("- - - x\n").depth, 4);
  const YamlDepth d = yaml_depth("a: 1\nb: [[[\n]]]\n");
  EXPECT_EQ(d.depth, 4);
  EXPECT_EQ(d.line, 2);
}

TEST(YamlDepth, IgnoresQuotesCommentsAndBlockScalars) {
  EXPECT_EQ(yaml_depth("a: \"[[[[\" # [[[[\nb: '{{{'\n").depth, 1);
  EXPECT_EQ(yaml_depth("a: |\n  [[[[[[\n  {{{{{\nb: 1\n").depth, 1);
  EXPECT_EQ(yaml_depth("name: a[1]{2}\n").depth, 1);
}

TEST(YamlDepth, EveryScenarioShapeIsFarBelowTheCap) {
  const char* scenario =
      "model:\n  preset: gpt3-175b\n  moe: {num_experts: 8}\ncluster:\n  inter_node:\n    torus_dims: [2, 4]\n"
      "parallel:\n  pipeline_layers: [1, 2]\n";
  EXPECT_LE(yaml_depth(scenario).depth, 4);
}

TEST(CheckYamlDepth, DeepFlowAndBlockNestingNameTheFileAndLine) {
  const std::string flow = "model: " + repeat("[", 10000) + repeat("]", 10000) + "\n";
  try {
    check_yaml_depth(flow, "deep.yaml", "scenario file");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "deep.yaml");
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels (line 1)"), std::string::npos) << e.what();
  }
  std::string block = "x: 1\n";
  for (int i = 0; i < 100; ++i) block += std::string(static_cast<std::size_t>(2 * i), ' ') + "a:\n";
  EXPECT_THROW(check_yaml_depth(block, "deep.yaml", "scenario file"), InputError);
  EXPECT_NO_THROW(check_yaml_depth(repeat("[", 63) + repeat("]", 63), "ok.yaml", "scenario file"));
  EXPECT_THROW(check_yaml_depth(repeat("[", 65) + repeat("]", 65), "x.json", "HuggingFace config"), InputError);
}

}  // namespace
}  // namespace ptsim::hw
