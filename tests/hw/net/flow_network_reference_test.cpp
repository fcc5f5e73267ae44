// FlowNetwork against an independent, textbook max-min solver: many flows per link (so
// the per-link rate heaps the solver searches are several levels deep), arrivals,
// cancellations and completions at many times, weighted flows. Every rate must equal
// the reference's, and every link's carried bytes the integral of its flows' rates.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "hw/net/flow_network.h"
#include "hw/units.h"
#include "tests/hw/net/random_path.h"

namespace ptsim::hw::net {
namespace {

struct RefFlow {
  FlowId id;
  std::vector<LinkId> path;
  std::uint32_t weight;
};

// One round in `every`, cancel a random live flow.
void cancel_sometimes(FlowNetwork& net, std::vector<RefFlow>& live, std::mt19937& rng, unsigned every) {
  if (live.empty() || rng() % every != 0) return;
  const std::size_t k = rng() % live.size();
  net.cancel(live[k].id);
  live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
}
// Forget the flows the network reported finished.
void drop_finished(std::vector<RefFlow>& live, const std::vector<FlowId>& done) {
  std::erase_if(live, [&](const RefFlow& x) { return std::find(done.begin(), done.end(), x.id) != done.end(); });
}

// Progressive filling written out plainly (Bertsekas & Gallager, Data Networks, §6.5.2):
// the link with the least remaining capacity per unfixed share saturates; its unfixed
// flows are fixed at that share; repeat. O(links × flows) per round, no incrementality.
std::vector<double> textbook_max_min_rates(const Topology& t, const std::vector<RefFlow>& live) {
  std::vector<double> remaining(t.num_links());
  std::vector<double> unfixed(t.num_links(), 0);
  for (LinkId l = 0; l < t.num_links(); ++l) remaining[l] = t.link(l).bandwidth;
  for (const auto& f : live)
    for (LinkId l : f.path) unfixed[l] += f.weight;
  std::vector<double> rate(live.size(), 0);
  std::vector<bool> fixed(live.size(), false);
  for (;;) {
    LinkId best = std::numeric_limits<LinkId>::max();
    double share = std::numeric_limits<double>::infinity();
    for (LinkId l = 0; l < t.num_links(); ++l)
      if (unfixed[l] > 0 && std::max(0.0, remaining[l]) / unfixed[l] < share) {
        share = std::max(0.0, remaining[l]) / unfixed[l];
        best = l;
      }
    if (best == std::numeric_limits<LinkId>::max()) break;
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (fixed[i] || std::find(live[i].path.begin(), live[i].path.end(), best) == live[i].path.end()) continue;
      fixed[i] = true;
      rate[i] = share;
      for (LinkId l : live[i].path) {
        remaining[l] -= share * live[i].weight;
        unfixed[l] -= live[i].weight;
      }
    }
  }
  return rate;
}

// One round's end: starts what is due now, checks every live flow's rate against the
// textbook, then runs to the next event, which must complete a flow. `where` names the
// round in a failure. Nothing happens when no flow is pending.
void check_round(FlowNetwork& net, const Topology& t, std::vector<RefFlow>& live, std::vector<FlowId>& done,
                 const std::string& where) {
  done.clear();
  net.advance_to(net.now(), done);
  drop_finished(live, done);
  const Seconds te = net.next_event_time();
  if (te == FlowNetwork::kNever) return;
  const auto ref = textbook_max_min_rates(t, live);
  for (std::size_t i = 0; i < live.size(); ++i)
    ASSERT_NEAR(net.rate(live[i].id), ref[i], 1e-9 * ref[i] + 1e-3)
        << where << " flow " << i << " of " << live.size() << " (" << live[i].path.size() << " links)";
  done.clear();
  net.advance_to(te, done);
  ASSERT_FALSE(done.empty()) << where;
  drop_finished(live, done);
}

TEST(FlowNetworkReference, ManyFlowsPerLinkMatchATextbookSolveAndLinkBytesIntegrateTheRates) {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Topology t;
    std::vector<VertexId> vs;
    for (int i = 0; i < 6; ++i) vs.push_back(t.add_vertex(VertexKind::gpu, "v" + std::to_string(i), i));
    std::vector<LinkId> links;
    const int nl = 3 + static_cast<int>(rng() % 5);
    for (int i = 0; i < nl; ++i) links.push_back(t.connect(vs[i % 6], vs[(i + 1) % 6], (1 + rng() % 9) * kGB, 0));
    FlowNetwork net(t);
    std::vector<RefFlow> live;
    std::vector<double> expected_bytes(t.num_links(), 0.0);
    std::vector<FlowId> done;
    for (int round = 0; round < 120; ++round) {
      const int arrivals = static_cast<int>(rng() % 7);
      for (int a = 0; a < arrivals; ++a) {
        const std::vector<LinkId> p = testing::random_path(links, rng, 3);
        const std::uint32_t w = 1 + rng() % 4;
        live.push_back({net.add_flow(p, (1 + rng() % 200) * 1e6, net.now(), 0, false, w), p, w});
      }
      cancel_sometimes(net, live, rng, 5);
      auto drop_done = [&] { drop_finished(live, done); };
      done.clear();
      net.advance_to(net.now(), done);  // the arrivals start now
      drop_done();
      const Seconds t0 = net.now();
      const Seconds te = net.next_event_time();
      if (te == FlowNetwork::kNever) continue;
      // The rates in force until te (flows start at now: no latency phase).
      const auto ref = textbook_max_min_rates(t, live);
      for (std::size_t i = 0; i < live.size(); ++i) {
        ASSERT_NEAR(net.rate(live[i].id), ref[i], 1e-9 * ref[i] + 1e-3)
            << "seed " << seed << " round " << round << " flow " << i << " of " << live.size();
        for (LinkId l : live[i].path) expected_bytes[l] += ref[i] * live[i].weight * (te - t0);
      }
      done.clear();
      net.advance_to(te, done);
      ASSERT_FALSE(done.empty());
      drop_done();
      for (LinkId l : links)
        ASSERT_NEAR(net.link_bytes(l), expected_bytes[l], 1e-9 * expected_bytes[l] + 1)
            << "seed " << seed << " round " << round << " link " << l;
    }
    // Whatever is left runs out; no flow is lost.
    net.run_until_idle(&done);
    EXPECT_EQ(net.num_unfinished(), 0u) << "seed " << seed;
  }
}

