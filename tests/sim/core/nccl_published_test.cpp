// The collective model (NCCL's tuning model on the cluster graph, sim/core/network_cost.h)
// against published multi-node nccl-tests all_reduce_perf curves of >= 64 GPUs
// (tests/hw/net/data/nccl_tests_published.csv, each curve cited there), over the whole
// size range each publication ran. Constants are global: every curve uses its GPU's
// catalog entry (H100 for A-C, A100 for D), the same NIC efficiency and NCCL tables; only
// the published cluster shape (GPUs, NICs, NIC speed, forced algorithm, NVLS on/off) differs.
//
// Tolerance, and why (not fitted: no constant was changed to pass this):
//  - bandwidth end (>= 2 GB): within ±20 % per point. Here the model is NCCL's
//    bandwidth figures on the cluster's links; the two 64-GPU curves, one cluster with
//    and without two NCCL variables (NCCL_MIN_CTAS, NCCL_IB_QPS_PER_CONNECTION), differ
//    by 18-22 % themselves at these sizes, so a tighter bound would pick one tuning.
//  - every point within a factor 3, each curve's mean |error| <= 30 %. The model is
//    optimistic at 4-32 MB (up to 2.8x too fast on curve B at 8 MB): NCCL's tuning
//    model, which this reproduces, has no pipeline-fill term (a step cannot stream
//    before its first chunks arrived) and the NVLS-tree picked there is faster on
//    paper than measured; the factor 3 bound states that gap rather than hiding it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/network_cost.h"
#include "sim/tools/zero_report.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

struct Point {
  std::string curve, gpu;
  int gpus = 0, per_node = 0, nics = 0;
  double nic_gbit = 0;
  std::string algo;
  double bytes = 0, time_us = 0;
};

std::vector<Point> load() {
  std::ifstream in(test::repo_path("tests/hw/net/data/nccl_tests_published.csv"));
  std::vector<Point> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream s(line);
    Point p;
    std::string f;
    std::getline(s, p.curve, ',');
    std::getline(s, p.gpu, ',');
    std::getline(s, f, ',');
    p.gpus = std::stoi(f);
    std::getline(s, f, ',');
    p.per_node = std::stoi(f);
    std::getline(s, f, ',');
    p.nics = std::stoi(f);
    std::getline(s, f, ',');
    p.nic_gbit = std::stod(f);
    std::getline(s, p.algo, ',');
    std::getline(s, f, ',');
    p.bytes = std::stod(f);
    std::getline(s, f, ',');
    p.time_us = std::stod(f);
    out.push_back(p);
  }
  return out;
}

Seconds predict(const Point& p) {
  ClusterConfig c = default_cluster(p.gpu, p.gpus);
  c.gpus_per_node = p.per_node;
  c.nics_per_node = p.nics;
  c.nic_bandwidth = p.nic_gbit * 1e9 / 8;
  c.nvls = p.algo == "auto" && c.gpu.nvls;  // NVSwitch SHARP where the GPU has it: NCCL's default; curve C disabled it
  if (p.algo != "auto") c.collective_algorithms = {{"all_reduce", p.algo}};
  Layout layout(1, 1, p.gpus, 1, 1, p.per_node);
  NetworkModel model(c, layout);
  return model.isolated_seconds(CollectiveKind::all_reduce, model.members(Dim::dp, 0), p.bytes);
}

TEST(NcclPublished, AllReduceCurvesOfAtLeast64GpusWithinTolerance) {
  const auto points = load();
  ASSERT_GE(points.size(), 30u);
  std::map<std::string, std::pair<double, int>> mean;
  std::map<std::string, int> gpus;
  for (const auto& p : points) {
    const double t = predict(p) * 1e6;
    const double err = (t - p.time_us) / p.time_us;
    std::printf("%s %5d GPUs %12.0f B  published %9.1f us  model %9.1f us  %+6.1f %%\n", p.curve.c_str(), p.gpus,
                p.bytes, p.time_us, t, 100 * err);
    EXPECT_LE(std::abs(std::log(t / p.time_us)), std::log(3.0)) << p.curve << " at " << p.bytes << " B";
    if (p.bytes >= 2e9) EXPECT_LE(std::abs(err), 0.20) << p.curve << " at " << p.bytes << " B";
    mean[p.curve].first += std::abs(err);
    mean[p.curve].second += 1;
    gpus[p.curve] = p.gpus;
  }
  EXPECT_GE(mean.size(), 3u);
  for (const auto& [curve, m] : mean) {
    EXPECT_GE(gpus[curve], 64);
    EXPECT_LE(m.first / m.second, 0.30) << curve;
    std::printf("curve %s: mean |error| %.1f %% over %d sizes\n", curve.c_str(), 100 * m.first / m.second, m.second);
  }
}

TEST(NcclPublished, SmallAllReduceOver256A100sCostsWhatNcclMeasured) {
  // Curve D, the latency end on A100 at scale: 4-128 byte all-reduces over 32 DGX-class
  // nodes took 62-69 us (NVIDIA/nccl #652). NCCL's tuner picks tree/LL there; its latency,
  // 2 x (7 NVLink hops + log2(32) network hops) plus the base, must land within 10 % of
  // each measured point (nothing in the model was set from these figures).
  int n = 0;
  for (const auto& p : load()) {
    if (p.curve != "D") continue;
    ++n;
    const double t = predict(p) * 1e6;
    EXPECT_NEAR(t, p.time_us, 0.10 * p.time_us) << p.bytes << " B";
  }
  EXPECT_GE(n, 5);
}

TEST(NcclPublished, RingAllGatherOf100MbOver1536RanksIsLatencyBound) {
  // ZeRO-3-style all-gather of a 100 MB bucket over all 1,536 GPUs of 192 DGX A100
  // nodes: NCCL runs a ring of n−1 = 1,535 steps (191 on the network); its latency
  // alone, at least 1,344 NVLink hops at the 1 µs network-post floor + 191 network
  // hops of 2.7 µs (LL, the cheapest), exceeds the whole bandwidth term
  // (n−1)/n · S over 192 GB/s (0.52 ms) several times.
  ClusterConfig c = default_cluster("a100-sxm-80gb", 1536);
  Layout layout(1, 1, 1536, 1, 1, 8);
  NetworkModel model(c, layout);
  const auto ranks = model.members(Dim::dp, 0);
  const double S = 100e6;
  const auto e = model.expand(CollectiveKind::all_gather, ranks, S);
  EXPECT_EQ(e.nccl.rfind("ring/", 0), 0u) << e.nccl;
  EXPECT_GE(e.step_latency * static_cast<double>(e.num_steps()), (1344 * 1.0 + 191 * 2.7) * 1e-6);
  const Seconds t = model.isolated_seconds(CollectiveKind::all_gather, ranks, S);
  const Seconds bandwidth_term = S * 1535 / 1536 / 192e9;
  EXPECT_GT(t, 3 * bandwidth_term);
  std::printf("all-gather 100 MB over 1536 ranks: %s, %.2f ms (bandwidth term %.2f ms)\n", e.nccl.c_str(), t * 1e3,
              bandwidth_term * 1e3);
}

}  // namespace
}  // namespace ptsim::sim
