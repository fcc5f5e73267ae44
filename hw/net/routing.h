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
// paths while one flow always takes the same path (deterministic runs). Hashing lets
// flows of distinct sources and destinations collide on one uplink while another
// idles, as on an Ethernet / RoCE fabric. Under Topology::Routing::d_mod_k the pick
// depends on the destination only, as the forwarding tables an InfiniBand subnet
// manager computes for a fat tree: D-mod-K (E. Zahavi, "D-Mod-K Routing Providing
// Non-Blocking Traffic for Shift Permutations on Real Life Fat Trees", CCIT Report
// 776, Technion 2010; OpenSM's ftree routing engine follows it): going up, the i-th
// choice with k_i options takes option (d / (k_1 ··· k_{i-1})) mod k_i, d the place of
// the destination's NIC in the order NICs are cabled to the leaves (routing.cpp
// destination_index). Traffic to distinct destinations below one leaf
// then leaves every leaf on distinct uplinks, and each destination has one way down:
// a shift permutation (a ring step) never meets itself in the fabric.
//
// Distances to a destination come from a reverse Dial/Dijkstra (small integer weights)
// over flat CSR arrays and are kept for the most recently used destinations only
// (bounded LRU), so a 65k-GPU fabric never stores all-pairs routes.
//
// Contraction to the switch fabric (why: a full-graph table per leaf is 177,152 vertices
// at 65,536 GPUs, and the 2,048 leaf tables a collective needs thrashed any sane LRU:
// 42 s of a 65k folded run). A compute node is *closed* when every cable leaving it
// ends on a fabric vertex (one of no node: leaf, spine, torus router, ...); the
// vertices of open nodes (a user graph wiring nodes directly) count as fabric. F is
// the fabric; H is the graph on F with, for every closed node, a shortcut a -> b of
// cost cost(a->p) + dist_in(p, q) + cost(q->b) for each way in (a -> p) and out
// (q -> b): transit through a node, as PXN does, stays exact. Then
//  - dist(f, u) for f, u in F is the distance in H (a path leaves a closed node only
//    onto F, so every stay in a node is one shortcut or costlier);
//  - to a vertex dst of a closed node: the path enters the node for the last time
//    through a port u -> p and stays inside, so
//      dist(w, dst) = min over ports (dist(w, u) + cost(u->p) + dist_in(p, dst)),
//    and dist_in(w, dst) for w inside that node (paths that never leave);
//  - from a vertex w of a closed node: the path leaves the node for the first time
//    through an exit q -> b, so dist(w, dst) = min over exits (dist_in(w, q) +
//    cost(q->b) + dist(b, dst)) (precomputed per vertex, keyed by b).
// dist_in is a search over the node's ~20 vertices; the tables dist(·, u) hold |F|
// entries (5,120 at 65,536 GPUs instead of 177,152), keyed by the entry switch u and
// shared by every GPU behind it. Exact: the same distances, hence the same routes, as
// a full search per destination (Contraction::none, kept as the reference; tested on
// random fat trees, tori and user graphs).
//
// NIC affinity: when the equal-cost next hops are NICs of the source's (or the
// destination's) node, the GPU takes NIC number (its rank mod the number of choices),
// as NCCL binds each GPU to its PCIe-closest NIC (NCCL topology detection, "NET/IB :
// Using [i]mlx5_i" in NCCL_DEBUG=INFO logs) instead of hashing per flow.
// A Router is not thread-safe: use one per simulation.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hw/net/huge_pages.h"
#include "hw/net/topology.h"

namespace ptsim::hw::net {

class Router {
 public:
  // nodes: the fabric contraction above; none: every vertex is fabric, one full-graph
  // search per destination (the reference the contraction must equal).
  enum class Contraction { nodes, none };
  // cached_destinations = 0 chooses a cache of about 256 MiB of distance tables.
  explicit Router(const Topology& topo, std::size_t cached_destinations = 0,
                  Contraction contraction = Contraction::nodes);