// The re-fill set (hw/net/flow_network.h, "Which flows a solve re-fills") on networks
// where narrow links (1-9 GB/s) and wide ones (20-60 GB/s) mix, so that many links are
// not saturated: removals of fast and slow flows, cancellations in bursts, and links
// that a re-fill newly saturates (the filling must be repeated, counted by refills).
// Every rate must equal the textbook's after every event.
TEST(FlowNetworkReference, ReFillSetOnMixedCapacitiesMatchesATextbookSolve) {
  std::uint64_t refills = 0, solves = 0;
  for (unsigned seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    Topology t;
    std::vector<VertexId> vs;
    for (int i = 0; i < 8; ++i) vs.push_back(t.add_vertex(VertexKind::gpu, "v" + std::to_string(i), i));
    std::vector<LinkId> links;
    const int nl = 5 + static_cast<int>(rng() % 8);
    for (int i = 0; i < nl; ++i) {
      const double cap = rng() % 3 == 0 ? (20 + rng() % 41) * kGB : (1 + rng() % 9) * kGB;
      links.push_back(t.connect(vs[i % 8], vs[(i + 1) % 8], cap, 0));
    }
    FlowNetwork net(t);
    std::vector<RefFlow> live;
    std::vector<FlowId> done;
    for (int round = 0; round < 100; ++round) {
      for (int a = static_cast<int>(rng() % 5); a > 0; --a) {
        const std::vector<LinkId> p = testing::random_path(links, rng, 4);
        const std::uint32_t w = 1 + rng() % 3;
        live.push_back({net.add_flow(p, (1 + rng() % 300) * 1e6, net.now(), 0, false, w), p, w});
      }
      for (int c = static_cast<int>(rng() % 3); c > 0; --c) cancel_sometimes(net, live, rng, 2);
      check_round(net, t, live, done, fmt::format("seed {} round {}", seed, round));
      if (HasFatalFailure()) return;
    }
    net.run_until_idle(&done);
    EXPECT_EQ(net.num_unfinished(), 0u) << "seed " << seed;
    refills += net.solve_stats().refills;
    solves += net.solve_stats().solves;
  }
  // The repeated filling was exercised (a link left out of the search saturated).
  EXPECT_GT(refills, 5u) << "of " << solves << " solves";
}

// Paths longer than the links a flow stores inline (FlowNetwork::kInlineHops = 16) keep
// theirs out of line: mixing short and long paths (1 to 30 links of a 40-link ring) must
// still give the textbook rates, through arrivals, cancellations and completions.
TEST(FlowNetworkReference, LongPathsStoredOutOfLineMatchATextbookSolve) {
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    Topology t;
    constexpr int kRing = 40;
    std::vector<VertexId> vs;
    for (int i = 0; i < kRing; ++i) vs.push_back(t.add_vertex(VertexKind::gpu, "v" + std::to_string(i), i));
    std::vector<LinkId> links;
    for (int i = 0; i < kRing; ++i) links.push_back(t.connect(vs[i], vs[(i + 1) % kRing], (1 + rng() % 9) * kGB, 0));
    FlowNetwork net(t);
    std::vector<RefFlow> live;
    std::vector<FlowId> done;
    int long_paths = 0;
    for (int round = 0; round < 60; ++round) {
      for (int a = static_cast<int>(rng() % 5); a > 0; --a) {
        const int first = static_cast<int>(rng() % kRing);
        const int len = 1 + static_cast<int>(rng() % 30);
        std::vector<LinkId> p;
        for (int j = 0; j < len; ++j) p.push_back(links[(first + j) % kRing]);
        long_paths += len > 16;
        const std::uint32_t w = 1 + rng() % 3;
        live.push_back({net.add_flow(p, (1 + rng() % 200) * 1e6, net.now(), 0, false, w), p, w});
      }
      cancel_sometimes(net, live, rng, 4);
      check_round(net, t, live, done, fmt::format("seed {} round {}", seed, round));
      if (HasFatalFailure()) return;
    }
    EXPECT_GT(long_paths, 10) << "seed " << seed;  // the out-of-line case was exercised
    net.run_until_idle(&done);
    EXPECT_EQ(net.num_unfinished(), 0u) << "seed " << seed;
  }
}

}  // namespace
}  // namespace ptsim::hw::net
