// Routing: least-cost paths (NVLink inside a node, own NIC across a fat tree, PXN on
// rails, fewest router hops on a torus) and ECMP spreading over equal paths.
#include <gtest/gtest.h>

#include <set>

#include "hw/net/builders.h"
#include "hw/net/cluster.h"
#include "hw/net/routing.h"

namespace ptsim::hw::net {
namespace {

std::vector<VertexKind> kinds_on(const Topology& t, const std::vector<LinkId>& path) {
  std::vector<VertexKind> k;
  for (LinkId l : path) k.push_back(t.kind(t.link(l).dst));
  return k;
}

Topology small_fat_tree() {
  ClusterNetSpec s;
  s.num_gpus = 32;  // 4 DGX nodes, 8 NICs each, radix 8 -> 8 leaves, 4 spines
  s.switch_radix = 8;
  return build_cluster(s);
}

TEST(Routing, InsideANodeUsesNvlink) {
  Topology t = small_fat_tree();
  Router r(t);
  auto p = r.route_ranks(0, 1);
  // gpu0 -> nvswitch -> gpu1 (cost 2), not gpu0 -> pcie0 -> gpu1 (cost 4).
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(t.link_name(p[0]), "node0.gpu0->node0.nvswitch");
  EXPECT_EQ(t.link_name(p[1]), "node0.nvswitch->node0.gpu1");
  EXPECT_DOUBLE_EQ(r.path_latency(p), 1e-6);  // intra_latency, half on each cable
  EXPECT_DOUBLE_EQ(r.path_bandwidth(p), 300e9);
  EXPECT_TRUE(r.route_ranks(3, 3).empty());
}

TEST(Routing, AcrossLeavesThroughOwnNicAndASpine) {
  Topology t = small_fat_tree();
  Router r(t);
  auto p = r.route_ranks(0, 8);  // node0.gpu0 -> node1.gpu0; node0 NICs on leaves 0-1, node1 on 2-3
  const std::vector<VertexKind> want = {VertexKind::pcie_switch, VertexKind::nic,  VertexKind::leaf,
                                        VertexKind::spine,       VertexKind::leaf, VertexKind::nic,
                                        VertexKind::pcie_switch, VertexKind::gpu};
  EXPECT_EQ(kinds_on(t, p), want);
  // Latency: 2 NIC cables of inter_latency/2 each.
  EXPECT_DOUBLE_EQ(r.path_latency(p), 2e-6);
  // Equal paths: 2 NICs on gpu0's PCIe switch x 4 spines x 2 NICs on the far side = 16.
  EXPECT_EQ(r.count_paths(t.gpu(0), t.gpu(8)), 16u);
  // ECMP: 64 flows of the same pair use all 4 spines.
  std::set<VertexId> spines;
  for (std::uint64_t f = 0; f < 64; ++f) spines.insert(t.link(r.route_ranks(0, 8, f)[3]).dst);
  EXPECT_EQ(spines.size(), 4u);
  // NIC affinity: GPU 0 always leaves through NIC 0 and GPU 1 through NIC 1 (the two
  // NICs of their PCIe switch), whatever the flow; the far side enters through the NIC
  // of the destination GPU's index.
  for (std::uint64_t f = 0; f < 16; ++f) {
    EXPECT_EQ(t.name(t.link(r.route_ranks(0, 8, f)[1]).dst), "node0.nic0");
    EXPECT_EQ(t.name(t.link(r.route_ranks(1, 9, f)[1]).dst), "node0.nic1");
    EXPECT_EQ(t.name(t.link(r.route_ranks(1, 9, f)[5]).dst), "node1.nic1");
  }
  // ...and one flow always takes the same path.
  EXPECT_EQ(r.route_ranks(0, 8, 7), r.route_ranks(0, 8, 7));
}

TEST(Routing, RailOptimizedCrossRailUsesPxnNotTheSpine) {
  ClusterNetSpec s;
  s.num_gpus = 16;
  s.topology = "rail-optimized";
  s.switch_radix = 16;
  s.gpus_per_pcie_switch = 1;
  Topology t = build_cluster(s);
  Router r(t);
  // node0.gpu0 -> node1.gpu3: own NIC via the spine costs 2+2+4+4+4+4+2+2 = 24; one NVLink
  // hop to the GPU on rail 3 (either side) costs 1+1+2+2+4+4+2+2 = 18.
  EXPECT_EQ(r.cost(t.gpu(0), t.gpu(11)), 18u);
  for (std::uint64_t f = 0; f < 16; ++f) {
    auto k = kinds_on(t, r.route_ranks(0, 11, f));
    EXPECT_EQ(std::count(k.begin(), k.end(), VertexKind::spine), 0);
    EXPECT_EQ(std::count(k.begin(), k.end(), VertexKind::nvswitch), 1);
  }
  // Same rail: straight through rail 2's leaf.
  auto k = kinds_on(t, r.route_ranks(2, 10));
  EXPECT_EQ(std::count(k.begin(), k.end(), VertexKind::nvswitch), 0);
  EXPECT_EQ(std::count(k.begin(), k.end(), VertexKind::spine), 0);
}

TEST(Routing, TorusTakesFewestHopsWithWrapAround) {
  ClusterNetSpec s;
  s.num_gpus = 16;
  s.gpus_per_node = 1;
  s.nics_per_node = 1;
  s.topology = "torus";
  s.torus_dims = {4, 4};
  Topology t = build_cluster(s);
  Router r(t);
  auto hops = [&](int a, int b) {
    auto k = kinds_on(t, r.route_ranks(a, b));
    int n = 0;
    for (std::size_t i = 1; i < k.size(); ++i)
      n += k[i] == VertexKind::torus_node && k[i - 1] == VertexKind::torus_node;
    return n;
  };
  // (0,0) -> (2,2): 2 + 2 router hops; (0,0) -> (3,0): 1 hop over the wrap-around link.
  EXPECT_EQ(hops(0, 10), 4);
  EXPECT_EQ(hops(0, 3), 1);
  // gpu->pcie->nic->router + 1 hop + router->nic->pcie->gpu = 7 links.
  EXPECT_EQ(r.route_ranks(0, 3).size(), 7u);
  // (0,0) -> (2,2): 2 hops each way round both rings of size 4, so 2 directions in x
  // times 2 in y times C(4,2) = 6 interleavings = 24 shortest router paths.
  EXPECT_EQ(r.count_paths(t.gpu(0), t.gpu(10)), 24u);
}

// The contraction gives exactly the least costs of a plain Dijkstra over the graph.
TEST(Routing, ContractionMatchesAFullSearchForEveryPair) {
  for (const char* topo : {"fat-tree", "rail-optimized", "torus"}) {
    ClusterNetSpec s;
    s.num_gpus = 32;
    s.switch_radix = 8;
    s.topology = topo;
    if (std::string(topo) == "torus") s.torus_dims = {2, 2};
    Topology t = build_cluster(s);
    Router r(t);
    const auto n = t.num_vertices();
    for (int dst = 0; dst < t.num_gpus(); ++dst) {
      // Bellman-Ford to the destination (tiny graph): the reference distances.
      std::vector<std::uint32_t> d(n, 1u << 30);
      d[t.gpu(dst)] = 0;
      for (std::size_t it = 0; it < n; ++it)
        for (const Link& l : t.links()) d[l.src] = std::min(d[l.src], d[l.dst] + l.cost);
      for (int src = 0; src < t.num_gpus(); ++src) EXPECT_EQ(r.cost(t.gpu(src), t.gpu(dst)), d[t.gpu(src)]) << topo;
    }
  }
}

// Kept routes are the routes: a router that keeps them (also one whose cache is so
// small that it starts over many times) answers exactly as one that walks every time.
TEST(Routing, RouteCacheReturnsTheWalkedRoutes) {
  Topology t = small_fat_tree();
  Router walked(t), kept(t), tiny(t);
  tiny.set_route_cache_links(16);
  std::vector<LinkId> a, b, c;
  for (int pass = 0; pass < 2; ++pass)
    for (int s = 0; s < 32; ++s)
      for (int d = 0; d < 32; ++d)
        for (std::uint64_t f = 0; f < 3; ++f) {
          Router fresh(t);  // nothing cached
          fresh.route(t.gpu(s), t.gpu(d), f, a);
          kept.route(t.gpu(s), t.gpu(d), f, b);
          tiny.route(t.gpu(s), t.gpu(d), f, c);
          ASSERT_EQ(a, b) << s << "->" << d << " flow " << f << " pass " << pass;
          ASSERT_EQ(a, c) << s << "->" << d << " flow " << f << " pass " << pass;
        }
  EXPECT_GT(kept.routes_cached(), 32u * 31u * 3u - 1u);
  EXPECT_LE(tiny.routes_cached(), 16u);
}

TEST(Routing, CacheIsBoundedAndUnreachableThrows) {
  Topology t = small_fat_tree();
  {
    // Per-node contraction: a destination GPU needs the full tables of the switches its
    // node hangs from only — leaves 2k and 2k+1 for node k (4 NICs per leaf) — so
    // routing to all 31 other GPUs computes 8 tables (one per leaf), not 31.
    Router r(t);
    for (int d = 1; d < 32; ++d) r.route_ranks(0, d);
    EXPECT_EQ(r.distance_tables_computed(), 8u);
  }
  Router r(t, 2);  // two tables asked for; a node's 2 entry leaves + 1 are kept (3)
  for (int d = 1; d < 32; ++d) r.route_ranks(0, d);
  for (int d = 1; d < 32; ++d) r.route_ranks(0, d, 1);  // flow 1: not in the route cache
  // LRU of 3 over the leaf pairs (0,1), (2,3), (4,5), (6,7) in turn: after the first
  // pass it holds {5, 6, 7}; the second pass needs 0,1 first, so every pair is
  // recomputed: 8 + 8 = 16.
  EXPECT_EQ(r.distance_tables_computed(), 16u);
  Topology island;
  island.add_vertex(VertexKind::gpu, "a", 0);
  island.add_vertex(VertexKind::gpu, "b", 1);
  Router ri(island);
  EXPECT_THROW(ri.route(0, 1), std::invalid_argument);
}

// Distance tables are 16-bit while (|F| - 1) x the costliest edge stays below 0xFFFF and
// 32-bit beyond: a chain of switches whose least costs pass 65,535 routes exactly, as
// does a chain just short of the limit.
TEST(Routing, LeastCostsBeyondSixteenBitsAreExact) {
  for (int switches : {200, 300}) {
    Topology t;
    const VertexId a = t.add_vertex(VertexKind::gpu, "a", 0), b = t.add_vertex(VertexKind::gpu, "b", 1);
    std::vector<VertexId> sw;
    for (int i = 0; i < switches; ++i) sw.push_back(t.add_vertex(VertexKind::spine, "s" + std::to_string(i)));
    for (int i = 1; i < switches; ++i) t.connect(sw[i - 1], sw[i], 1e9, 1e-6, 255);
    t.connect(a, sw.front(), 1e9, 1e-6, 7);
    t.connect(b, sw.back(), 1e9, 1e-6, 9);
    const std::uint32_t want = 7 + 255u * static_cast<std::uint32_t>(switches - 1) + 9;
    for (auto contraction : {Router::Contraction::nodes, Router::Contraction::none}) {
      Router r(t, 0, contraction);
      EXPECT_EQ(r.cost(a, b), want) << switches;
      EXPECT_EQ(r.cost(b, a), want) << switches;
      EXPECT_EQ(r.cost(sw[1], b), want - 7 - 255) << switches;
      const auto p = r.route(a, b);
      ASSERT_EQ(p.size(), static_cast<std::size_t>(switches + 1)) << switches;
      EXPECT_EQ(t.link(p.back()).dst, b);
    }
  }
}

}  // namespace
}  // namespace ptsim::hw::net
