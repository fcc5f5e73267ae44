// Defaults that stand in for what the user probably meant are warnings (README "Warnings"),
// HF configs come from a file or a model directory, and relative paths in a scenario are
// read from the scenario's folder (README "Inputs you already have").
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "hw/gpu_catalog.h"
#include "hw/net/nccl_tuning.h"
#include "sim/core/errors.h"
#include "sim/core/simulate.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"

namespace ptsim::sim {
namespace {

namespace fs = std::filesystem;

std::string cluster_yaml(const std::string& gpu, int num_gpus, const std::string& inter = "") {
  return fmt::format(R"(name: t
model: {{ preset: gpt3-1.7b }}
cluster:
  gpu: {}
  num_gpus: {}
  gpus_per_node: 8
{}
training: {{ global_batch_size: 64 }}
)",
                     gpu, num_gpus, inter);
}

bool has_warning(const Scenario& s, const std::string& fragment) {
  for (const auto& w : s.warnings)
    if (w.find(fragment) != std::string::npos) return true;
  return false;
}

TEST(NicDefault, FollowsTheGpuGenerationAndWarnsOnSeveralNodes) {
  // DGX H100: 8 × 400 Gb/s NDR ConnectX-7; DGX A100: 8 × 200 Gb/s HDR ConnectX-6.
  const Scenario h100 = parse_scenario(cluster_yaml("h100-sxm", 32, "  inter_node: { routing: d-mod-k }"), "h.yaml");
  EXPECT_DOUBLE_EQ(h100.cluster.nic_bandwidth, 400e9 / 8);
  ASSERT_EQ(h100.warnings.size(), 1u);
  EXPECT_EQ(h100.warnings[0].rfind("h.yaml: cluster.inter_node.nic_bandwidth: not given: 400 Gb/s", 0), 0u)
      << h100.warnings[0];
  const Scenario a100 = parse_scenario(cluster_yaml("a100-sxm-80gb", 32), "a.yaml");
  EXPECT_DOUBLE_EQ(a100.cluster.nic_bandwidth, 200e9 / 8);
  EXPECT_TRUE(has_warning(a100, "200 Gb/s per NIC assumed (HDR InfiniBand"));
  EXPECT_DOUBLE_EQ(parse_scenario(cluster_yaml("b200", 16), "b.yaml").cluster.nic_bandwidth, 400e9 / 8);
}

// An NCCL release older than the GPU (Blackwell's rows came with NCCL 2.25) is costed as that
// release would run it, with a warning; a later one, or the default, says nothing.
TEST(NcclVersion, OneThatPredatesTheGpuIsWarnedAbout) {
  auto parse = [](const std::string& gpu, const std::string& version) {
    return parse_scenario(cluster_yaml(gpu, 8, "  nccl_version: \"" + version + "\""), "n.yaml");
  };
  EXPECT_TRUE(has_warning(parse("b200", "2.24"), "cluster.nccl_version: NCCL 2.24 predates b200"));
  EXPECT_FALSE(has_warning(parse("b200", "2.25"), "cluster.nccl_version"));
  EXPECT_FALSE(has_warning(parse("h100-sxm", "2.18"), "cluster.nccl_version"));
  EXPECT_FALSE(has_warning(parse_scenario(cluster_yaml("b200", 8), "n.yaml"), "cluster.nccl_version"));
  // The JSON result names the release that costed the collectives, given or default.
  EXPECT_EQ(to_json(simulate(parse("b200", "2.28.3"), {.fold = true}).result)["nccl_version"], "2.28.3");
  EXPECT_EQ(
      to_json(simulate(parse_scenario(cluster_yaml("h100-sxm", 8), "n.yaml"), {.fold = true}).result)["nccl_version"],
      std::string(hw::net::kDefaultNcclVersion));
}

// A pipeline schedule the framework's own engine does not run is simulated with a warning that
// says where it runs (FrameworkProfile::pipeline_schedules); one it runs, or any schedule
// without pipeline parallelism, says nothing; interleaving on DeepSpeed's engine is an error.
TEST(PipelineSchedule, OneTheFrameworkDoesNotRunIsWarnedAbout) {
  auto parse = [](const std::string& framework, const std::string& schedule, int pp = 2) {
    return parse_scenario(fmt::format(R"(name: t
model: {{ preset: gpt3-1.7b }}
cluster: {{ gpu: a100-sxm-80gb, num_gpus: 8, gpus_per_node: 8 }}
parallel: {{ pipeline_parallel: {}, data_parallel: {}, pipeline_schedule: {} }}
training: {{ global_batch_size: 64, framework: {} }}
)",
                                      pp, 8 / pp, schedule, framework),
                          "p.yaml");
  };
  const Scenario dualpipe = parse("megatron-core", "dualpipe");
  ASSERT_EQ(dualpipe.warnings.size(), 1u);
  EXPECT_EQ(dualpipe.warnings[0],
            "p.yaml: parallel.pipeline_schedule: dualpipe is not one of megatron-core's pipeline schedules (1f1b, "
            "interleaved-1f1b); simulated as given, as in DeepSeek's deepseek-ai/DualPipe");
  EXPECT_TRUE(has_warning(parse("megatron-lm", "zb-h1"), "sail-sg/zero-bubble-pipeline-parallelism"));
  EXPECT_TRUE(has_warning(parse("deepspeed", "gpipe"), "deepspeed's pipeline schedules (1f1b)"));
  EXPECT_TRUE(parse("fsdp", "zb-v").warnings.empty());
  EXPECT_TRUE(parse("fsdp", "gpipe").warnings.empty());
  EXPECT_TRUE(parse("megatron-core", "interleaved-1f1b").warnings.empty());
  EXPECT_TRUE(parse("megatron-core", "gpipe", 1).warnings.empty());  // no pipeline: nothing is scheduled
  try {
    parse("deepspeed", "interleaved-1f1b");
    ADD_FAILURE() << "interleaving on DeepSpeed's pipeline engine was accepted";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("use one of its schedules: 1f1b"), std::string::npos) << e.what();
  }
}

