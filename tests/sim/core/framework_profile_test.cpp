// Framework profiles: the defaults as documented, and each framework's partition of
// a layer count that does not divide over the pipeline stages.
#include "sim/core/framework_profile.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

// A BLOOM-176B-shaped model (BigScience model card: 70 layers, hidden 14336, 112
// heads, vocabulary 250,880, tied embeddings), the 70-layer / 12-stage case.
models::ModelSpec bloom_like() {
  models::ModelSpec m;
  m.name = "bloom-like";
  m.num_layers = 70;
  m.hidden_size = 14336;
  m.num_attention_heads = 112;
  m.num_query_groups = 112;
  m.ffn_hidden_size = 4 * 14336;
  m.vocab_size = 250880;
  m.seq_length = 2048;
  m.learned_position_embeddings = false;
  return m;
}

// Each framework's own pipeline engine runs the schedules its source offers: Megatron's
// get_forward_backward_func 1F1B and interleaved, DeepSpeed's TrainSchedule, PyTorch's
// pipelining GPipe, 1F1B, interleaved and ZB-V.
TEST(FrameworkProfile, PipelineSchedulesAreTheEngines) {
  EXPECT_EQ(offered_schedules(default_profile(Framework::megatron_core)), "1f1b, interleaved-1f1b");
  EXPECT_EQ(offered_schedules(default_profile(Framework::megatron_lm)), "1f1b, interleaved-1f1b");
  EXPECT_EQ(offered_schedules(default_profile(Framework::deepspeed)), "1f1b");
  EXPECT_EQ(offered_schedules(default_profile(Framework::fsdp)), "gpipe, 1f1b, interleaved-1f1b, zb-v");
  for (const auto& f : kFrameworkNames) {
    const auto p = default_profile(f.value);
    EXPECT_TRUE(p.offers(models::Schedule::one_f_one_b)) << f.name;
    EXPECT_FALSE(p.offers(models::Schedule::dualpipe)) << f.name;  // DeepSeek's own
    EXPECT_FALSE(p.offers(models::Schedule::zb_h1)) << f.name;     // sail-sg's Megatron-LM fork
  }
  EXPECT_NE(schedule_home(models::Schedule::dualpipe).find("DualPipe"), std::string_view::npos);
  // ZeRO stages: Megatron-core's Megatron-FSDP shards gradients and parameters, 2021–23
  // Megatron-LM's DDP and distributed optimizer do not; FSDP's modes are ZeRO-0 and ZeRO-3.
  EXPECT_EQ(offered_zero_stages(default_profile(Framework::megatron_core)), "0, 1, 2, 3");
  EXPECT_EQ(offered_zero_stages(default_profile(Framework::megatron_lm)), "0, 1");
  EXPECT_EQ(offered_zero_stages(default_profile(Framework::deepspeed)), "0, 1, 2, 3");
  EXPECT_EQ(offered_zero_stages(default_profile(Framework::fsdp)), "0, 3");
  // Context parallelism: Megatron's in Transformer Engine's attention (the ring unless
  // --cp-comm-type says otherwise), PyTorch's ring, DeepSpeed's Ulysses (heads all-to-all'd).
  EXPECT_TRUE(default_profile(Framework::megatron_core).offers_context_parallel());
  EXPECT_FALSE(default_profile(Framework::megatron_lm).offers_context_parallel());  // its own layers
  EXPECT_TRUE(default_profile(Framework::deepspeed).offers_context_parallel());
  EXPECT_EQ(default_profile(Framework::deepspeed).cp_comm, CpComm::a2a);
  EXPECT_EQ(default_profile(Framework::megatron_core).cp_comm, CpComm::p2p);
  EXPECT_TRUE(default_profile(Framework::fsdp).offers_context_parallel());
}

TEST(FrameworkProfile, DefaultsAreTheDocumentedOnes) {
  const auto mc = default_profile(Framework::megatron_core);
  EXPECT_FALSE(mc.grad_bucket_params.has_value());  // Megatron's max(40M, 1M·dp)
  EXPECT_EQ(mc.gather_unit, GatherUnit::layer);
  const auto ds = default_profile(Framework::deepspeed);
  EXPECT_EQ(ds.gather_unit, GatherUnit::submodule);
  EXPECT_DOUBLE_EQ(*ds.grad_bucket_params, 5e8);
  EXPECT_DOUBLE_EQ(*ds.allgather_bucket_params, 5e8);
  EXPECT_DOUBLE_EQ(ds.prefetch_bucket_params, 5e7);
  EXPECT_DOUBLE_EQ(ds.param_persistence_threshold, 1e5);
  const auto fs = default_profile(Framework::fsdp);
  EXPECT_TRUE(fs.grad_reduce_per_unit);
  EXPECT_TRUE(fs.reshard_after_forward);
  EXPECT_EQ(fs.backward_prefetch, BackwardPrefetch::pre);
  // Every framework gathers and reduces over one process group: one NCCL stream.
  for (const auto& f : kFrameworkNames) EXPECT_TRUE(default_profile(f.value).dp_one_stream) << f.name;
  // Megatron's column-parallel backward communicates beside its GEMMs; the others block.
  for (const auto& f : kFrameworkNames) {
    const bool megatron = f.value == Framework::megatron_core || f.value == Framework::megatron_lm;
    EXPECT_EQ(default_profile(f.value).async_tp_backward, megatron) << f.name;
    EXPECT_EQ(default_profile(f.value).async_tp_allreduce, megatron) << f.name;
    EXPECT_EQ(default_profile(f.value).fused_grad_accumulation, megatron) << f.name;
  }
}

