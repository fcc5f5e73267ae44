// Megatron-LM arguments and DeepSpeed configs become scenario keys: every supported flag
// mapped, every other one named (README "Inputs you already have").
#include "sim/io/import_args.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "hw/errors.h"
#include "hw/input_file.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

std::string fixture(const std::string& name) { return test::repo_path("tests/sim/io/data/" + name); }
std::string text_of(const std::string& name) { return hw::read_input_file(fixture(name), "fixture"); }

std::string joined(const std::vector<std::string>& ws) {
  std::string out;
  for (const auto& w : ws) out += w + "\n";
  return out;
}

TEST(ImportMegatron, Gpt3_175bExampleScript) {
  const auto k = import_megatron_args(text_of("megatron_gpt3_175b.sh"), "gpt3.sh", 1024);
  const auto& m = k.keys["model"];
  EXPECT_EQ(m["num_layers"].as<int>(), 96);
  EXPECT_EQ(m["hidden_size"].as<int>(), 12288);
  EXPECT_EQ(m["num_attention_heads"].as<int>(), 96);
  EXPECT_EQ(m["seq_length"].as<int>(), 2048);
  EXPECT_EQ(m["ffn_hidden_size"].as<int>(), 4 * 12288);  // Megatron's default without --ffn-hidden-size
  EXPECT_EQ(m["mlp"].as<std::string>(), "gelu");
  EXPECT_FALSE(m["vocab_size"]);  // in the tokenizer's vocabulary file
  const auto& p = k.keys["parallel"];
  EXPECT_EQ(p["tensor_parallel"].as<int>(), 8);
  EXPECT_EQ(p["pipeline_parallel"].as<int>(), 16);
  EXPECT_EQ(p["zero_stage"].as<int>(), 0);
  EXPECT_FALSE(p["overlap_grad_reduce"].as<bool>());  // Megatron's default: off
  const auto& t = k.keys["training"];
  EXPECT_EQ(t["micro_batch_size"].as<int>(), 1);
  EXPECT_EQ(t["global_batch_size"].as<int>(), 1536);
  EXPECT_EQ(t["precision"].as<std::string>(), "fp16");
  EXPECT_EQ(t["train_iters"].as<int>(), 500000);
  ASSERT_EQ(k.missing.size(), 1u);
  EXPECT_EQ(k.missing[0].first, "model.vocab_size");
  YAML::Node without = YAML::Clone(k.keys), with = YAML::Clone(k.keys);
  with["model"]["vocab_size"] = 51200;
  ASSERT_EQ(missing_warnings(k, without).size(), 1u);
  EXPECT_NE(missing_warnings(k, without)[0].find(
                "gpt3.sh: --vocab-file/--tokenizer-model: the vocabulary size is in the tokenizer"),
            std::string::npos);
  EXPECT_TRUE(missing_warnings(k, with).empty());  // the scenario gives it: no warning
  const std::string w = joined(k.warnings);
  EXPECT_FALSE(t["attention"]);  // --attention-backend auto: Transformer Engine picks a flash kernel
  for (const char* ignored : {"--lr,", "--weight-decay", "--rampup-batch-size", "--split"})
    EXPECT_NE(w.find(ignored), std::string::npos) << ignored << " not named in:\n" << w;
  EXPECT_EQ(w.find("--num-layers,"), std::string::npos) << "a mapped flag named as ignored:\n" << w;
}

