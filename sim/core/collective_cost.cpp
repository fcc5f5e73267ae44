#include "sim/core/collective_cost.h"

namespace ptsim::sim {

Seconds TableCollectiveCost::seconds(CollectiveKind c, Dim d, const GroupShape& g, Bytes S) const {
  if (S > 0 && g.size > 1) {
    // The table's ops carry nccl-tests' names (to_string); its `size` is the buffer S as
    // the replay defines it (all-reduce buffer, all-gather output, reduce-scatter input,
    // all-to-all per-rank buffer).
    if (auto t = table_->collective_seconds(to_string(c), g.size, S)) {
      used_ = true;
      return *t;
    }
  }
  return fallback_->seconds(c, d, g, S);
}

}  // namespace ptsim::sim
