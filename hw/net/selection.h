// Algorithm selection, as NCCL makes it (src/graph/tuning.cc + src/enqueue.cc): for
// each candidate algorithm predict the time, keep the fastest. Candidates:
//   all-reduce inside one NVSwitch domain: nvls when the topology has it (H100+ with
//     NVLS enabled), else ring;
//   all-reduce across nodes: tree and ring — the double binary tree's O(log n) latency
//     wins for small messages, the ring's bandwidth for large ones (NCCL 2.4 blog);
//   reduce-scatter, all-gather, broadcast: ring; all-to-all, send/recv: direct.
// The prediction is collective_time() on the real topology, so group shape and
// placement enter. A per-kind override (a scenario key) replaces the choice.
// The simulator's NetworkModel (sim/core/network_cost.h) picks all-reduce, reduce-
// scatter, all-gather and broadcast with NCCL's own cost model instead (nccl_tuning.h)
// and uses this selection for all-to-all and send/recv.
#pragma once

#include <array>
#include <span>

#include "hw/net/collective_time.h"
#include "hw/net/collectives.h"

namespace ptsim::hw::net {

struct AlgorithmOverrides {
  // Indexed by CollectiveKind; Algorithm::automatic = let selection choose.
  std::array<Algorithm, 6> by_kind{Algorithm::automatic, Algorithm::automatic, Algorithm::automatic,
                                   Algorithm::automatic, Algorithm::automatic, Algorithm::automatic};
  void set(CollectiveKind k, Algorithm a) { by_kind[static_cast<int>(k)] = a; }
  Algorithm get(CollectiveKind k) const { return by_kind[static_cast<int>(k)]; }
};

Algorithm select_algorithm(CollectiveKind kind, std::span<const int> ranks, Bytes bytes, Router& router,
                           const AlgorithmOverrides& overrides = {}, const ExpandOptions& options = {});

// select_algorithm + expand.
Expansion expand_selected(CollectiveKind kind, std::span<const int> ranks, Bytes bytes, Router& router,
                          const AlgorithmOverrides& overrides = {}, const ExpandOptions& options = {});

}  // namespace ptsim::hw::net