TEST(ImportMegatron, LlamaStyleFlagsMapEveryKey) {
  const auto k = import_megatron_args(text_of("megatron_llama_gqa.args"), "llama.args", 512);
  const auto& m = k.keys["model"];
  EXPECT_EQ(m["num_query_groups"].as<int>(), 8);
  EXPECT_EQ(m["mlp"].as<std::string>(), "swiglu");
  EXPECT_EQ(m["norm"].as<std::string>(), "rmsnorm");
  EXPECT_EQ(m["position_embedding"].as<std::string>(), "rope");
  EXPECT_FALSE(m["add_bias_linear"].as<bool>());
  EXPECT_TRUE(m["untie_embeddings"].as<bool>());
  // 128,256 padded to a multiple of 128 × tp 8 = 1,024 (Megatron's _vocab_size_with_padding).
  EXPECT_EQ(m["vocab_size"].as<int>(), 129024);
  const auto& p = k.keys["parallel"];
  EXPECT_EQ(p["virtual_pipeline_stages"].as<int>(), 80 / (4 * 5));
  EXPECT_EQ(p["context_parallel"].as<int>(), 2);
  EXPECT_TRUE(p["sequence_parallel"].as<bool>());
  EXPECT_EQ(p["recompute"].as<std::string>(), "selective");
  EXPECT_EQ(p["zero_stage"].as<int>(), 1);
  EXPECT_TRUE(p["overlap_grad_reduce"].as<bool>());
  EXPECT_TRUE(p["overlap_param_gather"].as<bool>());
  const auto& t = k.keys["training"];
  EXPECT_EQ(t["precision"].as<std::string>(), "bf16");
  EXPECT_DOUBLE_EQ(t["total_tokens"].as<double>(), 1e6 * 8192);
  const std::string w = joined(k.warnings);
  EXPECT_NE(w.find("--max-position-embeddings: 131072 is not modelled"), std::string::npos) << w;
  EXPECT_NE(w.find("ignored (no effect on the simulated iteration, or not modelled): --lr\n"), std::string::npos) << w;
}

// The attention kernel: --attention-backend (unfused and local keep the s x s scores:
// naive), the local transformer's own attention (naive), --use-flash-attn.
TEST(ImportMegatron, AttentionBackendAndTransformerImpl) {
  const auto attention = [](const std::string& args) {
    const auto k = import_megatron_args(args, "a", 8);
    const auto t = k.keys["training"]["attention"];
    return t ? t.as<std::string>() : std::string("default");
  };
  EXPECT_EQ(attention("--attention-backend unfused"), "naive");
  EXPECT_EQ(attention("--attention-backend local --transformer-impl local"), "naive");
  EXPECT_EQ(attention("--attention-backend flash"), "flash");
  EXPECT_EQ(attention("--attention-backend fused"), "cudnn");
  EXPECT_EQ(attention("--attention-backend auto"), "default");
  EXPECT_EQ(attention("--transformer-impl transformer_engine"), "default");
  EXPECT_EQ(attention("--transformer-impl local"), "naive");
  EXPECT_EQ(attention("--transformer-impl local --use-flash-attn"), "flash");
  EXPECT_THROW(import_megatron_args("--attention-backend triton", "a", 8), InputError);
  // The layers' implementation itself (memory: TE's workspace, the local attention's buffer).
  EXPECT_EQ(import_megatron_args("--transformer-impl local", "a", 8)
                .keys["training"]["megatron"]["transformer_impl"]
                .as<std::string>(),
            "local");
}

// Megatron turns sequence parallelism off without tensor parallelism; so does the import.
TEST(ImportMegatron, SequenceParallelNeedsTensorParallel) {
  const auto one = import_megatron_args("--sequence-parallel --pipeline-model-parallel-size 4", "a", 8);
  EXPECT_FALSE(one.keys["parallel"]["sequence_parallel"].as<bool>());
  EXPECT_NE(joined(one.warnings).find("--sequence-parallel: off, as Megatron-LM turns it off"), std::string::npos);
  EXPECT_TRUE(import_megatron_args("--sequence-parallel --tensor-model-parallel-size 2", "a", 8)
                  .keys["parallel"]["sequence_parallel"]
                  .as<bool>());
}

