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
  EXPECT_EQ(parse_nccl_version("2.21.5").minor, 21);
  EXPECT_EQ(parse_nccl_version(kDefaultNcclVersion).minor, kMaxNcclMinor);
  for (const char* bad : {"2.17", "2.28", "3.1", "abc", "2.", "2.23.", "2.23x", "", "2.18.1.1"})
    EXPECT_THROW(parse_nccl_version(bad), std::invalid_argument) << bad;
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

}  // namespace
}  // namespace ptsim::hw::net
