// Collectives expanded into steps of flows (NCCL's algorithms as data movement).
//
// Model: a collective over a group of GPUs is a sequence of STEPS; a step is a set
// of concurrent point-to-point FLOWS {src, dst, bytes}; the next step starts when all
// flows of the previous one have finished, and every flow first pays its path
// latency (so a step on an idle network costs α + transfer, α = path latency).
// Consecutive identical steps are stored once with a repeat count, so a ring
// all-reduce over n ranks is one step of n flows repeated 2(n−1) times, not
// 2(n−1)·n flows.
//
// Sizes follow nccl-tests (doc/PERFORMANCE.md): S is the per-rank buffer of an
// all-reduce and broadcast, the total (n × per-rank shard) of reduce-scatter input and
// all-gather output, and the per-rank send buffer of all-to-all; send/recv moves S.
//
// Algorithms (NCCL docs "Collective operations", NCCL tuning in src/graph/tuning.cc):
//  ring         all-reduce = reduce-scatter + all-gather, 2(n−1) steps of S/n
//               (Patarasuk & Yuan 2009); RS / AG n−1 steps of S/n; broadcast a
//               pipelined chain from the root in chunks; all-to-all as n−1 pairwise
//               exchange steps (rank i sends to i+k in step k).
//  tree         all-reduce on NCCL's double binary tree (Sanders, Speck, Träff 2009,
//               "Two-tree algorithms for full bandwidth broadcast, reduction and scan"):
//               two complementary in-order binary trees each carry S/2, reduce up then
//               broadcast down, pipelined in chunks of chunk_bytes.
//  nvls         all-reduce in the NVSwitch (NVLink SHARP, NCCL 2.17+): each GPU sends
//               S up and receives the reduced S down, in one step; only inside one
//               NVSwitch domain of a topology with nvls() on.
//  hierarchical intra-node reduce-scatter, inter-node collective among the ranks with
//               the same local index (one ring per rail), intra-node all-gather
//               (as Horovod / NCCL "CollNet"-style 2D schemes; Jia et al. 2018).
//  direct       all-to-all as one step in which every pair exchanges S/n; send/recv.
//               With PXN (ExpandOptions::pxn) a cross-node pair's S/n goes over NVLink
//               to the sender's node-mate with the receiver's local index, and that
//               GPU sends one flow per remote peer carrying its node-mates' data.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hw/net/topology.h"

namespace ptsim::hw::net {

enum class CollectiveKind : std::uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, send_recv };
enum class Algorithm { automatic, ring, tree, nvls, hierarchical, direct };
std::string_view to_string(CollectiveKind k);
std::string_view to_string(Algorithm a);
CollectiveKind parse_collective_kind(std::string_view text);  // "all-reduce", "all_reduce", ...
Algorithm parse_algorithm(std::string_view text);             // "auto", "ring", "tree", ...

struct Flow {
  VertexId src = 0;
  VertexId dst = 0;
  Bytes bytes = 0;
  bool operator==(const Flow&) const = default;
};
struct Step {
  std::vector<Flow> flows;
  std::int64_t repeat = 1;  // this step runs `repeat` times back to back
};
struct Expansion {
  CollectiveKind kind = CollectiveKind::all_reduce;
  Algorithm algorithm = Algorithm::ring;
  int group_size = 0;
  Bytes bytes = 0;
  std::vector<Step> steps;
  // NCCL's cost model applied (sim/core/network_cost.cpp, hw/net/nccl_tuning.h): every
  // step pays step_latency instead of its largest path latency (< 0: path latency),
  // and flows carry byte_scale × the data they move (the protocol's wire overhead and
  // NCCL's achieved bandwidth on this group); nccl names the algorithm/protocol.
  Seconds step_latency = -1;
  double byte_scale = 1;
  std::string nccl;
  // ExpandOptions::qps of the expansion: every flow between two nodes is `qps` adjacent
  // flows of equal bytes, one per queue pair of its connection.
  int qps = 1;
  std::int64_t num_steps() const;  // Σ repeat
  std::size_t num_flows() const;   // Σ flows × repeat
};

// The most flows one connection may be split into (ExpandOptions::qps; NCCL accepts up
// to 128 queue pairs per connection, NCCL_IB_QPS_PER_CONNECTION; 64 bounds the flows).
inline constexpr int kMaxQps = 64;
// Whether ExpandOptions::qps splits a flow from `src` to `dst`: it runs between two nodes
// (not inside one node's NVLink / PCIe domain).
bool split_over_qps(const Topology& topo, VertexId src, VertexId dst);

struct ExpandOptions {
  // Pipeline chunk for tree and broadcast: NCCL's default NCCL_BUFFSIZE of 4 MiB split
  // into NCCL_STEPS = 8 slots (NCCL env docs).
  Bytes chunk_bytes = 512 * 1024;
  int max_broadcast_chunks = 64;  // bounds the O(chunks · n) flows of a ring broadcast
  int root = 0;                   // broadcast root, as a position in the group
  // NCCL's PXN for all-to-all (NCCL_P2P_PXN_LEVEL, default 2 = "use PXN as much as
  // possible to maximize aggregation", src/graph/paths.cc ncclTopoGetNetDev; PXN since
  // NCCL 2.12): a send to a GPU on another node leaves through the NIC of the sender's
  // node-mate that has the receiver's local index, when that GPU is in the communicator
  // and reached over NVLink; its proxy aggregates every node-mate's data for that peer
  // into one network connection. false = NCCL_PXN_DISABLE=1.
  bool pxn = true;
  // Network flows per connection (NCCL_IB_QPS_PER_CONNECTION, default 1: "useful on
  // multi-level fabrics which need multiple queue pairs to have good routing entropy",
  // NCCL environment docs): each flow between two nodes is split into `qps` flows of
  // equal bytes, each hashed onto its own equal-cost path (each queue pair is its own
  // ECMP flow on RoCE). Flows inside a node are not split.
  int qps = 1;
  // Hierarchical as NCCL's rings run it when a communicator holds several GPUs of a node:
  // one ring per channel through every member, each step moving its chunk over the
  // NVLink hops and the NIC hop at once, so the phases overlap and the slower one sets
  // the pace. One step of n−1 (all-reduce 2(n−1)) repeats carrying each flow's bytes of
  // the sequential phases spread over them: the same bytes per link, in max(intra, inter)
  // time instead of their sum. false: the phases one after another (a 2-D algorithm).
  bool pipelined_hierarchical = false;
};

// Expands one collective over `ranks` (global GPU ranks, in ring order; send/recv:
// {src, dst}). Throws std::invalid_argument for an algorithm the kind or the group does
// not support (e.g. nvls across nodes), duplicate or unknown ranks, negative bytes, or
// Algorithm::automatic (use select_algorithm / expand_selected in selection.h).
Expansion expand(CollectiveKind kind, std::span<const int> ranks, Bytes bytes, Algorithm algorithm,
                 const Topology& topo, const ExpandOptions& options = {});

// Whether expand() accepts (kind, algorithm) for this group on this topology.
bool supports(CollectiveKind kind, Algorithm algorithm, std::span<const int> ranks, const Topology& topo);

// Bytes vertex v sends over the whole collective.
Bytes bytes_sent(const Expansion& e, VertexId v);
Bytes bytes_received(const Expansion& e, VertexId v);

}  // namespace ptsim::hw::net