// So are ZeRO stages and context parallelism the framework does not run: FSDP has no ZeRO-1 or
// ZeRO-2 mode, the Megatron-LM profile no sharded gradients, and Megatron's context
// parallelism needs Transformer Engine (DeepSpeed's is Ulysses).
TEST(PipelineSchedule, ZeroStagesAndContextParallelismTheFrameworkDoesNotRunAreWarnedAbout) {
  auto parse = [](const std::string& training, const std::string& parallel) {
    return parse_scenario(fmt::format(R"(name: t
model: {{ preset: gpt3-1.7b }}
cluster: {{ gpu: a100-sxm-80gb, num_gpus: 8, gpus_per_node: 8 }}
parallel: {{ {} }}
training: {{ global_batch_size: 64, {} }}
)",
                                      parallel, training),
                          "z.yaml");
  };
  EXPECT_TRUE(has_warning(parse("framework: fsdp", "zero_stage: 1, data_parallel: 8"),
                          "z.yaml: parallel.zero_stage: 1 is not one of fsdp's ZeRO stages (0, 3: NO_SHARD, and "
                          "FULL_SHARD or SHARD_GRAD_OP); simulated as given"));
  EXPECT_TRUE(parse("framework: fsdp", "zero_stage: 3, data_parallel: 8").warnings.empty());
  EXPECT_TRUE(has_warning(parse("framework: megatron-lm", "zero_stage: 3, data_parallel: 8"),
                          "megatron-lm's ZeRO stages (0, 1)"));
  EXPECT_TRUE(parse("framework: megatron-core", "zero_stage: 3, data_parallel: 8").warnings.empty());
  // DeepSpeed's context parallelism is Ulysses (CpComm::a2a): run, not warned.
  const Scenario ulysses = parse("framework: deepspeed", "context_parallel: 2, data_parallel: 4");
  EXPECT_TRUE(ulysses.warnings.empty());
  EXPECT_TRUE(ulysses.plan.par.cp_heads);
  EXPECT_TRUE(has_warning(
      parse("framework: megatron-core, megatron: { transformer_impl: local }", "context_parallel: 2, data_parallel: 4"),
      "z.yaml: parallel.context_parallel: 2: megatron-core runs no context parallelism (Megatron's runs in "
      "Transformer Engine's attention"));
  EXPECT_TRUE(parse("framework: megatron-core", "context_parallel: 2, data_parallel: 4").warnings.empty());
  EXPECT_TRUE(parse("framework: fsdp", "zero_stage: 3, context_parallel: 2, data_parallel: 4").warnings.empty());
}

