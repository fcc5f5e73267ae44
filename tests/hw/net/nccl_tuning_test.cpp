// NCCL's tuning model (hw/net/nccl_tuning.h): latencies and bandwidths derived by hand
// from the constants of src/graph/tuning.cc, the protocol chosen by message size, and
// which algorithms each NCCL version offers.
#include "hw/net/nccl_tuning.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace ptsim::hw::net {
namespace {

// One DGX A100 node: 8 GPUs on NVSwitch, a Simple ring at 232.5 GB/s busbw.
NcclComm dgx_a100(int nodes = 1, int ppn = 8) {
  NcclComm c;
  c.n_ranks = nodes * ppn;
  c.n_nodes = nodes;
  c.arch = GpuArch::ampere;
  c.n_channels = 16;
  c.bus_bw_intra = 232.5e9;
  c.bus_bw_inter = std::min(232.5e9, 24e9 * ppn);
  return c;
}

const NcclEstimate& find(const std::vector<NcclEstimate>& v, NcclAlgo a, NcclProto p) {
  for (const auto& e : v)
    if (e.algo == a && e.proto == p) return e;
  throw std::runtime_error("not offered");
}
bool offers(const std::vector<NcclEstimate>& v, NcclAlgo a) {
  for (const auto& e : v)
    if (e.algo == a) return true;
  return false;
}

TEST(NcclTuning, ParsesVersionsAndRejectsOthers) {
  EXPECT_EQ(parse_nccl_version("2.23").minor, 23);
  EXPECT_EQ(parse_nccl_version("2.23").patch, -1);  // the minor's latest release
  EXPECT_EQ(parse_nccl_version("2.21.5").minor, 21);
  EXPECT_EQ(parse_nccl_version("2.28.3").patch, 3);
  EXPECT_EQ(parse_nccl_version("2.30").minor, kMaxNcclMinor);
  EXPECT_EQ(parse_nccl_version(kDefaultNcclVersion).minor, kMaxNcclMinor);
  for (const char* bad : {"2.17", "2.31", "3.1", "abc", "2.", "2.23.", "2.23x", "", "2.18.1.1", "2.28.-1"})
    EXPECT_THROW(parse_nccl_version(bad), std::invalid_argument) << bad;
  // A version without a patch level counts as the minor's latest.
  EXPECT_TRUE(parse_nccl_version("2.28").at_least(28, 9));
  EXPECT_FALSE(parse_nccl_version("2.28.3").at_least(28, 9));
  EXPECT_TRUE(parse_nccl_version("2.29.2").at_least(28, 9));
  EXPECT_FALSE(parse_nccl_version("2.27").at_least(28));
}

TEST(NcclTuning, RingLatencyInsideANodeIsBasePlusOneHopPerStep) {
  // All-reduce over 8 ranks: 2(n−1) = 14 NVLink hops. v2.27: base 6.6 / 14.0 / 8.4 µs,
  // NVLink ring hop 0.6 / 1.9 / 3.4 µs.
  const auto v = nccl_estimates(CollectiveKind::all_reduce, dgx_a100(), 1 << 20, parse_nccl_version("2.27"));
  EXPECT_NEAR(find(v, NcclAlgo::ring, NcclProto::ll).latency, (6.6 + 14 * 0.6) * 1e-6, 1e-12);
  EXPECT_NEAR(find(v, NcclAlgo::ring, NcclProto::ll128).latency, (14.0 + 14 * 1.9) * 1e-6, 1e-12);
  EXPECT_NEAR(find(v, NcclAlgo::ring, NcclProto::simple).latency, (8.4 + 14 * 3.4) * 1e-6, 1e-12);
  // Bandwidths: Simple the ring's busbw × n / 2(n−1); LL128 × 0.92; LL × 0.5 capped at
  // Ampere's single-node 87.7 GB/s.
  EXPECT_NEAR(find(v, NcclAlgo::ring, NcclProto::simple).bandwidth, 232.5e9 * 8 / 14, 1e3);
  EXPECT_NEAR(find(v, NcclAlgo::ring, NcclProto::ll128).bandwidth, 232.5e9 * 0.92 * 8 / 14, 1e3);
  EXPECT_NEAR(find(v, NcclAlgo::ring, NcclProto::ll).bandwidth, 87.7e9 * 8 / 14, 1e3);
}

TEST(NcclTuning, ProtocolFollowsMessageSize) {
  const auto v = parse_nccl_version("2.27");
  const auto c = dgx_a100();
  // Break-evens from the figures above: LL -> LL128 at ~2.2 MB, LL128 -> Simple at ~23 MB.
  EXPECT_EQ(nccl_choose(CollectiveKind::all_reduce, c, 4096, v)->proto, NcclProto::ll);
  EXPECT_EQ(nccl_choose(CollectiveKind::all_reduce, c, 8 << 20, v)->proto, NcclProto::ll128);
  EXPECT_EQ(nccl_choose(CollectiveKind::all_reduce, c, 1 << 30, v)->proto, NcclProto::simple);
}

TEST(NcclTuning, TreeWinsAllReduceAtScaleRingOnFewNodes) {
  const auto v = parse_nccl_version("2.27");
  const auto c = dgx_a100(192);  // 1,536 GPUs
  EXPECT_EQ(nccl_choose(CollectiveKind::all_reduce, c, 1 << 20, v)->algo, NcclAlgo::tree);
  // At 4 GB the ring's 2(n−1) hops (~13.9 ms with the 1.4 plateau factor) outweigh its
  // bandwidth edge (n/2(n−1) vs tree's 0.92 · 0.5): tree, 45.3 vs 55.6 ms.
  EXPECT_EQ(nccl_choose(CollectiveKind::all_reduce, c, 4e9, v)->algo, NcclAlgo::tree);
  // On 2 nodes the ring's bandwidth wins large messages: 39.2 vs 45.3 ms.
  EXPECT_EQ(nccl_choose(CollectiveKind::all_reduce, dgx_a100(2), 4e9, v)->algo, NcclAlgo::ring);
  // Tree latency: base + 2((ppn−1)·NVLink hop + log2(nodes)·net hop), LL: 6.8 + 2(7·0.6 + 7·5.0).
  const auto est = nccl_estimates(CollectiveKind::all_reduce, c, 1 << 20, v);
  EXPECT_NEAR(find(est, NcclAlgo::tree, NcclProto::ll).latency, (6.8 + 2 * (7 * 0.6 + 7 * 5.0)) * 1e-6, 1e-12);
}

TEST(NcclTuning, RingAllGatherAtScalePaysEveryStepLatency) {
  // All-gather over 1,536 ranks (192 nodes × 8): n−1 = 1,535 steps, 191 of them on the
  // network. Whatever the protocol, latency >= 1,344 NVLink hops + 191 network hops.
  const auto v = parse_nccl_version("2.27");
  const auto c = dgx_a100(192);
  const double S = 100e6;
  const auto best = *nccl_choose(CollectiveKind::all_gather, c, S, v);
  EXPECT_EQ(best.algo, NcclAlgo::ring);
  // Each network step posts a send (1 µs, > the 0.6 µs LL NVLink hop): cheapest case LL.
  EXPECT_GE(best.latency, (6.6 + 1344 * 1.0 + 191 * 2.7) * 1e-6 - 1e-12);
  // ... which dominates the bandwidth term (n−1)/n·S at 192 GB/s busbw.
  EXPECT_GT(best.time, 5 * (S * 1535 / 1536 / 192e9));
}

TEST(NcclTuning, AmdHostsPostNetworkSendsSlowerAndCapLl) {
  // getNetOverhead (tuning.cc, v2.18.3-1 .. v2.27.3-1): 1 µs on Intel, 2 µs on AMD, 3×
  // for Simple; a ring's NVLink steps across nodes each pay the larger of it and their
  // own hop latency. All-gather over 16 nodes × 8: 127 steps, 15 on the network, so
  // with LL (a 0.6 µs NVLink hop) the 112 NVLink steps cost 1 µs more each on AMD; with
  // Simple up to 3 µs more (less where the NVLink hop itself exceeds 3 µs).
  for (const char* ver : {"2.18", "2.27"}) {
    const auto v = parse_nccl_version(ver);
    auto intel = dgx_a100(16), amd = dgx_a100(16);
    amd.cpu = CpuVendor::amd;
    const auto a = nccl_estimates(CollectiveKind::all_gather, intel, 1e9, v);
    const auto b = nccl_estimates(CollectiveKind::all_gather, amd, 1e9, v);
    EXPECT_NEAR(find(b, NcclAlgo::ring, NcclProto::ll).latency - find(a, NcclAlgo::ring, NcclProto::ll).latency,
                112 * 1e-6, 1e-9)
        << ver;
    const double simple =
        find(b, NcclAlgo::ring, NcclProto::simple).latency - find(a, NcclAlgo::ring, NcclProto::simple).latency;
    EXPECT_GT(simple, 0) << ver;
    EXPECT_LE(simple, 112 * 3e-6 + 1e-9) << ver;
  }
  // llMaxBws: across 2 nodes AMD's row caps LL at 22.5 GB/s where Intel's gives 39.
  const auto v = parse_nccl_version("2.27");
  auto intel = dgx_a100(2), amd = dgx_a100(2);
  amd.cpu = CpuVendor::amd;
  const double li =
      find(nccl_estimates(CollectiveKind::all_reduce, intel, 1e6, v), NcclAlgo::ring, NcclProto::ll).bandwidth;
  const double la =
      find(nccl_estimates(CollectiveKind::all_reduce, amd, 1e6, v), NcclAlgo::ring, NcclProto::ll).bandwidth;
  EXPECT_LT(la, li);
  // One node: no network step, the same either way.
  auto one = dgx_a100(1), one_amd = dgx_a100(1);
  one_amd.cpu = CpuVendor::amd;
  EXPECT_DOUBLE_EQ(nccl_choose(CollectiveKind::all_reduce, one, 1e6, v)->time,
                   nccl_choose(CollectiveKind::all_reduce, one_amd, 1e6, v)->time);
}

TEST(NcclTuning, LowLatencyProtocolFactorsChangeWithTheVersion) {
  NcclComm c = dgx_a100();
  c.bus_bw_intra = 100e9;  // below the LL cap so the factor shows
  auto ll = [&](const char* ver) {
    const auto est = nccl_estimates(CollectiveKind::all_gather, c, 1 << 20, parse_nccl_version(ver));
    return find(est, NcclAlgo::ring, NcclProto::ll).bandwidth / find(est, NcclAlgo::ring, NcclProto::simple).bandwidth;
  };
  EXPECT_NEAR(ll("2.18"), 1.0 / 3.0, 1e-9);  // single-node all-gather: 1/3 before v2.21
  EXPECT_NEAR(ll("2.21"), 0.5, 1e-9);
  // Tree Simple hop latency: 28 µs in v2.19–v2.22, 14 µs on the network from v2.23.
  const auto c2 = dgx_a100(4);
  const auto t22 = nccl_estimates(CollectiveKind::all_reduce, c2, 1 << 20, parse_nccl_version("2.22"));
  const auto t23 = nccl_estimates(CollectiveKind::all_reduce, c2, 1 << 20, parse_nccl_version("2.23"));
  EXPECT_NEAR(find(t22, NcclAlgo::tree, NcclProto::simple).latency, 2 * (7 * 28 + 2 * 28) * 1e-6, 1e-12);
  EXPECT_NEAR(find(t23, NcclAlgo::tree, NcclProto::simple).latency, (8.4 + 2 * (7 * 4 + 2 * 14)) * 1e-6, 1e-12);
}

TEST(NcclTuning, PatOnlyFrom223WithOneGpuPerNode) {
  const auto c = dgx_a100(1024, 1);
  const Bytes S = 1 << 20;
  EXPECT_FALSE(offers(nccl_estimates(CollectiveKind::all_gather, c, S, parse_nccl_version("2.22")), NcclAlgo::pat));
  const auto est = nccl_estimates(CollectiveKind::reduce_scatter, c, S, parse_nccl_version("2.23"));
  // 8 + log2(1024)·14/3.5 + 1024·2.8 µs.
  EXPECT_NEAR(find(est, NcclAlgo::pat, NcclProto::simple).latency, (8 + 10 * 4.0 + 1024 * 2.8) * 1e-6, 1e-12);
  EXPECT_EQ(nccl_choose(CollectiveKind::all_gather, c, S, parse_nccl_version("2.23"))->algo, NcclAlgo::pat);
  EXPECT_FALSE(
      offers(nccl_estimates(CollectiveKind::all_gather, dgx_a100(128), S, parse_nccl_version("2.27")), NcclAlgo::pat));
  EXPECT_FALSE(offers(nccl_estimates(CollectiveKind::all_reduce, c, S, parse_nccl_version("2.27")), NcclAlgo::pat));
}

TEST(NcclTuning, NvlsInsideANodeAndNvlsTreeAcrossNodes) {
  NcclComm c = dgx_a100();
  c.arch = GpuArch::hopper;
  c.bus_bw_intra = 367e9;
  c.nvls = true;
  const auto v = parse_nccl_version("2.27");
  const auto one = nccl_estimates(CollectiveKind::all_reduce, c, 1 << 30, v);
  EXPECT_NEAR(find(one, NcclAlgo::nvls, NcclProto::simple).bandwidth, 367e9 * 5 / 6, 1e3);
  EXPECT_EQ(nccl_choose(CollectiveKind::all_reduce, c, 1 << 30, v)->algo, NcclAlgo::nvls);
  c.n_nodes = 4;
  c.n_ranks = 32;
  c.bus_bw_inter = 8 * 48e9 * 0.96;
  const auto four = nccl_estimates(CollectiveKind::all_reduce, c, 1 << 30, v);
  EXPECT_FALSE(offers(four, NcclAlgo::nvls));  // across nodes only with CollNet
  EXPECT_TRUE(offers(four, NcclAlgo::nvls_tree));
  c.collnet = true;
  EXPECT_TRUE(offers(nccl_estimates(CollectiveKind::all_reduce, c, 1 << 30, v), NcclAlgo::collnet_direct));
  // With CollNet, NVLS runs across nodes, for all-reduce only (the plugin's all-gather /
  // reduce-scatter are not modelled).
  EXPECT_TRUE(offers(nccl_estimates(CollectiveKind::all_reduce, c, 1 << 30, v), NcclAlgo::nvls));
  EXPECT_FALSE(offers(nccl_estimates(CollectiveKind::all_gather, c, 1 << 30, v), NcclAlgo::nvls));
  // CollNet Direct needs NVSwitches from v2.24.3-1 (algoEnable: nvsCount == 0 disables it).
  NcclComm p2p = c;
  p2p.nvswitch = false;
  EXPECT_FALSE(offers(nccl_estimates(CollectiveKind::all_reduce, p2p, 1 << 30, v), NcclAlgo::collnet_direct));
  EXPECT_TRUE(offers(nccl_estimates(CollectiveKind::all_reduce, p2p, 1 << 30, v), NcclAlgo::collnet_chain));
  EXPECT_TRUE(offers(nccl_estimates(CollectiveKind::all_reduce, p2p, 1 << 30, parse_nccl_version("2.23")),
                     NcclAlgo::collnet_direct));
  c.nvls = false;
  c.collnet = false;
  EXPECT_FALSE(offers(nccl_estimates(CollectiveKind::all_reduce, c, 1 << 30, v), NcclAlgo::nvls_tree));
}

TEST(NcclTuning, RejectsPointToPointAndBadCommunicators) {
  const auto v = parse_nccl_version("2.27");
  EXPECT_THROW(nccl_estimates(CollectiveKind::all_to_all, dgx_a100(), 1, v), std::invalid_argument);
  NcclComm c = dgx_a100(2);
  c.bus_bw_inter = 0;
  EXPECT_THROW(nccl_estimates(CollectiveKind::all_reduce, c, 1, v), std::invalid_argument);
  EXPECT_EQ(nccl_choose(CollectiveKind::all_reduce, dgx_a100(), 1 << 20, v, NcclAlgo::nvls), std::nullopt);
}

TEST(NcclTuning, PatBandwidthDropsFrom224) {
  // PAT's bus bandwidth: × .85 in v2.23.4-1, × .75 from v2.24.3-1 (tuning.cc); one GPU a
  // node, so the ring's inter-node 24 GB/s; all-gather keeps bus bandwidth (v2.20+).
  const auto c = dgx_a100(64, 1);
  auto pat = [&](const char* ver) {
    return find(nccl_estimates(CollectiveKind::all_gather, c, 1 << 20, parse_nccl_version(ver)), NcclAlgo::pat,
                NcclProto::simple)
        .bandwidth;
  };
  EXPECT_NEAR(pat("2.23"), 24e9 * .85, 1e3);
  EXPECT_NEAR(pat("2.24"), 24e9 * .75, 1e3);
  EXPECT_NEAR(pat("2.30"), 24e9 * .75, 1e3);
}

TEST(NcclTuning, HopperLlRowWasAmperesBefore221) {
  // llMaxBws' Hopper row: Ampere's 87.7 GB/s on one node until v2.20.3-1, 141 from v2.21.5-1.
  NcclComm c = dgx_a100();
  c.arch = GpuArch::hopper;
  c.bus_bw_intra = 367e9;
  auto ll = [&](const char* ver) {
    return find(nccl_estimates(CollectiveKind::all_reduce, c, 1 << 20, parse_nccl_version(ver)), NcclAlgo::ring,
                NcclProto::ll)
        .bandwidth;
  };
  EXPECT_NEAR(ll("2.20"), 87.7e9 * 8 / 14, 1e3);   // min(87.7, 367 / 4)
  EXPECT_NEAR(ll("2.21"), 141.0e9 * 8 / 14, 1e3);  // min(141, 367 / 2)
}

// One H100 node with NVLink SHARP; the ring's 367 GB/s stands for NCCL's NVLS graph.
NcclComm hgx_h100(int nodes = 1) {
  NcclComm c = dgx_a100(nodes);
  c.arch = GpuArch::hopper;
  c.bus_bw_intra = 367e9;
  c.bus_bw_inter = 8 * 48e9 * 0.96;
  c.nvls = true;
  return c;
}

TEST(NcclTuning, NvlsBandwidthByVersion) {
  const auto c = hgx_h100();
  auto bw = [&](CollectiveKind k, const char* ver) {
    return find(nccl_estimates(k, c, 1 << 30, parse_nccl_version(ver)), NcclAlgo::nvls, NcclProto::simple).bandwidth;
  };
  // v2.26: bus = the intra-node bandwidth; all-reduce × 5/6, all-gather kept as bus.
  EXPECT_NEAR(bw(CollectiveKind::all_reduce, "2.26"), 367e9 * 5 / 6, 1e3);
  EXPECT_NEAR(bw(CollectiveKind::all_gather, "2.26"), 367e9, 1e3);
  // v2.27.3-1: all-gather / reduce-scatter through the switch at (ppn − 1) / ppn.
  EXPECT_NEAR(bw(CollectiveKind::reduce_scatter, "2.27"), 367e9 * 7 / 8, 1e3);
  EXPECT_NEAR(bw(CollectiveKind::all_reduce, "2.27"), 367e9 * 5 / 6, 1e3);
  // v2.28.3-1: nvlsEfficiency 0.85 (Hopper) × (8 − 1) / 8 channels, all-reduce doubled and
  // converted as the ring (8 / 14), all-gather × 7/8 and not converted.
  EXPECT_NEAR(bw(CollectiveKind::all_reduce, "2.28"), 367e9 * 0.85 * 7 / 8 * 2 * 8 / 14, 1e3);
  EXPECT_NEAR(bw(CollectiveKind::all_gather, "2.30"), 367e9 * 0.85 * 7 / 8 * 7 / 8, 1e3);
  // Blackwell: 0.74.
  NcclComm b = c;
  b.arch = GpuArch::blackwell;
  EXPECT_NEAR(find(nccl_estimates(CollectiveKind::all_reduce, b, 1 << 30, parse_nccl_version("2.28")), NcclAlgo::nvls,
                   NcclProto::simple)
                  .bandwidth,
              367e9 * 0.74 * 7 / 8 * 2 * 8 / 14, 1e3);
}

TEST(NcclTuning, NvlsTreeAcrossNodesFrom228) {
  const auto c = hgx_h100(4);
  auto est = [&](const char* ver) {
    return find(nccl_estimates(CollectiveKind::all_reduce, c, 1 << 30, parse_nccl_version(ver)), NcclAlgo::nvls_tree,
                NcclProto::simple);
  };
  // v2.27: min(intra, inter / 2) beyond two nodes, × 5/6.
  EXPECT_NEAR(est("2.27").bandwidth, 8 * 48e9 * 0.96 / 2 * 5 / 6, 1e3);
  // v2.28: min(intra × 0.85 × 7/8 × 2, inter, 8 channels × 45.5 GB/s (Hopper, > 2 nodes)),
  // × 32 / 62.
  EXPECT_NEAR(est("2.28").bandwidth, 8 * 45.5e9 * 32 / 62, 1e3);
  // NVLS-tree's network hop: 14 µs up to v2.28.7-1, 20.9 from v2.28.9-1 (25 µs NVLink +
  // 2 log2(4) network hops).
  EXPECT_NEAR(est("2.28.3").latency, (25 + 4 * 14.0) * 1e-6, 1e-12);
  EXPECT_NEAR(est("2.28.9").latency, (25 + 4 * 20.9) * 1e-6, 1e-12);
  EXPECT_NEAR(est("2.30").latency, (25 + 4 * 20.9) * 1e-6, 1e-12);
}

TEST(NcclTuning, BlackwellCapsByVersion) {
  // Tree Simple all-reduce on 4 nodes with a fast fabric: 16 channels × perChMaxTreeBws,
  // halved to algorithm bandwidth. Blackwell took Hopper's row (36.0) before v2.25, twice
  // it (72.0) in v2.25–v2.27, its own (24.0) from v2.28.
  // A 1 GiB collective's bandwidth on `nodes` Blackwell nodes with a fast fabric.
  auto bandwidth = [](int nodes, CollectiveKind kind, NcclAlgo algo, NcclProto proto, const char* ver) {
    NcclComm c = dgx_a100(nodes);
    c.arch = GpuArch::blackwell;
    c.bus_bw_intra = c.bus_bw_inter = 2000e9;
    return find(nccl_estimates(kind, c, 1 << 30, parse_nccl_version(ver)), algo, proto).bandwidth;
  };
  auto tree = [&](const char* ver) {
    return bandwidth(4, CollectiveKind::all_reduce, NcclAlgo::tree, NcclProto::simple, ver);
  };
  EXPECT_NEAR(tree("2.24"), 16 * 36.0e9 * .5, 1e3);
  EXPECT_NEAR(tree("2.25"), 16 * 72.0e9 * .5, 1e3);
  EXPECT_NEAR(tree("2.28"), 16 * 24.0e9 * .5, 1e3);
  // Ring LL128 on two nodes: 73.4 (v2.28.3), 34.6 (v2.28.7 .. v2.29.3), 40 (v2.29.7 on).
  auto ll128 = [&](const char* ver) {
    return bandwidth(2, CollectiveKind::all_gather, NcclAlgo::ring, NcclProto::ll128, ver);
  };
  EXPECT_NEAR(ll128("2.28.3"), 16 * 73.4e9 * 16 / 15, 1e3);
  EXPECT_NEAR(ll128("2.28.7"), 16 * 34.6e9 * 16 / 15, 1e3);
  EXPECT_NEAR(ll128("2.29.3"), 16 * 34.6e9 * 16 / 15, 1e3);
  EXPECT_NEAR(ll128("2.29"), 16 * 40.0e9 * 16 / 15, 1e3);
}

TEST(NcclTuning, BlackwellNvlsTreeTakesTheTreeCorrectionFrom229OnX86) {
  // ncclTopoGetAlgoTime, v2.29.2-1: NVLS-tree all-reduce on compute capability >= 10.0 with
  // an x86 host scales its bandwidth by treeCorrectionFactor (Simple, 1 MiB: log2(2^20 /
  // 64) = 14 -> 0.5); not on an Arm host, nor before.
  NcclComm c = hgx_h100(4);
  c.arch = GpuArch::blackwell;
  auto bw = [&](const NcclComm& comm, const char* ver) {
    return find(nccl_estimates(CollectiveKind::all_reduce, comm, 1 << 20, parse_nccl_version(ver)), NcclAlgo::nvls_tree,
                NcclProto::simple)
        .bandwidth;
  };
  EXPECT_NEAR(bw(c, "2.29") / bw(c, "2.28"), 0.5, 1e-9);
  NcclComm arm = c;
  arm.cpu = CpuVendor::arm;
  EXPECT_NEAR(bw(arm, "2.29") / bw(arm, "2.28"), 1.0, 1e-9);
}

TEST(NcclTuning, BlackwellRunsLl128From225) {
  // tuning.cc's LL128 switch enabled compute capabilities 7.0, 8.0 and 9.0 up to v2.24.3-1;
  // v2.25.1-1 added 10.0 (and Blackwell's rows of the caps).
  NcclComm c = dgx_a100();
  c.arch = GpuArch::blackwell;
  auto ll128 = [&](const char* ver) {
    for (const auto& e : nccl_estimates(CollectiveKind::all_reduce, c, 1 << 20, parse_nccl_version(ver)))
      if (e.proto == NcclProto::ll128) return true;
    return false;
  };
  EXPECT_FALSE(ll128("2.24"));
  EXPECT_TRUE(ll128("2.25"));
  EXPECT_EQ(nccl_first_minor(GpuArch::blackwell), 25);
  EXPECT_EQ(nccl_first_minor(GpuArch::hopper), kMinNcclMinor);
  EXPECT_EQ(nccl_gpu_arch("b200", true), GpuArch::blackwell);
  EXPECT_EQ(nccl_gpu_arch("h200", true), GpuArch::hopper);
  EXPECT_EQ(nccl_gpu_arch("h100-sxm", false), GpuArch::hopper);
  EXPECT_EQ(nccl_gpu_arch("a100-sxm-80gb", false), GpuArch::ampere);
  EXPECT_EQ(nccl_gpu_arch("v100", false), GpuArch::volta);
}

}  // namespace
}  // namespace ptsim::hw::net
