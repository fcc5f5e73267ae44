// FlowNetwork weighted flows: one entry of weight k must behave exactly like k
// identical flows (same path, size and start) in a per-flow solve — the same rate for
// each, the same completion time, the same link and tag bytes — on random small
// networks, through arrivals, latencies, completions and cancellations.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "hw/net/flow_network.h"
#include "hw/units.h"

namespace ptsim::hw::net {
namespace {


TEST(FlowNetworkWeighted, KFlowClassTakesKShares) {
  // One link of 4 GB/s: a weight-3 entry and a single flow get 1 GB/s each, as four
  // separate flows would; the weighted one moves 3 × its bytes.
  Topology t;
  const VertexId a = t.add_vertex(VertexKind::gpu, "a", 0), b = t.add_vertex(VertexKind::gpu, "b", 1);
  const LinkId l = t.connect(a, b, 4 * kGB, 0);
  FlowNetwork net(t);
  const std::vector<LinkId> p = {l};
  const FlowId three = net.add_flow(p, 1 * kGB, 0, 0, true, 3);
  const FlowId one = net.add_flow(p, 2 * kGB, 0, 1);
  std::vector<FlowId> done;
  net.advance_to(0, done);
  EXPECT_DOUBLE_EQ(net.rate(three), 1 * kGB);
  EXPECT_DOUBLE_EQ(net.rate(one), 1 * kGB);
  EXPECT_DOUBLE_EQ(net.run_until_idle(&done), 1.0 + 1.0 / 4.0);  // then the single flow has the link alone
  EXPECT_EQ(done, (std::vector<FlowId>{three, one}));
  EXPECT_NEAR(net.link_bytes(l), 5 * kGB, 1);
  EXPECT_NEAR(net.tag_bytes(0), 3 * kGB, 1);
  EXPECT_NEAR(net.tag_bytes(1), 2 * kGB, 1);
}

// A random workload of flow classes on a random small network, run once with one
// weighted entry per class and once with every flow on its own; the two must agree
// at every event.
void compare_weighted_with_per_flow(unsigned seed) {
  std::mt19937 rng(seed);
  Topology t;
  const int nv = 6 + static_cast<int>(rng() % 5);
  std::vector<VertexId> vs;
  for (int i = 0; i < nv; ++i) vs.push_back(t.add_vertex(VertexKind::gpu, "v" + std::to_string(i), i));
  std::vector<LinkId> links;
  const int nl = 5 + static_cast<int>(rng() % 10);
  for (int i = 0; i < nl; ++i) {
    const int s = static_cast<int>(rng() % nv);
    const int d = (s + 1 + static_cast<int>(rng() % (nv - 1))) % nv;
    links.push_back(t.connect(vs[s], vs[d], (1 + rng() % 12) * kGB, (rng() % 3) * 1e-6));
  }
  struct Class {
    std::vector<LinkId> path;
    Bytes bytes;
    Seconds start;
    int tag;
    std::uint32_t k;
  };
  std::vector<Class> classes;
  const int nc = 3 + static_cast<int>(rng() % 12);
  for (int c = 0; c < nc; ++c) {
    Class x;
    const int len = static_cast<int>(rng() % 4);  // 0: loopback
    for (int j = 0; j < len; ++j) {
      const LinkId l = links[rng() % links.size()];
      if (std::find(x.path.begin(), x.path.end(), l) == x.path.end()) x.path.push_back(l);
    }
    x.bytes = (rng() % 8 == 0) ? 0.0 : (1 + rng() % 1000) * 1e6;
    x.start = (rng() % 5) * 1e-3;
    x.tag = static_cast<int>(rng() % 3);
    x.k = 1 + rng() % 5;
    classes.push_back(std::move(x));
  }
  FlowNetwork agg(t), per(t);
  std::vector<FlowId> agg_id(nc);
  std::vector<std::vector<FlowId>> per_ids(nc);
  std::map<FlowId, int> agg_class, per_class;
  // Classes are added in start order at their start, so some arrive mid-run.
  std::vector<int> order(nc);
  for (int c = 0; c < nc; ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return classes[a].start < classes[b].start; });
  std::size_t next = 0;
  std::vector<FlowId> done_agg, done_per;
  std::vector<int> live_count(nc, 0);
  const int cancel_class = (rng() % 2) ? static_cast<int>(rng() % nc) : -1;
  bool cancelled = false;
  for (int guard = 0; guard < 10000; ++guard) {
    Seconds t_next = agg.next_event_time();
    if (next < order.size()) t_next = std::min(t_next, classes[order[next]].start);
    const Seconds t_per = per.next_event_time();
    if (t_next == FlowNetwork::kNever) {
      ASSERT_EQ(t_per, FlowNetwork::kNever);
      break;
    }
    if (next == order.size() || t_next < classes[order[next]].start)
      ASSERT_NEAR(t_per, t_next, 1e-12 + 1e-12 * t_next) << "seed " << seed;
    done_agg.clear();
    done_per.clear();
    agg.advance_to(t_next, done_agg);
    per.advance_to(t_next, done_per);
    // Completed classes: all k copies at once.
    std::map<int, int> finished;
    for (FlowId f : done_agg) finished[agg_class.at(f)] += 0;
    for (FlowId f : done_per) ++finished[per_class.at(f)];
    for (const auto& entry : finished) {
      const int c = entry.first, n = entry.second;  // not a structured binding: clang 14 cannot capture one
      ASSERT_EQ(n, static_cast<int>(classes[c].k)) << "seed " << seed << " class " << c;
      ASSERT_TRUE(std::find_if(done_agg.begin(), done_agg.end(), [&](FlowId f) { return agg_class.at(f) == c; }) !=
                  done_agg.end())
          << "seed " << seed << " class " << c;
      live_count[c] = 0;
    }
    for (FlowId f : done_agg) agg_class.erase(f);
    for (FlowId f : done_per) per_class.erase(f);
    while (next < order.size() && classes[order[next]].start <= agg.now()) {
      const int c = order[next++];
      const Class& x = classes[c];
      agg_id[c] = agg.add_flow(x.path, x.bytes, x.start, x.tag, true, x.k);
      agg_class[agg_id[c]] = c;
      per_ids[c].clear();
      for (std::uint32_t i = 0; i < x.k; ++i) {
        per_ids[c].push_back(per.add_flow(x.path, x.bytes, x.start, x.tag));
        per_class[per_ids[c].back()] = c;
      }
      live_count[c] = static_cast<int>(x.k);
    }
    if (!cancelled && cancel_class >= 0 && live_count[cancel_class] > 0 && agg.now() > 2e-3) {
      agg.cancel(agg_id[cancel_class]);
      agg_class.erase(agg_id[cancel_class]);
      for (FlowId f : per_ids[cancel_class]) {
        per.cancel(f);
        per_class.erase(f);
      }
      live_count[cancel_class] = 0;
      cancelled = true;
    }
    // Every live class: each copy's rate and remaining bytes equal the entry's.
    for (int c = 0; c < nc; ++c) {
      if (live_count[c] == 0) continue;
      const double r = agg.rate(agg_id[c]);
      for (FlowId f : per_ids[c]) {
        ASSERT_NEAR(per.rate(f), r, 1e-9 * kGB) << "seed " << seed << " class " << c;
        ASSERT_NEAR(per.remaining(f), agg.remaining(agg_id[c]), 1e-3) << "seed " << seed << " class " << c;
      }
    }
    for (LinkId l : links) ASSERT_NEAR(agg.link_bytes(l), per.link_bytes(l), 1e-3 + 1e-9 * per.link_bytes(l));
    for (int tag = 0; tag < 3; ++tag)
      ASSERT_NEAR(agg.tag_bytes(tag), per.tag_bytes(tag), 1e-3 + 1e-9 * per.tag_bytes(tag));
  }
  EXPECT_EQ(agg.num_unfinished(), 0u);
  EXPECT_EQ(per.num_unfinished(), 0u);
  EXPECT_NEAR(agg.now(), per.now(), 1e-12 + 1e-12 * per.now());
  for (LinkId l : links) EXPECT_NEAR(agg.link_busy_time(l), per.link_busy_time(l), 1e-12);
}

TEST(FlowNetworkWeighted, MatchesAPerFlowSolveOnRandomNetworks) {
  for (unsigned seed = 1; seed <= 200; ++seed) {
    compare_weighted_with_per_flow(seed);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace ptsim::hw::net