  // Writes into `out` (cleared first) the directed links of one least-cost path
  // src -> dst chosen for flow number `flow`. Empty when src == dst. Throws
  // std::invalid_argument when dst cannot be reached.
  // Routes are a pure function of (src, dst, flow), so they are kept (up to
  // route_cache_links links in all, then the cache starts over): the closed form walks
  // a stage's representative group once per algorithm tried and again with its
  // siblings, and every message size of the same group repeats the same routes.
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
  // A counter per directed link, all zero: callers that count flows per link
  // (collective_time) use it and set what they touched back to zero.
  std::vector<std::uint32_t>& link_scratch() { return link_scratch_; }
  std::size_t distance_tables_computed() const { return tables_computed_; }
  std::size_t fabric_vertices() const { return fabric_.size(); }
  // The route cache: routes held now, and its bound in links (default 8 Mi, 32 MiB).
  std::size_t routes_cached() const { return route_count_; }
  void set_route_cache_links(std::size_t links) {
    route_cache_links_ = std::clamp<std::size_t>(links, 1, std::size_t{1} << 31);
  }

 private:
  // Distances to fabric vertex number `u` (index into fabric_) from every fabric vertex.
  // Tables hold 16-bit distances when every least cost on the fabric graph is below
  // 0xFFFF (wide_ false; (|F| - 1) × the costliest edge bounds them: 20,476 at 65,536
  // GPUs), else 32-bit: half the 40 MB a 65k run writes once and reads at random.
  const void* distances_to(std::uint32_t u);
  // An LRU slot for u's table (evicting the least recently used when full), all kInf
  // when `fill` (search_batch writes every entry itself).
  void* claim_table(std::uint32_t u, bool fill = true);
  // Dial's search to one fabric vertex; the same for up to kBatch at once (one bit per
  // target in a kBatch-bit mask per vertex, so a vertex is scanned once per distinct
  // distance instead of once per target, and an edge is read once for all of them).
  static constexpr std::size_t kBatchWords = 4, kBatch = 64 * kBatchWords;
  using Mask = std::array<std::uint64_t, kBatchWords>;
  void search_one(std::uint32_t u, void* table);
  void search_batch(const std::vector<std::uint32_t>& targets);
  struct Entry {
    std::uint32_t u;      // fabric index of a vertex outside the node
    std::uint32_t extra;  // min over ports from u: cost(u->p) + dist_in(p, dst)
  };
  // What routing to dst needs (built once per destination; 65,536 of them at 65,536 GPUs,
  // so the lists are ranges of two shared pools rather than two allocations each).
  struct DstInfo {
    int node = -1;                       // closed node of dst; -1: dst is fabric (one full table)
    const std::uint32_t* in_dist = nullptr;  // by local index of the node's vertices (in_column)
    std::uint32_t entry_begin = 0, entry_count = 0;    // its entries, in entry_pool_
    std::uint32_t border_begin = 0, border_count = 0;  // vertices outside the node with a link into it
  };
  std::span<const Entry> entries(const DstInfo& i) const { return {entry_pool_.data() + i.entry_begin, i.entry_count}; }
  std::span<const VertexId> border(const DstInfo& i) const {
    return {border_pool_.data() + i.border_begin, i.border_count};
  }
  struct Exit {
    std::uint32_t f;      // fabric index of b
    std::uint32_t extra;  // min over exits q -> b: dist_in(w, q) + cost(q->b)
  };
  struct HEdge {
    std::uint32_t src;  // fabric index
    std::uint32_t cost;
  };
  // Appends to cand_ the least-cost next hops of v towards dst (indices into out_arcs_,
  // in arc order), given dv = dist(v, dst).
  using TablePtrs = std::vector<const void*>;  // entry tables of a destination (uint16_t or uint32_t)
  template <class D>
  void next_hops(VertexId v, std::uint32_t dv, const DstInfo& info, const TablePtrs& tables);
  template <class D>
  void walk_with(VertexId src, VertexId dst, std::uint64_t flow, std::uint64_t key, std::uint64_t d,
                 std::vector<LinkId>& out);
  // walk_with for this router's distance width; d as walk_with's.
  void walk_by(VertexId src, VertexId dst, std::uint64_t flow, std::uint64_t key, std::uint64_t d,
               std::vector<LinkId>& out);
  // d-mod-k's index of dst (routing.cpp); kNoIndex: choices hash the flow (ecmp).
  static constexpr std::uint64_t kNoIndex = ~std::uint64_t{0};
  std::uint64_t destination_index(VertexId src, VertexId dst);
  std::vector<std::uint32_t> dest_index_;   // by vertex, kInf until known (d-mod-k only)
  std::vector<std::uint32_t> nic_ordinal_;  // by vertex: place among the NICs, kInf for others
  std::vector<LinkId> index_scratch_;
  // The least-cost walk behind route() (key: the ECMP hash of src, dst, flow).
  void walk(VertexId src, VertexId dst, std::uint64_t flow, std::uint64_t key, std::vector<LinkId>& out);
  void build_csr();
  void build_nodes(Contraction contraction);
  void build_node_classes();
  void build_exits();
  void build_fabric_graph();
  // Least costs v -> target over the links inside `node` (by local index).
  void in_node_distances(int node, VertexId target, std::vector<std::uint32_t>& out) const;
  // The same from the node's class matrix: k entries, by local index (target in a closed node).
  const std::uint32_t* in_column(VertexId target) const;
  // Valid until the next call (dst_info_ may grow).
  const DstInfo& dst_info(VertexId dst);
  // Distance w -> dst using `info` and the entry tables in `tables` (parallel to info.entries).
  template <class D>
  std::uint32_t dist_via(VertexId w, const DstInfo& info, const TablePtrs& tables) const;
  std::uint32_t dist_via(VertexId w, const DstInfo& info, const TablePtrs& tables) const;  // by wide_
  template <class D>
  std::uint32_t fabric_dist(std::uint32_t f, const DstInfo& info, const TablePtrs& tables) const;
  void load_tables(const DstInfo& info, TablePtrs& tables);
  int nic_affinity_pick(VertexId src, VertexId dst, VertexId v, std::uint32_t count,
                        std::uint32_t first_candidate_vertex) const;

