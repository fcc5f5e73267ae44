// ptsim validate: the published reference runs (scenarios/reference/) against the
// simulator, the accuracy bound of issue 3, the sidecar file's errors, and the fit.
#include "sim/tools/validate.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "sim/core/errors.h"
#include "sim/io/scenario_file.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

namespace fs = std::filesystem;

std::string reference_dir() { return test::repo_path("scenarios/reference"); }

// A scratch reference folder holding one copy of a reference scenario and the given
// published.yaml.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = fs::temp_directory_path() / fs::path("ptsim_validate_test_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
    add_reference("gpt3-1.7b.yaml", "gpt3-1.7b.yaml");
  }
  ~ScratchDir() { fs::remove_all(path_); }
  void write_published(const std::string& text) const { std::ofstream(path_ / "published.yaml") << text; }
  // A copy of reference scenario `file` under the name `as`.
  void add_reference(const std::string& file, const std::string& as) const {
    fs::copy_file(fs::path(reference_dir()) / file, path_ / as);
  }
  std::string dir() const { return path_.string(); }

 private:
  fs::path path_;
};

// A fitted entry of published.yaml for `scenario`, whose published figure is `value` tokens/s.
std::string tokens_run(const std::string& scenario, double value) {
  return fmt::format(
      "  - scenario: {}\n    metric: tokens_per_s\n    value: {}\n    flops_formula: model\n"
      "    fitted: true\n    source: test\n",
      scenario, value);
}

std::string one_run(double value, const std::string& extra = "", const std::string& metric = "tflops_per_gpu") {
  return "runs:\n  - scenario: gpt3-1.7b.yaml\n    metric: " + metric + "\n    value: " + std::to_string(value) +
         "\n    flops_formula: megatron-eq3\n    fitted: true\n    source: test\n" + extra;
}

TEST(Validate, MegatronEq3ByHand) {
  models::ModelSpec m;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.seq_length = 384;   // s/(6h) = 384/384 = 1
  m.vocab_size = 2048;  // V/(16·l·h) = 2048/2048 = 1
  // 96·B·s·l·h²·(1 + 1 + 1) = 96 · 1 · 384 · 2 · 4096 · 3 = 905,969,664.
  EXPECT_DOUBLE_EQ(megatron_eq3_flops(m, 1), 905969664.0);
  // Linear in the batch.
  EXPECT_DOUBLE_EQ(megatron_eq3_flops(m, 512), 512 * 905969664.0);
}

TEST(Validate, MegatronCoreFlopsByHand) {
  // Mixtral 8x7B as Megatron-LM's num_floating_point_operations counts it (core_r0.8.0):
  // 12·B·s·l·h²·[(1 + 8/32 + 4096/4096)·1 + 14336/4096·2·1.5 + 32000/(2·32·4096)], the
  // vocabulary already a multiple of 128: per sequence 12·4096·32·4096²·12.87207 =
  // 3.39709e14 FLOPs.
  const auto mixtral = load_scenario(reference_dir() + "/mcore-mixtral-8x7b-64xh100.yaml").model;
  const double bracket = 2.25 + 10.5 + 32000.0 / (2 * 32 * 4096);
  EXPECT_NEAR(megatron_core_flops(mixtral, 1, 1), 12.0 * 4096 * 32 * 4096.0 * 4096.0 * bracket, 1e3);
  EXPECT_DOUBLE_EQ(megatron_core_flops(mixtral, 256, 1), 256 * megatron_core_flops(mixtral, 1, 1));
  // A dense GeLU model with MHA: no gate, k = 1; the vocabulary padded to 128·tp (50257 ->
  // 50304 at tp 1, 51200 at tp 8: 50 x 1024).
  models::ModelSpec m;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_query_groups = 4;
  m.ffn_hidden_size = 256;
  m.seq_length = 64;
  m.vocab_size = 50257;
  const double base = 12.0 * 64 * 2 * 64 * 64;
  EXPECT_NEAR(megatron_core_flops(m, 1, 1), base * (3.0 + 4.0 + 50304.0 / 256), 1e-6);
  EXPECT_NEAR(megatron_core_flops(m, 1, 8), base * (3.0 + 4.0 + 51200.0 / 256), 1e-6);
}

