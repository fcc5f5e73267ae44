// Cluster topology as a directed graph (Boost.Graph adjacency_list).
//
// Model: vertices are GPUs, NVSwitch domains, PCIe switches, hosts, NICs, fabric
// switches (leaf / spine / core) and torus routers. A physical cable is two
// directed links, each with its own bandwidth (bytes/s, per direction) and
// latency (s) — the SimGrid "SPLITDUPLEX" link model (SimGrid docs, "Link sharing
// policy"), so traffic in one direction never slows the other.
// Every directed link also has a small integer routing cost (routing.h explains
// why hops are weighted). GPU ranks are the order in which GPU vertices are added.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hw/units.h"

namespace ptsim::hw::net {

enum class VertexKind : std::uint8_t { gpu, nvswitch, pcie_switch, host, nic, leaf, spine, core, torus_node };
std::string_view to_string(VertexKind kind);
// "gpu", "nvswitch", "pcie_switch" ("pcie"), "host", "nic", "leaf", "spine", "core",
// "torus_node"; throws std::invalid_argument naming the bad text.
VertexKind parse_vertex_kind(std::string_view text);

using VertexId = std::uint32_t;
using LinkId = std::uint32_t;  // one direction of a cable
inline constexpr VertexId kNoVertex = ~VertexId{0};

struct VertexProps {
  VertexKind kind = VertexKind::gpu;
  std::int32_t node = -1;  // compute node (server) the vertex belongs to; -1 for fabric switches
  std::string name;        // e.g. "node12.nic3", "leaf1" (used in bottleneck reports)
};
struct LinkProps {
  LinkId id = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexProps, LinkProps>;

struct Link {
  VertexId src = 0;
  VertexId dst = 0;
  BytesPerSecond bandwidth = 0;  // this direction only
  Seconds latency = 0;
  std::uint8_t cost = 1;  // routing weight (routing.h)
};

class Topology {
 public:
  VertexId add_vertex(VertexKind kind, std::string name, int node = -1);
  // A full-duplex cable: two directed links a->b (the returned id) and b->a (id + 1).
  // Throws std::invalid_argument on a self-loop, an unknown vertex, a non-positive or
  // non-finite bandwidth, a negative latency or a zero cost.
  LinkId connect(VertexId a, VertexId b, BytesPerSecond bandwidth_per_direction, Seconds latency,
                 std::uint8_t cost = 1);

  const Graph& graph() const { return graph_; }
  std::size_t num_vertices() const { return boost::num_vertices(graph_); }
  std::size_t num_links() const { return links_.size(); }
  const Link& link(LinkId id) const { return links_[id]; }
  std::span<const Link> links() const { return links_; }
  VertexKind kind(VertexId v) const { return graph_[v].kind; }
  const std::string& name(VertexId v) const { return graph_[v].name; }
  int node(VertexId v) const { return graph_[v].node; }
  std::string link_name(LinkId id) const;  // "node12.nic3->leaf1"

  // GPUs by rank.
  int num_gpus() const { return static_cast<int>(gpus_.size()); }
  VertexId gpu(int rank) const;  // throws std::out_of_range with the bad rank
  std::span<const VertexId> gpus() const { return gpus_; }
  int rank_of(VertexId v) const;  // -1 when v is not a GPU
  int node_of_rank(int rank) const { return graph_[gpu(rank)].node; }
  int num_nodes() const { return num_nodes_; }
  // The NVSwitch vertex of a node, or kNoVertex when that node has none.
  VertexId nvswitch_of_node(int node) const;

  // NVLink SHARP (NVLS) is available in the NVSwitch domains (NVSwitch gen 3, H100+;
  // NCCL 2.17 release notes). Builders leave it off; the cluster spec turns it on.
  bool nvls() const { return nvls_; }
  void set_nvls(bool on) { nvls_ = on; }

  // Free text saying which builder made the graph and with what parameters.
  const std::string& description() const { return description_; }
  void set_description(std::string d) { description_ = std::move(d); }

 private:
  Graph graph_;
  std::vector<Link> links_;
  std::vector<VertexId> gpus_;
  std::vector<int> rank_of_vertex_;  // indexed by vertex
  std::vector<VertexId> nvswitch_of_node_;
  int num_nodes_ = 0;
  bool nvls_ = false;
  std::string description_;
};

}  // namespace ptsim::hw::net
