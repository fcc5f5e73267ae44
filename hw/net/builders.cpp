#include "hw/net/builders.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <cmath>
#include <stdexcept>

namespace ptsim::hw::net {
namespace {

void check_positive(double v, const char* what) {
  if (!(v > 0) || !std::isfinite(v)) throw std::invalid_argument(fmt::format("{} must be positive, got {}", what, v));
}
void check_non_negative(double v, const char* what) {
  if (!(v >= 0) || !std::isfinite(v))
    throw std::invalid_argument(fmt::format("{} must be non-negative, got {}", what, v));
}

// Leaf uplinks under oversubscription o: keep u = round(d/o) cables (at least one)
// and size them so that downlink : uplink bandwidth is exactly o.
struct Uplinks {
  int count;
  BytesPerSecond bandwidth;
};
Uplinks leaf_uplinks(int down_ports, BytesPerSecond down_bw, double o) {
  int u = std::max(1, static_cast<int>(std::lround(down_ports / o)));
  u = std::min(u, down_ports);
  return {u, down_bw * down_ports / (o * u)};
}

int ceil_div(long a, long b) { return static_cast<int>((a + b - 1) / b); }

// What add_node creates for one server (Topology::reserve), and a name length that
// covers "node12345.pcie3" and "pod63.spine31".
std::size_t node_vertex_count(const NodeParams& p) {
  if (p.nics_per_node == 0) return static_cast<std::size_t>(p.gpus_per_node + (p.gpus_per_node > 1));
  return static_cast<std::size_t>(p.gpus_per_node + (p.gpus_per_node > 1) + p.gpus_per_node / p.gpus_per_pcie_switch +
                                  p.nics_per_node);
}
std::size_t node_cable_count(const NodeParams& p) {
  const std::size_t nvlink = p.gpus_per_node > 1 ? static_cast<std::size_t>(p.gpus_per_node) : 0;
  return nvlink + (p.nics_per_node == 0 ? 0 : static_cast<std::size_t>(p.gpus_per_node + p.nics_per_node));
}
constexpr std::size_t kNameBytes = 16;
void reserve_for(Topology& topo, std::size_t nodes, const NodeParams& p, std::size_t fabric_vertices,
                 std::size_t fabric_cables) {
  const std::size_t vertices = nodes * node_vertex_count(p) + fabric_vertices;
  topo.reserve(vertices, nodes * node_cable_count(p) + fabric_cables, vertices * kNameBytes);
}

}  // namespace

void validate(const NodeParams& p) {
  if (p.gpus_per_node < 1)
    throw std::invalid_argument(fmt::format("gpus_per_node must be >= 1, got {}", p.gpus_per_node));
  if (p.gpus_per_node > 1) check_positive(p.nvlink_bandwidth, "intra-node (NVLink) bandwidth");
  check_non_negative(p.nvlink_latency, "intra-node latency");
  if (p.nics_per_node < 0)
    throw std::invalid_argument(fmt::format("nics_per_node must be >= 0, got {}", p.nics_per_node));
  if (p.nics_per_node > 0) check_positive(p.nic_bandwidth, "nic_bandwidth");
  if (p.gpus_per_pcie_switch < 1 || p.gpus_per_node % p.gpus_per_pcie_switch != 0)
    throw std::invalid_argument(fmt::format("gpus_per_pcie_switch must divide gpus_per_node ({}), got {}",
                                            p.gpus_per_node, p.gpus_per_pcie_switch));
  const int switches = p.gpus_per_node / p.gpus_per_pcie_switch;
  if (p.nics_per_node > 0 && p.nics_per_node % switches != 0)
    throw std::invalid_argument(fmt::format(
        "nics_per_node ({}) must be a multiple of the PCIe switch count {} (= gpus_per_node / gpus_per_pcie_switch)",
        p.nics_per_node, switches));
  check_non_negative(p.pcie_bandwidth, "pcie_bandwidth");
  check_non_negative(p.pcie_latency, "pcie_latency");
}

void validate(const FabricParams& p) {
  if (p.switch_radix < 4 || p.switch_radix % 2 != 0)
    throw std::invalid_argument(fmt::format("switch_radix must be even and >= 4, got {}", p.switch_radix));
  if (!(p.oversubscription >= 1) || !std::isfinite(p.oversubscription))
    throw std::invalid_argument(
        fmt::format("oversubscription must be >= 1 (1 = full bisection), got {}", p.oversubscription));
  if (p.tiers != 0 && p.tiers != 2 && p.tiers != 3)
    throw std::invalid_argument(fmt::format("fat-tree tiers must be 2 or 3 (0 = automatic), got {}", p.tiers));
  check_non_negative(p.link_bandwidth, "fabric link_bandwidth");
  check_non_negative(p.nic_latency, "inter-node latency");
  check_non_negative(p.hop_latency, "hop_latency");
}

NodeVertices add_node(Topology& topo, int node, const NodeParams& p) {
  NodeVertices out;
  const int g = p.gpus_per_node;
  for (int i = 0; i < g; ++i)
    out.gpus.push_back(topo.add_vertex(VertexKind::gpu, fmt::format("node{}.gpu{}", node, i), node));
  if (g > 1) {
    out.nvswitch = topo.add_vertex(VertexKind::nvswitch, fmt::format("node{}.nvswitch", node), node);
    // One logical switch for the NVSwitch chips: each GPU's NVLinks summed (per direction).
    for (VertexId gpu : out.gpus)
      topo.connect(gpu, out.nvswitch, p.nvlink_bandwidth, p.nvlink_latency / 2, kNvlinkCost);
  }
  if (p.nics_per_node == 0) return out;
  const int switches = g / p.gpus_per_pcie_switch;
  const int nics_per_switch = p.nics_per_node / switches;
  for (int s = 0; s < switches; ++s) {
    VertexId sw = topo.add_vertex(VertexKind::pcie_switch, fmt::format("node{}.pcie{}", node, s), node);
    const BytesPerSecond gpu_bw = p.pcie_bandwidth > 0 ? p.pcie_bandwidth : p.nic_bandwidth * nics_per_switch;
    const BytesPerSecond nic_bw = p.pcie_bandwidth > 0 ? p.pcie_bandwidth : p.nic_bandwidth;
    for (int i = 0; i < p.gpus_per_pcie_switch; ++i)
      topo.connect(out.gpus[s * p.gpus_per_pcie_switch + i], sw, gpu_bw, p.pcie_latency, kPcieCost);
    for (int j = 0; j < nics_per_switch; ++j) {
      const int nic = s * nics_per_switch + j;
      VertexId v = topo.add_vertex(VertexKind::nic, fmt::format("node{}.nic{}", node, nic), node);
      topo.connect(sw, v, nic_bw, 0.0, kPcieCost);
      out.nics.push_back(v);
    }
  }
  return out;
}

Topology build_dgx_node(const NodeParams& p) {
  validate(p);
  Topology topo;
  NodeParams q = p;
  q.nics_per_node = 0;  // a lone node has nothing to reach through its NICs
  add_node(topo, 0, q);
  topo.set_description(fmt::format("single node: {} GPUs on NVSwitch", p.gpus_per_node));
  return topo;
}

Topology build_fat_tree(int num_nodes, const NodeParams& node, const FabricParams& fabric) {
  validate(node);
  validate(fabric);
  if (num_nodes < 1) throw std::invalid_argument(fmt::format("fat-tree: num_nodes must be >= 1, got {}", num_nodes));
  if (node.nics_per_node < 1)
    throw std::invalid_argument(fmt::format("fat-tree: nics_per_node must be >= 1, got {}", node.nics_per_node));
  const int k = fabric.switch_radix, half = k / 2;
  const long nics = static_cast<long>(num_nodes) * node.nics_per_node;
  const int leaves = ceil_div(nics, half);
  int tiers = fabric.tiers;
  if (tiers == 0) tiers = leaves <= k ? 2 : 3;
  if (tiers == 2 && leaves > k)
    throw std::invalid_argument(
        fmt::format("cluster.inter_node.tiers: fat-tree: {} NICs need {} leaves but a 2-tier tree of radix {} "
                    "(cluster.inter_node.switch_radix) holds at most {} leaves; use tiers: 3",
                    nics, leaves, k, k));
  const int pods = tiers == 3 ? ceil_div(leaves, half) : 1;
  if (tiers == 3 && pods > k)
    throw std::invalid_argument(fmt::format(
        "cluster.inter_node.switch_radix: fat-tree: {} NICs need {} pods but a 3-tier tree of radix {} holds "
        "at most {} pods ({} NICs); raise switch_radix or lower cluster.num_gpus",
        nics, pods, k, k, static_cast<long>(k) * half * half));

  const Uplinks up = leaf_uplinks(half, node.nic_bandwidth, fabric.oversubscription);
  Topology topo;
  {
    const auto u = static_cast<std::size_t>(up.count), l = static_cast<std::size_t>(leaves);
    const auto h = static_cast<std::size_t>(half), np = static_cast<std::size_t>(pods);
    if (tiers == 2)
      reserve_for(topo, num_nodes, node, l + u, static_cast<std::size_t>(nics) + u * l);
    else  // each spine: up to k/2 leaves below, k/2 cores above
      reserve_for(topo, num_nodes, node, l + u * h + np * u, static_cast<std::size_t>(nics) + np * u * 2 * h);
  }
  std::vector<VertexId> all_nics;
  all_nics.reserve(nics);
  for (int n = 0; n < num_nodes; ++n) {
    auto nv = add_node(topo, n, node);
    all_nics.insert(all_nics.end(), nv.nics.begin(), nv.nics.end());
  }
  const BytesPerSecond link_bw = fabric.link_bandwidth > 0 ? fabric.link_bandwidth : node.nic_bandwidth;
  std::vector<VertexId> leaf(leaves);
  for (int l = 0; l < leaves; ++l) leaf[l] = topo.add_vertex(VertexKind::leaf, fmt::format("leaf{}", l));
  for (long i = 0; i < nics; ++i)
    topo.connect(all_nics[i], leaf[i / half], node.nic_bandwidth, fabric.nic_latency, kFabricCost);
  if (leaves > 1 && tiers == 2) {
    for (int s = 0; s < up.count; ++s) {
      VertexId sp = topo.add_vertex(VertexKind::spine, fmt::format("spine{}", s));
      for (int l = 0; l < leaves; ++l) topo.connect(leaf[l], sp, up.bandwidth, fabric.hop_latency, kFabricCost);
    }
  } else if (leaves > 1) {
    // Spine j of every pod connects to core group j (k/2 cores), so each core has one
    // cable to every pod (Al-Fares et al. 2008, Fig. 3).
    std::vector<VertexId> cores(static_cast<std::size_t>(up.count) * half);
    for (std::size_t c = 0; c < cores.size(); ++c)
      cores[c] = topo.add_vertex(VertexKind::core, fmt::format("core{}", c));
    for (int p = 0; p < pods; ++p) {
      for (int j = 0; j < up.count; ++j) {
        VertexId sp = topo.add_vertex(VertexKind::spine, fmt::format("pod{}.spine{}", p, j));
        for (int l = p * half; l < std::min(leaves, (p + 1) * half); ++l)
          topo.connect(leaf[l], sp, up.bandwidth, fabric.hop_latency, kFabricCost);
        for (int c = 0; c < half; ++c) topo.connect(sp, cores[j * half + c], link_bw, fabric.hop_latency, kFabricCost);
      }
    }
  }
  topo.set_description(fmt::format("fat-tree: {} nodes x {} GPUs, {} tiers, radix {}, {} leaves, oversubscription {}:1",
                                   num_nodes, node.gpus_per_node, tiers, k, leaves, fabric.oversubscription));
  return topo;
}

Topology build_rail_optimized(int num_nodes, const NodeParams& node, const FabricParams& fabric) {
  validate(node);
  validate(fabric);
  if (num_nodes < 1)
    throw std::invalid_argument(fmt::format("rail-optimized: num_nodes must be >= 1, got {}", num_nodes));
  if (node.nics_per_node < 1)
    throw std::invalid_argument(fmt::format("rail-optimized: nics_per_node must be >= 1, got {}", node.nics_per_node));
  if (fabric.tiers == 3)
    throw std::invalid_argument("rail-optimized: only 2 tiers (rail leaves + spines) are built, got tiers: 3");
  const int k = fabric.switch_radix, half = k / 2, rails = node.nics_per_node;
  const int groups = ceil_div(num_nodes, half);
  const int leaves = rails * groups;
  if (leaves > k)
    throw std::invalid_argument(fmt::format(
        "rail-optimized: {} rails x {} node groups = {} rail leaves exceed the spine radix {}; use fat-tree", rails,
        groups, leaves, k));
  const Uplinks up = leaf_uplinks(half, node.nic_bandwidth, fabric.oversubscription);
  Topology topo;
  reserve_for(topo, num_nodes, node, static_cast<std::size_t>(leaves + up.count),
              static_cast<std::size_t>(num_nodes) * rails + static_cast<std::size_t>(up.count) * leaves);
  std::vector<NodeVertices> nodes;
  nodes.reserve(num_nodes);
  for (int n = 0; n < num_nodes; ++n) nodes.push_back(add_node(topo, n, node));
  std::vector<VertexId> leaf(leaves);
  for (int r = 0; r < rails; ++r)
    for (int g = 0; g < groups; ++g)
      leaf[r * groups + g] = topo.add_vertex(
          VertexKind::leaf, groups == 1 ? fmt::format("rail{}", r) : fmt::format("rail{}.leaf{}", r, g));
  for (int n = 0; n < num_nodes; ++n)
    for (int r = 0; r < rails; ++r)
      topo.connect(nodes[n].nics[r], leaf[r * groups + n / half], node.nic_bandwidth, fabric.nic_latency, kFabricCost);
  if (leaves > 1) {
    for (int s = 0; s < up.count; ++s) {
      VertexId sp = topo.add_vertex(VertexKind::spine, fmt::format("spine{}", s));
      for (VertexId l : leaf) topo.connect(l, sp, up.bandwidth, fabric.hop_latency, kFabricCost);
    }
  }
  topo.set_description(fmt::format("rail-optimized: {} nodes x {} GPUs, {} rails, radix {}, oversubscription {}:1",
                                   num_nodes, node.gpus_per_node, rails, k, fabric.oversubscription));
  return topo;
}

Topology build_torus(const NodeParams& node, const TorusParams& t) {
  validate(node);
  if (t.dims.size() != 2 && t.dims.size() != 3)
    throw std::invalid_argument(fmt::format("torus: dims must have 2 or 3 entries, got [{}]", fmt::join(t.dims, ",")));
  long count = 1;
  for (int d : t.dims) {
    if (d < 2)
      throw std::invalid_argument(
          fmt::format("torus: every dimension must be >= 2, got {} in [{}]", d, fmt::join(t.dims, ",")));
    count *= d;
    if (count > (1L << 24))
      throw std::invalid_argument(fmt::format("torus: [{}] is too large", fmt::join(t.dims, ",")));
  }
  if (node.nics_per_node < 1)
    throw std::invalid_argument(fmt::format("torus: nics_per_node must be >= 1, got {}", node.nics_per_node));
  check_non_negative(t.link_bandwidth, "torus link_bandwidth");
  check_non_negative(t.nic_latency, "inter-node latency");
  check_non_negative(t.hop_latency, "torus hop_latency");
  Topology topo;
  const int n = static_cast<int>(count);
  const int nd = static_cast<int>(t.dims.size());
  reserve_for(topo, static_cast<std::size_t>(n), node, static_cast<std::size_t>(n),
              static_cast<std::size_t>(n) * static_cast<std::size_t>(node.nics_per_node + nd));
  std::vector<VertexId> router(n);
  auto coords = [&](int i) {
    std::vector<int> c(nd);
    for (int d = 0; d < nd; ++d) {
      c[d] = i % t.dims[d];
      i /= t.dims[d];
    }
    return c;
  };
  for (int i = 0; i < n; ++i) {
    auto nv = add_node(topo, i, node);
    router[i] = topo.add_vertex(VertexKind::torus_node, fmt::format("torus({})", fmt::join(coords(i), ",")), -1);
    for (VertexId nic : nv.nics) topo.connect(nic, router[i], node.nic_bandwidth, t.nic_latency, kFabricCost);
  }
  const BytesPerSecond bw = t.link_bandwidth > 0 ? t.link_bandwidth : node.nic_bandwidth;
  int stride = 1;
  for (int d = 0; d < nd; ++d) {
    for (int i = 0; i < n; ++i) {
      const int c = (i / stride) % t.dims[d];
      const int next = i + ((c + 1) % t.dims[d] - c) * stride;
      // Size 2: the wrap-around link is the same pair; build one cable, not two.
      if (t.dims[d] == 2 && c == 1) continue;
      topo.connect(router[i], router[next], bw, t.hop_latency, kFabricCost);
    }
    stride *= t.dims[d];
  }
  topo.set_description(fmt::format("torus [{}]: {} nodes x {} GPUs", fmt::join(t.dims, "x"), n, node.gpus_per_node));
  return topo;
}

}  // namespace ptsim::hw::net
