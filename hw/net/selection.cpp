#include "hw/net/selection.h"

#include <limits>

namespace ptsim::hw::net {

Algorithm select_algorithm(CollectiveKind kind, std::span<const int> ranks, Bytes bytes, Router& router,
                           const AlgorithmOverrides& overrides, const ExpandOptions& options) {
  if (Algorithm a = overrides.get(kind); a != Algorithm::automatic) return a;
  const Topology& topo = router.topology();
  switch (kind) {
    case CollectiveKind::send_recv:
    case CollectiveKind::all_to_all: return Algorithm::direct;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_gather:
    case CollectiveKind::broadcast: return Algorithm::ring;
    case CollectiveKind::all_reduce: break;
  }
  if (ranks.size() <= 1) return Algorithm::ring;
  if (supports(kind, Algorithm::nvls, ranks, topo)) return Algorithm::nvls;
  const int node = topo.node_of_rank(ranks[0]);
  bool one_node = true;
  for (int r : ranks) one_node = one_node && topo.node_of_rank(r) == node;
  if (one_node) return Algorithm::ring;
  Algorithm best = Algorithm::ring;
  Seconds best_t = std::numeric_limits<double>::infinity();
  for (Algorithm a : {Algorithm::tree, Algorithm::ring}) {  // tree first: ties go to the ring
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
