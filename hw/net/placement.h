// Rank placement: which global rank holds which coordinate of the parallel grid.
//
// Model: Megatron-LM's RankGenerator (megatron/core/parallel_state.py): ranks are
// laid out in the order string, innermost first, default "tp-cp-dp-pp" — TP varies
// fastest, so a TP group is consecutive ranks and stays inside a node; PP is
// outermost. Expert parallelism is carved from data parallelism (Megatron's
// "tp-cp-ep-dp-pp" with ep * edp = dp): the EP group is `ep` consecutive members of
// the DP group, and the expert-data-parallel (EDP) group joins the ranks with the same
// EP coordinate. GPU rank r sits on the r-th GPU of the topology, so node = r / gpus_per_node
// for the built-in builders.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace ptsim::hw::net {

class Topology;

// Dimension tags; also used as FlowNetwork flow tags.
enum class Dim : int { tp = 0, cp = 1, dp = 2, pp = 3, ep = 4, edp = 5 };
inline constexpr int kNumDims = 6;
const char* to_string(Dim d);

struct ParallelShape {
  int tp = 1, cp = 1, dp = 1, pp = 1, ep = 1;
  std::string order = "tp-cp-dp-pp";  // innermost first; "ep" may appear right before "dp"
};

class Placement {
 public:
  // Throws std::invalid_argument if a size is < 1, tp*cp*dp*pp != world_size,
  // ep does not divide dp, or the order is not a permutation of tp, cp, dp, pp.
  Placement(const ParallelShape& shape, int world_size);

  int world_size() const { return world_; }
  int size(Dim d) const;
  int coord(int rank, Dim d) const;
  // Members of `rank`'s group along d, ordered by their coordinate along d.
  std::vector<int> group(int rank, Dim d) const;
  // All groups along d (each ordered as group()), in order of their first member.
  std::vector<std::vector<int>> groups(Dim d) const;

 private:
  int rank_from(const std::array<int, 4>& c) const;  // coords indexed tp, cp, dp, pp
  void check_rank(int rank) const;
  int world_;
  std::array<int, 4> size_{};    // tp, cp, dp, pp
  std::array<int, 4> stride_{};  // rank stride of each of tp, cp, dp, pp
  int ep_ = 1;
};

struct GroupCrossing {
  Dim dim;
  int group_size = 0;
  int num_groups = 0;
  int groups_crossing_nodes = 0;  // groups whose members sit on more than one node
  int max_nodes_spanned = 0;
};
struct PlacementReport {
  std::vector<GroupCrossing> dims;  // tp, cp, dp, pp, ep, edp
  std::string text() const;         // one line per dimension
};
// Node of rank r = topo.node_of_rank(r).
PlacementReport placement_report(const Placement& placement, const Topology& topo);

}  // namespace ptsim::hw::net
