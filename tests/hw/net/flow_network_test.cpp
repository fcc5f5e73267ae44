// Max-min link sharing with hand-derived shares (SimGrid maxmin_test.cpp habit).
#include <gtest/gtest.h>

#include "hw/errors.h"
#include "hw/net/cluster.h"
#include "hw/net/flow_network.h"
#include "hw/units.h"
#include "hw/net/layout.h"
#include "hw/net/routing.h"

namespace ptsim::hw::net {
namespace {


TEST(FlowNetwork, TwoFlowsOnOneLinkGetHalfEach) {
  Topology t;
  VertexId a = t.add_vertex(VertexKind::gpu, "a", 0), b = t.add_vertex(VertexKind::gpu, "b", 1);
  const LinkId ab = t.connect(a, b, 10 * kGB, 0);
  FlowNetwork net(t);
  const std::vector<LinkId> path = {ab};
  FlowId f1 = net.add_flow(path, 1 * kGB, 0), f2 = net.add_flow(path, 1 * kGB, 0);
  std::vector<FlowId> done;
  net.advance_to(0, done);  // activate
  // B/2 = 5 GB/s each; 1 GB takes 0.2 s.
  EXPECT_DOUBLE_EQ(net.rate(f1), 5 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(f2), 5 * kGB);
  EXPECT_NEAR(net.next_event_time(), 0.2, 1e-12);
  net.run_until_idle(&done);
  EXPECT_EQ(done.size(), 2u);
  EXPECT_NEAR(net.now(), 0.2, 1e-12);
  EXPECT_NEAR(net.link_bytes(ab), 2 * kGB, 1);
  EXPECT_NEAR(net.link_busy_time(ab), 0.2, 1e-12);
  // The reverse direction is a separate link and saw nothing.
  EXPECT_EQ(net.link_bytes(ab + 1), 0);
}

// a -10 GB/s- b -4 GB/s- c, and the paths a->c and a->b.
struct Line {
  Topology t;
  LinkId ab = 0, bc = 0;
  std::vector<LinkId> a_to_c, a_to_b;
  Line() {
    const VertexId a = t.add_vertex(VertexKind::gpu, "a", 0), b = t.add_vertex(VertexKind::leaf, "b"),
                   c = t.add_vertex(VertexKind::gpu, "c", 1);
    ab = t.connect(a, b, 10 * kGB, 0);
    bc = t.connect(b, c, 4 * kGB, 0);
    a_to_c = {ab, bc};
    a_to_b = {ab};
  }
};

// A flow alone on every link of its path gets its tightest link's capacity / weight at
// activation, without a solve; the next flow on one of those links brings the solver
// back, which then re-fills both.
TEST(FlowNetwork, AFlowAloneOnItsLinksIsSolvedWithoutASolve) {
  const Line line;
  FlowNetwork net(line.t);
  const FlowId f1 = net.add_flow(line.a_to_c, 8 * kGB, 0, 0, true, 2);  // two identical flows: 4 / 2 on bc
  std::vector<FlowId> done;
  net.advance_to(0, done);
  EXPECT_DOUBLE_EQ(net.rate(f1), 2 * kGB);
  EXPECT_EQ(net.solve_stats().solves, 0u);
  const FlowId f2 = net.add_flow(line.a_to_b, 6 * kGB, 0);
  net.advance_to(0, done);
  EXPECT_EQ(net.solve_stats().solves, 1u);
  EXPECT_DOUBLE_EQ(net.rate(f1), 2 * kGB);  // bc still binds it; f2 takes ab's 10 - 2·2
  EXPECT_DOUBLE_EQ(net.rate(f2), 6 * kGB);
  // A path through one link twice takes two shares there: solved as usual.
  FlowNetwork n2(line.t);
  const std::vector<LinkId> twice = {line.ab, line.ab};
  const FlowId f3 = n2.add_flow(twice, 1 * kGB, 0);
  n2.advance_to(0, done);
  EXPECT_DOUBLE_EQ(n2.rate(f3), 5 * kGB);
  EXPECT_EQ(n2.solve_stats().solves, 1u);
}

// Two queue pairs of one connection that move in lockstep (add_flow's copies): one
// flow over the links of both paths, a->c and a->b, so it takes two shares on ab, with
// ab listed twice or once with multiplicity 2. On a -10 GB/s- b -2 GB/s- c, bc holds it
// at 2 GB/s per queue pair; a flow a->b then gets ab's 10 - 2·2 = 6 GB/s (as two
// independent flows the a->b queue pair would take 4 of it). Its tag counts both queue
// pairs' bytes.
TEST(FlowNetwork, LockstepQueuePairsAreOneFlowOverTheirPaths) {
  Topology t;
  const VertexId a = t.add_vertex(VertexKind::gpu, "a", 0), b = t.add_vertex(VertexKind::leaf, "b"),
                 c = t.add_vertex(VertexKind::gpu, "c", 1);
  const LinkId ab = t.connect(a, b, 10 * kGB, 0), bc = t.connect(b, c, 2 * kGB, 0);
  const std::vector<LinkId> listed = {ab, bc, ab}, once = {ab, bc}, a_to_b = {ab};
  const std::vector<std::uint16_t> twice_on_ab = {2, 1};
  for (const bool with_mult : {false, true}) {
    FlowNetwork net(t);
    const FlowId f = with_mult ? net.add_flow(once, 1 * kGB, 0, /*tag=*/1, true, 1, /*copies=*/2, twice_on_ab)
                               : net.add_flow(listed, 1 * kGB, 0, /*tag=*/1, true, 1, /*copies=*/2);
    const FlowId g = net.add_flow(a_to_b, 6 * kGB, 0, /*tag=*/2);
    std::vector<FlowId> done;
    net.advance_to(0, done);
    EXPECT_DOUBLE_EQ(net.rate(f), 2 * kGB) << with_mult;
    EXPECT_DOUBLE_EQ(net.rate(g), 6 * kGB) << with_mult;
    net.run_until_idle(&done);
    // f: 1 GB at 2 GB/s, done at 0.5 s; g: 3 GB by then, the other 3 at 10 GB/s: 0.8 s.
    EXPECT_NEAR(net.now(), 0.8, 1e-12) << with_mult;
    EXPECT_NEAR(net.tag_bytes(1), 2 * kGB, 1) << with_mult;
    EXPECT_NEAR(net.link_bytes(ab), 2 * kGB + 6 * kGB, 1) << with_mult;
    EXPECT_NEAR(net.link_bytes(bc), 1 * kGB, 1) << with_mult;
    // Alone, the multiplicity counts too: 10 / 2 on ab, against 2 on bc.
    const FlowId h = net.add_flow(once, 1 * kGB, net.now(), 0, true, 1, 2, std::vector<std::uint16_t>{2, 1});
    net.advance_to(net.now(), done);
    EXPECT_DOUBLE_EQ(net.rate(h), 2 * kGB);
    const FlowId k = net.add_flow(a_to_b, 1 * kGB, net.now(), 0, true, 1, 1, std::vector<std::uint16_t>{4});
    net.run_until_idle(&done);
    EXPECT_NEAR(net.link_bytes(ab), 8 * kGB + 2 * kGB + 4 * kGB, 1) << with_mult;  // k's four lockstep shares
    (void)k;
    EXPECT_THROW(net.add_flow(a_to_b, 1, net.now(), 0, true, 1, 0), InternalError);
    EXPECT_THROW(net.add_flow(a_to_b, 1, net.now(), 0, true, 1, 1, std::vector<std::uint16_t>{1, 1}), InternalError);
    EXPECT_THROW(net.add_flow(a_to_b, 1, net.now(), 0, true, 1, 1, std::vector<std::uint16_t>{0}), InternalError);
  }
}

TEST(FlowNetwork, BottleneckedFlowLeavesCapacityToOthers) {
  // a -10 GB/s- b -4 GB/s- c. f1: a->c, f2: a->b, 8 GB and 6 GB.
  const Line line;
  const Topology& t = line.t;
  const LinkId ab = line.ab, bc = line.bc;
  FlowNetwork net(t);
  const std::vector<LinkId> p1 = {ab, bc}, p2 = {ab};
  FlowId f1 = net.add_flow(p1, 8 * kGB, 0), f2 = net.add_flow(p2, 6 * kGB, 0);
  std::vector<FlowId> done;
  net.advance_to(0, done);
  // Fair shares: ab 10/2 = 5, bc 4/1 = 4 -> bc saturates first: f1 = 4; ab keeps 10 - 4 = 6 for f2.
  EXPECT_DOUBLE_EQ(net.rate(f1), 4 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(f2), 6 * kGB);
  // f2: 6 GB / 6 GB/s = 1 s. f1 then has 8 - 4 = 4 GB left at 4 GB/s (bc) -> done at 2 s.
  net.advance_to(net.next_event_time(), done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], f2);
  EXPECT_NEAR(net.now(), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(net.rate(f1), 4 * kGB);
  net.run_until_idle(&done);
  EXPECT_NEAR(net.now(), 2.0, 1e-12);
  // A third flow b->c splits bc: f1 = f3 = 2 GB/s, and f2 then gets ab's 10 - 2 = 8.
  FlowNetwork n2(t);
  const std::vector<LinkId> p3 = {bc};
  FlowId g1 = n2.add_flow(p1, 1 * kGB, 0), g2 = n2.add_flow(p2, 1 * kGB, 0), g3 = n2.add_flow(p3, 1 * kGB, 0);
  n2.advance_to(0, done);
  EXPECT_DOUBLE_EQ(n2.rate(g1), 2 * kGB);
  EXPECT_DOUBLE_EQ(n2.rate(g2), 8 * kGB);
  EXPECT_DOUBLE_EQ(n2.rate(g3), 2 * kGB);
}

TEST(FlowNetwork, LatencyComesBeforeBandwidthAndCancelFreesTheLink) {
  Topology t;
  VertexId a = t.add_vertex(VertexKind::gpu, "a", 0), b = t.add_vertex(VertexKind::gpu, "b", 1);
  const LinkId ab = t.connect(a, b, 1 * kGB, 1e-3);
  FlowNetwork net(t);
  const std::vector<LinkId> path = {ab};
  FlowId f1 = net.add_flow(path, 1 * kGB, 0);
  // Active at 1 ms; alone it would finish at 1 ms + 1 s.
  EXPECT_NEAR(net.next_event_time(), 1e-3, 1e-15);
  FlowId f2 = net.add_flow(path, 1 * kGB, 0);
  std::vector<FlowId> done;
  net.advance_to(0.5, done);
  EXPECT_DOUBLE_EQ(net.rate(f1), 0.5 * kGB);
  // Cancel f2 at 0.5 s: f1 has moved 0.499 s x 0.5 GB/s = 0.2495 GB; the rest at 1 GB/s
  // takes 0.7505 s -> done at 1.2505 s.
  net.cancel(f2);
  EXPECT_NEAR(net.remaining(f1), 1 * kGB - 0.2495 * kGB, 1);
  EXPECT_NEAR(net.next_event_time(), 1.2505, 1e-9);
  net.run_until_idle(&done);
  EXPECT_EQ(done, std::vector<FlowId>{f1});
  EXPECT_THROW(net.cancel(f1), InternalError);
  EXPECT_THROW(net.add_flow(path, -1, net.now()), InternalError);
  EXPECT_THROW(net.add_flow(path, 1, net.now() - 1), InternalError);
}

TEST(FlowNetwork, DpAllReduceAndPpSendOnOneNicSlowEachOther) {
  // Two single-GPU nodes under one leaf, one 25 GB/s NIC each, no latency.
  ClusterNetSpec s;
  s.num_gpus = 2;
  s.gpus_per_node = 1;
  s.nics_per_node = 1;
  s.inter_latency = 0;
  Topology t = build_cluster(s);
  Router r(t);
  const auto path = r.route_ranks(0, 1);
  FlowNetwork alone(t);
  alone.add_flow(path, 1 * kGB, 0, static_cast<int>(Dim::dp));
  // Alone: 1 GB / 25 GB/s = 40 ms.
  EXPECT_NEAR(alone.run_until_idle(), 0.04, 1e-12);
  FlowNetwork net(t);
  FlowId dp = net.add_flow(path, 1 * kGB, 0, static_cast<int>(Dim::dp));
  FlowId pp = net.add_flow(path, 0.5 * kGB, 0, static_cast<int>(Dim::pp));
  std::vector<FlowId> done;
  // Shared NIC: 12.5 GB/s each. PP: 0.5 GB / 12.5 = 40 ms (alone 20 ms). DP: 0.5 GB by then,
  // the other 0.5 GB at 25 GB/s = 20 ms more -> 60 ms (alone 40 ms).
  net.advance_to(net.next_event_time(), done);
  net.advance_to(net.next_event_time(), done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0], pp);
  EXPECT_NEAR(net.now(), 0.04, 1e-12);
  net.run_until_idle(&done);
  EXPECT_EQ(done.back(), dp);
  EXPECT_NEAR(net.now(), 0.06, 1e-12);
  EXPECT_NEAR(net.tag_bytes(static_cast<int>(Dim::dp)), 1 * kGB, 1);
  EXPECT_NEAR(net.tag_bytes(static_cast<int>(Dim::pp)), 0.5 * kGB, 1);
  EXPECT_EQ(net.tag_bytes(static_cast<int>(Dim::tp)), 0);
}

TEST(FlowNetwork, OversubscriptionSlowsCrossLeafTraffic) {
  // Radix 4: 2 single-NIC nodes per leaf; nodes 0,1 on leaf0, nodes 2,3 on leaf1.
  ClusterNetSpec s;
  s.num_gpus = 4;
  s.gpus_per_node = 1;
  s.nics_per_node = 1;
  s.inter_latency = 0;
  s.switch_radix = 4;
  auto run = [&](double oversub, bool same_leaf) {
    s.oversubscription = oversub;
    Topology t = build_cluster(s);
    Router r(t);
    FlowNetwork net(t);
    const int d0 = same_leaf ? 1 : 2, d1 = same_leaf ? 0 : 3;
    auto p0 = r.route_ranks(0, d0, 0);
    // Full bisection has 2 spines: give the second flow a path through the other spine,
    // as ECMP would for distinct flows that hash apart.
    std::vector<LinkId> p1;
    for (std::uint64_t f = 0; f < 64; ++f) {
      p1 = r.route_ranks(1, d1, f);
      if (same_leaf || t.link(p1[3]).dst != t.link(p0[3]).dst) break;
    }
    net.add_flow(p0, 1 * kGB, 0);
    net.add_flow(p1, 1 * kGB, 0);
    return net.run_until_idle();
  };
  // 1:1 -> 2 uplinks of 25 GB/s, one flow each: 1 GB / 25 GB/s = 40 ms.
  EXPECT_NEAR(run(1.0, false), 0.04, 1e-12);
  // 2:1 -> round(2/2) = 1 uplink of 2*25/2 = 25 GB/s shared by both: 12.5 GB/s -> 80 ms.
  EXPECT_NEAR(run(2.0, false), 0.08, 1e-12);
  // Traffic inside a leaf does not cross the uplinks: still 40 ms at 2:1.
  EXPECT_NEAR(run(2.0, true), 0.04, 1e-12);
}

}  // namespace
}  // namespace ptsim::hw::net
