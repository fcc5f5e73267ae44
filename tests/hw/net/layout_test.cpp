// Megatron rank order: TP innermost, then CP, DP (EP carved from DP × CP), PP outermost.
#include "hw/net/layout.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace ptsim::hw::net {
namespace {

TEST(Layout, MegatronOrderAndGroupShapes) {
  // tp 4, cp 2, dp 2, pp 2 on 8-GPU nodes: rank = tp + 4·(cp + 2·(dp + 2·pp)).
  const Layout l(4, 2, 2, 2, 2, 8);
  EXPECT_EQ(l.world(), 32);
  EXPECT_EQ(l.rank_of({1, 1, 1, 1}), 1 + 4 * (1 + 2 * (1 + 2 * 1)));
  for (int r = 0; r < l.world(); ++r) EXPECT_EQ(l.rank_of(l.coords(r)), r);
  // TP groups are 4 consecutive ranks: inside one node.
  EXPECT_EQ(l.shape(Dim::tp, 0).nodes, 1);
  EXPECT_EQ(l.shape(Dim::tp, 0).stride, 1);
  // DP × CP group of rank 0: ranks 0, 4, 8, 12 (stride tp) on nodes 0, 0, 1, 1.
  const GroupShape dp = l.shape(Dim::dp, l.group_id(0, Dim::dp));
  EXPECT_EQ(dp.size, 4);
  EXPECT_EQ(dp.stride, 4);
  EXPECT_EQ(dp.nodes, 2);
  // The model-parallel group (tp × cp × pp) of dp index 0: ranks 0–7 (stage 0,
  // node 0) and 16–23 (stage 1, node 2): 16 ranks on 2 nodes.
  EXPECT_EQ(l.shape(Dim::mp, 0).size, 16);
  EXPECT_EQ(l.shape(Dim::mp, 0).nodes, 2);
  // Every rank is in exactly one group per dimension, at its member index.
  for (Dim d : {Dim::tp, Dim::cp, Dim::dp, Dim::ep, Dim::mp}) {
    std::set<int> seen;
    for (int g = 0; g < l.group_count(d); ++g)
      for (int m = 0; m < l.group_size(d); ++m) {
        const int r = l.member_rank(d, g, m);
        EXPECT_EQ(l.group_id(r, d), g);
        EXPECT_EQ(l.member_index(r, d), m);
        seen.insert(r);
      }
    EXPECT_EQ(static_cast<int>(seen.size()), l.world());
  }
}

// Members of rank r's group along d, in member order.
std::vector<int> group_of(const Layout& l, int r, Dim d) {
  std::vector<int> out;
  for (int m = 0; m < l.group_size(d); ++m) out.push_back(l.member_rank(d, l.group_id(r, d), m));
  return out;
}

TEST(Layout, GroupsOfOneRank) {
  // tp 8, dp 4, pp 2, ep 2 on 8-GPU nodes: rank = tp + 8·(dp + 4·pp), so rank 9 is
  // tp 1, dp 1, pp 0.
  const Layout l(8, 1, 4, 2, 2, 8);
  const Coords c = l.coords(9);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 0);
  EXPECT_EQ(group_of(l, 9, Dim::tp), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(group_of(l, 9, Dim::dp), (std::vector<int>{1, 9, 17, 25}));
  EXPECT_EQ(group_of(l, 9, Dim::cp), (std::vector<int>{9}));
  // EP = 2 consecutive DP members (dp 0, 1).
  EXPECT_EQ(group_of(l, 9, Dim::ep), (std::vector<int>{1, 9}));
  // PP: the rank and its peer on the next stage, 8·4 ranks on.
  EXPECT_EQ(group_of(l, 9, Dim::pp), (std::vector<int>{9, 41}));
  EXPECT_EQ(l.group_count(Dim::dp), 16);  // 8 tp × 2 pp
}

// MoE parallel folding (expert_tensor_parallel 1): the experts order a stage's tp·cp·dp
// ranks as etp × ep × edp, so an EP group is ep consecutive ranks across TP groups.
TEST(Layout, ExpertGroupsFoldedOverTensorParallelRanks) {
  // tp 2, dp 4, pp 2, ep 4, etp 1 on 8-GPU nodes: a stage's 8 ranks hold two EP groups.
  const Layout l(2, 1, 4, 2, 4, 8, 1);
  EXPECT_EQ(group_of(l, 5, Dim::ep), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(group_of(l, 9, Dim::ep), (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(l.group_count(Dim::ep), 4);
  EXPECT_EQ(l.shape(Dim::ep, 0).stride, 1);
  EXPECT_EQ(l.shape(Dim::ep, 0).nodes, 1);
  // The dense groups do not move.
  EXPECT_EQ(group_of(l, 5, Dim::tp), (std::vector<int>{4, 5}));
  EXPECT_EQ(group_of(l, 5, Dim::dp), (std::vector<int>{1, 3, 5, 7}));
  std::set<int> seen;
  for (int g = 0; g < l.group_count(Dim::ep); ++g)
    for (int m = 0; m < l.group_size(Dim::ep); ++m) {
      const int r = l.member_rank(Dim::ep, g, m);
      EXPECT_EQ(l.group_id(r, Dim::ep), g);
      EXPECT_EQ(l.member_index(r, Dim::ep), m);
      seen.insert(r);
    }
  EXPECT_EQ(static_cast<int>(seen.size()), l.world());
  // etp = tp numbers and places the groups as the default does.
  const Layout a(2, 1, 4, 2, 2, 8), b(2, 1, 4, 2, 2, 8, 2);
  for (int r = 0; r < a.world(); ++r) {
    EXPECT_EQ(a.group_id(r, Dim::ep), b.group_id(r, Dim::ep));
    EXPECT_EQ(a.member_index(r, Dim::ep), b.member_index(r, Dim::ep));
  }
}

// An expert tensor-parallel size between 1 and tp: ETP groups are etp consecutive ranks
// inside a TP group, EP groups take every etp-th rank.
TEST(Layout, ExpertTensorParallelGroupsInsideTensorParallelOnes) {
  const Layout l(4, 1, 2, 1, 4, 8, 2);  // tp 4, dp 2, ep 4, etp 2: 8 ranks, one stage
  EXPECT_EQ(group_of(l, 5, Dim::etp), (std::vector<int>{4, 5}));
  EXPECT_EQ(group_of(l, 5, Dim::ep), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(l.group_count(Dim::etp), 4);
  for (int r = 0; r < l.world(); ++r) {
    EXPECT_EQ(l.member_rank(Dim::etp, l.group_id(r, Dim::etp), l.member_index(r, Dim::etp)), r);
    EXPECT_EQ(l.member_rank(Dim::ep, l.group_id(r, Dim::ep), l.member_index(r, Dim::ep)), r);
  }
  EXPECT_NE(l.placement_summary().find("etp 4×2 in-node"), std::string::npos) << l.placement_summary();
  // At etp = tp there is no group of its own to report.
  EXPECT_EQ(Layout(4, 1, 2, 1, 2, 8).placement_summary().find("etp"), std::string::npos);
}

// The experts' data-parallel group: the ranks of a stage holding the same experts, every
// (etp·ep)-th rank; without experts sharded apart it is the dp group.
TEST(Layout, ExpertDataParallelGroupsHoldTheSameExperts) {
  const Layout l(2, 1, 4, 2, 4, 8, 1);  // tp 2, dp 4, pp 2, ep 4, etp 1: edp 2
  EXPECT_EQ(l.group_size(Dim::edp), 2);
  EXPECT_EQ(l.group_count(Dim::edp), 8);
  EXPECT_EQ(group_of(l, 5, Dim::edp), (std::vector<int>{1, 5}));
  EXPECT_EQ(group_of(l, 10, Dim::edp), (std::vector<int>{10, 14}));  // stage 1
  EXPECT_EQ(l.shape(Dim::edp, l.group_id(5, Dim::edp)).stride, 4);
  for (int r = 0; r < l.world(); ++r) {
    EXPECT_EQ(l.member_rank(Dim::edp, l.group_id(r, Dim::edp), l.member_index(r, Dim::edp)), r);
    // An edp group's members share the EP slot and the ETP slot, so the same experts.
    for (int x : group_of(l, r, Dim::edp)) EXPECT_EQ(l.member_index(x, Dim::ep), l.member_index(r, Dim::ep));
  }
  const Layout dense(2, 2, 4, 2, 1, 8);  // cp 2, no expert parallelism
  for (int r = 0; r < dense.world(); ++r) EXPECT_EQ(group_of(dense, r, Dim::edp), group_of(dense, r, Dim::dp));
  EXPECT_EQ(dense.placement_summary().find("edp"), std::string::npos);
  // tp 1, dp 16, ep 8 on 8-GPU nodes (the Mixtral reference plan): EP fills a node, edp
  // pairs the two nodes.
  const Layout mixtral(1, 1, 16, 4, 8, 8);
  EXPECT_EQ(group_of(mixtral, 3, Dim::edp), (std::vector<int>{3, 11}));
  EXPECT_NE(mixtral.placement_summary().find("edp 32×2, 32 cross nodes"), std::string::npos)
      << mixtral.placement_summary();
}

TEST(Layout, DimensionNames) {
  EXPECT_STREQ(to_string(Dim::tp), "tp");
  EXPECT_STREQ(to_string(Dim::pp), "pp");
  EXPECT_STREQ(to_string(Dim::dp), "dp");
  EXPECT_STREQ(to_string(Dim::cp), "cp");
  EXPECT_STREQ(to_string(Dim::ep), "ep");
  EXPECT_STREQ(to_string(Dim::mp), "mp");
  EXPECT_STREQ(to_string(Dim::etp), "etp");
  EXPECT_STREQ(to_string(Dim::edp), "edp");
}

TEST(Layout, PlacementSummarySaysWhichGroupsCrossNodes) {
  // tp 8 × dp 4 × pp 2 on 8-GPU nodes: TP fills a node; the 8 DP groups of 4
  // ranks (stride 8) each span 4 nodes; stage 1 starts on node 4.
  const Layout l(8, 1, 4, 2, 1, 8);
  const std::string text = l.placement_summary();
  EXPECT_NE(text.find("tp 8×8 in-node"), std::string::npos) << text;
  EXPECT_NE(text.find("dp 16×4, 16 cross nodes (up to 4 nodes)"), std::string::npos) << text;
  EXPECT_NE(text.find("pp sends cross nodes"), std::string::npos) << text;
}

}  // namespace
}  // namespace ptsim::hw::net
