#include "sim/core/collective_cost.h"

#include <algorithm>

namespace ptsim::sim {

Bytes ring_wire_bytes(Coll c, int n, Bytes S) {
  if (n <= 1) return 0;
  const double f = static_cast<double>(n - 1) / n;
  switch (c) {
    case Coll::all_reduce: return 2 * f * S;
    case Coll::reduce_scatter:
    case Coll::all_gather:
    case Coll::all_to_all: return f * S;
    case Coll::broadcast:
    case Coll::send_recv: return S;
  }
  return 0;
}

Seconds TableCollectiveCost::seconds(Coll c, Dim d, const GroupShape& g, Bytes S) const {
  if (S > 0 && g.size > 1) {
    // nccl-tests' names; its `size` is the buffer S as the replay defines it (all-reduce
    // buffer, all-gather output, reduce-scatter input, all-to-all per-rank buffer).
    static const char* names[] = {"all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send-recv"};
    if (auto t = table_->collective_seconds(names[static_cast<int>(c)], g.size, S)) {
      used_ = true;
      return *t;
    }
  }
  return fallback_->seconds(c, d, g, S);
}

}  // namespace ptsim::sim
