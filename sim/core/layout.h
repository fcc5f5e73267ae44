// Rank placement and groups, in Megatron-LM's order: TP innermost, then CP, then
// DP (EP carved out of DP × CP), PP outermost:
//   rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i)).
// Consecutive ranks share a node (cluster.gpus_per_node), so TP stays inside one.
#pragma once
#include <cstdint>
#include <string>

#include "sim/core/collective_cost.h"
#include "sim/core/program.h"

namespace ptsim::sim {

struct Coords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

class Layout {
 public:
  Layout(int tp, int cp, int dp, int pp, int ep, int gpus_per_node);

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
  int tp_, cp_, dp_, pp_, ep_, gpus_per_node_;
};

}  // namespace ptsim::sim