TEST(NicDefault, NoWarningWhenGivenOrOnOneNode) {
  const Scenario given = parse_scenario(
      cluster_yaml("h100-sxm", 32, "  inter_node: { nic_bandwidth: \"200 Gb/s\", routing: ecmp }"), "g.yaml");
  EXPECT_DOUBLE_EQ(given.cluster.nic_bandwidth, 200e9 / 8);
  EXPECT_TRUE(given.warnings.empty());
  EXPECT_TRUE(parse_scenario(cluster_yaml("h100-sxm", 8), "one.yaml").warnings.empty());
}

TEST(RoutingDefault, WarnsOnAMultiNodeFatTreeOnly) {
  // Hashed (Ethernet / RoCE) or by destination (InfiniBand): the default names itself.
  const std::string nic = "nic_bandwidth: \"400 Gb/s\"";
  const Scenario s = parse_scenario(cluster_yaml("h100-sxm", 32, "  inter_node: { " + nic + " }"), "r.yaml");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0].rfind("r.yaml: cluster.inter_node.routing: not given: ecmp, a hash per flow", 0), 0u)
      << s.warnings[0];
  EXPECT_NE(s.warnings[0].find("set d-mod-k"), std::string::npos);
  for (const char* topology : {"fat-tree-3", "rail-optimized"})
    EXPECT_TRUE(has_warning(
        parse_scenario(cluster_yaml("h100-sxm", 64, fmt::format("  inter_node: {{ {}, topology: {} }}", nic, topology)),
                       "t.yaml"),
        "cluster.inter_node.routing: not given"))
        << topology;
  // Given, on one node, or on a torus (one shortest path per hop): no warning.
  for (const std::string inter :
       {"  inter_node: { " + nic + ", routing: ecmp }", "  inter_node: { " + nic + ", routing: d-mod-k }",
        "  inter_node: { " + nic + ", topology: torus-2d, torus_dims: [2, 2] }"})
    EXPECT_FALSE(has_warning(parse_scenario(cluster_yaml("h100-sxm", 32, inter), "n.yaml"), "routing")) << inter;
  EXPECT_FALSE(has_warning(parse_scenario(cluster_yaml("h100-sxm", 8), "one.yaml"), "routing"));
}

TEST(NicDefault, EveryCatalogGpuHasAReferenceNic) {
  for (const auto& g : hw::gpu_catalog()) {
    const Scenario s = parse_scenario(cluster_yaml(g.name, 16), "c.yaml");
    EXPECT_GE(s.cluster.nic_bandwidth, 200e9 / 8) << g.name;
  }
}

// A temporary folder holding a Hub-style model directory with config.json.
class HfDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("ptsim-hf-" + std::to_string(::getpid()));
    fs::create_directories(root_ / "Tiny-Llama");
    std::ofstream(root_ / "Tiny-Llama" / "config.json")
        << R"({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
              "num_key_value_heads": 8, "intermediate_size": 1376, "vocab_size": 32000,
              "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-5,
              "tie_word_embeddings": false})";
    fs::create_directories(root_ / "empty");
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string scenario(const std::string& model_keys) const {
    return "model:\n" + model_keys + "\ncluster: { gpu: h100-sxm, num_gpus: 8 }\ntraining: { global_batch_size: 8 }\n";
  }
  fs::path root_;
};