TEST(FrameworkProfile, DeepSpeedReleases) {
  EXPECT_EQ(parse_deepspeed_version("0.3.14").minor, 3);
  EXPECT_EQ(parse_deepspeed_version("0.3.14").patch, 14);
  EXPECT_EQ(parse_deepspeed_version("0.14").minor, 14);
  EXPECT_EQ(parse_deepspeed_version(kDefaultDeepSpeedVersion).minor, DeepSpeedVersion{}.minor);
  for (const char* bad : {"0.3.11", "0.2", "1.0", "0", "0.", "0.3.", "0.3.x", "v0.5", "0.100", " 0.5", "0.5.1.2"})
    EXPECT_THROW(parse_deepspeed_version(bad), std::invalid_argument) << bad;
  const auto flags = [](const char* v, std::optional<bool> contiguous = std::nullopt) {
    auto p = default_profile(Framework::deepspeed);
    apply_deepspeed_release(p, parse_deepspeed_version(v), contiguous);
    return std::tuple{p.gather_blocks_host, p.gather_per_rank_ops, p.grads_all_reduced, p.grads_per_param_list};
  };
  EXPECT_EQ(flags("0.3.14"), std::tuple(true, true, true, false));
  EXPECT_EQ(flags("0.3.14", true), std::tuple(true, true, false, true));
  EXPECT_EQ(flags("0.3.16", true), std::tuple(true, true, true, false));  // reduce_scatter off in 0.3.16 only
  EXPECT_EQ(flags("0.4.3"), std::tuple(true, true, false, true));         // contiguous_gradients on by default
  EXPECT_EQ(flags("0.4.3", false), std::tuple(true, true, true, false));
  EXPECT_EQ(flags("0.5.5"), std::tuple(true, false, false, true));
  EXPECT_EQ(flags("0.5.10"), std::tuple(true, false, false, true));  // reduce_scatter_coalesced from 0.6.0
  EXPECT_EQ(flags("0.6.0", false), std::tuple(false, false, false, false));
  EXPECT_EQ(flags("0.6.0"), std::tuple(false, false, false, false));
  EXPECT_EQ(flags("0.14"), std::tuple(false, false, false, false));
}

TEST(FrameworkProfile, DeepSpeedBalancesParametersOver70LayersOn12Stages) {
  // Weights in layers L: the tied embedding E ≈ 1.46 L sits on the first stage and
  // again as the head on the last. A bottleneck below 5 L + E cannot hold 70
  // layers (at most 4 + 10·6 + 4 = 68); at 5 L + E the middle stages hold 6
  // (7 L > 5 L + E) and 5 + 10·6 + 5 = 70: the split is forced.
  const auto parts = default_partition(default_profile(Framework::deepspeed), bloom_like(), 12);
  const std::vector<int> expected = {5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5};
  EXPECT_EQ(parts, expected);
}

TEST(FrameworkProfile, DeepSpeedEvenWhenTheEmbeddingIsSmall) {
  models::ModelSpec m = bloom_like();
  m.vocab_size = 8;  // negligible embedding: an even split of 24 layers over 4 stages
  m.num_layers = 24;
  EXPECT_EQ(default_partition(default_profile(Framework::deepspeed), m, 4), (std::vector<int>{6, 6, 6, 6}));
}

TEST(FrameworkProfile, MegatronNeedsFirstAndLastStageCounts) {
  auto fp = default_profile(Framework::megatron_core);
  EXPECT_TRUE(default_partition(fp, bloom_like(), 12).empty());  // nothing given: the caller names the keys
  fp.first_stage_layers = 4;
  fp.last_stage_layers = 6;
  EXPECT_EQ(default_partition(fp, bloom_like(), 12), (std::vector<int>{4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6}));
  fp.last_stage_layers = 0;  // 66 layers over 11 stages
  EXPECT_EQ(default_partition(fp, bloom_like(), 12), (std::vector<int>{4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6}));
  fp.first_stage_layers = 5;  // 65 over 11: uneven
  EXPECT_THROW(default_partition(fp, bloom_like(), 12), std::invalid_argument);
}

