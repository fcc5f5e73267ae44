// Rank placement and groups, in Megatron-LM's order (RankGenerator,
// megatron/core/parallel_state.py, "tp-cp-dp-pp"): TP innermost, then CP, then DP
// (EP carved out of DP × CP), PP outermost:
//   rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i)).
// The experts' own order over a stage's tp·cp·dp ranks (Megatron-core's expert
// RankGenerator, "tp-ep-dp" with the expert tensor-parallel size etp): i = tp_i + tp·(cp_i +
// cp·dp_i) = etp_i + etp·(ep_i + ep·edp_i). With etp = tp (the default) EP groups lie in
// the dp × cp group; with etp < tp (MoE parallel folding) they span tensor-parallel ranks.
// Consecutive ranks share a node (gpus_per_node), so TP stays inside one. GPU rank r
// sits on the r-th GPU of the topology, so node = r / gpus_per_node for the built-in
// builders.
#pragma once
#include <cstdint>
#include <string>

namespace ptsim::hw::net {

// The parallel dimensions traffic is accounted to (also FlowNetwork flow tags);
// `dp` is the data-parallel × context-parallel group gradients are reduced over;
// `mp` is the model-parallel synchronisation before the optimizer (gradient-norm /
// inf check all-reduce over tp × cp × pp); `etp` is the routed experts' own
// tensor-parallel group under MoE parallel folding (etp consecutive ranks inside a TP
// group); `edp` is the routed experts' data-parallel group, the edp = tp·cp·dp/(etp·ep)
// ranks of a stage holding the same experts, which their gradients are reduced and their
// ZeRO shards gathered over (Megatron-core's expert-data-parallel group; the dp group
// when there are no experts to shard differently). The order is the index order of per-dimension arrays and of the
// simulator's trace streams.
enum class Dim : std::uint8_t { tp, pp, dp, cp, ep, mp, etp, edp };
inline constexpr int kNumDims = 8;
const char* to_string(Dim d);  // "tp", "pp", "dp", "cp", "ep", "mp", "etp", "edp"

// A group as the cost model sees it: its size and how it lies on the nodes.
struct GroupShape {
  int size = 1;
  int nodes = 1;       // distinct nodes spanned
  int first_rank = 0;  // global rank of member 0
  int stride = 1;      // rank distance between consecutive members
};

struct Coords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

class Layout {
 public:
  // etp: the experts' tensor-parallel size, dividing tp (0 = tp).
  Layout(int tp, int cp, int dp, int pp, int ep, int gpus_per_node, int etp = 0);

  int world() const { return tp_ * cp_ * dp_ * pp_; }
  int rank_of(const Coords& c) const { return c.tp + tp_ * (c.cp + cp_ * (c.dp + dp_ * c.pp)); }
  Coords coords(int rank) const;

  // Group of `rank` in dimension d: its id, the number of such groups, the size,
  // and this rank's index in it. Dim::pp is the pair (rank, next stage).
  int group_id(int rank, Dim d) const;
  int group_count(Dim d) const;
  int group_size(Dim d) const;
  int member_index(int rank, Dim d) const;
  int member_rank(Dim d, int group, int member) const;
  GroupShape shape(Dim d, int group) const;
  int node_of(int rank) const { return rank / gpus_per_node_; }
  // One line for the summary: per dimension, how many groups cross node
  // boundaries, e.g. "placement: tp 128×8 in-node; dp 128×8 cross nodes (8 nodes each)".
  std::string placement_summary() const;
  int gpus_per_node() const { return gpus_per_node_; }

 private:
  int tp_, cp_, dp_, pp_, ep_, gpus_per_node_, etp_;
};

}  // namespace ptsim::hw::net
