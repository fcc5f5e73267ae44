// Each algorithm's time on an idle network, derived by hand, checked three ways:
// the formula, collective_time() (analytical) and idle_network_time() (FlowNetwork).
#include <gtest/gtest.h>

#include <numeric>
#include <utility>

#include "hw/errors.h"
#include "hw/net/bottleneck.h"
#include "hw/net/busbw.h"
#include "hw/net/cluster.h"
#include "hw/net/collective_time.h"
#include "hw/net/selection.h"

namespace ptsim::hw::net {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::vector<int> iota(int n, int first = 0) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// One DGX node: 8 GPUs, 300 GB/s NVLink per direction, 1 us GPU to GPU.
Topology dgx(bool nvls = false) {
  ClusterNetSpec s;
  s.nvls = nvls;
  return build_cluster(s);
}

// n single-GPU nodes under one non-blocking leaf: 25 GB/s NICs, 2 us NIC to NIC.
Topology single_gpu_nodes(int n) {
  ClusterNetSpec s;
  s.num_gpus = n;
  s.gpus_per_node = 1;
  s.nics_per_node = 1;
  s.switch_radix = 64;
  return build_cluster(s);
}

void expect_time(const Expansion& e, Router& r, double want) {
  EXPECT_NEAR(collective_time(e, r), want, want * 1e-9);
  EXPECT_NEAR(idle_network_time(e, r), want, want * 1e-9);
}

TEST(Collectives, RingAllReduceInANode) {
  Topology t = dgx();
  Router r(t);
  const double S = 1024 * kMiB, a = 1e-6, B = 300e9;
  Expansion e = expand(CollectiveKind::all_reduce, iota(8), S, Algorithm::ring, t);
  // Compact: one step of 8 flows, repeated 2(n-1) = 14 times.
  ASSERT_EQ(e.steps.size(), 1u);
  EXPECT_EQ(e.steps[0].repeat, 14);
  EXPECT_EQ(e.steps[0].flows.size(), 8u);
  EXPECT_EQ(e.num_flows(), 112u);
  // 2(n-1)(α + S/(nB)) = 14 (1 us + 1 GiB / 2.4 TB/s).
  expect_time(e, r, 14 * (a + S / (8 * B)));
  // Each rank sends 2(n-1)/n S (CONTRACT §3 comm_bytes_per_gpu).
  EXPECT_DOUBLE_EQ(bytes_sent(e, t.gpu(3)), 2.0 * 7 / 8 * S);
  EXPECT_DOUBLE_EQ(bytes_sent(e, t.gpu(3)), wire_bytes_per_rank(CollectiveKind::all_reduce, 8, S));
  EXPECT_DOUBLE_EQ(bytes_received(e, t.gpu(3)), 2.0 * 7 / 8 * S);
}

TEST(Collectives, RingReduceScatterAndAllGather) {
  Topology t = dgx();
  Router r(t);
  const double S = 256 * kMiB, a = 1e-6, B = 300e9;
  // (n-1)(α + S/(nB)).
  expect_time(expand(CollectiveKind::reduce_scatter, iota(8), S, Algorithm::ring, t), r, 7 * (a + S / (8 * B)));
  expect_time(expand(CollectiveKind::all_gather, iota(4), S, Algorithm::ring, t), r, 3 * (a + S / (4 * B)));
}

TEST(Collectives, RingAllReduceAcrossNodes) {
  Topology t = single_gpu_nodes(4);
  Router r(t);
  const double S = 64 * kMiB, a = 2e-6, B = 25e9;
  // Every ring hop crosses the leaf on its own NIC links: 2(n-1)(α + S/(nB)), α = 2 us.
  expect_time(expand(CollectiveKind::all_reduce, iota(4), S, Algorithm::ring, t), r, 6 * (a + S / (4 * B)));
}

TEST(Collectives, QueuePairsSplitOnlyTheFlowsBetweenNodes) {
  // Two DGX nodes, a ring all-gather over all 16 GPUs: 2 of the 16 ring edges cross
  // the network. With 4 queue pairs per connection those become 4 flows of a quarter
  // of the bytes each; the 14 NVLink edges stay one flow; every GPU sends what it did.
  ClusterNetSpec spec;
  spec.num_gpus = 16;
  Topology t = build_cluster(spec);
  const double S = 64 * kMiB;
  ExpandOptions four;
  four.qps = 4;
  const auto one = expand(CollectiveKind::all_gather, iota(16), S, Algorithm::ring, t);
  const auto split = expand(CollectiveKind::all_gather, iota(16), S, Algorithm::ring, t, four);
  ASSERT_EQ(one.steps.size(), split.steps.size());
  for (std::size_t i = 0; i < one.steps.size(); ++i) {
    EXPECT_EQ(split.steps[i].flows.size(), one.steps[i].flows.size() + 2 * 3);
    for (const Flow& f : split.steps[i].flows) {
      const bool across = t.node(f.src) != t.node(f.dst);
      EXPECT_DOUBLE_EQ(f.bytes, one.steps[i].flows.front().bytes / (across ? 4 : 1));
    }
  }
  for (int r = 0; r < 16; ++r) EXPECT_DOUBLE_EQ(bytes_sent(split, t.gpu(r)), bytes_sent(one, t.gpu(r)));
  four.qps = 0;
  EXPECT_THROW(expand(CollectiveKind::all_gather, iota(16), S, Algorithm::ring, t, four), std::invalid_argument);
  four.qps = kMaxQps + 1;
  EXPECT_THROW(expand(CollectiveKind::all_gather, iota(16), S, Algorithm::ring, t, four), std::invalid_argument);
}

TEST(Collectives, RingBroadcastIsPipelined) {
  Topology t = single_gpu_nodes(4);
  Router r(t);
  const double S = 4 * kMiB, a = 2e-6, B = 25e9;
  Expansion e = expand(CollectiveKind::broadcast, iota(4), S, Algorithm::ring, t);
  // 4 MiB / 512 KiB = c = 8 chunks; a chain of 4 needs c + n - 2 = 10 steps of S/c, each
  // chunk on its own link pair: 10 (α + S/(8B)).
  EXPECT_EQ(e.num_steps(), 10);
  expect_time(e, r, 10 * (a + S / (8 * B)));
  EXPECT_DOUBLE_EQ(bytes_received(e, t.gpu(3)), S);
  EXPECT_DOUBLE_EQ(bytes_sent(e, t.gpu(3)), 0);
}

TEST(Collectives, DoubleBinaryTreeAllReduce) {
  Topology t = single_gpu_nodes(4);
  Router r(t);
  const double S = 2 * kMiB, a = 2e-6, B = 25e9;
  Expansion e = expand(CollectiveKind::all_reduce, iota(4), S, Algorithm::tree, t);
  // n = 4: tree 1 = 3 <- 1 <- {0, 2}; tree 2 (mirror) = 0 <- 2 <- {3, 1}; height H = 2.
  // Each tree carries S/2 in c = 1 MiB / 512 KiB = 2 chunks of S/4; each phase H + c - 1 = 3 steps.
  // Reduce: step 0 leaves send (rank 1 and 2 each receive 2 chunks: B/2 each) -> α + (S/4)/(B/2);
  //         step 1 leaves + height 1 (ranks 1, 2 send 2 flows each) -> α + S/(2B);
  //         step 2 only 1->3 and 2->0, alone -> α + S/(4B).
  // Broadcast mirrors it: roots alone (α + S/(4B)), then two steps at B/2 (α + S/(2B)).
  // Total: 6α + 4·S/(2B) + 2·S/(4B) = 6α + 2.5 S/B.
  EXPECT_EQ(e.num_steps(), 6);
  expect_time(e, r, 6 * a + 2.5 * S / B);
}

TEST(Collectives, NvlsAllReduceInTheSwitch) {
  Topology t = dgx(/*nvls=*/true);
  Router r(t);
  const double S = 1024 * kMiB, B = 300e9;
  Expansion e = expand(CollectiveKind::all_reduce, iota(8), S, Algorithm::nvls, t);
  // One step: every GPU sends S up and gets S down on opposite directions of its own
  // NVLink: α + S/B with α = half the GPU-to-GPU latency (one cable).
  EXPECT_EQ(e.num_steps(), 1);
  expect_time(e, r, 0.5e-6 + S / B);
  // Not available without NVLS, nor across nodes.
  Topology plain = dgx(false);
  EXPECT_THROW(expand(CollectiveKind::all_reduce, iota(8), S, Algorithm::nvls, plain), std::invalid_argument);
  ClusterNetSpec two;
  two.num_gpus = 16;
  two.nvls = true;
  Topology t2 = build_cluster(two);
  EXPECT_THROW(expand(CollectiveKind::all_reduce, iota(16), S, Algorithm::nvls, t2), std::invalid_argument);
  EXPECT_THROW(expand(CollectiveKind::all_gather, iota(8), S, Algorithm::nvls, t), std::invalid_argument);
}

TEST(Collectives, HierarchicalAllReduce) {
  // 2 nodes x 4 GPUs, a NIC per GPU (4 rails), one leaf.
  ClusterNetSpec s;
  s.num_gpus = 8;
  s.gpus_per_node = 4;
  s.nics_per_node = 4;
  s.gpus_per_pcie_switch = 1;
  Topology t = build_cluster(s);
  Router r(t);
  const double S = 256 * kMiB, ai = 1e-6, Bi = 300e9, ao = 2e-6, Bo = 25e9;
  Expansion e = expand(CollectiveKind::all_reduce, iota(8), S, Algorithm::hierarchical, t);
  // g = 4 per node, m = 2 nodes, n = 8:
  // intra RS (g-1)(α_i + S/(g B_i)) + inter AR on 4 rails 2(m-1)(α_o + S/(n B_o)) + intra AG (g-1)(...).
  const double want = 2 * 3 * (ai + S / (4 * Bi)) + 2 * 1 * (ao + S / (8 * Bo));
  expect_time(e, r, want);
  // Hierarchical all-gather: inter (m-1)(α_o + S/(n B_o)) then intra (g-1)(α_i + S/(g B_i)).
  expect_time(expand(CollectiveKind::all_gather, iota(8), S, Algorithm::hierarchical, t), r,
              (ao + S / (8 * Bo)) + 3 * (ai + S / (4 * Bi)));
  // Uneven groups are refused.
  EXPECT_THROW(expand(CollectiveKind::all_reduce, iota(5), S, Algorithm::hierarchical, t), std::invalid_argument);

  // Pipelined, as NCCL's rings run it: one step of 2(n−1) = 14 repeats whose NVLink and
  // NIC flows move at once, each carrying the sequential form's bytes spread over the
  // repeats (intra 2(g−1)·S/g, inter 2(m−1)·S/n per flow). Each repeat pays the NIC
  // path's latency and the slower of the two: here the NIC, 0.25·S / B_o in all, so the
  // NVLink phases vanish under it.
  ExpandOptions pipelined;
  pipelined.pipelined_hierarchical = true;
  const Expansion p = expand(CollectiveKind::all_reduce, iota(8), S, Algorithm::hierarchical, t, pipelined);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].repeat, 14);
  expect_time(p, r, 14 * ao + 2 * 1 * S / 8 / Bo);
  // All-gather: n−1 = 7 repeats of inter S/n and intra (g−1)·S/g spread over them.
  expect_time(expand(CollectiveKind::all_gather, iota(8), S, Algorithm::hierarchical, t, pipelined), r,
              7 * ao + S / 8 / Bo);
  // The same bytes per link as the sequential form, whatever NVLink's speed.
  double seq = 0, pip = 0;
  for (const auto& st : e.steps)
    for (const auto& f : st.flows) seq += static_cast<double>(st.repeat) * f.bytes;
  for (const auto& st : p.steps)
    for (const auto& f : st.flows) pip += static_cast<double>(st.repeat) * f.bytes;
  EXPECT_NEAR(pip, seq, seq * 1e-12);
}