// Megatron's softmax flags: the fused kernel off, the softmax in fp32 (also implied by
// --apply-query-key-layer-scaling).
TEST(ImportMegatron, SoftmaxFusionAndFp32Flags) {
  const auto k = import_megatron_args("--no-masked-softmax-fusion --apply-query-key-layer-scaling", "a", 8);
  EXPECT_FALSE(k.keys["training"]["megatron"]["masked_softmax_fusion"].as<bool>());
  EXPECT_TRUE(k.keys["training"]["megatron"]["attention_softmax_in_fp32"].as<bool>());
  EXPECT_TRUE(import_megatron_args("--attention-softmax-in-fp32", "a", 8)
                  .keys["training"]["megatron"]["attention_softmax_in_fp32"]
                  .as<bool>());
  EXPECT_FALSE(import_megatron_args("--bf16", "a", 8).keys["training"]["megatron"]);
}

TEST(ImportMegatron, CrossEntropyLossFusionAndGradientBucketFlags) {
  EXPECT_TRUE(import_megatron_args("--cross-entropy-loss-fusion", "a", 8)
                  .keys["training"]["megatron"]["cross_entropy_loss_fusion"]
                  .as<bool>());
  const auto k = import_megatron_args(
      "--no-check-for-nan-in-loss-and-grad --ddp-average-in-collective --no-delay-grad-reduce", "a", 8);
  EXPECT_FALSE(k.keys["training"]["megatron"]["check_for_nan_in_loss_and_grad"].as<bool>());
  EXPECT_TRUE(k.keys["training"]["megatron"]["ddp_average_in_collective"].as<bool>());
  EXPECT_FALSE(k.keys["training"]["megatron"]["delay_grad_reduce"].as<bool>());
}

// --moe-grouped-gemm (memory: TEGroupedMLP's multi-stream workspaces).
TEST(ImportMegatron, MoeGroupedGemm) {
  EXPECT_TRUE(import_megatron_args("--num-experts 8 --moe-grouped-gemm", "a", 8)
                  .keys["training"]["megatron"]["moe_grouped_gemm"]
                  .as<bool>());
  EXPECT_FALSE(import_megatron_args("--num-experts 8", "a", 8).keys["training"]["megatron"]["moe_grouped_gemm"]);
}

// --microbatch-group-size-per-virtual-pipeline-stage (the interleaved schedule's groups).
TEST(ImportMegatron, MicrobatchGroupSize) {
  EXPECT_EQ(import_megatron_args("--microbatch-group-size-per-virtual-pipeline-stage 6", "a", 8)
                .keys["training"]["megatron"]["microbatch_group_size_per_vp_stage"]
                .as<int>(),
            6);
  EXPECT_FALSE(
      import_megatron_args("--bf16", "a", 8).keys["training"]["megatron"]["microbatch_group_size_per_vp_stage"]);
}

// --defer-embedding-wgrad-compute with its --wgrad-deferral-limit.
TEST(ImportMegatron, DeferEmbeddingWgrad) {
  const auto k = import_megatron_args("--defer-embedding-wgrad-compute --wgrad-deferral-limit 2", "a", 8);
  EXPECT_TRUE(k.keys["training"]["megatron"]["defer_embedding_wgrad_compute"].as<bool>());
  EXPECT_EQ(k.keys["training"]["megatron"]["wgrad_deferral_limit"].as<int>(), 2);
  EXPECT_FALSE(import_megatron_args("--bf16", "a", 8).keys["training"]["megatron"]["defer_embedding_wgrad_compute"]);
}

// --no-bias-swiglu-fusion / --no-bias-gelu-fusion: the one of the model's activation.
TEST(ImportMegatron, BiasActivationFusion) {
  const auto fusion = [](const std::string& args) {
    return import_megatron_args(args, "a", 8).keys["training"]["megatron"]["bias_activation_fusion"];
  };
  EXPECT_FALSE(fusion("--swiglu --no-bias-swiglu-fusion").as<bool>());
  EXPECT_FALSE(fusion("--swiglu --no-bias-gelu-fusion"));
  EXPECT_FALSE(fusion("--no-bias-gelu-fusion").as<bool>());
  EXPECT_FALSE(fusion("--no-bias-swiglu-fusion"));
}