TEST(Validate, MegatronEq3MatchesTable1DerivedIterationTime) {
  // Table 1 row 10: 1T model, B = 3072, 163 TFLOP/s per GPU on 3072 GPUs; the
  // iteration time derived in shared/reference/published-runs.md is 102.6 s:
  // F = 96·3072·2048·128·25600²·(1 + 2048/153600 + 51200/52428800)
  //   = 5.0666e19 · 1.014310 = 5.1391e19 FLOPs; F / (163e12 · 3072) = 102.63 s.
  const auto s = load_scenario(reference_dir() + "/gpt3-1t.yaml");
  const double f = megatron_eq3_flops(s.model, static_cast<double>(s.plan.global_batch_size));
  EXPECT_NEAR(f / (163e12 * 3072), 102.6, 0.1);
}

TEST(Validate, ErrorStatsByHand) {
  std::vector<ValidationRow> rows(3);
  rows[0].run = "a";
  rows[0].error_pct = 2.0;
  rows[1].run = "b";
  rows[1].error_pct = -6.0;
  rows[2].run = "c";
  rows[2].error_pct = 1.0;
  // mean |error| = (2 + 6 + 1) / 3 = 3; worst = 6 (run b, a negative error).
  const auto st = error_stats(rows);
  EXPECT_EQ(st.count, 3);
  EXPECT_DOUBLE_EQ(st.mae_pct, 3.0);
  EXPECT_DOUBLE_EQ(st.worst_pct, 6.0);
  EXPECT_EQ(st.worst_run, "b");
}

// The acceptance test of issue 3 on the set it was written for, the ten runs of Megatron
// SC'21 Table 1 (folded simulation, the catalog's efficiencies): mean |error| ≤ 5 %,
// worst ≤ 10 %. The broad set of issue 9 does not meet the held-out bound yet (README
// "Validation against published runs"); BroadSetCoversTheRegimes checks its shape.
TEST(Validate, ReferenceRunsMeetTheBound) {
  ValidateOptions opt;
  opt.source = "narayanan-sc21-t1";
  // Megatron SC'21 Table 1 has 10 rows; alternate rows are fitted (1, 3, 5, 7, 9).
  const auto rep = run_validation(reference_dir(), opt);
  ASSERT_EQ(rep.rows.size(), 10u);
  EXPECT_EQ(rep.fitted.count, 5);
  EXPECT_EQ(rep.held_out.count, 5);
  for (const auto& row : rep.rows) {
    SCOPED_TRACE(row.run);
    EXPECT_GT(row.iteration_time_s, 0);
    EXPECT_NEAR(row.error_pct, (row.predicted - row.published) / row.published * 100.0, 1e-9);
    EXPECT_LE(std::abs(row.error_pct), 10.0);
  }
  EXPECT_LE(rep.all.mae_pct, 5.0);
  EXPECT_LE(rep.all.worst_pct, 10.0);
  // The held-out runs are the real test: they too must meet the bound on their own.
  EXPECT_LE(rep.held_out.mae_pct, 5.0);
  EXPECT_TRUE(rep.bound_holds);
}

// Issue 9 item 4: at least 30 runs beyond Table 1 from at least 6 independent sources,
// each with its source and quoted figure, all held out (nothing was fitted on them).
TEST(Validate, BroadSetCoversTheRegimes) {
  const auto refs = load_published(reference_dir());
  std::set<std::string> sources;
  int beyond_table1 = 0;
  for (const auto& r : refs) {
    SCOPED_TRACE(r.scenario);
    sources.insert(r.source_id);
    if (r.source_id == "narayanan-sc21-t1") continue;
    ++beyond_table1;
    EXPECT_FALSE(r.fitted);
    EXPECT_FALSE(r.quote.empty());
    EXPECT_FALSE(r.source.empty());
  }
  EXPECT_GE(beyond_table1, 30);
  // Table 1 and Table 2 of SC'21 are one publication.
  sources.erase("narayanan-sc21-t2");
  EXPECT_GE(sources.size(), 6u);
  // Every scenario loads, and the regimes of issue 9 are there: ZeRO-3 at >= 256 GPUs,
  // DeepSpeed with pipeline parallelism, GQA + SwiGLU, H100 at >= 1,000 GPUs.
  bool zero3_256 = false, ds_3d = false, gqa_swiglu = false, h100_1k = false;
  for (const auto& r : refs) {
    const auto s = load_scenario(reference_dir() + "/" + r.scenario);
    const auto n = s.cluster.num_gpus;
    zero3_256 |= s.plan.par.zero_stage == 3 && n >= 256;
    ds_3d |= s.framework.framework == Framework::deepspeed && s.plan.par.pp > 1;
    gqa_swiglu |= s.model.num_query_groups < s.model.num_attention_heads && s.model.mlp == models::Mlp::swiglu;
    h100_1k |= s.cluster.gpu.name == "h100-sxm" && n >= 1000;
  }
  EXPECT_TRUE(zero3_256);
  EXPECT_TRUE(ds_3d);
  EXPECT_TRUE(gqa_swiglu);
  EXPECT_TRUE(h100_1k);
}

