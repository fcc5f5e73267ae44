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
// A Router is not thread-safe: use one per simulation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hw/net/topology.h"

namespace ptsim::hw::net {

class Router {
 public:
  // cached_destinations = 0 chooses a cache of about 32 MiB of distance tables.
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
  std::size_t capacity_;
  std::uint64_t clock_ = 0;
  std::size_t tables_computed_ = 0;
  std::vector<std::vector<VertexId>> buckets_;  // Dial's circular buckets, reused
};

}  // namespace ptsim::hw::net
