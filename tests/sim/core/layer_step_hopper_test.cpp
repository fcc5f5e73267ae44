// ptsim's per-layer compute against layer steps measured on an H100 80GB HBM3 at reference
// runs' shapes (calibration/logs/h100-sxm/; README "Training frameworks" and "Validation"),
// and the same steps measured on an H200 (calibration/logs/h200/, README "The H200 table")
// against the same layers with `cluster.gpu=h200`.
// MPT blocks as FSDP runs them (bench/gpu/layer_step.py, layer_step.json):
//  - a layer's compute (forward, recomputed forward, backward) on the datasheet roofline
//    against the measured PyTorch step (`plain`: cuBLAS GEMMs, SDPA's FlashAttention-2,
//    eager LayerNorm and GELU);
//  - FSDP's gradient kernels (ProgramBuilder::fsdp_unit_grads) against the
//    profiled cat, cast and divisions;
//  - the post-backward stream saving nothing against the same kernels in line, which is
//    why the program puts them on the compute stream.
// And one expert-parallel rank's share of a Mixtral 8x7B layer (bench/gpu/moe_step.py,
// moe_step.json), against the Megatron-Core MoE reference run's layer.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "hw/compute_cost.h"
#include "sim/core/framework_profile.h"
#include "sim/core/program_builder.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/core/program_fixtures.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

nlohmann::json measured_json(const std::string& gpu, const std::string& file) {
  std::ifstream in(test::repo_path("calibration/logs/" + gpu + "/" + file));
  return nlohmann::json::parse(in);
}

nlohmann::json measured_mpt_row(const std::string& name, const std::string& gpu = "h100-sxm") {
  const auto doc = measured_json(gpu, "layer_step.json");
  for (const auto& r : doc.at("rows"))
    if (r.at("case").at("name") == name) return r;
  ADD_FAILURE() << "no measured row " << name;
  return {};
}

// Seconds of one micro-batch's compute on the first stage, the FSDP kernels apart or not.
double micro_batch_compute(const std::string& file, int layers, bool fsdp_kernels,
                           std::vector<std::string> overrides = {}) {
  overrides.push_back("model.num_layers=" + std::to_string(layers));
  const Scenario s = load_scenario(test::repo_path("scenarios/reference/" + file), overrides);
  BuildOptions named;  // compute instructions keep their names
  named.fuse_compute = false;
  const Program p = build_program(s, make_compute_cost(s), named);
  Tick t = 0;
  for (bool backward : {false, true})
    for (const Instr& in : testing::phase(p.stages[0], backward)) {
      if (in.kind != InstrKind::compute) continue;
      const std::string& label = p.labels[in.label];
      if (label == "grad accumulation") continue;  // from the second micro-batch on, the shard only
      if ((label.rfind("fsdp ", 0) == 0) == fsdp_kernels) t += in.duration;
    }
  return static_cast<double>(t) * 1e-9;
}
// Per layer: (L − L/2) layers' difference, so the embedding and head drop out.
double per_layer(const std::string& file, int layers, bool fsdp_kernels,
                 const std::vector<std::string>& overrides = {}) {
  return (micro_batch_compute(file, layers, fsdp_kernels, overrides) -
          micro_batch_compute(file, layers / 2, fsdp_kernels, overrides)) /
         (layers - layers / 2);
}

struct MptCase {
  const char* measured;  // layer_step.py's case name
  const char* scenario;
};
constexpr MptCase kMptCases[] = {{"mpt-13b-64xh100", "mpt-13b-64xh100.yaml"},
                                 {"mpt-30b-32xh100", "mpt-30b-32xh100.yaml"},
                                 {"mpt-70b-64xh100", "mpt-70b-64xh100.yaml"}};

// Each MPT block's modelled compute per layer on `gpu` against the `plain` step measured on it,
// with the attention kernel that step ran (SDPA's FlashAttention-2; the reference runs' own,
// llm-foundry's Triton kernel, is FlashAttention-1-class).
void expect_mpt_layers_within_six_percent(const std::string& gpu) {
  for (const MptCase& c : kMptCases) {
    const double measured = measured_mpt_row(c.measured, gpu).at("per_layer_s").at("plain");
    EXPECT_NEAR(per_layer(c.scenario, 8, false, {"cluster.gpu=" + gpu, "training.attention=fa2"}) / measured, 1.0, 0.06)
        << c.scenario;
  }
}

TEST(FsdpStepOnH100, LayerComputeWithinSixPercentOfTheMeasuredStep) {
  // Measured 13.72 / 223.6 / 162.6 ms per layer, modelled 13.57 / 234.0 / 171.2 ms alone
  // (0.989, 1.046, 1.053; 13.36 / 231.6 / 169.8 before stop 56's backward and causal
  // attention rates): the datasheet roofline is today's PyTorch on this H100 within 6 %, so
  // the MPT H100 rows' predictions being 9 to 25 % too fast under FA2 was not the GEMMs,
  // norms or activations (stop 54: their attention is FA1-class).
  expect_mpt_layers_within_six_percent("h100-sxm");
}