// --moe-layer-freq in its list form (as DeepSeek-style scripts write it) and the shared
// experts' --moe-shared-expert-intermediate-size, in experts of the routed width.
TEST(ImportMegatron, MoeLayerPatternAndSharedExperts) {
  const auto k = import_megatron_args(
      "--num-layers 4 --num-experts 64 --moe-ffn-hidden-size 1408 --moe-layer-freq ([0]*1+[1]*3) "
      "--moe-shared-expert-intermediate-size 2816",
      "ds.sh", 8);
  EXPECT_EQ(k.keys["model"]["moe"]["layer_freq"].as<std::string>(), "([0]*1+[1]*3)");
  EXPECT_EQ(k.keys["model"]["moe"]["shared_experts"].as<int>(), 2);
  EXPECT_FALSE(k.keys["training"]["megatron"]["moe_shared_expert_overlap"]);
  EXPECT_FALSE(k.keys["model"]["moe"]["shared_expert_gate"]);
  EXPECT_TRUE(import_megatron_args("--num-experts 8 --moe-shared-expert-gate", "a", 8)
                  .keys["model"]["moe"]["shared_expert_gate"]
                  .as<bool>());
  EXPECT_TRUE(import_megatron_args("--tp-comm-overlap --sequence-parallel --tensor-model-parallel-size 2", "a", 8)
                  .keys["training"]["megatron"]["tp_comm_overlap"]
                  .as<bool>());
  // --cp-comm-type: one type for every layer; per-layer lists and a2a+p2p are not modelled (warned).
  for (const char* type : {"allgather", "a2a"})
    EXPECT_EQ(import_megatron_args(std::string("--context-parallel-size 2 --cp-comm-type ") + type, "a", 8)
                  .keys["training"]["megatron"]["cp_comm_type"]
                  .as<std::string>(),
              type);
  const auto mixed = import_megatron_args("--context-parallel-size 2 --cp-comm-type p2p a2a+p2p", "a", 8);
  EXPECT_FALSE(mixed.keys["training"]["megatron"]["cp_comm_type"]);
  EXPECT_TRUE(std::any_of(mixed.warnings.begin(), mixed.warnings.end(), [](const std::string& w) {
    return w.find("--cp-comm-type: only one of p2p, allgather or a2a") != std::string::npos;
  }));
  EXPECT_TRUE(import_megatron_args("--num-experts 8 --moe-shared-expert-overlap", "a", 8)
                  .keys["training"]["megatron"]["moe_shared_expert_overlap"]
                  .as<bool>());
  EXPECT_EQ(
      import_megatron_args("--num-experts 8 --moe-layer-freq 2", "a", 8).keys["model"]["moe"]["layer_freq"].as<int>(),
      2);
  for (const char* bad : {"--num-experts 8 --moe-layer-freq [0]*1+[2]*3",
                          "--num-experts 8 --moe-ffn-hidden-size 1408 --moe-shared-expert-intermediate-size 1000"}) {
    try {
      import_megatron_args(bad, "ds.sh", 8);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const InputError& e) {
      const std::string w = e.what();
      EXPECT_TRUE(w.find("--moe-layer-freq") != std::string::npos ||
                  w.find("--moe-shared-expert-intermediate-size") != std::string::npos)
          << w;
    }
  }
}

// --moe-token-dispatcher-type, and Megatron's default (allgather) when a MoE script names none.
TEST(ImportMegatron, MoeTokenDispatcher) {
  const auto dispatcher = [](const std::string& args) {
    return import_megatron_args(args, "a", 8).keys["training"]["megatron"]["moe_token_dispatcher_type"];
  };
  EXPECT_EQ(dispatcher("--num-experts 8").as<std::string>(), "allgather");
  EXPECT_EQ(dispatcher("--num-experts 8 --moe-token-dispatcher-type alltoall").as<std::string>(), "alltoall");
  EXPECT_EQ(dispatcher("--num-experts 8 --moe-token-dispatcher-type flex").as<std::string>(), "flex");
  EXPECT_FALSE(dispatcher("--hidden-size 64"));
  EXPECT_THROW(import_megatron_args("--num-experts 8 --moe-token-dispatcher-type ring", "a", 8), InputError);
}