TEST(Collectives, AllToAllAndSendRecv) {
  Topology t = single_gpu_nodes(4);
  Router r(t);
  const double S = 64 * kMiB, a = 2e-6, B = 25e9;
  // Direct: one step, each NIC sends 3 flows of S/4 and receives 3: B/3 each:
  // α + (S/4)/(B/3) = α + 3S/(4B).
  Expansion d = expand(CollectiveKind::all_to_all, iota(4), S, Algorithm::direct, t);
  EXPECT_EQ(d.steps[0].flows.size(), 12u);
  expect_time(d, r, a + 3 * S / (4 * B));
  // Pairwise (ring): n - 1 = 3 steps of S/4 each alone on its links: 3(α + S/(4B)).
  expect_time(expand(CollectiveKind::all_to_all, iota(4), S, Algorithm::ring, t), r, 3 * (a + S / (4 * B)));
  // send/recv: α + S/B.
  const std::vector<int> pair = {0, 2};
  expect_time(expand(CollectiveKind::send_recv, pair, S, Algorithm::direct, t), r, a + S / B);
  EXPECT_THROW(expand(CollectiveKind::send_recv, iota(3), S, Algorithm::direct, t), std::invalid_argument);
  EXPECT_THROW(expand(CollectiveKind::all_reduce, iota(4), S, Algorithm::direct, t), std::invalid_argument);
  EXPECT_THROW(expand(CollectiveKind::all_reduce, iota(4), S, Algorithm::automatic, t), std::invalid_argument);
  EXPECT_THROW(expand(CollectiveKind::all_reduce, std::vector<int>{0, 0}, S, Algorithm::ring, t),
               std::invalid_argument);
  EXPECT_THROW(expand(CollectiveKind::all_reduce, iota(4), -1, Algorithm::ring, t), std::invalid_argument);
  EXPECT_THROW(expand(CollectiveKind::all_reduce, std::vector<int>{0, 9}, S, Algorithm::ring, t), InternalError);
  // A group of one moves nothing.
  EXPECT_EQ(collective_time(expand(CollectiveKind::all_reduce, iota(1), S, Algorithm::ring, t), r), 0);
}

