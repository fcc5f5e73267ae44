// Bottleneck report: the busiest directed links, by utilisation = bytes /
// (bandwidth × elapsed). Utilisations equal to 9 digits are ties (both directions of
// a cable under a symmetric ring differ only by summation rounding), broken by link
// id, so the order does not depend on the order in which bytes were accumulated.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hw/net/flow_network.h"

namespace ptsim::hw::net {

struct LinkUsage {
  LinkId link = 0;
  std::string name;  // "node12.nic3->leaf1"
  Bytes bytes = 0;
  Seconds busy = 0;        // time with at least one flow on the link
  double utilisation = 0;  // bytes / (bandwidth × elapsed)
};

// The `top_n` busiest of the links that carried bytes (link_bytes(l) > 0) and that
// `keep` accepts (every link when `keep` is empty); `busy` is left 0.
std::vector<LinkUsage> busiest_links(const Topology& topo, const std::function<Bytes(LinkId)>& link_bytes,
                                     Seconds elapsed, std::size_t top_n, const std::function<bool(LinkId)>& keep = {});
// Of a FlowNetwork run, with `busy` filled in; elapsed <= 0: from
// net.statistics_start() to net.now().
std::vector<LinkUsage> busiest_links(const FlowNetwork& net, std::size_t top_n, Seconds elapsed = 0);
// A small text table, one link per line.
std::string format_busiest_links(const std::vector<LinkUsage>& links);

}  // namespace ptsim::hw::net
