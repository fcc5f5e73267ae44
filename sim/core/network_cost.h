// The collective cost on the real cluster network (hw/net): the scenario's cluster
// becomes a topology graph (DGX-style nodes on a fat tree / rail-optimized fabric /
// torus / user graph), GPU rank r is the r-th GPU of the graph (hw::net::Layout's
// Megatron order, rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i)), so TP stays in a
// node), and each collective is expanded by the algorithm NCCL would pick (ring,
// double binary tree, NVLS, hierarchical, direct; hw/net/selection.h) into steps of
// flows on ECMP-routed paths.
//
// Closed form (NetworkCost::seconds): SPMD training runs the same collective in every
// group of a pipeline stage at the same time (all 8 DP rings of a DGX node, all TP
// groups of the stage, every rank's pipeline send), so a group's time is that of the
// union of its sibling groups' flows, step by step, with each flow at its equal share
// of its most loaded link (hw/net/collective_time.h: exact max-min rates for symmetric
// steps). This is why an oversubscribed fabric or two DP rings hashed onto one NIC slow
// a plan even without the event-level link sharing of NetworkTransport. Results are
// cached by (collective, dimension, stage, group shape, bytes): a stage's groups are
// symmetric, so an iteration needs a few dozen evaluations.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "hw/net/cluster.h"
#include "hw/net/collectives.h"
#include "hw/net/layout.h"
#include "hw/net/nccl_tuning.h"
#include "hw/net/routing.h"
#include "hw/net/selection.h"
#include "hw/net/topology.h"
#include "sim/core/collective_cost.h"
#include "sim/core/scenario.h"

namespace ptsim::sim {

// The hw/net cluster spec of a scenario's `cluster:` section (topology names of
// CONTRACT §2: fat-tree, fat-tree-3, rail-optimized, torus, torus-2d, torus-3d, user).
// Torus dims default to the most nearly square (cubic) factorisation of the node count.
hw::net::ClusterNetSpec cluster_net_spec(const ClusterConfig& c);
hw::net::AlgorithmOverrides algorithm_overrides(const ClusterConfig& c);

// Topology + router + rank layout, shared by NetworkCost and NetworkTransport.
// Not thread-safe (the router caches routes): one per simulation.
class NetworkModel {
 public:
  // Throws std::invalid_argument when the cluster cannot be built or has fewer GPUs
  // than the layout's world.
  NetworkModel(const ClusterConfig& cluster, const Layout& layout);

  const hw::net::Topology& topology() const { return topo_; }
  hw::net::Router& router() { return *router_; }
  const Layout& layout() const { return layout_; }

  // Members of group `gid` of dimension d in ring order (Layout::member_rank);
  // Dim::pp: gid is the sending rank, the pair (gid, next stage's rank).
  std::vector<int> members(Dim d, int gid) const;
  // Members of the group that `shape` describes (found through its first rank).
  std::vector<int> members(Dim d, const GroupShape& shape) const;

  // The algorithm NCCL would use (or the scenario's override) and its expansion. For
  // the collectives NCCL's tuner times (all-reduce, reduce-scatter, all-gather,
  // broadcast) the choice is NCCL's (hw/net/nccl_tuning.h: smallest predicted time over
  // algorithm × protocol) and the expansion is calibrated to NCCL's prediction: each
  // step pays latency / steps, flows carry bytes scaled so that the group alone on a
  // full-bisection fabric (what NCCL's tuning model assumes: it knows NVLink and NIC
  // speeds, not the switches) takes NCCL's time. The real fabric slows it from there:
  // its own flows that ECMP hashes onto one switch link, an oversubscribed leaf, and
  // other groups' traffic — so a slower fabric never makes a collective faster.
  hw::net::Expansion expand(CollectiveKind c, std::span<const int> ranks, Bytes S);
  // What NCCL's tuner sees for this group (ranks, nodes, bandwidths of this cluster).
  hw::net::NcclComm nccl_comm(std::span<const int> ranks) const;
  hw::net::NcclVersion nccl_version() const { return nccl_version_; }
  // Idle-network time of one group's collective, alone on the network.
  Seconds isolated_seconds(CollectiveKind c, std::span<const int> ranks, Bytes S);
  // Closed form with the group's sibling groups of the same stage running at once.
  Seconds stage_seconds(CollectiveKind c, Dim d, const GroupShape& shape, Bytes S);

 private:
  ClusterConfig cluster_;
  Layout layout_;
  hw::net::Topology topo_;
  std::unique_ptr<hw::net::Router> router_;
  hw::net::AlgorithmOverrides overrides_;
  hw::net::ExpandOptions expand_options_;
  hw::net::NcclVersion nccl_version_;
  BytesPerSecond nvlink_bw_ = 0, nic_bw_ = 0;  // per GPU / per NIC, as NCCL gets them

  hw::net::Algorithm flow_algorithm(CollectiveKind c, hw::net::NcclAlgo a, std::span<const int> ranks, Bytes S);
  void calibrate(hw::net::Expansion& e, const hw::net::NcclEstimate& est);
};

class NetworkCost : public CollectiveCost {
 public:
  explicit NetworkCost(std::shared_ptr<NetworkModel> model) : model_(std::move(model)) {}
  Seconds seconds(CollectiveKind c, Dim d, const GroupShape& g, Bytes S) const override;
  NetworkModel& model() const { return *model_; }
  std::shared_ptr<NetworkModel> shared_model() const { return model_; }

 private:
  struct Key {
    CollectiveKind c;
    Dim d;
    int stage, size, stride, offset;  // offset: first rank within its stage (p2p: 0)
    Bytes S;
    bool operator<(const Key& o) const {
      return std::tie(c, d, stage, size, stride, offset, S) <
             std::tie(o.c, o.d, o.stage, o.size, o.stride, o.offset, o.S);
    }
  };
  std::shared_ptr<NetworkModel> model_;
  mutable std::map<Key, Seconds> cache_;
};

}  // namespace ptsim::sim