// NCCL's PXN (ExpandOptions::pxn): a cross-node send goes over NVLink to the sender's
// node-mate with the receiver's local index, which sends one aggregated flow per remote
// peer; pairs whose proxy is not in the group keep their own flow.
TEST(Collectives, AllToAllThroughPxnProxies) {
  ClusterNetSpec s;  // 2 DGX nodes: 8 GPUs and 8 NICs of 25 GB/s each, one leaf
  s.num_gpus = 16;
  Topology t = build_cluster(s);
  Router r(t);
  const double S = 64 * kMiB, chunk = S / 16;
  ExpandOptions off;
  off.pxn = false;
  const Expansion plain = expand(CollectiveKind::all_to_all, iota(16), S, Algorithm::direct, t, off);
  const Expansion pxn = expand(CollectiveKind::all_to_all, iota(16), S, Algorithm::direct, t);
  EXPECT_EQ(plain.steps[0].flows.size(), 240u);
  // 2 x 56 NVLink pairs (a node-mate's own chunk plus the one relayed for its rail) and
  // 2 x 8 network flows (one per proxy and remote peer, the 8 node-mates' chunks).
  ASSERT_EQ(pxn.steps[0].flows.size(), 128u);
  int network = 0;
  for (const Flow& f : pxn.steps[0].flows) {
    const bool cross = t.node(f.src) != t.node(f.dst);
    network += cross;
    if (!cross) continue;
    EXPECT_EQ(t.local_index(f.src), t.local_index(f.dst)) << "a cross-node flow stays on its rail";
    EXPECT_DOUBLE_EQ(f.bytes, 8 * chunk);
  }
  EXPECT_EQ(network, 16);
  for (const Flow& f : pxn.steps[0].flows)
    if (t.node(f.src) == t.node(f.dst)) EXPECT_DOUBLE_EQ(f.bytes, 2 * chunk);
  // Every NIC still sends and receives 8 chunks, so alone on the network both take
  // α + 8·chunk / B (the NVLink relay, 14 chunks at 300 GB/s, is faster).
  const double a = 2e-6, B = 25e9;
  expect_time(plain, r, a + 8 * chunk / B);
  expect_time(pxn, r, a + 8 * chunk / B);
  // Ranks 0, 1 (node 0) and 8 (node 1): 1 -> 8 goes through 0 (local index 0, a member);
  // 8 -> 1 has no member with local index 1 on node 1 and goes direct.
  const std::vector<int> g = {0, 1, 8};
  const Expansion small = expand(CollectiveKind::all_to_all, g, 3 * S, Algorithm::direct, t);
  auto bytes = [&](int a_rank, int b_rank) {
    for (const Flow& f : small.steps[0].flows)
      if (f.src == t.gpu(a_rank) && f.dst == t.gpu(b_rank)) return f.bytes;
    return -1.0;
  };
  EXPECT_EQ(small.steps[0].flows.size(), 5u);
  EXPECT_DOUBLE_EQ(bytes(1, 0), 2 * S);  // its own chunk for 0 and the one relayed to 8
  EXPECT_DOUBLE_EQ(bytes(0, 8), 2 * S);  // 0's and 1's chunks for 8
  EXPECT_DOUBLE_EQ(bytes(0, 1), S);
  EXPECT_DOUBLE_EQ(bytes(8, 0), S);
  EXPECT_DOUBLE_EQ(bytes(8, 1), S);
  EXPECT_DOUBLE_EQ(bytes(1, 8), -1.0);
}

