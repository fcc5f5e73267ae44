// How long a collective of one group takes, and how many bytes each member puts
// on the wire. The replay asks this interface (through a Transport); NetworkCost
// (sim/core/network_cost.h) answers on the scenario's topology, TableCollectiveCost
// with measured times first.
#pragma once
#include <atomic>
#include <memory>

#include "hw/cost_table.h"
#include "hw/units.h"
#include "sim/core/program.h"

namespace ptsim::sim {

// A group as the cost model sees it: its size and how it lies on the nodes.
struct GroupShape {
  int size = 1;
  int nodes = 1;           // distinct nodes spanned
  int first_rank = 0;      // global rank of member 0
  int stride = 1;          // rank distance between consecutive members
};

// Bytes each member sends for a collective with buffer size S over n ranks, as the
// ring algorithm moves them (nccl-tests PERFORMANCE.md): all-reduce 2(n−1)/n·S,
// reduce-scatter / all-gather / all-to-all (n−1)/n·S, broadcast S (n>1), send S.
Bytes ring_wire_bytes(Coll c, int n, Bytes S);

class CollectiveCost {
 public:
  virtual ~CollectiveCost() = default;
  virtual Seconds seconds(Coll c, Dim d, const GroupShape& g, Bytes S) const = 0;
  virtual Bytes wire_bytes(Coll c, const GroupShape& g, Bytes S) const { return ring_wire_bytes(c, g.size, S); }
};

// Measured collectives first: a calibration table's collective points (from
// `ptsim calibrate` or imported nccl-tests logs of the user's cluster) answer for
// the (op, group size) they cover; everything else goes to `fallback`.
class TableCollectiveCost : public CollectiveCost {
 public:
  TableCollectiveCost(std::unique_ptr<CollectiveCost> fallback, std::shared_ptr<const hw::CostTable> table)
      : fallback_(std::move(fallback)), table_(std::move(table)) {}
  Seconds seconds(Coll c, Dim d, const GroupShape& g, Bytes S) const override;
  Bytes wire_bytes(Coll c, const GroupShape& g, Bytes S) const override { return fallback_->wire_bytes(c, g, S); }
  // Whether any answer came from the table (the result's cost_source says so).
  bool used_table() const { return used_; }
  const std::string& table_name() const { return table_->name; }

 private:
  std::unique_ptr<CollectiveCost> fallback_;
  std::shared_ptr<const hw::CostTable> table_;
  mutable std::atomic<bool> used_{false};
};

}  // namespace ptsim::sim