// The committed prediction-band table (scenarios/reference/prediction_bands.json, which
// `ptsim run` reports from) is what `ptsim validate --write-bands` generates from the
// current model: regenerate it when the model or the reference set moves.
void expect_committed_bands_in_sync(const ValidationReport& rep) {
  std::ifstream in(reference_dir() + "/prediction_bands.json", std::ios::binary);
  const std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(committed, bands_json_text(prediction_bands(rep)))
      << "regenerate: ptsim validate --write-bands scenarios/reference/prediction_bands.json";
  // Each band spans the deviations of its regime's runs (out of memory in ptsim or not: a
  // time residual).
  for (const auto& b : prediction_bands(rep)) {
    int n = 0;
    for (const auto& row : rep.rows) {
      if (row.regime != b.regime || !(row.predicted > 0)) continue;
      ++n;
      EXPECT_GE(row.deviation_pct, b.low - 0.05) << row.run;
      EXPECT_LE(row.deviation_pct, b.high + 0.05) << row.run;
    }
    EXPECT_EQ(n, b.runs) << b.regime;
  }
}

TEST(Validate, ARunPtsimFindsOutOfMemoryIsComparedAndFailsTheBound) {
  // Without recomputation the 1.7B model's micro-batch of 16 needs far more than 80 GB:
  // the row keeps its time-based figure (the published run fit, so the time is still a
  // prediction to judge), is marked, and the bound fails however small its error.
  ScratchDir d("oom");
  const fs::path file = fs::path(d.dir()) / "gpt3-1.7b.yaml";
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  text.replace(text.find("recompute: full"), 15, "recompute: none");
  std::ofstream(file) << text;
  d.write_published(one_run(137));
  const auto first = run_validation(d.dir()).rows.at(0);
  EXPECT_FALSE(first.feasible);
  ASSERT_GT(first.predicted, 0);
  d.write_published(one_run(first.predicted));
  const auto rep = run_validation(d.dir());
  EXPECT_NEAR(rep.rows.at(0).error_pct, 0, 1e-3);  // one_run writes 6 decimals
  EXPECT_FALSE(rep.bound_holds);
  EXPECT_NE(validation_text(rep).find("OUT OF MEMORY in ptsim"), std::string::npos);
  EXPECT_NE(validation_text(rep).find("every run fits (1 out of memory): MISSED"), std::string::npos);
}

TEST(Validate, DeviationIsPublishedOverPredictedThroughput) {
  // Throughput metric: published 137 vs predicted p → 137/p − 1; a time metric inverts.
  ScratchDir d("deviation");
  d.write_published(one_run(137));
  const auto f = run_validation(d.dir()).rows[0];
  EXPECT_NEAR(f.deviation_pct, (137.0 / f.predicted - 1) * 100, 1e-9);
  d.write_published(one_run(4.0, "", "iteration_time_s"));
  const auto t = run_validation(d.dir()).rows[0];
  EXPECT_NEAR(t.deviation_pct, (t.predicted / 4.0 - 1) * 100, 1e-9);
}