// MoE parallel folding: an expert tensor-parallel size dividing tp is imported, one that does
// not is refused by name; the same size as the model's is the default.
TEST(ImportMegatron, ExpertTensorParallelSize) {
  const auto folded = import_megatron_args(
      "--tensor-model-parallel-size 2 --expert-tensor-parallel-size 1 --num-experts 8 --sequence-parallel", "moe.sh",
      8);
  EXPECT_EQ(folded.keys["parallel"]["expert_tensor_parallel"].as<int>(), 1);
  EXPECT_EQ(
      import_megatron_args("--tensor-model-parallel-size 4 --expert-tensor-parallel-size 2 --num-experts 8", "m", 8)
          .keys["parallel"]["expert_tensor_parallel"]
          .as<int>(),
      2);
  try {
    import_megatron_args("--tensor-model-parallel-size 2 --expert-tensor-parallel-size 4 --num-experts 8", "moe.sh", 8);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("--expert-tensor-parallel-size"), std::string::npos) << w;
    EXPECT_NE(w.find("does not divide --tensor-model-parallel-size 2"), std::string::npos) << w;
  }
  EXPECT_FALSE(
      import_megatron_args("--tensor-model-parallel-size 2 --expert-tensor-parallel-size 2 --num-experts 8", "a", 8)
          .keys["parallel"]["expert_tensor_parallel"]);
  // Without experts the flag changes nothing.
  EXPECT_NO_THROW(import_megatron_args("--tensor-model-parallel-size 2 --expert-tensor-parallel-size 4", "a", 8));
}

// A launch script's CUBLAS_WORKSPACE_CONFIG sets PyTorch's cuBLAS workspace.
TEST(ImportMegatron, CublasWorkspaceConfigFromTheScript) {
  const auto k =
      import_megatron_args("export CUBLAS_WORKSPACE_CONFIG=:4096:8\npython pretrain_gpt.py --bf16\n", "a", 8);
  EXPECT_EQ(k.keys["training"]["memory"]["cublas_workspace_config"].as<std::string>(), ":4096:8");
  EXPECT_FALSE(import_megatron_args("--bf16", "a", 8).keys["training"]["memory"]);
}

TEST(ImportMegatron, UnevenPipelineSplitFlags) {
  const auto k = import_megatron_args(
      "--num-layers 126 --pipeline-model-parallel-size 16 --account-for-embedding-in-pipeline-split "
      "--account-for-loss-in-pipeline-split",
      "a", 128);
  const auto& meg = k.keys["training"]["megatron"];
  EXPECT_TRUE(meg["account_for_embedding_in_pipeline_split"].as<bool>());
  EXPECT_TRUE(meg["account_for_loss_in_pipeline_split"].as<bool>());
  const auto d = import_megatron_args(
      "--pipeline-model-parallel-size 12 --decoder-first-pipeline-num-layers 4 --decoder-last-pipeline-num-layers 6",
      "a");
  EXPECT_EQ(d.keys["training"]["megatron"]["decoder_first_pipeline_num_layers"].as<int>(), 4);
  EXPECT_EQ(d.keys["training"]["megatron"]["decoder_last_pipeline_num_layers"].as<int>(), 6);
  EXPECT_FALSE(import_megatron_args("--num-layers 12", "a").keys["training"]["megatron"]);
}

TEST(ImportMegatron, BlockingTensorParallelAllReduceAndUnfusedAccumulationFlags) {
  const auto k = import_megatron_args(
      "--tensor-model-parallel-size 8 --no-async-tensor-model-parallel-allreduce --no-gradient-accumulation-fusion",
      "a", 8);
  EXPECT_FALSE(k.keys["training"]["megatron"]["async_tensor_model_parallel_allreduce"].as<bool>());
  EXPECT_FALSE(k.keys["training"]["megatron"]["gradient_accumulation_fusion"].as<bool>());
  for (const char* flag : {"--no-async-tensor-model-parallel-allreduce", "--no-gradient-accumulation-fusion"})
    EXPECT_EQ(joined(k.warnings).find(flag), std::string::npos) << "a mapped flag named as ignored: " << flag;
}

