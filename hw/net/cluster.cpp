#include "hw/net/cluster.h"

#include <fmt/format.h>
#include <stdexcept>

#include "hw/net/builders.h"
#include "hw/net/graph_yaml.h"

namespace ptsim::hw::net {

std::vector<std::string> topology_names() { return {"fat-tree", "rail-optimized", "torus", "graph", "single-node"}; }

namespace {

// The equal-cost choice of the switches (routing.h), said in the description when not ecmp.
void set_routing(Topology& topo, Topology::Routing r) {
  topo.set_routing(r);
  if (r == Topology::Routing::d_mod_k) topo.set_description(topo.description() + ", d-mod-k routing");
}

}  // namespace

Topology build_cluster(const ClusterNetSpec& s) {
  if (s.num_gpus < 1) throw std::invalid_argument(fmt::format("cluster.num_gpus must be >= 1, got {}", s.num_gpus));
  if (s.topology == "graph") {
    if (s.graph_file.empty()) throw std::invalid_argument("cluster: topology 'graph' needs a graph file");
    Topology topo = build_graph_from_yaml_file(s.graph_file);
    if (topo.num_gpus() != s.num_gpus)
      throw std::invalid_argument(
          fmt::format("cluster.num_gpus is {} but graph '{}' has {} GPUs", s.num_gpus, s.graph_file, topo.num_gpus()));
    if (s.nvls) topo.set_nvls(true);
    set_routing(topo, s.routing);
    return topo;
  }
  if (s.gpus_per_node < 1 || s.num_gpus % s.gpus_per_node != 0)
    throw std::invalid_argument(
        fmt::format("cluster.gpus_per_node must divide num_gpus ({}), got {}", s.num_gpus, s.gpus_per_node));
  const int nodes = s.num_gpus / s.gpus_per_node;
  NodeParams node;
  node.gpus_per_node = s.gpus_per_node;
  node.nvlink_bandwidth = s.intra_bandwidth;
  node.nvlink_latency = s.intra_latency;
  node.nics_per_node = s.nics_per_node;
  node.nic_bandwidth = s.nic_bandwidth;
  node.pcie_bandwidth = s.pcie_bandwidth;
  node.pcie_latency = s.pcie_latency;
  if (s.gpus_per_pcie_switch > 0) {
    node.gpus_per_pcie_switch = s.gpus_per_pcie_switch;
  } else {
    const bool pairs = s.gpus_per_node % 2 == 0 && s.nics_per_node % (s.gpus_per_node / 2) == 0;
    node.gpus_per_pcie_switch = pairs ? 2 : s.gpus_per_node;
  }
  FabricParams fabric;
  fabric.switch_radix = s.switch_radix;
  fabric.oversubscription = s.oversubscription;
  fabric.tiers = s.tiers;
  fabric.nic_latency = s.inter_latency / 2;
  fabric.hop_latency = s.hop_latency;
  Topology topo;
  if (s.topology == "single-node" || (nodes == 1 && s.topology != "torus")) {
    if (nodes != 1)
      throw std::invalid_argument(
          fmt::format("cluster: topology 'single-node' needs num_gpus = gpus_per_node, got {} GPUs", s.num_gpus));
    topo = build_dgx_node(node);
  } else if (s.topology == "fat-tree") {
    topo = build_fat_tree(nodes, node, fabric);
  } else if (s.topology == "rail-optimized") {
    topo = build_rail_optimized(nodes, node, fabric);
  } else if (s.topology == "torus") {
    TorusParams t;
    t.dims = s.torus_dims;
    t.link_bandwidth = s.torus_link_bandwidth;
    t.nic_latency = s.inter_latency / 2;
    t.hop_latency = s.hop_latency;
    std::int64_t product = 1;  // stops growing past the node count: never overflows
    bool partial = false;
    for (int d : t.dims) {
      if (product > nodes)
        partial = true;
      else
        product *= d;
    }
    if (!t.dims.empty() && product != nodes)
      throw std::invalid_argument(fmt::format(
          "cluster.inter_node.torus_dims: multiply to {}{} but the cluster has {} nodes (cluster.num_gpus / "
          "cluster.gpus_per_node = {} / {})",
          partial ? "more than " : "", product, nodes, s.num_gpus, s.gpus_per_node));
    topo = build_torus(node, t);
  } else {
    throw std::invalid_argument(
        fmt::format("cluster.inter_node.topology: unknown topology '{}' (expected fat-tree, rail-optimized, torus, "
                    "graph, single-node)",
                    s.topology));
  }
  topo.set_nvls(s.nvls);
  set_routing(topo, s.routing);
  return topo;
}

}  // namespace ptsim::hw::net
