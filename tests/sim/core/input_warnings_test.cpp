// A calibration table measured on another device or precision than the scenario's is
// used, with a warning naming the table and what differs (README "Warnings").
#include "sim/core/input_warnings.h"

#include <gtest/gtest.h>

#include "hw/cost_table.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

hw::CostTable cuda_table(const std::string& name, const std::string& device, const std::string& dtype) {
  hw::CostTable t;
  t.name = name;
  t.backend = "cuda";
  t.device.name = device;
  t.gemm.push_back({4096, 4096, 4096, dtype, 1e-4});
  return t;
}

Scenario tiny(const std::string& gpu, const std::string& precision) {
  return parse_scenario(testing::tiny_gpt_yaml(1, 1, 1, 2, 1), "s.yaml",
                        {"cluster.gpu=" + gpu, "training.precision=" + precision});
}

TEST(CalibrationWarnings, TheSameGenerationAndPrecisionIsNoWarning) {
  EXPECT_TRUE(
      calibration_warnings(tiny("h100-sxm", "bf16"), cuda_table("mine", "NVIDIA H100 80GB HBM3", "bf16")).empty());
  // The table's name may say the generation when the device string does not.
  EXPECT_TRUE(calibration_warnings(tiny("a100-sxm-80gb", "bf16"), cuda_table("a100-lab", "GPU-0", "bf16")).empty());
}

TEST(CalibrationWarnings, AnotherDeviceIsNamed) {
  const auto w =
      calibration_warnings(tiny("a100-sxm-80gb", "bf16"), cuda_table("mine", "NVIDIA H100 80GB HBM3", "bf16"));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "s.yaml: cluster.calibration: table 'mine' was measured on 'NVIDIA H100 80GB HBM3', not on the "
            "scenario's a100-sxm-80gb (neither its device nor its name says A100)");
}

TEST(CalibrationWarnings, AnotherPrecisionIsNamed) {
  const auto w = calibration_warnings(tiny("h100-sxm", "bf16"), cuda_table("mine", "NVIDIA H100", "fp16"));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("has GEMM costs in fp16 only, not the scenario's bf16"), std::string::npos) << w[0];
}

TEST(CalibrationWarnings, TheCpuExampleTableOnAnA100Bf16RunWarnsTwiceInTheResult) {
  // The case of issue 11: the CPU backend's fp32 table applied to an A100 bf16 scenario.
  const Scenario s = parse_scenario(
      testing::tiny_gpt_yaml(1, 1, 1, 2, 1), "s.yaml",
      {"training.precision=bf16", "cluster.calibration=" + test::repo_path("calibration/tables/cpu-example.yaml")});
  const Result r = simulate(s, {.fold = true}).result;
  int found = 0;
  for (const auto& w : r.warnings) {
    if (w.find("cluster.calibration: table 'cpu-example' was measured by the CPU backend") != std::string::npos)
      ++found;
    if (w.find("has GEMM costs in fp32 only, not the scenario's bf16") != std::string::npos) ++found;
  }
  EXPECT_EQ(found, 2) << ::testing::PrintToString(r.warnings);
}

TEST(CalibrationWarnings, ACollectivesOnlyTableIsNotCheckedForDevice) {
  hw::CostTable t;
  t.name = "nccl";
  t.backend = "nccl-tests";
  t.collective_fits.push_back({"all-reduce", 8, "ring", 1e-5, 1e-10});
  EXPECT_TRUE(calibration_warnings(tiny("h100-sxm", "bf16"), t).empty());
}

}  // namespace
}  // namespace ptsim::sim
