// FlowNetwork's re-fill set (hw/net/flow_network.h, "Which flows a solve re-fills"):
// a removal seeds the re-fill only at links that were saturated, the search grows only
// through saturated links and takes only their flows at the top rate, and a link the
// filling saturates below a kept flow's rate is searched after all.
// Each case checks the rates against the max-min solution worked out by hand and the
// re-filled flows counted by solve_stats().
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hw/net/flow_network.h"
#include "hw/units.h"

namespace ptsim::hw::net {
namespace {

// Links A and B (the flows' bottlenecks) joined by a shared link C: f1, f2 on A; g1, g2
// on B; f1 and g1 also cross C.
struct Rig {
  Topology t;
  LinkId a = 0, b = 0, c = 0;
  Rig(BytesPerSecond cap_a, BytesPerSecond cap_b, BytesPerSecond cap_c) {
    std::vector<VertexId> v;
    for (int i = 0; i < 4; ++i) v.push_back(t.add_vertex(VertexKind::gpu, "v" + std::to_string(i), i));
    a = t.connect(v[0], v[1], cap_a, 0);
    b = t.connect(v[1], v[2], cap_b, 0);
    c = t.connect(v[2], v[3], cap_c, 0);
  }
};

struct Flows {
  FlowId f1, f2, g1, g2;
};

Flows start(FlowNetwork& net, const Rig& r) {
  const std::vector<LinkId> ac = {r.a, r.c}, a = {r.a}, bc = {r.b, r.c}, b = {r.b};
  Flows x{net.add_flow(ac, 1e3 * kGB, 0), net.add_flow(a, 1e3 * kGB, 0), net.add_flow(bc, 1e3 * kGB, 0),
          net.add_flow(b, 1e3 * kGB, 0)};
  std::vector<FlowId> done;
  net.advance_to(0, done);
  return x;
}

TEST(FlowNetworkRefill, ARemovalReFillsOnlyTheFlowsOfItsSaturatedLinks) {
  // A = B = 10 GB/s, C = 100 GB/s: every flow 5 GB/s, C carries 10 of 100. Cancelling
  // f2 speeds f1 up to 10 GB/s; C stays far from full, so g1 and g2 (reachable through
  // C, at the level of the change) keep their rates and are not re-filled.
  Rig r(10 * kGB, 10 * kGB, 100 * kGB);
  FlowNetwork net(r.t);
  const Flows x = start(net, r);
  EXPECT_DOUBLE_EQ(net.rate(x.f1), 5 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(x.g1), 5 * kGB);
  const auto before = net.solve_stats();
  net.cancel(x.f2);
  EXPECT_DOUBLE_EQ(net.rate(x.f1), 10 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(x.g1), 5 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(x.g2), 5 * kGB);
  const auto after = net.solve_stats();
  EXPECT_EQ(after.solves - before.solves, 1u);
  EXPECT_EQ(after.flows - before.flows, 1u);  // f1 only
  EXPECT_EQ(after.refills, before.refills);
}

TEST(FlowNetworkRefill, ARemovedFlowsUnsaturatedLinkSeedsNothing) {
  // The same rig; cancel f1, which crosses A (saturated) and C (10 of 100 GB/s). Only A
  // seeds the re-fill: f2 goes to 10 GB/s; g1 and g2, reachable through C at the
  // level of the change (5 GB/s), are not re-filled and keep 5 GB/s.
  Rig r(10 * kGB, 10 * kGB, 100 * kGB);
  FlowNetwork net(r.t);
  const Flows x = start(net, r);
  const auto before = net.solve_stats();
  net.cancel(x.f1);
  EXPECT_DOUBLE_EQ(net.rate(x.f2), 10 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(x.g1), 5 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(x.g2), 5 * kGB);
  const auto after = net.solve_stats();
  EXPECT_EQ(after.flows - before.flows, 1u);  // f2 only
  EXPECT_EQ(after.links - before.links, 1u);  // A only
}

TEST(FlowNetworkRefill, ALinkTheFillingSaturatesIsSearchedAndFilledAgain) {
  // A = 10, B = 20, C = 16 GB/s: f1, f2 5 GB/s (A), g1, g2 10 GB/s (B); C carries 15 of
  // 16. Cancelling f2 re-fills f1 alone first (C was not saturated): C's 16 - 10 (g1)
  // would cap f1 at 6 GB/s and saturate C, where g1 is faster. The check after the
  // filling searches C and fills again: f1 = g1 = 8 GB/s on C, g2 = 12 GB/s on B.
  Rig r(10 * kGB, 20 * kGB, 16 * kGB);
  FlowNetwork net(r.t);
  const Flows x = start(net, r);
  EXPECT_DOUBLE_EQ(net.rate(x.f1), 5 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(x.g1), 10 * kGB);
  const auto before = net.solve_stats();
  net.cancel(x.f2);
  EXPECT_DOUBLE_EQ(net.rate(x.f1), 8 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(x.g1), 8 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(x.g2), 12 * kGB);
  const auto after = net.solve_stats();
  EXPECT_EQ(after.refills - before.refills, 1u);
  EXPECT_EQ(after.flows - before.flows, 3u);
}

TEST(FlowNetworkRefill, ARemovalReFillsOnlyTheFlowsAtTheTopRateOfASaturatedLink) {
  // The rig's links as a star: h crosses B alone, g crosses A and B, k crosses B and C.
  // B = 10, A = 3, C = 1 GB/s: k = 1 (C), g = 3 (A), h = 6 GB/s (B, saturated). Cancelling
  // k (level 1 GB/s) re-fills h alone, the one at B's top rate: g, at or above the level
  // but bottlenecked on A, keeps 3 GB/s and reserves it; h goes to 7 GB/s.
  Rig r(3 * kGB, 10 * kGB, 1 * kGB);
  FlowNetwork net(r.t);
  const std::vector<LinkId> hc = {r.b}, gc = {r.a, r.b}, kc = {r.b, r.c};
  const FlowId h = net.add_flow(hc, 1e3 * kGB, 0), g = net.add_flow(gc, 1e3 * kGB, 0),
               k = net.add_flow(kc, 1e3 * kGB, 0);
  std::vector<FlowId> done;
  net.advance_to(0, done);
  EXPECT_DOUBLE_EQ(net.rate(h), 6 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(g), 3 * kGB);
  const auto before = net.solve_stats();
  net.cancel(k);
  EXPECT_DOUBLE_EQ(net.rate(h), 7 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(g), 3 * kGB);
  const auto after = net.solve_stats();
  EXPECT_EQ(after.flows - before.flows, 1u);  // h only
  EXPECT_EQ(after.refills, before.refills);
}

TEST(FlowNetworkRefill, AKeptFlowFasterThanTheNewShareIsReFilledToo) {
  // h crosses B alone, g crosses A and B. B = 12, A = 5 GB/s: g = 5 (A), h = 7 GB/s (B).
  // Two flows join B (level 12 / 4 = 3 GB/s): the first filling re-fills them and h (B's top
  // rate) on B's 12 - 5 = 7 GB/s left by g, 2.33 GB/s each, below g's 5 GB/s; the check
  // takes g too and fills again: all 3 GB/s.
  Rig r(5 * kGB, 12 * kGB, 1 * kGB);
  FlowNetwork net(r.t);
  const std::vector<LinkId> hc = {r.b}, gc = {r.a, r.b};
  const FlowId h = net.add_flow(hc, 1e3 * kGB, 0), g = net.add_flow(gc, 1e3 * kGB, 0);
  std::vector<FlowId> done;
  net.advance_to(0, done);
  EXPECT_DOUBLE_EQ(net.rate(h), 7 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(g), 5 * kGB);
  const auto before = net.solve_stats();
  const FlowId n1 = net.add_flow(hc, 1e3 * kGB, net.now()), n2 = net.add_flow(hc, 1e3 * kGB, net.now());
  net.advance_to(net.now(), done);
  for (FlowId f : {h, g, n1, n2}) EXPECT_DOUBLE_EQ(net.rate(f), 3 * kGB);
  const auto after = net.solve_stats();
  EXPECT_EQ(after.refills - before.refills, 1u);
  EXPECT_EQ(after.flows - before.flows, 4u);
}

}  // namespace
}  // namespace ptsim::hw::net
