// Random flow paths for the flow-network property tests.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include "hw/net/topology.h"

namespace ptsim::hw::net::testing {

// Up to `max_links` links drawn from `links` (1 + rng() % max_links draws; a link drawn
// twice is kept once), in draw order.
inline std::vector<LinkId> random_path(const std::vector<LinkId>& links, std::mt19937& rng, unsigned max_links) {
  std::vector<LinkId> p;
  const int len = 1 + static_cast<int>(rng() % max_links);
  for (int j = 0; j < len; ++j) {
    const LinkId l = links[rng() % links.size()];
    if (std::find(p.begin(), p.end(), l) == p.end()) p.push_back(l);
  }
  return p;
}

}  // namespace ptsim::hw::net::testing
