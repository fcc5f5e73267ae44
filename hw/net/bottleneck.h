// Bottleneck report: the busiest directed links of a FlowNetwork run, by
// utilisation = bytes / (bandwidth × elapsed), ties broken by bytes.
#pragma once

#include <string>
#include <vector>

#include "hw/net/flow_network.h"

namespace ptsim::hw::net {

struct LinkUsage {
  LinkId link = 0;
  std::string name;  // "node12.nic3->leaf1"
  Bytes bytes = 0;
  Seconds busy = 0;         // time with at least one flow on the link
  double utilisation = 0;   // bytes / (bandwidth × elapsed)
};

// elapsed <= 0: from net.statistics_start() to net.now().
std::vector<LinkUsage> busiest_links(const FlowNetwork& net, std::size_t top_n, Seconds elapsed = 0);
// A small text table, one link per line.
std::string format_busiest_links(const std::vector<LinkUsage>& links);

}  // namespace ptsim::hw::net