TEST(ImportMegatron, DefaultsAndBadValues) {
  const auto k =
      import_megatron_args("--hidden-size 4096 --swiglu --micro-batch-size 2 --tensor-model-parallel-size 4", "a", 64);
  EXPECT_EQ(k.keys["model"]["ffn_hidden_size"].as<int>(), 10880);        // int(4·4096·2/3 / 64)·64
  EXPECT_EQ(k.keys["training"]["global_batch_size"].as<int>(), 2 * 16);  // micro × dp
  EXPECT_EQ(k.keys["training"]["precision"].as<std::string>(), "fp32");
  const auto d = import_megatron_args("--hidden-dropout 0 --attention-dropout 0.0", "a", 64);
  EXPECT_EQ(d.keys["model"]["hidden_dropout"].as<double>(), 0.0);
  EXPECT_EQ(d.keys["model"]["attention_dropout"].as<double>(), 0.0);
  EXPECT_THROW(import_megatron_args("--hidden-dropout 1.5", "a"), InputError);
  EXPECT_THROW(import_megatron_args("--num-layers twelve", "a"), InputError);
  EXPECT_THROW(import_megatron_args("--recompute-granularity partial", "a"), InputError);
  EXPECT_THROW(import_megatron_args("--train-iters 10 --train-samples 100 --seq-length 8", "a"), InputError);
  try {
    import_megatron_args("--num-layers 0", "launch.sh");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("launch.sh: --num-layers: '0' is not a whole number"), std::string::npos)
        << e.what();
  }
  const auto unset = import_megatron_args("--tensor-model-parallel-size $TP", "a");
  EXPECT_FALSE(unset.keys["parallel"]["tensor_parallel"]);
  EXPECT_NE(joined(unset.warnings).find("'$TP' is a shell variable the file does not set"), std::string::npos);
}

TEST(ImportDeepSpeed, Zero3Config) {
  const auto k = import_deepspeed_config(text_of("deepspeed_zero3.json"), "ds.json", 64);
  EXPECT_EQ(k.keys["training"]["framework"].as<std::string>(), "deepspeed");
  EXPECT_EQ(k.keys["parallel"]["zero_stage"].as<int>(), 3);
  EXPECT_FALSE(k.keys["parallel"]["offload_optimizer"].as<bool>());
  EXPECT_FALSE(k.keys["parallel"]["offload_params"].as<bool>());
  const auto& ds = k.keys["training"]["deepspeed"];
  EXPECT_DOUBLE_EQ(ds["reduce_bucket_size"].as<double>(), 5e8);
  EXPECT_DOUBLE_EQ(ds["stage3_prefetch_bucket_size"].as<double>(), 5e8);
  EXPECT_DOUBLE_EQ(ds["stage3_param_persistence_threshold"].as<double>(), 1e6);
  EXPECT_DOUBLE_EQ(ds["stage3_max_reuse_distance"].as<double>(), 1e9);
  EXPECT_TRUE(ds["overlap_comm"].as<bool>());
  EXPECT_TRUE(ds["contiguous_gradients"].as<bool>());
  EXPECT_EQ(k.keys["training"]["global_batch_size"].as<int>(), 2048);
  EXPECT_EQ(k.keys["training"]["micro_batch_size"].as<int>(), 2);
  EXPECT_EQ(k.keys["training"]["precision"].as<std::string>(), "bf16");
  EXPECT_EQ(k.keys["training"]["optimizer"].as<std::string>(), "adamw");
  const std::string w = joined(k.warnings);
  for (const char* ignored : {"zero_optimization.stage3_max_live_parameters", "gradient_clipping",
                              "optimizer.params.lr", "wall_clock_breakdown"})
    EXPECT_NE(w.find(ignored), std::string::npos) << ignored << " not named in:\n" << w;
  EXPECT_EQ(w.find("zero_optimization.stage,"), std::string::npos) << w;
}