TEST(FsdpStepOnH200, LayerComputeWithinSixPercentOfTheMeasuredStep) {
  // The same die as the H100 with HBM3e (4.8 TB/s): measured 13.90 / 224.5 / 164.8 ms per
  // layer (H100: 13.72 / 223.6 / 162.6), modelled with the h200 entry 13.40 / 231.6 / 169.6
  // (0.964, 1.032, 1.029; 13.20 / 229.2 / 168.3 before stop 56). The measured steps are no faster than the H100's (the same SMs
  // and clocks under the same 700 W); the model gives the memory-bound kernels HBM3e's
  // measured rate, which puts the 13B block, the one with the most of them, 5 % fast.
  expect_mpt_layers_within_six_percent("h200");
}

// The profiled kernels FSDP adds (`fsdp` against `plain`, one step): the split backward's
// cat, the bf16-to-fp32 cast (an unvectorised copy kernel, ~1.8 TB/s) and the divisions.
double profiled_fsdp_kernels(const nlohmann::json& row) {
  const auto sum = [&](const char* variant) {
    double us = 0;
    for (const auto& k : row.at("kernels").at(variant)) {
      const std::string name = k.at("kernel");
      if (name.find("CatArrayBatchedCopy") != std::string::npos ||
          name.find("unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda") != std::string::npos ||
          name.find("MulFunctor<float>") != std::string::npos)
        us += double(k.at("us"));
    }
    return us;
  };
  return (sum("fsdp") - sum("plain")) * 1e-6 / double(row.at("case").at("layers"));
}

TEST(FsdpStepOnH100, GradientKernelsWithinTwentyPercentOfTheProfile) {
  // Modelled 2.00 / 3.92 / 5.12 ms per layer against 2.32 / 4.68 / 6.09 ms profiled
  // (0.84 to 0.86): the memory roofline gives the cat and the divisions within 3 %, the
  // dtype-converting copy 1.5x too fast.
  for (const MptCase& c : kMptCases) {
    const double measured = profiled_fsdp_kernels(measured_mpt_row(c.measured));
    const double model = per_layer(c.scenario, 8, true);
    EXPECT_NEAR(model / measured, 1.0, 0.2) << c.scenario;
  }
}

TEST(FsdpStepOnH100, ThePostBackwardStreamSavesNothing) {
  // fsdp (side stream) against fsdp_serial (in line): 16.79 / 16.12, 227.9 / 228.7,
  // 168.7 / 168.3 ms per layer. Beside the GEMMs the memory-bound kernels take SMs the
  // GEMMs' waves wanted; none of the cases gains 3 %.
  for (const MptCase& c : kMptCases) {
    const auto row = measured_mpt_row(c.measured);
    const auto& pl = row.at("per_layer_s");
    EXPECT_GT(double(pl.at("fsdp")), 0.97 * double(pl.at("fsdp_serial"))) << c.measured;
    EXPECT_GT(double(pl.at("fsdp")), double(pl.at("flat"))) << c.measured;
  }
}

// One EP rank's share of a Mixtral layer's compute, modelled on `gpu`. One stage so that
// layers can be counted off (the layer's ops are those of vpp 8 on pp 4).
double mixtral_layer(const std::string& gpu) {
  return per_layer("mcore-mixtral-8x7b-64xh100.yaml", 8, false,
                   {"parallel.pipeline_parallel=1", "parallel.virtual_pipeline_stages=1",
                    "parallel.pipeline_schedule=1f1b", "training.global_batch_size=64", "cluster.gpu=" + gpu});
}

TEST(MoeStepOnH100, MixtralLayerComputeWithinTenPercentOfTheMeasuredStep) {
  // One EP rank's share of a Mixtral layer (8,192 routed token copies to its expert, cuDNN
  // attention): measured 17.94 ms per layer in plain PyTorch (unfused SwiGLU, RMSNorm and
  // index kernels where Megatron-Core fuses them), modelled 17.88 ms alone (0.997; 16.76,
  // 0.934, before stop 56's backward and causal attention rates). The reference run's +23 %
  // is not the per-GPU kernels.
  const double measured = measured_json("h100-sxm", "moe_step.json").at("per_layer_s");
  EXPECT_NEAR(mixtral_layer("h100-sxm") / measured, 1.0, 0.1);
}

TEST(MoeStepOnH200, MixtralLayerComputeWithinTenPercentOfTheMeasuredStep) {
  // Measured 18.10 ms per layer on the H200 (17.94 on the H100), modelled 17.30 ms (0.956;
  // 17.88 on the H100): as for the MPT blocks, the model's memory-bound kernels gain from
  // HBM3e where the measured step does not.
  const double measured = measured_json("h200", "moe_step.json").at("per_layer_s");
  EXPECT_NEAR(mixtral_layer("h200") / measured, 1.0, 0.1);
}

}  // namespace
}  // namespace ptsim::sim
