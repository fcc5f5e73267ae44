// How long a collective of one group takes, and how many bytes each member puts
// on the wire. The replay asks this interface (through a Transport); NetworkCost
// (sim/core/network_cost.h) answers on the scenario's topology, TableCollectiveCost
// with measured times first.
#pragma once
#include <atomic>
#include <memory>

#include "hw/cost_table.h"
#include "hw/net/busbw.h"
#include "hw/units.h"
#include "sim/core/program.h"

namespace ptsim::sim {

class CollectiveCost {
 public:
  virtual ~CollectiveCost() = default;
  virtual Seconds seconds(CollectiveKind c, Dim d, const GroupShape& g, Bytes S) const = 0;
  // Bytes each member sends (hw::net::wire_bytes_per_rank); a group of one sends nothing.
  virtual Bytes wire_bytes(CollectiveKind c, const GroupShape& g, Bytes S) const {
    return g.size > 1 ? hw::net::wire_bytes_per_rank(c, g.size, S) : 0;
  }
};

// Measured collectives first: a calibration table's collective points (from
// `ptsim calibrate` or imported nccl-tests logs of the user's cluster) answer for
// the (op, group size) they cover; everything else goes to `fallback`.
class TableCollectiveCost : public CollectiveCost {
 public:
  TableCollectiveCost(std::unique_ptr<CollectiveCost> fallback, std::shared_ptr<const hw::CostTable> table)
      : fallback_(std::move(fallback)), table_(std::move(table)) {}
  Seconds seconds(CollectiveKind c, Dim d, const GroupShape& g, Bytes S) const override;
  Bytes wire_bytes(CollectiveKind c, const GroupShape& g, Bytes S) const override {
    return fallback_->wire_bytes(c, g, S);
  }
  // Whether any answer came from the table (the result's cost_source says so).
  bool used_table() const { return used_; }
  const std::string& table_name() const { return table_->name; }

 private:
  std::unique_ptr<CollectiveCost> fallback_;
  std::shared_ptr<const hw::CostTable> table_;
  mutable std::atomic<bool> used_{false};
};

}  // namespace ptsim::sim
