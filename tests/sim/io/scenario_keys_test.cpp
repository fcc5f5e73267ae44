// The key table is the reader's schema: what it lists is accepted, what it does not is
// refused, and its text forms list every key (README "Scenario keys").
#include "sim/io/scenario_keys.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "sim/core/errors.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

TEST(ScenarioKeys, SectionsListTheirDirectChildren) {
  const auto top = keys_of("");
  EXPECT_EQ(top, (std::vector<std::string>{"name", "model", "cluster", "parallel", "training", "reliability"}));
  const auto moe = keys_of("model.moe");
  EXPECT_EQ(moe.front(), "num_experts");
  EXPECT_EQ(std::set<std::string>(moe.begin(), moe.end()).count("load_imbalance"), 1u);
  EXPECT_THROW(keys_of("model.no_such_section"), std::logic_error);
}

TEST(ScenarioKeys, EveryPathIsUniqueAndItsSectionIsATableRow) {
  std::set<std::string> paths;
  for (const auto& k : scenario_keys()) {
    EXPECT_TRUE(paths.insert(std::string(k.path)).second) << "duplicate " << k.path;
    const auto dot = k.path.rfind('.');
    if (dot != std::string_view::npos) EXPECT_TRUE(paths.count(std::string(k.path.substr(0, dot)))) << k.path;
    EXPECT_FALSE(k.description.empty()) << k.path;
  }
}

TEST(ScenarioKeys, TheReaderAcceptsATableKeyAndRefusesOthers) {
  const std::string yaml = testing::tiny_gpt_yaml(1, 1, 1, 2, 1);
  EXPECT_NO_THROW(parse_scenario(yaml, "s.yaml", {"cluster.inter_node.switch_radix=32"}));
  EXPECT_THROW(parse_scenario(yaml, "s.yaml", {"cluster.inter_node.switch_radixx=32"}), ScenarioError);
}

TEST(ScenarioKeys, TextAndMarkdownListEveryKey) {
  const std::string text = keys_text(), md = keys_markdown();
  for (const auto& k : scenario_keys()) {
    EXPECT_NE(text.find(std::string(k.path) + " "), std::string::npos) << k.path;
    EXPECT_NE(md.find("| `" + std::string(k.path) + "` |"), std::string::npos) << k.path;
  }
  for (std::size_t at = 0, next; at < text.size(); at = next + 1) {
    next = text.find('\n', at);
    EXPECT_LE(next - at, 100u) << text.substr(at, next - at);
  }
  // '|' inside a cell is escaped, so each row has exactly the table's 7 unescaped bars.
  EXPECT_NE(md.find("gelu \\| swiglu"), std::string::npos);
}

}  // namespace
}  // namespace ptsim::sim
