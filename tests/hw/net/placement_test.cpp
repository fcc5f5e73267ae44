// Megatron rank order: TP innermost, then CP, DP (EP carved from DP), PP outermost.
#include <gtest/gtest.h>

#include "hw/net/cluster.h"
#include "hw/net/placement.h"

namespace ptsim::hw::net {
namespace {

TEST(Placement, MegatronOrder) {
  ParallelShape s;
  s.tp = 8;
  s.dp = 4;
  s.pp = 2;
  s.ep = 2;
  Placement p(s, 64);
  // rank = tp + 8*(cp + 1*(dp + 4*pp)): rank 9 -> tp 1, dp 1, pp 0.
  EXPECT_EQ(p.coord(9, Dim::tp), 1);
  EXPECT_EQ(p.coord(9, Dim::dp), 1);
  EXPECT_EQ(p.coord(9, Dim::pp), 0);
  EXPECT_EQ(p.group(9, Dim::tp), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(p.group(9, Dim::dp), (std::vector<int>{1, 9, 17, 25}));
  EXPECT_EQ(p.group(9, Dim::pp), (std::vector<int>{9, 41}));
  EXPECT_EQ(p.group(9, Dim::cp), (std::vector<int>{9}));
  // EP = 2 consecutive DP members (dp 0,1); EDP = same EP coordinate (dp 1,3).
  EXPECT_EQ(p.group(9, Dim::ep), (std::vector<int>{1, 9}));
  EXPECT_EQ(p.group(9, Dim::edp), (std::vector<int>{9, 25}));
  EXPECT_EQ(p.size(Dim::edp), 2);
  EXPECT_EQ(p.groups(Dim::dp).size(), 16u);  // 8 tp x 2 pp
}

TEST(Placement, CustomOrder) {
  ParallelShape s;
  s.tp = 2;
  s.dp = 4;
  s.order = "dp-tp-cp-pp";  // DP innermost: stride 1; TP stride 4
  Placement p(s, 8);
  EXPECT_EQ(p.group(0, Dim::tp), (std::vector<int>{0, 4}));
  EXPECT_EQ(p.group(0, Dim::dp), (std::vector<int>{0, 1, 2, 3}));
  s.order = "tp-cp-ep-dp-pp";  // Megatron's spelling with ep is accepted
  EXPECT_EQ(Placement(s, 8).group(0, Dim::dp), (std::vector<int>{0, 2, 4, 6}));
}

TEST(Placement, RejectsBadShapes) {
  ParallelShape s;
  s.tp = 8;
  auto msg = [](const ParallelShape& sh, int world) {
    try {
      Placement p(sh, world);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg(s, 16).find("= 8 but world size is 16"), std::string::npos);
  s.dp = 2;
  s.ep = 3;
  EXPECT_NE(msg(s, 16).find("ep must be >= 1 and divide dp (2), got 3"), std::string::npos);
  s.ep = 1;
  s.tp = 0;
  EXPECT_NE(msg(s, 0).find("tp must be >= 1, got 0"), std::string::npos);
  s.tp = 8;
  s.order = "tp-cp-dp";
  EXPECT_NE(msg(s, 16).find("must name each of tp, cp, dp, pp once"), std::string::npos);
  s.order = "tp-tp-dp-pp";
  EXPECT_NE(msg(s, 16).find("'tp' appears twice"), std::string::npos);
  s.order = "tp-xp-dp-pp";
  EXPECT_NE(msg(s, 16).find("unknown dimension 'xp'"), std::string::npos);
  s.order = "tp-ep-cp-dp-pp";
  EXPECT_NE(msg(s, 16).find("'ep' must come right before 'dp'"), std::string::npos);
  s.order = "tp-cp-dp-pp";
  Placement p(s, 16);
  EXPECT_THROW(p.group(16, Dim::tp), std::out_of_range);
}

TEST(Placement, ReportSaysWhichGroupsCrossNodes) {
  ClusterNetSpec c;
  c.num_gpus = 64;  // 8 nodes of 8
  c.switch_radix = 16;
  Topology t = build_cluster(c);
  ParallelShape s;
  s.tp = 8;
  s.dp = 4;
  s.pp = 2;
  PlacementReport rep = placement_report(Placement(s, 64), t);
  // TP = one node exactly; DP groups {r, r+8, r+16, r+24} span 4 nodes; PP {r, r+32} 2 nodes.
  EXPECT_EQ(rep.dims[0].groups_crossing_nodes, 0);
  EXPECT_EQ(rep.dims[2].num_groups, 16);
  EXPECT_EQ(rep.dims[2].groups_crossing_nodes, 16);
  EXPECT_EQ(rep.dims[2].max_nodes_spanned, 4);
  EXPECT_EQ(rep.dims[3].groups_crossing_nodes, 32);
  EXPECT_EQ(rep.dims[3].max_nodes_spanned, 2);
  const std::string text = rep.text();
  EXPECT_NE(text.find(" tp: 8 groups of 8: all inside one node"), std::string::npos) << text;
  EXPECT_NE(text.find(" dp: 16 groups of 4: 16 cross nodes (up to 4 nodes each)"), std::string::npos) << text;
}

}  // namespace
}  // namespace ptsim::hw::net