TEST(Collectives, BigRingStaysCompact) {
  Topology t = single_gpu_nodes(64);
  Expansion e = expand(CollectiveKind::all_reduce, iota(64), 1e9, Algorithm::ring, t);
  EXPECT_EQ(e.steps.size(), 1u);
  EXPECT_EQ(e.num_steps(), 126);
  // Tree: fill/drain steps differ, the steady state is one step repeated.
  Expansion tr = expand(CollectiveKind::all_reduce, iota(64), 1e9, Algorithm::tree, t);
  EXPECT_LT(tr.steps.size(), 30u);
}

TEST(Selection, NcclLikeChoices) {
  Topology t = single_gpu_nodes(16);
  Router r(t);
  const auto g = iota(16);
  // Small: tree's 2(H + c - 1) = 2·4 = 8 latencies beat the ring's 2·15 = 30.
  EXPECT_EQ(select_algorithm(CollectiveKind::all_reduce, g, 1024, r), Algorithm::tree);
  // Large: ring 2(n-1)/n·S/B = 1.875 S/B beats the tree's ≈ 2 S/B.
  EXPECT_EQ(select_algorithm(CollectiveKind::all_reduce, g, 1024 * kMiB, r), Algorithm::ring);
  EXPECT_EQ(select_algorithm(CollectiveKind::all_gather, g, 1024, r), Algorithm::ring);
  EXPECT_EQ(select_algorithm(CollectiveKind::all_to_all, g, 1024, r), Algorithm::direct);
  AlgorithmOverrides o;
  o.set(CollectiveKind::all_reduce, Algorithm::ring);
  EXPECT_EQ(select_algorithm(CollectiveKind::all_reduce, g, 1024, r, o), Algorithm::ring);
  // Inside a node: NVLS when the fabric has it, ring otherwise.
  Topology nv = dgx(true), plain = dgx(false);
  Router rn(nv), rp(plain);
  EXPECT_EQ(select_algorithm(CollectiveKind::all_reduce, iota(8), 1e9, rn), Algorithm::nvls);
  EXPECT_EQ(select_algorithm(CollectiveKind::all_reduce, iota(8), 1e9, rp), Algorithm::ring);
  EXPECT_EQ(expand_selected(CollectiveKind::all_reduce, iota(8), 1e9, rn).algorithm, Algorithm::nvls);
}