TEST(Validate, PerSourceStatsAndHeldOutBound) {
  // One fitted run far off and the same run held out on target: the bound judges the
  // held-out runs only, and the per-source table splits by source_id.
  ScratchDir d("persource");
  d.add_reference("gpt3-3.6b.yaml", "gpt3-3.6b.yaml");
  d.write_published(one_run(2 * 137, "    source_id: a\n") +
                    "  - scenario: gpt3-3.6b.yaml\n    metric: tflops_per_gpu\n    value: 138\n"
                    "    flops_formula: megatron-eq3\n    fitted: false\n    source_id: b\n"
                    "    quote: \"138\"\n    source: test\n");
  const auto rep = run_validation(d.dir());
  ASSERT_EQ(rep.per_source.size(), 2u);
  EXPECT_EQ(rep.per_source[0].source_id, "a");
  EXPECT_EQ(rep.per_source[1].source_id, "b");
  EXPECT_GT(rep.per_source[0].stats.mae_pct, 40.0);
  EXPECT_LT(rep.per_source[1].stats.mae_pct, 5.0);
  EXPECT_EQ(rep.held_out.count, 1);
  EXPECT_TRUE(rep.bound_holds);
  EXPECT_NE(validation_text(rep).find("held-out mean"), std::string::npos);
  // --source keeps one source; an unknown one names the ids there are.
  ValidateOptions only_a;
  only_a.source = "a";
  EXPECT_EQ(run_validation(d.dir(), only_a).rows.size(), 1u);
  only_a.source = "c";
  try {
    run_validation(d.dir(), only_a);
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("no run has source_id 'c'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("a, b"), std::string::npos) << e.what();
  }
}

// Plan-ranking checks (issue 9 item 4): the published A/B comparisons of published.yaml
// `rankings`, each reproduced in direction and within 10 % in ratio. The ones listed
// here hold; the others (ZeRO-3 against PTD-P, ZeRO-3 strong scaling) do not yet, README "Plan-ranking
// checks" gives their figures, and a mechanism fix that makes one hold should add it here.
void expect_published_rankings_that_hold(const ValidationReport& rep) {
  const auto checks = load_rankings(reference_dir());
  ASSERT_GE(checks.size(), 18u);
  EXPECT_EQ(rep.rankings.size(), checks.size());  // every pair's runs simulated
  const std::set<std::string> hold = {
      "PTD-P 175B: 384 vs 1,536 GPUs (fixed batch)", "PTD-P 530B: 560 vs 2,240 GPUs (fixed batch)",
      "MT-NLG 530B: 2,240 vs 3,360 GPUs (dp 8 vs 12)", "MPT-70B FSDP: 64 vs 32 A100 (micro-batch 8 vs 2)",
      "FSDP on 128 A100-40GB: MPT-7B vs MPT-70B (tokens)",
      // +8.9 % since stop 38's host-ahead BACKWARD_POST gathers (+10.1 % before).
      "MPT-70B FSDP on 64 GPUs: H100 vs A100",
      // Korthikanti et al. 2022 Table 5 and Sec. 6.3: selective recompute + SP against full
      // recompute, and 530B's data-parallel scaling.
      "22B: selective recompute + SP vs full recompute", "175B: selective recompute + SP vs full recompute",
      "530B: selective recompute + SP vs full recompute", "1T: selective recompute + SP vs full recompute",
      "530B selective: 280 vs 2,240 GPUs (dp 1 vs 8)",
      // Since the Llama 3 runs take Sec. 3.3.2's interleaved schedule (8 one-layer chunks per
      // rank): +1.5 %, where plain 1F1B's bubble at 16 micro-batches made it +24.7 %.
      "Llama 3 405B: 8,192 vs 16,384 H100 (dp 64 vs 128)",
      // Since stop 56 runs the CP 16 row's all-gather context parallelism (Sec. 3.3.2).
      "Llama 3 405B on 16,384 H100: 8K tokens, CP 1 vs 131K tokens, CP 16",
      // Since stop 53 reduce-scatters 2021 ZeRO-3's gradients per parameter in list form
      // (DeepSpeedExamples' contiguous_gradients): -8.2 %, -31.5 % before.
      "ZeRO-3 175B: 384 vs 1,536 GPUs (fixed batch)",
      // Stop 53's H100 rows of llm-foundry's table: scale-out and model size on one node.
      "MPT-13B FSDP on H100: 64 vs 8 GPUs (micro-batch 2)",
      "FSDP on 8 H100: MPT-7B (micro-batch 6) vs MPT-13B (micro-batch 2)",
      // Since stop 56's backward and causal attention rates and FSDP optimizer step: +9.2 %
      // (+10.5 % before, +15.1 % before stop 54's FlashAttention-1-class attention).
      "MPT-7B FSDP on 8 GPUs: H100 vs A100 (micro-batch 6)"};
  // Issue 9: ZeRO-3 without model parallelism at 768 GPUs and more is slower than
  // PTD-P, as measured, since DeepSpeed's 2021 gathers block the host (0.3.14).
  const std::set<std::string> direction_holds = {
      "175B, 768 GPUs: PTD-P vs ZeRO-3", "175B, 1,536 GPUs: PTD-P vs ZeRO-3", "530B, 1,120 GPUs: PTD-P vs ZeRO-3",
      "530B, 2,240 GPUs: PTD-P vs ZeRO-3", "ZeRO-3 175B: 384 vs 1,536 GPUs (fixed batch)"};
  int seen = 0, directions = 0;
  for (const auto& k : rep.rankings) {
    SCOPED_TRACE(k.check.what);
    if (direction_holds.count(k.check.what)) {
      ++directions;
      EXPECT_TRUE(k.direction_ok);
      EXPECT_GT(k.predicted_ratio, 1.0);
    }
    // The published ratio is the sources' own figures over each other.
    EXPECT_GT(k.published_ratio, 0);
    EXPECT_NEAR(k.ratio_error_pct, (k.predicted_ratio / k.published_ratio - 1) * 100, 1e-9);
    if (!hold.count(k.check.what)) continue;
    ++seen;
    EXPECT_TRUE(k.direction_ok);
    EXPECT_LE(std::abs(k.ratio_error_pct), 10.0);
  }
  EXPECT_EQ(seen, static_cast<int>(hold.size()));
  EXPECT_EQ(directions, static_cast<int>(direction_holds.size()));
  // The published ratio of one pair by hand: SC'21 Table 2, PTD-P 175B, 153 / 141.
  for (const auto& k : rep.rankings)
    if (k.check.a == "sc21-ptdp-175b-384.yaml" && k.check.b == "sc21-ptdp-175b-1536.yaml")
      EXPECT_NEAR(k.published_ratio, 153.0 / 141.0, 1e-9);
}

// Both checks on one validation of the whole reference set (64 runs), which under the
// sanitizers (scripts/sanitize.sh) takes about a minute: once for both, not once each.
TEST(Validate, CommittedBandsAndPublishedRankingsOnTheWholeSet) {
  const auto rep = run_validation(reference_dir());
  {
    SCOPED_TRACE("prediction bands");
    expect_committed_bands_in_sync(rep);
  }
  SCOPED_TRACE("rankings");
  expect_published_rankings_that_hold(rep);
}

TEST(Validate, RankingErrorsNameTheKey) {
  ScratchDir d("rankings");
  auto expect_error = [&](const std::string& rankings, const std::string& needle) {
    d.write_published(one_run(137) + rankings);
    try {
      load_rankings(d.dir());
      ADD_FAILURE() << "no error for: " << rankings;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("rankings:\n  - {a: gpt3-1.7b.yaml, b: nope.yaml, what: x, source: y}\n",
               "rankings[0].b: 'nope.yaml' is not one of the runs");
  expect_error("rankings:\n  - {a: gpt3-1.7b.yaml, b: gpt3-1.7b.yaml, what: x, source: y}\n", "with itself");
  expect_error("rankings:\n  - {a: gpt3-1.7b.yaml, b: gpt3-1.7b.yaml, wat: x, source: y}\n",
               "did you mean 'what'");
  expect_error("rankings:\n  - {a: gpt3-1.7b.yaml, what: x, source: y}\n", "rankings[0].b: missing");
  expect_error("rankings: 3\n", "rankings: expected a list");
}

TEST(Validate, TokensMetricsConvertFromTheIterationTime) {
  ScratchDir d("tokens");
  d.write_published(one_run(3.5, "", "iteration_time_s"));
  const double t = run_validation(d.dir()).rows[0].predicted;
  // 1.7B row: batch 512 x 2048 tokens on 32 GPUs.
  d.write_published(one_run(1e5, "", "tokens_per_s"));
  EXPECT_NEAR(run_validation(d.dir()).rows[0].predicted, 512.0 * 2048 / t, 1e-6);
  d.write_published(one_run(1e3, "", "tokens_per_s_per_gpu"));
  EXPECT_NEAR(run_validation(d.dir()).rows[0].predicted, 512.0 * 2048 / t / 32, 1e-6);
}

TEST(Validate, TflopsConversionUsesTheSourcesFormula) {
  // published.yaml → iteration_time_s metric gives the raw time; tflops_per_gpu with
  // megatron-eq3 must equal Eq. 3 / (time · GPUs) for the same simulation.
  ScratchDir d("conv");
  d.write_published(one_run(3.5, "", "iteration_time_s"));
  const auto t = run_validation(d.dir());
  d.write_published(one_run(137));
  const auto f = run_validation(d.dir());
  const auto s = load_scenario(d.dir() + "/gpt3-1.7b.yaml");
  // 1.7B row: B = 512, 32 GPUs.
  const double expect = megatron_eq3_flops(s.model, 512) / (t.rows[0].predicted * 32) / 1e12;
  EXPECT_NEAR(f.rows[0].predicted, expect, 1e-9 * expect);
  EXPECT_DOUBLE_EQ(t.rows[0].iteration_time_s, f.rows[0].iteration_time_s);
}

TEST(Validate, BoundMissedWhenPublishedFigureIsFarOff) {
  // Twice the real figure: the prediction is ≈ −50 % off, so the bound must fail
  // (the CLI then exits 4).
  ScratchDir d("miss");
  d.write_published(one_run(2 * 137));
  const auto rep = run_validation(d.dir());
  EXPECT_LT(rep.rows[0].error_pct, -40.0);
  EXPECT_FALSE(rep.bound_holds);
}

TEST(Validate, PublishedFileErrorsNameTheKey) {
  ScratchDir d("errors");
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    d.write_published(text);
    try {
      load_published(d.dir());
      ADD_FAILURE() << "no error for: " << text;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(one_run(137, "    fited: true\n"), "runs[0].fited");
  expect_error(one_run(137, "    fited: true\n"), "did you mean 'fitted'");
  expect_error(one_run(137, "", "tflops"), "'tflops' is not a metric");
  std::string bad_formula = one_run(137);
  bad_formula.replace(bad_formula.find("megatron-eq3"), 12, "megatron-lm");
  expect_error(bad_formula, "runs[0].flops_formula");
  expect_error(bad_formula, "use megatron-eq3, megatron-core or model");
  expect_error(one_run(137, "    source_id: \"\"\n"), "runs[0].source_id");
  expect_error(one_run(-1), "must be a positive number");
  expect_error("runs: []\n", "non-empty list");
  expect_error("run:\n  - scenario: x\n", "did you mean 'runs'");
  expect_error(one_run(137) + one_run(137).substr(6), "listed twice");
  fs::remove(fs::path(d.dir()) / "published.yaml");
  EXPECT_THROW(load_published(d.dir()), ScenarioError);
}

TEST(Validate, FitRecoversKnownEfficiencies) {
  // Make the "published" figure what the simulator predicts at gemm 0.60 and memory
  // 0.70; a fit from the catalog values must get (near) zero error back.
  ScratchDir d("fit");
  d.write_published(one_run(137));
  ValidateOptions truth;
  truth.efficiency["a100-sxm-80gb"] = hw::GpuSpec::Efficiency{0.60, 0.50, 0.70};
  const auto truth_report = run_validation(d.dir(), truth);
  const double target = truth_report.rows[0].predicted;
  // The report says which constants it ran with, in the text and the JSON.
  EXPECT_NE(validation_text(truth_report).find("efficiency override for a100-sxm-80gb: gemm 0.6000"),
            std::string::npos);
  const auto overrides = validation_json(truth_report).at("efficiency_overrides");
  ASSERT_EQ(overrides.size(), 1u);
  EXPECT_EQ(overrides[0].at("gpu"), "a100-sxm-80gb");
  EXPECT_DOUBLE_EQ(overrides[0].at("memory").get<double>(), 0.70);
  d.write_published(one_run(target));
  const auto fits = fit_efficiency(d.dir());
  ASSERT_EQ(fits.size(), 1u);
  const auto& fr = fits[0];
  EXPECT_EQ(fr.gpu, "a100-sxm-80gb");
  // The descent's last step is 0.0025 in efficiency, ≈ 0.4 % of 0.6: well under 1 %.
  EXPECT_LT(fr.best_mae_pct, 1.0);
  EXPECT_LE(fr.best_mae_pct, fr.start_mae_pct);
}

TEST(Validate, FitsEachGpuTypeOnItsOwnRuns) {
  // An A100 80GB run and an A100 40GB run, each "published" at what the simulator predicts
  // with efficiencies of its own: one fit per GPU type, in listed order, each back near zero
  // error, and the 80GB constants the same as a fit of its run alone.
  ScratchDir d("fit2");
  d.add_reference("mpt-7b-128xa100-40gb.yaml", "mpt-7b.yaml");
  d.write_published(one_run(137) + tokens_run("mpt-7b.yaml", 1e5));
  ValidateOptions truth;
  truth.efficiency["a100-sxm-80gb"] = hw::GpuSpec::Efficiency{0.60, 0.73, 0.70};
  truth.efficiency["a100-sxm-40gb"] = hw::GpuSpec::Efficiency{0.62, 0.60, 0.75};
  const auto rows = run_validation(d.dir(), truth).rows;
  ASSERT_EQ(rows.size(), 2u);
  d.write_published(one_run(rows[0].predicted) + tokens_run("mpt-7b.yaml", rows[1].predicted));
  const auto fits = fit_efficiency(d.dir());
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].gpu, "a100-sxm-80gb");
  EXPECT_EQ(fits[1].gpu, "a100-sxm-40gb");
  for (const auto& fr : fits) EXPECT_LT(fr.best_mae_pct, 1.0) << fr.gpu;
  d.write_published(one_run(rows[0].predicted));
  const auto alone = fit_efficiency(d.dir()).at(0);
  EXPECT_DOUBLE_EQ(alone.best.gemm, fits[0].best.gemm);
  EXPECT_DOUBLE_EQ(alone.best.memory, fits[0].best.memory);
}

TEST(Validate, FitKeepsMeasuredConstants) {
  // hw/gpus.yaml efficiency_not_fitted: the A100's attention is FA2's published 0.73, so a
  // fit moves gemm and memory only; every H100 constant was measured, so an H100 fit moves
  // nothing, however far off its run.
  ScratchDir d("kept");
  d.write_published(one_run(2 * 137));
  const auto a100 = fit_efficiency(d.dir()).at(0);
  EXPECT_DOUBLE_EQ(a100.best.attention, 0.73);
  EXPECT_NE(a100.best.gemm, a100.start.gemm);
  d.add_reference("mpt-13b-64xh100.yaml", "mpt-13b.yaml");
  d.write_published("runs:\n" + tokens_run("mpt-13b.yaml", 1e5));
  const auto h100 = fit_efficiency(d.dir()).at(0);
  EXPECT_EQ(h100.gpu, "h100-sxm");
  EXPECT_DOUBLE_EQ(h100.best.gemm, h100.start.gemm);
  EXPECT_DOUBLE_EQ(h100.best.attention, h100.start.attention);
  EXPECT_DOUBLE_EQ(h100.best.memory, h100.start.memory);
  EXPECT_GT(h100.best_mae_pct, 10.0);
}

TEST(Validate, FitNeverExceedsBestMeasuredMatmul) {
  // A figure no A100 can reach (3× the real one) drives gemm and memory to their
  // upper bounds: gemm stops at matmul_best (0.869, ml-engineering's 271.2 of 312).
  ScratchDir d("clamp");
  d.write_published(one_run(3 * 137));
  const auto fr = fit_efficiency(d.dir()).at(0);
  EXPECT_DOUBLE_EQ(fr.best.gemm, 0.869);
  EXPECT_DOUBLE_EQ(fr.best.memory, 1.0);
  EXPECT_GT(fr.best_mae_pct, 10.0);
}

}  // namespace
}  // namespace ptsim::sim
