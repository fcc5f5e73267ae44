// FlowNetwork at scale: the incremental solver (only the component touched by a
// change is re-filled), lazy progress and the epsilon rule must give the same
// answers as a from-scratch max-min allocation.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "hw/net/flow_network.h"
#include "hw/units.h"
#include "tests/hw/net/random_path.h"

namespace ptsim::hw::net {
namespace {


TEST(FlowNetworkIncremental, UntouchedComponentKeepsItsRateAndFinishTime) {
  // Links a (10 GB/s) and b (10 GB/s) share no flow: f1 alone on a, f2 and f3 on b.
  Topology t;
  const VertexId u = t.add_vertex(VertexKind::gpu, "u", 0), v = t.add_vertex(VertexKind::gpu, "v", 1);
  const VertexId w = t.add_vertex(VertexKind::gpu, "w", 2);
  const LinkId a = t.connect(u, v, 10 * kGB, 0), b = t.connect(v, w, 10 * kGB, 0);
  FlowNetwork net(t);
  const std::vector<LinkId> pa = {a}, pb = {b};
  const FlowId f1 = net.add_flow(pa, 1 * kGB, 0), f2 = net.add_flow(pb, 1 * kGB, 0), f3 = net.add_flow(pb, 1 * kGB, 0);
  std::vector<FlowId> done;
  net.advance_to(0.05, done);
  // f1: 10 GB/s; f2, f3: 5 GB/s each.
  EXPECT_DOUBLE_EQ(net.rate(f1), 10 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(f2), 5 * kGB);
  // Lazy progress read back at 50 ms: f1 moved 0.5 GB, f2 0.25 GB; link b carried 0.5 GB.
  EXPECT_NEAR(net.remaining(f1), 0.5 * kGB, 1);
  EXPECT_NEAR(net.remaining(f2), 0.75 * kGB, 1);
  EXPECT_NEAR(net.link_bytes(b), 0.5 * kGB, 1);
  EXPECT_NEAR(net.tag_bytes(0), 1.0 * kGB, 1);
  net.cancel(f3);
  // f2 alone on b: 10 GB/s, its 0.75 GB left end at 50 + 75 = 125 ms; f1 still ends at 100 ms.
  EXPECT_DOUBLE_EQ(net.rate(f2), 10 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(f1), 10 * kGB);
  EXPECT_NEAR(net.next_event_time(), 0.1, 1e-12);
  net.advance_to(net.next_event_time(), done);
  EXPECT_EQ(done, std::vector<FlowId>{f1});
  EXPECT_NEAR(net.run_until_idle(&done), 0.125, 1e-12);
  EXPECT_EQ(done.back(), f2);
  // Link b: 0.5 GB before the cancel + 0.75 GB after = 1.25 GB, busy all 125 ms.
  EXPECT_NEAR(net.link_bytes(b), 1.25 * kGB, 1);
  EXPECT_NEAR(net.link_busy_time(b), 0.125, 1e-12);
}

TEST(FlowNetworkIncremental, FlowDueWithinOneTickOfTCompletesAtT) {
  // At t = 20 s a 1 GB/s flow of 1.0000001 bytes would end 1.0000001 ns later:
  // after the epsilon but, in doubles, 20 + 1.0000001e-9 == 20 + 1e-9. It must complete
  // in advance_to(20 s) (it once spun forever there: the test for "done" re-divided
  // remaining / rate, which stays above the epsilon while no time passes).
  Topology t;
  const VertexId u = t.add_vertex(VertexKind::gpu, "u", 0), v = t.add_vertex(VertexKind::gpu, "v", 1);
  const LinkId a = t.connect(u, v, 1 * kGB, 0);
  FlowNetwork net(t);
  std::vector<FlowId> done;
  net.advance_to(20.0, done);
  const std::vector<LinkId> p = {a};
  const FlowId f = net.add_flow(p, 1.0000001, 20.0);
  net.advance_to(20.0, done);
  EXPECT_EQ(done, std::vector<FlowId>{f});
  EXPECT_EQ(net.num_unfinished(), 0u);
}

TEST(FlowNetworkIncremental, FlowsDueAtTheSameTimeCompleteInIdOrder) {
  // Three equal flows on three equal links end at the same time. Their ids come back
  // from the free list in reverse (2, 1, 0), so they are activated and scheduled in
  // that order; they must still be reported in id order, not in the order the solver
  // happened to schedule them (which a change to the solver's search would move).
  Topology t;
  std::vector<VertexId> v;
  for (int i = 0; i < 4; ++i) v.push_back(t.add_vertex(VertexKind::gpu, "v" + std::to_string(i), i));
  std::vector<LinkId> l;
  for (int i = 0; i < 3; ++i) l.push_back(t.connect(v[i], v[i + 1], 1 * kGB, 0));
  FlowNetwork net(t);
  std::vector<FlowId> first;
  for (int i = 0; i < 3; ++i) first.push_back(net.add_flow(std::vector<LinkId>{l[i]}, 1 * kGB, 0));
  for (FlowId id : first) net.cancel(id);
  std::vector<FlowId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(net.add_flow(std::vector<LinkId>{l[i]}, 1 * kGB, 0));
  ASSERT_EQ(ids, (std::vector<FlowId>{2, 1, 0}));
  std::vector<FlowId> done;
  net.run_until_idle(&done);
  EXPECT_EQ(done, (std::vector<FlowId>{0, 1, 2}));
}

TEST(FlowNetworkIncremental, MatchesAFromScratchSolveUnderChurn) {
  // 12 links of 1..12 GB/s, flows over random 1..4-link paths arrive, and some are
  // cancelled; after every change each rate must equal the one a fresh network
  // (solving everything at once) gives the same set of active flows.
  Topology t;
  std::vector<VertexId> vs;
  for (int i = 0; i < 13; ++i) vs.push_back(t.add_vertex(VertexKind::gpu, "v" + std::to_string(i), i));
  std::vector<LinkId> links;
  for (int i = 0; i < 12; ++i) links.push_back(t.connect(vs[i], vs[i + 1], (i + 1) * kGB, 0));
  FlowNetwork net(t);
  std::mt19937 rng(7);
  std::vector<std::pair<FlowId, std::vector<LinkId>>> live;
  std::vector<FlowId> done;
  Seconds now = 0;
  for (int step = 0; step < 300; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t k = rng() % live.size();
      if (net.unfinished(live[k].first)) net.cancel(live[k].first);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const std::vector<LinkId> p = testing::random_path(links, rng, 4);
      live.emplace_back(net.add_flow(p, 1e3 * kGB, now), p);  // large: none completes
    }
    now += 1e-3;
    net.advance_to(now, done);
    ASSERT_TRUE(done.empty());
    FlowNetwork fresh(t);
    std::vector<FlowId> ids;
    for (const auto& [id, p] : live) ids.push_back(fresh.add_flow(p, 1 * kGB, 0));
    fresh.advance_to(0, done);
    for (std::size_t i = 0; i < live.size(); ++i)
      ASSERT_NEAR(net.rate(live[i].first), fresh.rate(ids[i]), 1e-6 * kGB) << "step " << step << " flow " << i;
  }
}

TEST(FlowNetworkIncremental, LevelBoundedResolveMatchesAFromScratchSolveThroughCompletions) {
  // Random networks where flows of random sizes and weights arrive and complete at
  // many different times (the level-bounded re-solve keeps the rates below the level
  // of each change): at every event each live flow's rate must equal what a fresh
  // network, solving the same live flows with every flow on its own, gives it.
  for (unsigned seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    Topology t;
    std::vector<VertexId> vs;
    for (int i = 0; i < 8; ++i) vs.push_back(t.add_vertex(VertexKind::gpu, "v" + std::to_string(i), i));
    std::vector<LinkId> links;
    const int nl = 4 + static_cast<int>(rng() % 10);
    for (int i = 0; i < nl; ++i) links.push_back(t.connect(vs[i % 8], vs[(i + 1) % 8], (1 + rng() % 9) * kGB, 0));
    FlowNetwork net(t);
    struct Live {
      FlowId id;
      std::vector<LinkId> path;
      std::uint32_t weight;
    };
    std::vector<Live> live;
    std::vector<FlowId> done;
    for (int round = 0; round < 40; ++round) {
      // A few arrivals now, then run to the next event.
      const int arrivals = static_cast<int>(rng() % 4);
      for (int a = 0; a < arrivals; ++a) {
        const std::vector<LinkId> p = testing::random_path(links, rng, 4);
        const std::uint32_t w = 1 + rng() % 3;
        live.push_back({net.add_flow(p, (1 + rng() % 50) * 1e7, net.now(), 0, false, w), p, w});
      }
      const Seconds te = net.next_event_time();
      if (te == FlowNetwork::kNever) continue;
      done.clear();
      net.advance_to(te, done);
      std::erase_if(live, [&](const Live& x) { return std::find(done.begin(), done.end(), x.id) != done.end(); });
      FlowNetwork fresh(t);
      std::vector<FlowId> ids;
      for (const auto& x : live) {
        ids.push_back(fresh.add_flow(x.path, 1 * kGB, 0));
        for (std::uint32_t k = 1; k < x.weight; ++k) fresh.add_flow(x.path, 1 * kGB, 0);
      }
      std::vector<FlowId> none;
      fresh.advance_to(0, none);
      for (std::size_t i = 0; i < live.size(); ++i)
        ASSERT_NEAR(net.rate(live[i].id), fresh.rate(ids[i]), 1e-6 * kGB)
            << "seed " << seed << " round " << round << " flow " << i;
    }
  }
}

}  // namespace
}  // namespace ptsim::hw::net