TEST(Collectives, RunnerSharesTheNetworkAndReportsBottlenecks) {
  Topology t = single_gpu_nodes(4);
  Router r(t);
  const double S = 64 * kMiB, a = 2e-6, B = 25e9;
  Expansion e = expand(CollectiveKind::all_reduce, iota(4), S, Algorithm::ring, t);
  FlowNetwork net(t);
  CollectiveRunner run(e, r);
  std::vector<FlowId> ids, done;
  int steps = 0;
  while (!run.finished()) {
    ids.clear();
    EXPECT_EQ(run.launch_next_step(net, net.now(), 2, ids), 4u);
    net.run_until_idle(&done);
    ++steps;
  }
  // Same as the idle formula, 2(n-1)(α + S/(nB)), with every step really run.
  EXPECT_EQ(steps, 6);
  EXPECT_NEAR(net.now(), 6 * (a + S / (4 * B)), 1e-12);
  EXPECT_NEAR(net.tag_bytes(2), 4 * 1.5 * S, 1);  // 4 ranks x 2(n-1)/n S
  auto top = busiest_links(net, 3);
  ASSERT_EQ(top.size(), 3u);
  // Every NIC uplink carried 1.5 S in 6 S/(4B) of transfer within 6(α + S/(4B)).
  EXPECT_NEAR(top[0].bytes, 1.5 * S, 1);
  EXPECT_NEAR(top[0].utilisation, (6 * S / (4 * B)) / net.now(), 1e-9);
  EXPECT_NE(format_busiest_links(top).find("->"), std::string::npos);
}

