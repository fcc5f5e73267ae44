#include "hw/net/selection.h"

#include <limits>

namespace ptsim::hw::net {

Algorithm select_algorithm(CollectiveKind kind, std::span<const int> ranks, Bytes bytes, Router& router,
                           const AlgorithmOverrides& overrides, const ExpandOptions& options) {
  if (Algorithm a = overrides.get(kind); a != Algorithm::automatic) return a;
  const Topology& topo = router.topology();
  switch (kind) {
    case CollectiveKind::send_recv:
    case CollectiveKind::all_to_all:
      return Algorithm::direct;
    case CollectiveKind::broadcast:
      return Algorithm::ring;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_gather:
    case CollectiveKind::all_reduce:
      break;
  }
  if (ranks.size() <= 1) return Algorithm::ring;
  if (kind == CollectiveKind::all_reduce && supports(kind, Algorithm::nvls, ranks, topo)) return Algorithm::nvls;
  const int node = topo.node_of_rank(ranks[0]);
  bool one_node = true;
  for (int r : ranks) one_node = one_node && topo.node_of_rank(r) == node;
  if (one_node) return Algorithm::ring;
  // Across nodes: the fastest of the algorithms NCCL has for the kind. When a group
  // holds several GPUs of each node, NCCL runs one ring channel per NIC so the
  // inter-node traffic of a ring is spread over all the node's NICs (nccl #812: a
  // DGX A100 all-reduce reaches 192 GB/s busbw over 8 × 200 Gb/s); the
  // hierarchical expansion (intra-node reduce-scatter over NVLink, one inter-node
  // collective per local rank over its own NIC, intra-node all-gather) moves the
  // bytes the same way, so it stands for those multi-channel rings here.
  Algorithm best = Algorithm::ring;
  Seconds best_t = std::numeric_limits<double>::infinity();
  for (Algorithm a : {Algorithm::tree, Algorithm::hierarchical, Algorithm::ring}) {  // ties go to the ring
    if (!supports(kind, a, ranks, topo)) continue;
    const Seconds t = collective_time(expand(kind, ranks, bytes, a, topo, options), router);
    if (t <= best_t) {
      best_t = t;
      best = a;
    }
  }
  return best;
}

Expansion expand_selected(CollectiveKind kind, std::span<const int> ranks, Bytes bytes, Router& router,
                          const AlgorithmOverrides& overrides, const ExpandOptions& options) {
  const Algorithm a = select_algorithm(kind, ranks, bytes, router, overrides, options);
  return expand(kind, ranks, bytes, a, router.topology(), options);
}

}  // namespace ptsim::hw::net