TEST_F(HfDir, ADirectoryIsReadThroughItsConfigJsonAndTheSequenceWarns) {
  const Scenario s = parse_scenario(scenario("  hf_config: " + (root_ / "Tiny-Llama").string()), "s.yaml");
  EXPECT_EQ(s.model.name, "Tiny-Llama");
  EXPECT_EQ(s.model.num_layers, 4);
  EXPECT_EQ(s.model.seq_length, 131072);
  EXPECT_NE(s.seq_length_source.find("max_position_embeddings"), std::string::npos);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("s.yaml: model.seq_length: not given: 131072 tokens taken from max_position_embeddings"),
            std::string::npos)
      << s.warnings[0];
}

TEST_F(HfDir, AGivenSequenceLengthIsNoWarning) {
  const Scenario s =
      parse_scenario(scenario("  hf_config: " + (root_ / "Tiny-Llama").string() + "\n  seq_length: 4096"), "s.yaml");
  EXPECT_EQ(s.model.seq_length, 4096);
  EXPECT_EQ(s.seq_length_source, "model.seq_length");
  EXPECT_TRUE(s.warnings.empty());
}

TEST_F(HfDir, ADirectoryWithoutConfigJsonIsAClearError) {
  try {
    parse_scenario(scenario("  hf_config: " + (root_ / "empty").string()), "s.yaml");
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("s.yaml: model.hf_config:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("a directory without a config.json"), std::string::npos) << msg;
  }
}

TEST_F(HfDir, RelativePathsAreReadFromTheScenarioFolder) {
  const fs::path file = root_ / "scenario.yaml";
  std::ofstream(file) << scenario("  hf_config: Tiny-Llama/config.json\n  seq_length: 2048");
  const fs::path cwd = fs::current_path();
  fs::current_path(root_ / "empty");  // anywhere but the scenario's folder
  const Scenario s = load_scenario(file.string());
  fs::current_path(cwd);
  EXPECT_EQ(s.model.name, "Tiny-Llama");
  EXPECT_EQ(s.model.hidden_size, 512);
}

TEST_F(HfDir, TheResolvedModelIsInTheSummaryAndTheJson) {
  const Scenario s =
      parse_scenario(scenario("  hf_config: " + (root_ / "Tiny-Llama").string() + "\n  seq_length: 256"), "s.yaml");
  const Result r = simulate(s, {.fold = true}).result;
  EXPECT_EQ(r.model.name, "Tiny-Llama");
  EXPECT_EQ(r.model.seq_length, 256);
  EXPECT_GT(r.model.parameters, 0);
  const auto j = to_json(r);
  EXPECT_EQ(j["model"]["seq_length_source"], "model.seq_length");
  EXPECT_EQ(j["model"]["parameters"], r.model.parameters);
  const std::string text = summary_text(r);
  EXPECT_NE(text.find("model           Tiny-Llama: "), std::string::npos) << text;
  EXPECT_NE(text.find("sequence 256 (model.seq_length)"), std::string::npos) << text;
  EXPECT_EQ(text.find("warning:"), std::string::npos) << "warnings go to stderr, not the summary";
  // Within 100 columns (code points: "×" is one).
  for (std::size_t at = 0, next; at < text.size(); at = next + 1) {
    next = text.find('\n', at);
    std::size_t cols = 0;
    for (std::size_t i = at; i < next; ++i) cols += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    EXPECT_LE(cols, 100u) << text.substr(at, next - at);
  }
}

}  // namespace
}  // namespace ptsim::sim
