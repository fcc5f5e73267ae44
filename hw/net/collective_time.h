// Time of an expanded collective on an otherwise idle network, and a runner that
// feeds a collective's steps into a shared FlowNetwork.
//
// collective_time(): the analytical path. A step costs α + max over its flows of
// bytes / rate, with α the largest path latency of the step and each flow's rate its
// equal share of its most loaded link, min over links of bandwidth / flows-on-link
// (exact max-min rates whenever a step is symmetric, as ring / NVLS / direct steps
// are). The whole collective is Σ repeat × step time; e.g. the ring all-reduce gives
// the α-β formula 2(n−1)·(α + S/(n·B)) (Thakur, Rabenseifner, Gropp 2005; NCCL
// tuning model). An expansion with step_latency >= 0 (NCCL's latency model applied)
// pays that per step instead of α, here, in idle_network_time and in the runner. No event simulation: O(flows × path
// length) per distinct step.
//
// idle_network_time(): the same collective run through a private FlowNetwork, step by
// step (max-min rates, flows finishing at different times). Identical repeated steps
// are simulated once and multiplied — exact on an idle network.
#pragma once

#include <cstdint>
#include <vector>

#include "hw/net/collectives.h"
#include "hw/net/flow_network.h"
#include "hw/net/routing.h"

namespace ptsim::hw::net {

// nonblocking_fabric: links between two fabric switches (leaf, spine, core) never
// limit a rate, as on the full-bisection fabric NCCL's tuning model assumes; the GPU,
// NVLink, PCIe and NIC links still do.
Seconds collective_time(const Expansion& e, Router& router, bool nonblocking_fabric = false);
Seconds idle_network_time(const Expansion& e, Router& router);

// Drives one collective through a FlowNetwork shared with other traffic: launch a
// step, wait (in the caller's event loop) until all its flows completed, launch the
// next. Paths of each distinct step are resolved once (flow i of a step uses ECMP
// flow index i, so repeats take the same paths).
class CollectiveRunner {
 public:
  CollectiveRunner(const Expansion& e, Router& router);
  bool finished() const { return next_step_ >= expansion_.steps.size(); }
  std::int64_t steps_left() const;
  // Adds the next step's flows starting at `start` with `tag`; appends their ids to
  // `ids` and returns how many were added (0 when finished()).
  std::size_t launch_next_step(FlowNetwork& net, Seconds start, int tag, std::vector<FlowId>& ids);

 private:
  const Expansion& expansion_;
  Router& router_;
  std::size_t next_step_ = 0;
  std::int64_t done_repeats_ = 0;
  std::size_t resolved_for_ = static_cast<std::size_t>(-1);
  std::vector<std::vector<LinkId>> paths_;
};

}  // namespace ptsim::hw::net
