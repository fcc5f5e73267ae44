// The fabric contraction (routing.h) gives the same least costs, path counts and
// routes as one full-graph search per destination (Router::Contraction::none), on
// small random fat trees, rail-optimized fabrics, tori and user graphs with transit
// through compute nodes (PXN-style) and nodes wired to each other directly.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "hw/net/cluster.h"
#include "hw/net/routing.h"

namespace ptsim::hw::net {
namespace {

// Every vertex pair: equal costs; every GPU pair and a few flows: equal routes (or both throw).
void expect_same_as_full_search(const Topology& t, const std::string& what) {
  Router fast(t);
  Router full(t, 0, Router::Contraction::none);
  EXPECT_EQ(full.fabric_vertices(), t.num_vertices()) << what;
  const auto n = static_cast<VertexId>(t.num_vertices());
  for (VertexId dst = 0; dst < n; ++dst)
    for (VertexId src = 0; src < n; ++src) ASSERT_EQ(fast.cost(src, dst), full.cost(src, dst)) << what;
  for (int a = 0; a < t.num_gpus(); ++a)
    for (int b = 0; b < t.num_gpus(); ++b) {
      const VertexId s = t.gpu(a), d = t.gpu(b);
      if (full.cost(s, d) == ~0u) {
        EXPECT_THROW(fast.route(s, d), std::invalid_argument) << what;
        continue;
      }
      for (std::uint64_t flow = 0; flow < 3; ++flow) ASSERT_EQ(fast.route(s, d, flow), full.route(s, d, flow)) << what;
      if ((a + b) % 7 == 0) EXPECT_EQ(fast.count_paths(s, d), full.count_paths(s, d)) << what;
    }
}

TEST(RoutingContraction, BuiltFabricsMatchAFullSearch) {
  std::mt19937 rng(17);
  int tested = 0;
  for (int i = 0; i < 40; ++i) {
    ClusterNetSpec s;
    const char* kinds[] = {"fat-tree", "rail-optimized", "torus"};
    s.topology = kinds[i % 3];
    s.gpus_per_node = std::vector<int>{2, 4, 8}[rng() % 3];
    s.nics_per_node = std::vector<int>{1, 2, s.gpus_per_node}[rng() % 3];
    const int nodes = 2 + static_cast<int>(rng() % 5);
    s.num_gpus = nodes * s.gpus_per_node;
    s.switch_radix = std::vector<int>{4, 8, 16}[rng() % 3];
    s.oversubscription = rng() % 2 ? 1.0 : 2.0;
    s.tiers = std::vector<int>{0, 2, 3}[rng() % 3];
    if (s.topology == "torus") s.torus_dims = {2, nodes / 2 >= 2 ? nodes / 2 : 2};
    Topology t;
    try {
      t = build_cluster(s);
    } catch (const std::invalid_argument&) {
      continue;  // a shape the builders reject (e.g. a torus that does not tile the nodes)
    }
    ++tested;
    const std::string what = s.topology + " nodes " + std::to_string(nodes) + " gpn " +
                             std::to_string(s.gpus_per_node) + " nics " + std::to_string(s.nics_per_node);
    EXPECT_LT(Router(t).fabric_vertices(), t.num_vertices()) << what;  // the contraction is in use
    expect_same_as_full_search(t, what);
  }
  EXPECT_GE(tested, 20);
}

// Nodes of GPUs behind an internal switch, NICs on random switches (several per node,
// on different switches: cheap transit through a node can beat the fabric), random
// switch-switch cables (sometimes none) and costs, sometimes a cable joining two nodes directly (both
// become fabric) and sometimes an unreachable island.
Topology random_user_graph(std::mt19937& rng) {
  Topology t;
  const int nodes = 2 + static_cast<int>(rng() % 4), switches = 1 + static_cast<int>(rng() % 4);
  std::vector<VertexId> sw, nics;
  for (int s = 0; s < switches; ++s) sw.push_back(t.add_vertex(VertexKind::leaf, "sw" + std::to_string(s)));
  auto cost = [&] { return static_cast<std::uint8_t>(1 + rng() % 5); };
  // Half the time the switches are not all joined: only transit through nodes links them.
  const bool joined = rng() % 2;
  for (int s = 1; s < switches; ++s)
    if (joined || rng() % 3 == 0) t.connect(sw[s], sw[rng() % s], 1e9, 1e-6, static_cast<std::uint8_t>(4 + rng() % 8));
  std::vector<std::vector<VertexId>> gpus(nodes);
  for (int n = 0; n < nodes; ++n) {
    const std::string p = "n" + std::to_string(n) + ".";
    const VertexId hub = t.add_vertex(VertexKind::nvswitch, p + "nvs", n);
    for (int g = 0; g < 2 + static_cast<int>(rng() % 2); ++g) {
      gpus[n].push_back(t.add_vertex(VertexKind::gpu, p + "gpu" + std::to_string(g), n));
      t.connect(gpus[n].back(), hub, 1e9, 1e-6, cost());
    }
    const int island = rng() % 9 == 0;
    for (int k = 0; k < (island ? 0 : 1 + static_cast<int>(rng() % 3)); ++k) {
      const VertexId nic = t.add_vertex(VertexKind::nic, p + "nic" + std::to_string(k), n);
      t.connect(gpus[n][rng() % gpus[n].size()], nic, 1e9, 1e-6, cost());
      t.connect(nic, sw[rng() % switches], 1e9, 1e-6, cost());
      nics.push_back(nic);
    }
  }
  if (rng() % 3 == 0 && nics.size() >= 2) {
    const VertexId a = nics[rng() % nics.size()], b = nics[rng() % nics.size()];
    if (t.node(a) != t.node(b)) t.connect(a, b, 1e9, 1e-6, cost());
  }
  return t;
}

TEST(RoutingContraction, RandomUserGraphsMatchAFullSearch) {
  std::mt19937 rng(12);
  for (int i = 0; i < 200; ++i) {
    const Topology t = random_user_graph(rng);
    expect_same_as_full_search(t, "user graph " + std::to_string(i));
  }
}

// Independently of the router's tables: every route is a least-cost path (each link
// tight against Bellman-Ford distances to the destination), and the flows through a
// switch towards one destination use every one of its equal-cost next hops (where
// enough of them pass: the ECMP hash spreads them), NIC choices aside (NIC affinity).
void expect_least_cost_and_spread(const Topology& t, const std::string& what) {
  Router r(t);
  const auto n = t.num_vertices();
  std::vector<LinkId> path;
  for (int b = 0; b < t.num_gpus(); ++b) {
    const VertexId d = t.gpu(b);
    std::vector<std::uint32_t> dist(n, ~0u);
    dist[d] = 0;
    for (std::size_t it = 0; it < n; ++it)
      for (const Link& l : t.links())
        if (dist[l.dst] != ~0u) dist[l.src] = std::min(dist[l.src], dist[l.dst] + l.cost);
    std::map<VertexId, std::set<LinkId>> used;
    std::map<VertexId, int> visits;
    for (int a = 0; a < t.num_gpus(); ++a) {
      const VertexId s = t.gpu(a);
      if (s == d || dist[s] == ~0u) continue;
      for (std::uint64_t flow = 0; flow < 32; ++flow) {
        r.route(s, d, flow, path);
        std::uint32_t sum = 0;
        for (LinkId id : path) {
          const Link& l = t.link(id);
          ASSERT_EQ(dist[l.src], l.cost + dist[l.dst]) << what << ": " << t.link_name(id) << " is not on a least-cost path";
          sum += l.cost;
          used[l.src].insert(id);
          ++visits[l.src];
        }
        ASSERT_EQ(sum, dist[s]) << what;
        ASSERT_EQ(t.link(path.back()).dst, d) << what;
      }
    }
    for (const auto& [v, links] : used) {
      std::set<LinkId> tight;
      for (LinkId id = 0; id < t.num_links(); ++id) {
        const Link& l = t.link(id);
        if (l.src == v && dist[l.dst] != ~0u && dist[v] == l.cost + dist[l.dst]) tight.insert(id);
      }
      const bool nic_choice = t.kind(t.link(*tight.begin()).dst) == VertexKind::nic;
      if (nic_choice || visits[v] < 16 * static_cast<int>(tight.size())) continue;
      EXPECT_EQ(links, tight) << what << ": next hops of " << t.name(v) << " to " << t.name(d);
    }
  }
}

TEST(RoutingContraction, RoutesAreLeastCostAndSpreadOverEqualNextHops) {
  for (const char* topo : {"fat-tree", "rail-optimized", "torus"}) {
    ClusterNetSpec s;
    s.num_gpus = 64;
    s.switch_radix = 8;
    s.tiers = 3;
    s.topology = topo;
    if (std::string(topo) == "torus") s.torus_dims = {2, 4};
    if (std::string(topo) != "fat-tree") s.tiers = 0;
    if (std::string(topo) == "rail-optimized") s.switch_radix = 16;  // 8 rails x 2 groups of 8 nodes
    expect_least_cost_and_spread(build_cluster(s), topo);
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 60; ++i) expect_least_cost_and_spread(random_user_graph(rng), "user graph " + std::to_string(i));
}

}  // namespace
}  // namespace ptsim::hw::net
