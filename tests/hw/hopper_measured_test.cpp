// The datasheet cost model against measurements on a real H100 80GB HBM3 and a real H200
// (README 'Calibration on a real GPU'):
//  - the shape-aware GEMM roofline against calibration/tables/h100-sxm.yaml and h200.yaml
//    (`ptsim calibrate`, cuBLASLt, random operands);
//  - the catalog's memory rate (efficiency.memory x HBM bandwidth) against each table's
//    device-copy fit;
//  - the SM-holding model (KernelDesc::reserved_sms): bench/gpu/sm_contention.py timed every
//    bf16 shape of the calibration sweep alone and beside 16 held SMs (a DGX's 8 NICs x 2
//    NCCL channels), committed in calibration/logs/<gpu>/sm_contention.json;
//  - cuDNN's fused attention, forward and backward, as the Mixtral layer probe timed it
//    (bench/gpu/moe_step.py, calibration/logs/h100-sxm/moe_step.json).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "hw/compute_cost.h"
#include "hw/cost_table.h"
#include "hw/gpu_catalog.h"
#include "tests/hw/kernel_fixtures.h"
#include "tests/test_paths.h"

namespace ptsim::hw {
namespace {

struct Slowdown {
  double measured = 0, model = 0;
};

// Time-weighted (by the measured time alone) slowdown of the shapes whose measured time
// alone is under `max_alone_s`: a training step's GEMMs add up, so their sum is what counts.
Slowdown held_slowdown(double max_alone_s, const std::string& gpu = "h100-sxm") {
  std::ifstream in(test::repo_path("calibration/logs/" + gpu + "/sm_contention.json"));
  const auto j = nlohmann::json::parse(in);
  const ComputeCostModel model(*find_gpu(gpu));
  double alone = 0, measured = 0, modelled = 0;
  for (const auto& r : j.at("sweep_held16")) {
    const double t = r.at("alone_s");
    if (t >= max_alone_s) continue;
    KernelDesc k = testing::gemm(r.at("m"), r.at("n"), r.at("k"));
    const double free = model.seconds(k);
    k.reserved_sms = 16;
    alone += t;
    measured += double(r.at("held_s"));
    modelled += t * model.seconds(k) / free;
  }
  return {measured / alone, modelled / alone};
}

// Sorted model/measured time ratios of every bf16 GEMM of `gpu`'s measured table.
std::vector<double> gemm_ratios(const std::string& table_file, const std::string& gpu) {
  const auto table = load_cost_table(test::repo_path("calibration/tables/" + table_file));
  const ComputeCostModel model(*find_gpu(gpu));
  std::vector<double> ratio;
  for (const auto& p : table.gemm) {
    if (p.dtype != "bf16") continue;
    ratio.push_back(model.seconds(testing::gemm(p.m, p.n, p.k)) / p.seconds);
  }
  std::sort(ratio.begin(), ratio.end());
  return ratio;
}

double share_within_ten_percent(const std::vector<double>& ratio) {
  const auto close = std::count_if(ratio.begin(), ratio.end(), [](double r) { return std::abs(r - 1) <= 0.10; });
  return double(close) / double(ratio.size());
}

TEST(GemmRooflineOnH100, TracksTheMeasuredTable) {
  // 214 bf16 shapes (hidden 1k-12k, 2k-16k tokens, fwd/dgrad/wgrad): measured median
  // model/measured 1.036 (the 0.70 efficiency is the sustained rate, the table a 0.1 s
  // warm-up), 93 % of the shapes within 10 %.
  const auto ratio = gemm_ratios("h100-sxm.yaml", "h100-sxm");
  ASSERT_GT(ratio.size(), 200u);
  EXPECT_NEAR(ratio[ratio.size() / 2], 1.0, 0.06);
  EXPECT_GE(share_within_ten_percent(ratio), 0.90);
}

TEST(GemmRooflineOnH200, TracksTheMeasuredTable) {
  // The same sweep on an H200 (the H100's SMs and clocks): median model/measured 1.001,
  // 94 % of the shapes within 10 % (the fit at full waves: 699 TFLOP/s, the H100's 726).
  const auto ratio = gemm_ratios("h200.yaml", "h200");
  ASSERT_GT(ratio.size(), 200u);
  EXPECT_NEAR(ratio[ratio.size() / 2], 1.0, 0.06);
  EXPECT_GE(share_within_ten_percent(ratio), 0.90);
}

TEST(MemoryRateOnHopper, CatalogMatchesTheMeasuredCopy) {
  // efficiency.memory is the measured device copy's share of the datasheet HBM bandwidth:
  // H100 2,854 GB/s of 3,350 (0.85), H200 3,990 GB/s of 4,800 (0.83).
  for (const auto& [table_file, gpu] : {std::pair{"h100-sxm.yaml", "h100-sxm"}, std::pair{"h200.yaml", "h200"}}) {
    const auto table = load_cost_table(test::repo_path(std::string("calibration/tables/") + table_file));
    ASSERT_TRUE(table.membw_fit.has_value()) << table_file;
    const GpuSpec spec = *find_gpu(gpu);
    const double catalog = spec.efficiency.memory * spec.hbm_bandwidth;
    EXPECT_NEAR(catalog / table.membw_fit->bandwidth_bytes_per_s, 1.0, 0.01) << gpu;
  }
}

TEST(HeldSmsOnH100, WholeSweepSlowdownWithinFivePoints) {
  // Measured 1.102, modelled 1.141 (202 shapes): more than the bare SM ratio 132/116 = 1.138
  // would say for the short GEMMs, less for the long ones (power headroom).
  const Slowdown s = held_slowdown(1.0);
  EXPECT_GT(s.measured, 1.05);
  EXPECT_NEAR(s.model, s.measured, 0.05);
}

TEST(HeldSmsOnH100, SubMillisecondGemmsWithinTenPoints) {
  // Measured 1.358, modelled 1.272 (101 shapes): a GEMM of one or two waves loses most
  // (its tiles that find no SM wait for a whole wave).
  const Slowdown s = held_slowdown(1e-3);
  EXPECT_GT(s.measured, 1.2);
  EXPECT_NEAR(s.model, s.measured, 0.10);
}

TEST(HeldSmsOnH200, SweepSlowdownsWithinSevenAndTwelvePoints) {
  // The same probe on an H200 (the H100's die): the whole sweep measures 1.080 (H100 1.102),
  // the GEMMs under 1 ms 1.376 (1.358); the model, the same for both GPUs, says 1.141 and
  // 1.270. So the H100's 5 and 10 point bounds are missed here by 1 point each: the held-SM
  // model is good to ~6 points on the whole sweep and ~11 on the short GEMMs.
  const Slowdown whole = held_slowdown(1.0, "h200"), short_gemms = held_slowdown(1e-3, "h200");
  EXPECT_GT(whole.measured, 1.05);
  EXPECT_NEAR(whole.model, whole.measured, 0.07);
  EXPECT_GT(short_gemms.measured, 1.2);
  EXPECT_NEAR(short_gemms.model, short_gemms.measured, 0.12);
}

// cuDNN's SDPA in the Mixtral layer probe (PyTorch 2.11, SDPBackend.CUDNN_ATTENTION): one
// sequence of 4,096 tokens, 32 query heads of 128, causal. Its forward kernel and its backward
// kernels (the flash bprop, dot(dO, O), dQ's conversion and the head reduction), per layer,
// against the catalog's `cudnn` shape (gpus.yaml attention_shape): within 10 %. Before stop 56
// the backward ran at the forward's rate, 22 % faster than measured.
TEST(AttentionOnH100, CudnnForwardAndBackwardWithinTenPercent) {
  std::ifstream in(test::repo_path("calibration/logs/h100-sxm/moe_step.json"));
  const auto j = nlohmann::json::parse(in);
  const int layers = j.at("shape").at("layers");
  double fwd = 0, bwd = 0;
  for (const auto& k : j.at("kernels")) {
    const std::string name = k.at("kernel");
    const double s = double(k.at("us")) * 1e-6 / layers;
    if (name.find("sdpa_sm90_flash_fprop") != std::string::npos) fwd += s;
    if (name.find("sdpa_sm90_flash_bprop") != std::string::npos || name.find("cudnn::fusion::") != std::string::npos)
      bwd += s;
  }
  ASSERT_GT(fwd, 0);
  ASSERT_GT(bwd, fwd);
  ComputeCostModel model(*find_gpu("h100-sxm"));
  model.set_attention_kernel("cudnn");
  const std::int64_t seq = j.at("shape").at("seq"), heads = j.at("shape").at("heads");
  KernelDesc a;
  a.cls = KernelClass::attention;
  a.batch_heads = heads, a.seq_q = seq, a.seq_kv = seq, a.head_dim = 128, a.causal = true;
  a.flops = 4.0 * static_cast<double>(heads * seq * seq * 128);  // counted in full; the model halves it
  EXPECT_NEAR(model.seconds(a) / fwd, 1.0, 0.10) << fwd;
  a.backward = true;
  a.flops *= 2.5;
  EXPECT_NEAR(model.seconds(a) / bwd, 1.0, 0.10) << bwd;
}

}  // namespace
}  // namespace ptsim::hw