TEST(FrameworkProfile, MegatronAccountsForEmbeddingAndLossInTheSplit) {
  // Megatron-core get_num_layers_to_build: (70 + 1 + 1) / 12 = 6 per stage; the first
  // stage builds 5 (the embedding is its sixth), the last 5 (the loss).
  auto fp = default_profile(Framework::megatron_core);
  fp.embedding_in_split = fp.loss_in_split = true;
  EXPECT_EQ(default_partition(fp, bloom_like(), 12), (std::vector<int>{5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5}));
  // With 6 chunks per stage: one layer per virtual stage, none in the first and the last.
  const auto v = default_partition(fp, bloom_like(), 12, 6);
  ASSERT_EQ(v.size(), 72u);
  EXPECT_EQ(v.front(), 0);
  EXPECT_EQ(v.back(), 0);
  EXPECT_EQ(std::count(v.begin(), v.end(), 1), 70);
  fp.loss_in_split = false;  // 71 over 12 stages: uneven
  EXPECT_THROW(default_partition(fp, bloom_like(), 12), std::invalid_argument);
  fp.loss_in_split = true;  // 72 / 12 = 6 per stage, not divisible by 4 chunks
  EXPECT_THROW(default_partition(fp, bloom_like(), 12, 4), std::invalid_argument);
}

TEST(FrameworkProfile, FsdpHasNoPipelinePartition) {
  EXPECT_TRUE(default_partition(default_profile(Framework::fsdp), bloom_like(), 12).empty());
}

// kEagerOpHostSeconds (a 2020 operator micro-benchmark) against the list-form gather's
// loop itself, measured on a lent H100 machine (bench/gpu/list_gather_host.py, PyTorch
// 2.11; calibration/logs/h100-sxm/list_gather_host.json): per rank, DeepSpeed 0.3.14's
// narrow + get_rank loop with all_gather's checks and the list's conversion (one call in
// the model), and ProcessGroupNCCL's post loop, recordStream + select + copy_ (two calls).
// Rows where a pure-Python reference loop ran slower than 4.5 ms are left out: the host
// then ran 1.7x slower throughout (README "Training frameworks"). Within 20 %: the
// usual-speed rows themselves spread by that much.
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

TEST(FrameworkProfile, EagerOpHostTimeMatchesTheMeasuredListGatherLoop) {
  std::ifstream in(test::repo_path("calibration/logs/h100-sxm/list_gather_host.json"));
  ASSERT_TRUE(in) << "calibration/logs/h100-sxm/list_gather_host.json";
  const auto j = nlohmann::json::parse(in);
  std::vector<double> views, copies;
  for (const auto& r : j.at("rows")) {
    if (double(r.at("python_ref_s")) >= 4.5e-3) continue;
    views.push_back(double(r.at("ds_loop_per_rank_s")) + double(r.at("py_checks_per_rank_s")) +
                    double(r.at("to_cpp_per_rank_s")));
    copies.push_back(r.at("post_host_per_rank_s"));
  }
  ASSERT_GE(views.size(), 30u);
  const double view = median_of(views), copy = median_of(copies);
  EXPECT_NEAR(kEagerOpHostSeconds / view, 1.0, 0.2) << view;
  EXPECT_NEAR(2 * kEagerOpHostSeconds / copy, 1.0, 0.2) << copy;
}

// The optimizer step's implementation per framework (optimizer_step_bytes; the builder's
// use of it: ProgramBuilder.OptimizerStepBytesPerParameter): FSDP's scripts run PyTorch
// AdamW's foreach passes (80 bytes a parameter) and clip_grad_norm_ (12), Composer's
// DecoupledAdamW loop 88; Megatron and DeepSpeed one fused kernel (28).
TEST(FrameworkProfile, OptimizerStepPassesByImplementation) {
  FrameworkProfile fp = default_profile(Framework::fsdp);
  EXPECT_EQ(fp.optimizer_impl, OptimizerImpl::foreach);
  EXPECT_TRUE(fp.clip_grad_norm);
  EXPECT_DOUBLE_EQ(optimizer_step_bytes(fp), 92);
  fp.optimizer_impl = OptimizerImpl::decoupled_adamw;
  EXPECT_DOUBLE_EQ(optimizer_step_bytes(fp), 100);
  fp.clip_grad_norm = false;
  fp.optimizer_impl = OptimizerImpl::fused;
  EXPECT_DOUBLE_EQ(optimizer_step_bytes(fp), 28);
  for (const Framework f : {Framework::megatron_core, Framework::megatron_lm, Framework::deepspeed})
    EXPECT_DOUBLE_EQ(optimizer_step_bytes(default_profile(f)), 28) << to_string(f);
}

}  // namespace
}  // namespace ptsim::sim