TEST(Busbw, NcclTestsConventions) {
  // nccl-tests PERFORMANCE.md factors.
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::reduce_scatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_to_all, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::send_recv, 2), 1.0);
  // 1 GB in 10 ms: algbw 100 GB/s; all-reduce busbw on 8 ranks 175 GB/s.
  EXPECT_DOUBLE_EQ(algbw(1e9, 0.01), 100e9);
  EXPECT_DOUBLE_EQ(busbw(CollectiveKind::all_reduce, 8, 1e9, 0.01), 175e9);
  EXPECT_THROW(algbw(1e9, 0), std::invalid_argument);
  EXPECT_THROW(busbw_factor(CollectiveKind::all_reduce, 0), std::invalid_argument);
  // A ring all-reduce with no latency reaches busbw = link bandwidth exactly:
  // t = 2(n-1)S/(nB) -> busbw = S/t · 2(n-1)/n = B.
  ClusterNetSpec s;
  s.intra_latency = 0;
  Topology t = build_cluster(s);
  Router r(t);
  const double S = 1e9;
  const double tm = collective_time(expand(CollectiveKind::all_reduce, iota(8), S, Algorithm::ring, t), r);
  EXPECT_NEAR(busbw(CollectiveKind::all_reduce, 8, S, tm), 300e9, 1);
}

TEST(Collectives, OneNameTable) {
  // nccl-tests' names (the ops of cost tables and calibration logs), read back by
  // parse_collective_kind, which also takes the YAML keys' underscores.
  const std::pair<CollectiveKind, const char*> names[] = {
      {CollectiveKind::all_reduce, "all-reduce"}, {CollectiveKind::reduce_scatter, "reduce-scatter"},
      {CollectiveKind::all_gather, "all-gather"}, {CollectiveKind::broadcast, "broadcast"},
      {CollectiveKind::all_to_all, "all-to-all"}, {CollectiveKind::send_recv, "send-recv"}};
  for (const auto& [kind, name] : names) {
    EXPECT_EQ(to_string(kind), name);
    EXPECT_EQ(parse_collective_kind(name), kind) << name;
  }
  EXPECT_EQ(parse_collective_kind("reduce_scatter"), CollectiveKind::reduce_scatter);
  EXPECT_EQ(parse_collective_kind("p2p"), CollectiveKind::send_recv);
}

TEST(Busbw, WireBytesPerRank) {
  // Bytes each rank sends for buffer S over n ranks in a ring: all-reduce 2(n−1)/n·S,
  // reduce-scatter / all-gather / all-to-all (n−1)/n·S, broadcast and send S.
  const double S = 8e6;
  EXPECT_DOUBLE_EQ(wire_bytes_per_rank(CollectiveKind::all_reduce, 4, S), 12e6);
  EXPECT_DOUBLE_EQ(wire_bytes_per_rank(CollectiveKind::reduce_scatter, 4, S), 6e6);
  EXPECT_DOUBLE_EQ(wire_bytes_per_rank(CollectiveKind::all_gather, 4, S), 6e6);
  EXPECT_DOUBLE_EQ(wire_bytes_per_rank(CollectiveKind::all_to_all, 4, S), 6e6);
  EXPECT_DOUBLE_EQ(wire_bytes_per_rank(CollectiveKind::broadcast, 4, S), S);
  EXPECT_DOUBLE_EQ(wire_bytes_per_rank(CollectiveKind::send_recv, 2, S), S);
}

}  // namespace
}  // namespace ptsim::hw::net
