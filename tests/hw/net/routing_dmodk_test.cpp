// d-mod-k routing (cluster.inter_node.routing: d-mod-k): equal-cost choices by
// destination, as an InfiniBand fat tree's forwarding tables. Checked: a shift
// permutation across the fabric (every GPU sends to the GPU s ranks on, a ring step)
// puts at most one flow on any fabric link in 2- and 3-tier trees, where per-flow
// hashing (ecmp) stacks several on one uplink; routes stay least-cost and the
// same whatever the flow number.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "hw/net/cluster.h"
#include "hw/net/routing.h"

namespace ptsim::hw::net {
namespace {

Topology tree(int gpus, int radix, int tiers, Topology::Routing routing) {
  ClusterNetSpec s;
  s.num_gpus = gpus;
  s.switch_radix = radix;
  s.tiers = tiers;
  s.routing = routing;
  return build_cluster(s);
}

// Most flows on one link between fabric switches (leaf, spine, core) over the
// shifts by whole nodes, every GPU sending to the GPU `shift` ranks on.
int most_flows_on_a_switch_link(const Topology& t, Router& r, int gpus_per_node) {
  int worst = 0;
  std::vector<int> load(t.num_links(), 0);
  for (int shift = gpus_per_node; shift < t.num_gpus(); shift += gpus_per_node) {
    std::fill(load.begin(), load.end(), 0);
    for (int src = 0; src < t.num_gpus(); ++src)
      for (LinkId l : r.route_ranks(src, (src + shift) % t.num_gpus(), static_cast<std::uint64_t>(src))) {
        const auto a = t.kind(t.link(l).src), b = t.kind(t.link(l).dst);
        const bool fabric = (a == VertexKind::leaf || a == VertexKind::spine || a == VertexKind::core) &&
                            (b == VertexKind::leaf || b == VertexKind::spine || b == VertexKind::core);
        if (fabric) worst = std::max(worst, ++load[l]);
      }
  }
  return worst;
}

// The busiest fabric link over the node shifts under d-mod-k and under ecmp.
std::pair<int, int> busiest_by_routing(int gpus, int radix, int tiers) {
  Topology d = tree(gpus, radix, tiers, Topology::Routing::d_mod_k);
  Topology e = tree(gpus, radix, tiers, Topology::Routing::ecmp);
  Router rd(d), re(e);
  return {most_flows_on_a_switch_link(d, rd, 8), most_flows_on_a_switch_link(e, re, 8)};
}

TEST(RoutingDModK, ShiftPermutationsNeverShareAFabricLinkOnTwoTiers) {
  // 8 nodes x 8 GPUs, radix 16: 8 leaves of 8 NICs, 8 spines.
  const auto [routed, hashed] = busiest_by_routing(64, 16, 2);
  EXPECT_EQ(routed, 1);
  EXPECT_GT(hashed, 1);  // hashing collides somewhere
}

TEST(RoutingDModK, ShiftPermutationsNeverShareAFabricLinkOnThreeTiers) {
  // 16 nodes x 8 GPUs, radix 8: 32 leaves of 4 NICs, 8 pods, cores above.
  const auto [routed, hashed] = busiest_by_routing(128, 8, 3);
  EXPECT_EQ(routed, 1);
  EXPECT_GT(hashed, 1);
}

TEST(RoutingDModK, RoutesAreLeastCostAndIgnoreTheFlowNumber) {
  Topology d = tree(128, 8, 3, Topology::Routing::d_mod_k);
  Topology e = tree(128, 8, 3, Topology::Routing::ecmp);
  Router rd(d), re(e);
  for (int src = 0; src < 128; src += 7)
    for (int dst = 0; dst < 128; dst += 5) {
      const auto p = rd.route_ranks(src, dst, 0);
      EXPECT_EQ(p, rd.route_ranks(src, dst, 12345)) << src << " -> " << dst;
      EXPECT_EQ(p.size(), re.route_ranks(src, dst, 0).size()) << src << " -> " << dst;
    }
}

TEST(RoutingDModK, DescriptionSaysSo) {
  EXPECT_NE(tree(64, 16, 2, Topology::Routing::d_mod_k).description().find("d-mod-k routing"), std::string::npos);
  EXPECT_EQ(tree(64, 16, 2, Topology::Routing::ecmp).description().find("d-mod-k"), std::string::npos);
}

}  // namespace
}  // namespace ptsim::hw::net
