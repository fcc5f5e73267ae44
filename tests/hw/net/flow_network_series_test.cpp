// FlowNetwork::contract_series_links: the links of a chain (GPU -> PCIe switch -> NIC ->
// leaf through vertices with two neighbours) carry the same flows, so a flow keeps only
// the narrowest. On routed flows between GPUs of a fat tree, with arrivals, weights,
// cancellations and completions, every rate, completion and link's bytes must be the
// per-link network's; a path that crosses part of a chain is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "hw/errors.h"
#include "hw/net/builders.h"
#include "hw/net/flow_network.h"
#include "hw/net/routing.h"
#include "hw/units.h"

namespace ptsim::hw::net {
namespace {

struct Live {
  FlowId plain, contracted;
};

// Both networks run the same flows; after every event their rates, completions and link
// bytes must agree.
void run_both(const Topology& t, unsigned seed) {
  std::mt19937 rng(seed);
  Router router(t);
  FlowNetwork plain(t), contracted(t);
  contracted.contract_series_links();
  std::vector<Live> live;
  std::vector<FlowId> done_a, done_b;
  const int gpus = t.num_gpus();
  for (int round = 0; round < 60; ++round) {
    const int arrivals = static_cast<int>(rng() % 6);
    for (int a = 0; a < arrivals; ++a) {
      const int src = static_cast<int>(rng() % gpus);
      int dst = static_cast<int>(rng() % gpus);
      if (dst == src) dst = (dst + 1) % gpus;
      const std::vector<LinkId> p = router.route(t.gpu(src), t.gpu(dst), rng());
      std::vector<LinkId> q = p;
      std::vector<std::uint16_t> no_mult;
      contracted.contract_path(q, no_mult);
      const Bytes bytes = (1 + rng() % 200) * 1e6;
      const std::uint32_t w = 1 + rng() % 3;
      live.push_back({plain.add_flow(p, bytes, plain.now(), 0, false, w),
                      contracted.add_flow(q, bytes, contracted.now(), 0, false, w)});
    }
    if (!live.empty() && rng() % 5 == 0) {
      const std::size_t k = rng() % live.size();
      plain.cancel(live[k].plain);
      contracted.cancel(live[k].contracted);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
    const Seconds te = plain.next_event_time();
    if (te == FlowNetwork::kNever) {
      ASSERT_EQ(contracted.next_event_time(), FlowNetwork::kNever) << "seed " << seed << " round " << round;
      continue;
    }
    ASSERT_NEAR(contracted.next_event_time(), te, 1e-12 * te) << "seed " << seed << " round " << round;
    done_a.clear();
    done_b.clear();
    plain.advance_to(te, done_a);
    contracted.advance_to(te, done_b);
    ASSERT_EQ(done_a.size(), done_b.size()) << "seed " << seed << " round " << round;
    for (std::size_t i = 0; i < done_a.size(); ++i) {
      const auto it = std::find_if(live.begin(), live.end(), [&](const Live& x) { return x.plain == done_a[i]; });
      ASSERT_NE(it, live.end());
      EXPECT_EQ(it->contracted, done_b[i]) << "seed " << seed << " round " << round;
      live.erase(it);
    }
    for (const Live& x : live)
      ASSERT_NEAR(contracted.rate(x.contracted), plain.rate(x.plain), 1e-9 * plain.rate(x.plain))
          << "seed " << seed << " round " << round;
  }
  plain.run_until_idle();
  contracted.run_until_idle();
  EXPECT_NEAR(contracted.now(), plain.now(), 1e-12 * plain.now()) << "seed " << seed;
  for (LinkId l = 0; l < t.num_links(); ++l) {
    EXPECT_NEAR(contracted.link_bytes(l), plain.link_bytes(l), 1e-9 * plain.link_bytes(l) + 1)
        << "seed " << seed << " " << t.link_name(l);
    EXPECT_NEAR(contracted.link_busy_time(l), plain.link_busy_time(l), 1e-9 * plain.link_busy_time(l) + 1e-12)
        << "seed " << seed << " " << t.link_name(l);
  }
  // The chains' other links were left out of the solves.
  EXPECT_LT(contracted.solve_stats().links, plain.solve_stats().links) << "seed " << seed;
}

// A NIC per GPU (the PCIe switch then has two neighbours too), PCIe narrower, as wide and
// wider than the NIC, a 2:1 leaf so that uplinks bind as well; and two GPUs per switch
// (that switch is no chain: only the NIC's links are).
TEST(FlowNetworkSeries, ChainsKeepTheirNarrowestLinkAndGiveThePerLinkSolve) {
  unsigned seed = 1;
  for (const int per_switch : {1, 2})
    for (const double pcie : {0.0, 16e9, 25e9, 64e9}) {
      NodeParams node;
      node.gpus_per_node = 4;
      node.nics_per_node = 4;
      node.gpus_per_pcie_switch = per_switch;
      node.pcie_bandwidth = pcie;
      FabricParams fabric;
      fabric.switch_radix = 8;
      fabric.oversubscription = 2.0;
      const Topology t = build_fat_tree(8, node, fabric);
      for (int k = 0; k < 3; ++k) run_both(t, seed++);
    }
}

// A path that enters a chain and leaves it part-way (GPU -> PCIe switch only) cannot be
// told apart from one that crosses it whole once its other links are dropped: refused, as
// is a path given to add_flow uncontracted.
TEST(FlowNetworkSeries, APathThroughPartOfAChainIsRefused) {
  NodeParams node;
  node.gpus_per_node = 2;
  node.nics_per_node = 2;
  node.gpus_per_pcie_switch = 1;
  const Topology t = build_fat_tree(2, node, FabricParams{});
  Router router(t);
  const std::vector<LinkId> whole = router.route(t.gpu(0), t.gpu(2));
  FlowNetwork net(t);
  net.contract_series_links();
  std::vector<std::uint16_t> no_mult;
  std::vector<LinkId> q = whole;
  net.contract_path(q, no_mult);
  EXPECT_EQ(q.size(), whole.size() - 4);  // a chain of three links at either end keeps one
  EXPECT_NO_THROW(net.add_flow(q, 1e6, 0, 0, /*pay_latency=*/false));
  EXPECT_THROW(net.add_flow(whole, 1e6, 0, 0, false), InternalError);
  EXPECT_THROW(net.add_flow(q, 1e6, 0), InternalError);  // its latency would miss the dropped links'
  std::vector<LinkId> part = {whole[0]};                 // GPU -> its PCIe switch
  EXPECT_THROW(net.contract_path(part, no_mult), InternalError);
}

}  // namespace
}  // namespace ptsim::hw::net