TEST(ImportDeepSpeed, GradAccumDtype) {
  const auto k = import_deepspeed_config(
      R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1},
          "data_types": {"grad_accum_dtype": "fp32"}})",
      "ds.json", 8);
  EXPECT_EQ(k.keys["training"]["deepspeed"]["grad_accum_dtype"].as<std::string>(), "fp32");
  EXPECT_THROW(import_deepspeed_config(R"({"data_types": {"grad_accum_dtype": "fp64"}})", "ds.json", 8), InputError);
}

TEST(ImportDeepSpeed, BatchMismatchAutoAndBadJson) {
  EXPECT_THROW(import_deepspeed_config(text_of("deepspeed_zero3.json"), "ds.json", 32), InputError);
  const auto k = import_deepspeed_config(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4})",
                                         "ds.json", 8);
  EXPECT_EQ(k.keys["training"]["global_batch_size"].as<int>(), 2 * 4 * 8);
  const auto a = import_deepspeed_config(R"({"train_batch_size": "auto"})", "ds.json");
  EXPECT_NE(joined(a.warnings).find("train_batch_size: \"auto\" is filled in by the HF Trainer"), std::string::npos);
  EXPECT_THROW(import_deepspeed_config("{not json", "ds.json"), InputError);
  EXPECT_THROW(import_deepspeed_config(R"({"zero_optimization": {"stage": 4}})", "ds.json"), InputError);
  EXPECT_THROW(import_deepspeed_config(R"({"zero_optimization": {"offload_param": {"device": "gpu"}}})", "ds.json"),
               InputError);
}

TEST(ImportInScenario, MegatronArgsAndDeepSpeedConfigFillWhatTheScenarioDoesNotSay) {
  const std::string dir = test::repo_path("tests/sim/io/data");
  const Scenario s = parse_scenario(R"(model:
  megatron_args: megatron_gpt3_175b.sh
  vocab_size: 51200
cluster: { gpu: a100-sxm-80gb, num_gpus: 1024, inter_node: { nic_bandwidth: "200 Gb/s" } }
parallel: { pipeline_parallel: 8 }
)",
                                    dir + "/s.yaml");
  EXPECT_EQ(s.model.num_layers, 96);
  EXPECT_EQ(s.model.vocab_size, 51200);
  EXPECT_EQ(s.plan.par.tp, 8);
  EXPECT_EQ(s.plan.par.pp, 8);  // the scenario's own key wins
  EXPECT_EQ(s.plan.par.dp, 16);
  EXPECT_EQ(s.plan.par.precision, models::Precision::fp16);
  EXPECT_FALSE(s.plan.overlap_grad_reduce);
  EXPECT_NE(joined(s.warnings).find("megatron_gpt3_175b.sh: ignored"), std::string::npos);

  const Scenario d = parse_scenario(R"(model: { preset: llama2-7b }
cluster: { gpu: a100-sxm-80gb, num_gpus: 64, inter_node: { nic_bandwidth: "200 Gb/s" } }
training: { deepspeed_config: deepspeed_zero3.json }
)",
                                    dir + "/d.yaml");
  EXPECT_EQ(d.framework.framework, Framework::deepspeed);
  EXPECT_EQ(d.plan.par.zero_stage, 3);
  EXPECT_EQ(d.plan.global_batch_size, 2048);
  EXPECT_EQ(d.plan.par.num_microbatches, 16);
  const Result r = simulate(d, {.fold = true}).result;
  EXPECT_GT(r.tokens_per_s, 0);
  EXPECT_EQ(r.framework, "deepspeed");
}

TEST(ImportInScenario, AMissingFileNamesTheScenarioKey) {
  try {
    parse_scenario("model: { megatron_args: /nonexistent/args.sh }\ncluster: { gpu: h100, num_gpus: 8 }\n", "s.yaml");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("s.yaml: model.megatron_args: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptsim::sim
