// A scenario that names a cost table takes its costs from it and says so.
#include <gtest/gtest.h>

#include <fstream>

#include "sim/core/errors.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

TEST(CalibrationSource, TableNameBecomesCostSourceAndTimesChange) {
  // calibration/tables/cpu-example.yaml was measured by the CPU backend
  // (fp32 GEMMs on this machine's CPU): orders of magnitude slower than an A100.
  const std::string yaml = testing::tiny_gpt_yaml(1, 1, 1, 2, 1, "", 51200) + "\n";
  const Scenario datasheet = parse_scenario(yaml, "test", {"training.precision=fp32"});
  const Scenario table = parse_scenario(
      yaml, "test",
      {"training.precision=fp32", "cluster.calibration=" + test::repo_path("calibration/tables/cpu-example.yaml")});
  const Result a = simulate(datasheet).result, b = simulate(table).result;
  EXPECT_EQ(a.cost_source, "datasheet");
  EXPECT_EQ(b.cost_source, "cpu-example");
  EXPECT_GT(b.iteration_time_s, 10 * a.iteration_time_s);
}

TEST(CalibrationSource, MeasuredH100TableRunsTheH100Scenario) {
  // calibration/tables/h100-sxm.yaml: `ptsim calibrate` on an H100 80GB HBM3 (README
  // 'Calibration on a real GPU'). Its GEMMs run 3.4 % faster than the datasheet model's;
  // the scenario's FA3 attention is not in it (roofline). It must run on it and name it.
  const auto path = test::repo_path("scenarios/llama3-70b-512xh100.yaml");
  const Result a = simulate(load_scenario(path)).result;
  const Result b =
      simulate(load_scenario(path, {"cluster.calibration=" + test::repo_path("calibration/tables/h100-sxm.yaml")}))
          .result;
  EXPECT_EQ(a.cost_source, "datasheet");
  EXPECT_EQ(b.cost_source, "h100-sxm");
  EXPECT_NE(a.iteration_time_s, b.iteration_time_s);
}

TEST(CalibrationSource, MissingTableIsABadInput) {
  const Scenario s =
      parse_scenario(testing::tiny_gpt_yaml(1, 1, 1, 2, 1), "s.yaml", {"cluster.calibration=/nonexistent/table.yaml"});
  EXPECT_THROW(simulate(s), ScenarioError);
}

}  // namespace
}  // namespace ptsim::sim

namespace ptsim::sim {
namespace {

TEST(CalibrationSource, MeasuredCollectivesReplaceTheNetworkModel) {
  // A table with only an 8-rank all-reduce measured as α + S/B with α = 1 ms,
  // B = 1 GB/s — far slower than NVSwitch — as an imported nccl-tests log would be.
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/slow-allreduce.yaml";
  {
    std::ofstream out(path);
    out << "format: ptsim-cost-table/1\nname: slow-allreduce\nbackend: nccl-tests\ndate: 2026-01-01T00:00:00Z\n"
           "collective:\n  fits: [{op: all-reduce, ranks: 8, algorithm: ring, alpha_s: 0.001, beta_s_per_byte: "
           "1.0e-9}]\n";
  }
  // Every all-reduce blocking (2021 Megatron-LM): none runs beside a weight-gradient GEMM.
  const std::string yaml = testing::tiny_gpt_yaml(1, 1, 8, 2, 1, "", 51200,
                                                  "  megatron:\n    async_tensor_model_parallel_allreduce: false\n");
  const Result plain = simulate(parse_scenario(yaml, "test")).result;
  const Result measured = simulate(parse_scenario(yaml, "test", {"cluster.calibration=" + path})).result;
  EXPECT_EQ(plain.cost_source, "datasheet");
  EXPECT_EQ(measured.cost_source, "slow-allreduce");
  // One micro-batch, one stage: the TP all-reduces are 2 forward + 2 backward per
  // layer (2 layers), the embedding's forward one and the logits' backward one, all
  // of S = 128·1024·2 B: 1 ms + 262144 B / 1 GB/s = 1.262144 ms each; plus the
  // cross-entropy all-reduce of 3·128·4 = 1536 B: 1.001536 ms.
  EXPECT_NEAR(measured.exposed_comm_s[static_cast<int>(Dim::tp)], 10 * 1.262144e-3 + 1.001536e-3, 1e-7);
  EXPECT_LT(plain.exposed_comm_s[static_cast<int>(Dim::tp)], 1e-3);
}

}  // namespace
}  // namespace ptsim::sim
