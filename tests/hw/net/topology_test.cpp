// Builders: vertex/link counts derived by hand from each shape, and every invalid
// parameter rejected with its value in the message (SimGrid TorusZone_test habit).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "hw/net/builders.h"
#include "hw/net/cluster.h"
#include "hw/net/graph_yaml.h"

namespace ptsim::hw::net {
namespace {

int count_kind(const Topology& t, VertexKind k) {
  int n = 0;
  for (VertexId v = 0; v < t.num_vertices(); ++v) n += t.kind(v) == k;
  return n;
}

template <class F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected std::invalid_argument mentioning '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Builders, DgxNodeShape) {
  NodeParams p;  // 8 GPUs, 8 NICs, 2 GPUs per PCIe switch
  Topology t;
  auto nv = add_node(t, 0, p);
  // 8 GPUs + 1 NVSwitch + 4 PCIe switches + 8 NICs = 21 vertices; cables:
  // 8 GPU-NVSwitch + 8 GPU-PCIe + 8 PCIe-NIC = 24, i.e. 48 directed links.
  EXPECT_EQ(t.num_vertices(), 21u);
  EXPECT_EQ(t.num_links(), 48u);
  EXPECT_EQ(count_kind(t, VertexKind::pcie_switch), 4);
  EXPECT_EQ(nv.gpus.size(), 8u);
  EXPECT_EQ(nv.nics.size(), 8u);
  EXPECT_EQ(t.nvswitch_of_node(0), nv.nvswitch);
  EXPECT_EQ(t.name(nv.nics[3]), "node0.nic3");
  EXPECT_EQ(t.rank_of(nv.gpus[5]), 5);
  // GPU -> NVSwitch link carries the per-GPU NVLink bandwidth.
  EXPECT_DOUBLE_EQ(t.link(0).bandwidth, 300e9);
  EXPECT_EQ(t.link_name(0), "node0.gpu0->node0.nvswitch");
}

TEST(Builders, FatTreeTwoTier) {
  NodeParams node;
  FabricParams f;
  f.switch_radix = 8;  // leaves take 4 NICs down, 4 cables up
  Topology t = build_fat_tree(4, node, f);
  // 32 NICs / 4 = 8 leaves <= radix 8 -> 2 tiers with 4 spines.
  // Vertices 4*21 + 8 + 4 = 96; cables 4*24 + 32 NIC-leaf + 8*4 leaf-spine = 160.
  EXPECT_EQ(count_kind(t, VertexKind::leaf), 8);
  EXPECT_EQ(count_kind(t, VertexKind::spine), 4);
  EXPECT_EQ(count_kind(t, VertexKind::core), 0);
  EXPECT_EQ(t.num_vertices(), 96u);
  EXPECT_EQ(t.num_links(), 320u);
  EXPECT_EQ(t.num_gpus(), 32);
  EXPECT_EQ(t.num_nodes(), 4);
}

TEST(Builders, FatTreeOversubscriptionThinsLeafUplinks) {
  NodeParams node;
  FabricParams f;
  f.switch_radix = 8;
  f.oversubscription = 2;
  Topology t = build_fat_tree(4, node, f);
  // 2:1 -> round(4/2) = 2 uplinks per leaf of 4*25e9/(2*2) = 25 GB/s: 100 down : 50 up.
  EXPECT_EQ(count_kind(t, VertexKind::spine), 2);
  f.oversubscription = 3;
  Topology t3 = build_fat_tree(4, node, f);
  // 3:1 -> round(4/3) = 1 uplink of 4*25e9/3 = 33.3 GB/s.
  EXPECT_EQ(count_kind(t3, VertexKind::spine), 1);
  bool found = false;
  for (const Link& l : t3.links())
    if (t3.kind(l.src) == VertexKind::leaf && t3.kind(l.dst) == VertexKind::spine) {
      EXPECT_NEAR(l.bandwidth, 100e9 / 3, 1);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(Builders, FatTreeThreeTier) {
  NodeParams node;
  FabricParams f;
  f.switch_radix = 8;
  Topology t = build_fat_tree(8, node, f);
  // 64 NICs / 4 = 16 leaves > 8 -> 3 tiers: 16/4 = 4 pods of 4 spines; 4 groups x 4 = 16 cores.
  EXPECT_EQ(count_kind(t, VertexKind::leaf), 16);
  EXPECT_EQ(count_kind(t, VertexKind::spine), 16);
  EXPECT_EQ(count_kind(t, VertexKind::core), 16);
  // Cables: 8*24 + 64 + 16 leaves * 4 + 16 spines * 4 = 384 -> 768 links.
  EXPECT_EQ(t.num_links(), 768u);
}

// The builders reserve their arrays from the shape (Topology::reserve), so a 65k-GPU
// graph is filled without regrowing its link vector: exactly the room needed where
// every pod is full, never less.
TEST(Builders, ReserveTheLinksTheyMake) {
  NodeParams node;
  FabricParams f;
  f.switch_radix = 8;
  for (int nodes : {1, 2, 8}) {  // 2-tier (1 leaf, 4 leaves) and 3-tier with full pods
    const Topology t = build_fat_tree(nodes, node, f);
    EXPECT_EQ(t.link_capacity(), t.num_links()) << nodes << " nodes";
  }
  f.oversubscription = 2;
  const Topology thin = build_fat_tree(8, node, f);
  EXPECT_EQ(thin.link_capacity(), thin.num_links());
  FabricParams rail;
  rail.switch_radix = 16;
  const Topology r = build_rail_optimized(4, node, rail);
  EXPECT_EQ(r.link_capacity(), r.num_links());
  NodeParams one;
  one.gpus_per_node = 1;
  one.nics_per_node = 1;
  one.gpus_per_pcie_switch = 1;
  TorusParams tp;
  tp.dims = {4, 3, 2};  // a size-2 dimension has one cable per pair: the reserve is an upper bound
  const Topology torus = build_torus(one, tp);
  EXPECT_GE(torus.link_capacity(), torus.num_links());
  EXPECT_LE(torus.link_capacity(), torus.num_links() + 2 * 12);
}

TEST(Builders, RailOptimized) {
  NodeParams node;
  node.gpus_per_pcie_switch = 1;  // a NIC per GPU
  FabricParams f;
  f.switch_radix = 16;
  Topology t = build_rail_optimized(4, node, f);
  // 8 rails x 1 group (4 nodes <= 8 per leaf) = 8 rail leaves, 8 spines.
  EXPECT_EQ(count_kind(t, VertexKind::leaf), 8);
  EXPECT_EQ(count_kind(t, VertexKind::spine), 8);
  // NIC 3 of every node hangs off rail3.
  for (const Link& l : t.links())
    if (t.kind(l.src) == VertexKind::nic && t.kind(l.dst) == VertexKind::leaf) {
      const std::string nic(t.name(l.src)), leaf(t.name(l.dst));
      EXPECT_EQ(nic.substr(nic.find(".nic") + 4), leaf.substr(4)) << nic << " " << leaf;
    }
}

TEST(Builders, Torus) {
  NodeParams node;
  node.gpus_per_node = 1;
  node.nics_per_node = 1;
  node.gpus_per_pcie_switch = 1;
  TorusParams tp;
  tp.dims = {4, 3, 2};
  Topology t = build_torus(node, tp);
  // 24 routers; cables per dimension: 24 (size 4) + 24 (size 3) + 12 (size 2: one cable per pair).
  EXPECT_EQ(count_kind(t, VertexKind::torus_node), 24);
  int router_cables = 0;
  for (const Link& l : t.links())
    router_cables += t.kind(l.src) == VertexKind::torus_node && t.kind(l.dst) == VertexKind::torus_node;
  EXPECT_EQ(router_cables, 2 * (24 + 24 + 12));
}

TEST(Builders, InvalidNodeParameters) {
  NodeParams p;
  p.gpus_per_node = 0;
  expect_invalid([&] { build_dgx_node(p); }, "gpus_per_node must be >= 1, got 0");
  p = {};
  p.nvlink_bandwidth = -1;
  expect_invalid([&] { build_dgx_node(p); }, "got -1");
  p = {};
  p.nvlink_latency = -2e-6;
  expect_invalid([&] { build_dgx_node(p); }, "intra-node latency");
  p = {};
  p.nics_per_node = -1;
  expect_invalid([&] { build_dgx_node(p); }, "nics_per_node must be >= 0, got -1");
  p = {};
  p.nic_bandwidth = 0;
  expect_invalid([&] { build_dgx_node(p); }, "nic_bandwidth must be positive, got 0");
  p = {};
  p.gpus_per_pcie_switch = 3;
  expect_invalid([&] { build_dgx_node(p); }, "gpus_per_pcie_switch must divide gpus_per_node (8), got 3");
  p = {};
  p.nics_per_node = 6;  // 4 PCIe switches
  expect_invalid([&] { build_dgx_node(p); }, "nics_per_node (6) must be a multiple of the PCIe switch count 4");
  p = {};
  p.pcie_bandwidth = -5;
  expect_invalid([&] { build_dgx_node(p); }, "pcie_bandwidth must be non-negative, got -5");
  p = {};
  p.pcie_latency = -1;
  expect_invalid([&] { build_dgx_node(p); }, "pcie_latency");
}

TEST(Builders, InvalidFabricParameters) {
  NodeParams node;
  FabricParams f;
  f.switch_radix = 7;
  expect_invalid([&] { build_fat_tree(4, node, f); }, "switch_radix must be even and >= 4, got 7");
  f.switch_radix = 2;
  expect_invalid([&] { build_fat_tree(4, node, f); }, "got 2");
  f = {};
  f.oversubscription = 0.5;
  expect_invalid([&] { build_fat_tree(4, node, f); }, "oversubscription must be >= 1 (1 = full bisection), got 0.5");
  f = {};
  f.tiers = 4;
  expect_invalid([&] { build_fat_tree(4, node, f); }, "tiers must be 2 or 3 (0 = automatic), got 4");
  f = {};
  f.nic_latency = -1;
  expect_invalid([&] { build_fat_tree(4, node, f); }, "inter-node latency");
  f = {};
  f.hop_latency = -1;
  expect_invalid([&] { build_fat_tree(4, node, f); }, "hop_latency");
  f = {};
  f.link_bandwidth = -1;
  expect_invalid([&] { build_fat_tree(4, node, f); }, "link_bandwidth");
  f = {};
  expect_invalid([&] { build_fat_tree(0, node, f); }, "num_nodes must be >= 1, got 0");
  f.switch_radix = 8;
  f.tiers = 2;  // 64 NICs need 16 leaves > 8
  expect_invalid([&] { build_fat_tree(8, node, f); }, "need 16 leaves");
  f.tiers = 3;  // radix 8 holds 8 pods of 4 leaves of 4 NICs = 128 NICs = 16 nodes
  expect_invalid([&] { build_fat_tree(17, node, f); }, "need 9 pods");
  NodeParams no_nic;
  no_nic.nics_per_node = 0;
  expect_invalid([&] { build_fat_tree(2, no_nic, FabricParams{}); }, "nics_per_node must be >= 1, got 0");
  f = {};
  f.switch_radix = 8;  // 8 rails x 2 groups = 16 leaves > 8
  expect_invalid([&] { build_rail_optimized(5, node, f); }, "16 rail leaves exceed the spine radix 8");
  f.tiers = 3;
  expect_invalid([&] { build_rail_optimized(2, node, f); }, "tiers: 3");
}

TEST(Builders, InvalidTorusParameters) {
  NodeParams node;
  TorusParams t;
  t.dims = {};
  expect_invalid([&] { build_torus(node, t); }, "dims must have 2 or 3 entries, got []");
  t.dims = {4};
  expect_invalid([&] { build_torus(node, t); }, "got [4]");
  t.dims = {2, 2, 2, 2};
  expect_invalid([&] { build_torus(node, t); }, "got [2,2,2,2]");
  t.dims = {4, 1};
  expect_invalid([&] { build_torus(node, t); }, "every dimension must be >= 2, got 1 in [4,1]");
  t.dims = {0, 4};
  expect_invalid([&] { build_torus(node, t); }, "got 0 in [0,4]");
  t.dims = {-3, 4};
  expect_invalid([&] { build_torus(node, t); }, "got -3");
  t.dims = {2, 2};
  t.link_bandwidth = -1;
  expect_invalid([&] { build_torus(node, t); }, "torus link_bandwidth");
  t.link_bandwidth = 0;
  t.hop_latency = -1;
  expect_invalid([&] { build_torus(node, t); }, "torus hop_latency");
}

TEST(Cluster, DispatchAndValidation) {
  ClusterNetSpec s;
  s.num_gpus = 32;
  s.switch_radix = 8;
  Topology ft = build_cluster(s);
  EXPECT_EQ(ft.num_gpus(), 32);
  EXPECT_EQ(count_kind(ft, VertexKind::spine), 4);
  s.topology = "rail-optimized";
  s.switch_radix = 16;
  EXPECT_EQ(count_kind(build_cluster(s), VertexKind::leaf), 8);
  s.topology = "torus";
  s.torus_dims = {2, 2};
  EXPECT_EQ(count_kind(build_cluster(s), VertexKind::torus_node), 4);
  s.torus_dims = {2, 3};
  expect_invalid([&] { build_cluster(s); }, "torus_dims: multiply to 6 but the cluster has 4 nodes");
  s.topology = "dragonfly";
  expect_invalid([&] { build_cluster(s); }, "unknown topology 'dragonfly'");
  s.topology = "fat-tree";
  s.num_gpus = 12;
  expect_invalid([&] { build_cluster(s); }, "gpus_per_node must divide num_gpus (12), got 8");
  s.num_gpus = 0;
  expect_invalid([&] { build_cluster(s); }, "num_gpus must be >= 1, got 0");
  s.num_gpus = 8;
  s.nvls = true;
  Topology one = build_cluster(s);  // one node: no fabric
  EXPECT_EQ(count_kind(one, VertexKind::leaf), 0);
  EXPECT_TRUE(one.nvls());
}

TEST(GraphYaml, BuildsAUserGraph) {
  Topology t = build_graph_from_yaml_text(R"(
nodes:
  - {name: a, kind: gpu, node: 0}
  - {name: b, kind: gpu, node: 1}
  - {name: sw, kind: leaf}
links:
  - {a: a, b: sw, bandwidth: "200 Gb/s", latency: "1 us"}
  - {a: b, b: sw, bandwidth: "25 GB/s", latency: "500 ns", cost: 2}
)");
  EXPECT_EQ(t.num_gpus(), 2);
  EXPECT_EQ(t.num_links(), 4u);
  // 200 Gb/s = 25e9 B/s.
  EXPECT_DOUBLE_EQ(t.link(0).bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(t.link(2).latency, 500e-9);
  EXPECT_EQ(t.link(2).cost, 2);
}

TEST(GraphYaml, RejectsBadGraphs) {
  const std::string ok_nodes = "nodes:\n  - {name: a, kind: gpu, node: 0}\n  - {name: b, kind: gpu, node: 0}\n";
  expect_invalid([&] { build_graph_from_yaml_text("nodes: []\nlinks: []\n"); }, "'nodes' must be a non-empty list");
  expect_invalid([&] { build_graph_from_yaml_text(ok_nodes); }, "'links' must be a list");
  expect_invalid([&] { build_graph_from_yaml_text(ok_nodes + "links: []\nextra: 1\n"); }, "unknown key 'extra'");
  expect_invalid([&] { build_graph_from_yaml_text("nodes:\n  - {name: a, kind: tpu, node: 0}\nlinks: []\n"); },
                 "unknown vertex kind 'tpu'");
  expect_invalid([&] { build_graph_from_yaml_text("nodes:\n  - {name: a, kind: gpu}\nlinks: []\n"); }, "needs 'node'");
  expect_invalid(
      [&] {
        build_graph_from_yaml_text("nodes:\n  - {name: a, kind: gpu, node: 0}\n  - {name: a, kind: nic}\nlinks: []\n");
      },
      "duplicate node name 'a'");
  expect_invalid(
      [&] {
        build_graph_from_yaml_text(ok_nodes + "links:\n  - {a: a, b: c, bandwidth: \"1 GB/s\", latency: \"1 us\"}\n");
      },
      "unknown node 'c'");
  expect_invalid(
      [&] { build_graph_from_yaml_text(ok_nodes + "links:\n  - {a: a, b: b, bandwidth: 100, latency: \"1 us\"}\n"); },
      "'100' has no unit");
  expect_invalid([&] { build_graph_from_yaml_text(ok_nodes + "links:\n  - {a: a, b: b, bandwidth: \"1 GB/s\"}\n"); },
                 "lacks 'latency'");
  expect_invalid(
      [&] {
        build_graph_from_yaml_text(ok_nodes + "links:\n  - {a: a, b: a, bandwidth: \"1 GB/s\", latency: \"1 us\"}\n");
      },
      "self-loop");
  expect_invalid(
      [&] {
        build_graph_from_yaml_text(ok_nodes +
                                   "links:\n  - {a: a, b: b, bandwidth: \"1 GB/s\", latency: \"1 us\", cost: 0}\n");
      },
      "cost must be 1..255, got 0");
  expect_invalid([&] { build_graph_from_yaml_text(ok_nodes + "links: []\n"); }, "gpu 'b' cannot be reached from 'a'");
  expect_invalid([&] { build_graph_from_yaml_file("/nonexistent/graph.yaml"); }, "/nonexistent/graph.yaml");
}

}  // namespace
}  // namespace ptsim::hw::net
