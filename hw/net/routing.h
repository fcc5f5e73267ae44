// Shortest-path routing with ECMP.
//
// Model: a path minimises the sum of per-link routing costs (hop count weighted by
// link type: NVLink 1, PCIe 2, fabric 4 — builders.h). The weights make a GPU pair in
// one node use NVLink, not PCIe peer-to-peer, and make a cross-rail transfer on a
// rail-optimized fabric take one NVLink hop to the GPU whose NIC is on the
// destination's rail, as NCCL's PXN does (NCCL 2.12 release notes), instead of
// crossing the spine. With all costs 1 (a user graph) it is plain BFS hop count.
// Among equal-cost next hops a switch picks one by a hash of (src, dst, flow, hop),
// as ECMP hashes a flow's 5-tuple (RFC 2992), so distinct flows spread over equal
// paths while one flow always takes the same path (deterministic runs).
//
// Distances to a destination come from a reverse Dial/Dijkstra (small integer weights)
// over flat CSR arrays and are kept for the most recently used destinations only
// (bounded LRU), so a 16k-GPU fabric never stores all-pairs routes.
//
// Per-node contraction (why: one full search per destination GPU cost ~0.8 ms on a
// 16k-GPU fat tree, 12 s for every GPU): a least-cost path from outside a compute
// node to a vertex `dst` inside it enters the node for the last time through a
// "port" cable u -> p (u outside, p inside) and then stays inside, so
//   dist(w, dst) = min over ports (dist(w, u) + cost(u->p) + dist_in(p, dst)),
// and for w inside the node also dist_in(w, dst) (paths that never leave). dist_in is
// a search over the node's ~20 vertices; dist(·, u) is a full table keyed by the entry
// switch u (a leaf, a rail switch, a torus router) and shared by every GPU behind it,
// so a 16k-GPU fat tree needs 512 full searches instead of 16,384. Exact: the same
// distances, hence the same routes, as a full search per destination.
//
// NIC affinity: when the equal-cost next hops are NICs of the source's (or the
// destination's) node, the GPU takes NIC number (its rank mod the number of choices),
// as NCCL binds each GPU to its PCIe-closest NIC (NCCL topology detection, "NET/IB :
// Using [i]mlx5_i" in NCCL_DEBUG=INFO logs) instead of hashing per flow.
// A Router is not thread-safe: use one per simulation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hw/net/topology.h"

namespace ptsim::hw::net {

class Router {
 public:
  // cached_destinations = 0 chooses a cache of about 256 MiB of distance tables.
  explicit Router(const Topology& topo, std::size_t cached_destinations = 0);

  // Writes into `out` (cleared first) the directed links of one least-cost path
  // src -> dst chosen for flow number `flow`. Empty when src == dst. Throws
  // std::invalid_argument when dst cannot be reached.
  void route(VertexId src, VertexId dst, std::uint64_t flow, std::vector<LinkId>& out);
  std::vector<LinkId> route(VertexId src, VertexId dst, std::uint64_t flow = 0);
  std::vector<LinkId> route_ranks(int src_rank, int dst_rank, std::uint64_t flow = 0);

  // Least total routing cost src -> dst.
  std::uint32_t cost(VertexId src, VertexId dst);
  // Number of distinct least-cost paths src -> dst (saturates at 2^32).
  std::uint64_t count_paths(VertexId src, VertexId dst);

  Seconds path_latency(std::span<const LinkId> path) const;
  BytesPerSecond path_bandwidth(std::span<const LinkId> path) const;  // slowest link; inf when empty

  const Topology& topology() const { return topo_; }
  std::size_t distance_tables_computed() const { return tables_computed_; }

 private:
  const std::vector<std::uint32_t>& distances_to(VertexId dst);
  // Destination summary for the per-node contraction (see above).
  struct Entry {
    VertexId u;           // fabric vertex outside the node
    std::uint32_t extra;  // min over ports from u: cost(u->p) + dist_in(p, dst)
  };
  struct DstInfo {
    int node = -1;                       // -1: dst is not inside a compute node (full table)
    std::vector<std::uint32_t> in_dist;  // by local index of the node's vertices
    std::vector<Entry> entries;
  };
  const DstInfo& dst_info(VertexId dst);
  // Distance w -> dst using `info` and the entry tables in `tables` (parallel to info.entries).
  std::uint32_t dist_via(VertexId w, const DstInfo& info, const std::vector<const std::uint32_t*>& tables) const;
  void load_tables(const DstInfo& info, VertexId dst, std::vector<const std::uint32_t*>& tables);
  int nic_affinity_pick(VertexId src, VertexId dst, VertexId v, std::uint32_t count,
                        std::uint32_t first_candidate_vertex) const;

  const Topology& topo_;
  std::vector<std::uint32_t> out_begin_, out_links_;  // CSR of outgoing links
  std::vector<std::uint32_t> in_begin_, in_links_;    // CSR of incoming links
  std::uint32_t max_cost_ = 1;
  struct Table {
    VertexId dst = kNoVertex;
    std::uint64_t last_use = 0;
    std::vector<std::uint32_t> dist;
  };
  std::vector<Table> tables_;
  std::vector<std::int32_t> slot_of_dst_;  // by vertex: index in tables_, -1 if not cached
  std::size_t capacity_;
  std::uint64_t clock_ = 0;
  std::size_t tables_computed_ = 0;
  std::vector<std::vector<VertexId>> buckets_;  // Dial's circular buckets, reused
  // Compute-node structure for the contraction.
  std::vector<std::int32_t> node_of_;                      // by vertex
  std::vector<std::uint32_t> local_index_;                 // index of the vertex inside its node
  std::vector<std::uint32_t> node_begin_, node_vertices_;  // CSR: vertices of each node
  std::vector<std::uint32_t> port_begin_, port_links_;     // CSR: links u -> p entering each node
  std::vector<DstInfo> dst_info_;                          // by vertex, built lazily
  std::vector<char> dst_info_ready_;
  std::vector<const std::uint32_t*> scratch_tables_;
  std::vector<LinkId> cand_;
};

}  // namespace ptsim::hw::net