  const Topology& topo_;
  // CSR of outgoing links, each with its head and cost: the walk scans every out-link of
  // every vertex on a path (64 at a fabric switch), and reading them from the topology's
  // 32-byte links, scattered by creation order, missed the cache once per link.
  // Seen from outside dst's node and its border, the head's distance to dst is that of
  // fabric vertex `via` plus `step` - cost (via: the head itself, or a node vertex's only
  // exit), so the walk reads one table entry per arc and nothing of the head; kNone:
  // a head with several exits (dist_via).
  struct Arc {
    LinkId link;
    VertexId dst;
    std::uint32_t via;
    std::uint32_t step : 23;   // cost of the link, plus the exit's extra when via is an exit
    std::uint32_t closed : 1;  // the head is in a closed node
    std::uint32_t cost : 8;    // of the link
  };
  std::vector<std::uint32_t> out_begin_;
  HugeVector<Arc> out_arcs_;
  std::vector<std::uint32_t> in_begin_;
  HugeVector<std::uint32_t> in_links_;  // CSR of incoming links
  struct Table {
    std::uint32_t u = 0;
    std::uint64_t last_use = 0;
    void* dist = nullptr;  // by fabric index, in table_chunks_ (uint16_t, or uint32_t when wide_)
  };
  std::vector<Table> tables_;
  // The tables' storage: chunks of tables_per_chunk_ tables each, never moved (a route's
  // entry tables stay where they are while it is walked), on huge pages: at 65,536 GPUs
  // 2,048 tables of 20 kB, 40 MB touched once.
  struct ChunkFree {
    std::size_t bytes;
    void operator()(unsigned char* p) const noexcept { huge_free(p, bytes); }
  };
  std::vector<std::unique_ptr<unsigned char[], ChunkFree>> table_chunks_;
  bool wide_ = false;
  std::size_t dist_bytes_ = 2;  // per table entry
  std::vector<std::uint32_t> one_;  // search_one's distances
  std::size_t tables_per_chunk_ = 1;
  std::vector<std::int32_t> slot_of_;  // by fabric index: index in tables_, -1 if not cached
  std::size_t capacity_;
  std::uint64_t clock_ = 0;
  std::size_t tables_computed_ = 0;
  std::vector<std::vector<std::uint32_t>> buckets_;  // Dial's circular buckets, reused
  std::vector<Mask> pend_, settled_;                 // search_batch's bit sets, reused (pend_ all zero between)
  HugeVector<std::uint32_t> stage_;                  // search_batch's distances by (vertex, target)
  std::size_t batch_limit_ = kBatch;                 // targets per search_batch
  // Compute-node structure for the contraction.
  std::vector<std::int32_t> node_of_;                      // by vertex (topology's node)
  std::vector<std::int32_t> region_;                       // by vertex: its closed node, -1 for fabric
  std::vector<std::uint32_t> local_index_;                 // index of the vertex inside its node
  std::vector<std::uint32_t> node_begin_, node_vertices_;  // CSR: vertices of each node
  std::vector<std::uint32_t> port_begin_, port_links_;     // CSR: links u -> p entering each closed node
  std::vector<std::uint32_t> fabric_;                      // fabric vertices (F), by fabric index
  std::vector<std::uint32_t> fidx_;                        // by vertex: fabric index, kNone if not fabric
  std::vector<std::uint32_t> entry_fabric_;                // fabric indices with a port into a closed node
  std::vector<std::uint32_t> entry_pos_;                   // by fabric index: position in entry_fabric_
  std::vector<std::int32_t> node_class_;                   // by node: its wiring class, -1 when open
  std::vector<std::uint32_t> class_k_, class_begin_;       // by class: vertices, start in class_dist_
  std::vector<std::uint32_t> class_dist_;                  // per class: k columns of k in-node distances
  std::vector<std::uint32_t> exit_begin_, exit_count_;     // by vertex: its exits_ range
  std::vector<Exit> exits_;
  // What dist_via reads of a vertex, in one place (one cache miss per neighbour that the
  // walk looks at instead of five: the arrays above are 0.7 MB each at 65,536 GPUs).
  struct VertexRoute {
    std::uint32_t fidx;
    std::int32_t region;
    std::uint32_t local_index, exit_begin, exit_count;
  };
  HugeVector<VertexRoute> vertex_route_;
  std::vector<std::uint32_t> h_in_begin_;  // H: incoming edges by fabric index
  std::vector<HEdge> h_in_;
  std::vector<std::int32_t> dst_slot_;  // by vertex: index in dst_info_, -1 until first asked
  std::vector<DstInfo> dst_info_;       // built lazily
  std::vector<Entry> entry_pool_;
  std::vector<VertexId> border_pool_;
  TablePtrs scratch_tables_;
  std::vector<std::uint32_t> cand_;
  std::vector<std::uint32_t> link_scratch_;
  struct RouteSlot {  // open addressing on the ECMP hash, linear probing; 16 bytes
    VertexId src = kNoVertex, dst = kNoVertex;
    std::uint32_t flow = 0;   // flows >= 2^32 are walked every time
    std::uint32_t begin = 0;  // in route_links_: the route's length, then its links
  };
  HugeVector<RouteSlot> route_slots_;
  HugeVector<LinkId> route_links_;
  std::size_t route_count_ = 0;
  std::size_t route_cache_links_ = std::size_t{8} << 20;  // 32 MiB of link ids
};

}  // namespace ptsim::hw::net
