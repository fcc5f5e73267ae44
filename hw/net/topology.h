// Cluster topology as a directed graph, held in flat arrays (vertex kinds, nodes,
// names in one character buffer; links in one vector): 177,152 vertices at 65,536
// GPUs build in a few allocations, where a Boost.Graph adjacency_list made one
// out-edge vector and one name string per vertex. Adjacency for searches is the
// router's own CSR (routing.h).
//
// Model: vertices are GPUs, NVSwitch domains, PCIe switches, hosts, NICs, fabric
// switches (leaf / spine / core) and torus routers. A physical cable is two
// directed links, each with its own bandwidth (bytes/s, per direction) and
// latency (s) — the SimGrid "SPLITDUPLEX" link model (SimGrid docs, "Link sharing
// policy"), so traffic in one direction never slows the other.
// Every directed link also has a small integer routing cost (routing.h explains
// why hops are weighted). GPU ranks are the order in which GPU vertices are added.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hw/net/huge_pages.h"
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

struct Link {
  VertexId src = 0;
  VertexId dst = 0;
  BytesPerSecond bandwidth = 0;  // this direction only
  Seconds latency = 0;
  std::uint8_t cost = 1;  // routing weight (routing.h)
};

class Topology {
 public:
  // node: the compute node (server) the vertex belongs to, -1 for fabric switches;
  // name: e.g. "node12.nic3", "leaf1" (used in bottleneck reports).
  VertexId add_vertex(VertexKind kind, std::string_view name, int node = -1);
  // A full-duplex cable: two directed links a->b (the returned id) and b->a (id + 1).
  // Throws std::invalid_argument on a self-loop, an unknown vertex, a non-positive or
  // non-finite bandwidth, a negative latency or a zero cost.
  LinkId connect(VertexId a, VertexId b, BytesPerSecond bandwidth_per_direction, Seconds latency,
                 std::uint8_t cost = 1);
  // Room for `vertices` vertices (names of about `name_bytes` in all) and `cables` cables,
  // so that a builder that knows its size fills the arrays without regrowing them: at
  // 65,536 GPUs the doubling growth of the link vector copied and page-faulted twice its
  // final 25 MB (README "Performance"). Optional; the arrays grow as needed either way.
  void reserve(std::size_t vertices, std::size_t cables, std::size_t name_bytes);

  std::size_t num_vertices() const { return kind_.size(); }
  std::size_t num_links() const { return links_.size(); }
  // Room in the link array (reserve()): a builder that sized it right has no more.
  std::size_t link_capacity() const { return links_.capacity(); }
  const Link& link(LinkId id) const { return links_[id]; }
  std::span<const Link> links() const { return links_; }
  VertexKind kind(VertexId v) const { return kind_[v]; }
  std::string_view name(VertexId v) const {
    const std::size_t b = v == 0 ? 0 : name_end_[v - 1];
    return std::string_view(names_).substr(b, name_end_[v] - b);
  }
  int node(VertexId v) const { return node_[v]; }
  std::string link_name(LinkId id) const;  // "node12.nic3->leaf1"

  // GPUs by rank.
  int num_gpus() const { return static_cast<int>(gpus_.size()); }
  VertexId gpu(int rank) const;  // throws std::out_of_range with the bad rank
  std::span<const VertexId> gpus() const { return gpus_; }
  int rank_of(VertexId v) const;  // -1 when v is not a GPU
  int node_of_rank(int rank) const { return node_[gpu(rank)]; }
  // A GPU's index inside its node (its CUDA / NVML device number there): the order its
  // node's GPUs were added in; -1 for a vertex that is no GPU or belongs to no node.
  int local_index(VertexId v) const {
    const int r = rank_of(v);
    return r < 0 ? -1 : local_index_[static_cast<std::size_t>(r)];
  }
  int num_nodes() const { return num_nodes_; }
  // The NVSwitch vertex of a node, or kNoVertex when that node has none.
  VertexId nvswitch_of_node(int node) const;

  // NVLink SHARP (NVLS) is available in the NVSwitch domains (NVSwitch gen 3, H100+;
  // NCCL 2.17 release notes). Builders leave it off; the cluster spec turns it on.
  bool nvls() const { return nvls_; }
  void set_nvls(bool on) { nvls_ = on; }

  // How a switch picks among equal-cost next hops (cluster.inter_node.routing):
  // ecmp hashes each flow (Ethernet / RoCE ECMP, RFC 2992); d_mod_k routes by
  // destination, as an InfiniBand subnet manager's forwarding tables do on a fat
  // tree (routing.h). Builders leave it at ecmp; the cluster spec sets it.
  enum class Routing : std::uint8_t { ecmp, d_mod_k };
  Routing routing() const { return routing_; }
  void set_routing(Routing r) { routing_ = r; }

  // Free text saying which builder made the graph and with what parameters.
  const std::string& description() const { return description_; }
  void set_description(std::string d) { description_ = std::move(d); }

 private:
  std::vector<VertexKind> kind_;   // by vertex
  std::vector<std::int32_t> node_;  // by vertex
  std::string names_;               // every vertex name, back to back
  std::vector<std::size_t> name_end_;  // by vertex: end of its name in names_
  HugeVector<Link> links_;  // 25 MB at 65,536 GPUs (huge_pages.h)
  std::vector<VertexId> gpus_;
  std::vector<int> rank_of_vertex_;  // indexed by vertex
  std::vector<int> local_index_;     // by rank (local_index())
  std::vector<int> gpus_in_node_;    // by node: GPUs added so far
  std::vector<VertexId> nvswitch_of_node_;
  int num_nodes_ = 0;
  bool nvls_ = false;
  Routing routing_ = Routing::ecmp;
  std::string description_;
};

}  // namespace ptsim::hw::net
