#include "hw/strict_yaml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "hw/gpu_catalog.h"

namespace ptsim::hw {
namespace {

TEST(StrictYaml, ClosestMatchByEditDistance) {
  // "tensor_paralel" is one insertion from "tensor_parallel", many from the rest.
  EXPECT_EQ(closest_match("tensor_paralel", {"pipeline_parallel", "tensor_parallel", "zero_stage"}), "tensor_parallel");
  EXPECT_EQ(closest_match("x", {}), "");
}

TEST(StrictYaml, UnknownKeyNamesTheKeyTheSuggestionAndTheLine) {
  const YAML::Node n = YAML::Load("bandwidth: 1\nlatancy: 2\n");
  const auto u = unknown_key(n, {"bandwidth", "latency"});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->key, "latancy");
  EXPECT_EQ(u->suggestion, "latency");
  EXPECT_EQ(u->line, 2);
  EXPECT_FALSE(unknown_key(n, {"bandwidth", "latancy"}));
  EXPECT_FALSE(unknown_key(YAML::Load("[1, 2]"), {"a"}));  // not a mapping: nothing to check
}

// Found by fuzz_scenario: an explicit complex key (`? {…}`) made yaml-cpp throw a bad
// conversion that escaped as an internal error; it is an unknown key like any other.
TEST(StrictYaml, ComplexKeyIsAnUnknownKey) {
  const YAML::Node n = YAML::Load("? {pres: 1}\n: 2\n");
  const auto u = unknown_key(n, {"preset"});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->key, "<complex key>");
}

// yaml-cpp keeps both entries of a duplicate key and one silently wins: it is an error.
TEST(StrictYaml, DuplicateYamlKeyNamesTheKeyAndBothLines) {
  const auto d = duplicate_key(YAML::Load("a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\n"));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->path, "b.c");
  EXPECT_EQ(d->line, 5);
  EXPECT_EQ(d->first_line, 3);
  EXPECT_FALSE(duplicate_key(YAML::Load("a: 1\nb: [{c: 1}, {c: 2}]\n")));
  const auto in_list = duplicate_key(YAML::Load("l:\n  - {x: 1, x: 2}\n"));
  ASSERT_TRUE(in_list);
  EXPECT_EQ(in_list->path, "l[0].x");
}

TEST(StrictYaml, QuantitiesWhoseTimesCannotBeRepresentedAreRejected) {
  const StrictReader r([](const std::string& key, const std::string& what, const std::string&) {
    throw std::invalid_argument(key + ": " + what);
  });
  EXPECT_THROW(r.bandwidth(YAML::Load("1e-300 Gb/s"), "bw"), std::invalid_argument);
  EXPECT_THROW(r.bandwidth(YAML::Load("inf GB/s"), "bw"), std::invalid_argument);
  EXPECT_THROW(r.seconds(YAML::Load("1e12 s"), "lat"), std::invalid_argument);
  EXPECT_DOUBLE_EQ(r.seconds(YAML::Load("2 us"), "lat"), 2e-6);
  EXPECT_THROW(r.int64(YAML::Load("4294967296"), "n", 1, 1 << 20), std::invalid_argument);
  EXPECT_EQ(r.int64(YAML::Load("4294967296"), "n"), 4294967296);
}

// A duration beyond the int64 nanosecond clock used to wrap to INT64_MIN (an event in the
// past: a negative iteration time, or a replay "deadlock"); it is refused instead.
TEST(Units, ToTicksRefusesDurationsTheClockCannotHold) {
  EXPECT_EQ(to_ticks(1.5), 1'500'000'000);
  EXPECT_THROW(to_ticks(1e12), TimeRangeError);
  EXPECT_THROW(to_ticks(std::numeric_limits<double>::infinity()), TimeRangeError);
  EXPECT_THROW(to_ticks(std::nan("")), TimeRangeError);
  EXPECT_THROW(to_ticks(-1), TimeRangeError);
}

// "100 B/s" used to be an unknown unit while "1 KB/s" was accepted.
TEST(Units, BandwidthWithoutPrefix) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("100 B/s"), 100.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("800 b/s"), 100.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1 KB/s"), 1000.0);
  EXPECT_THROW(parse_bandwidth("1 /s"), UnitError);
}

TEST(Units, Power) {
  EXPECT_DOUBLE_EQ(parse_power("700 W"), 700.0);
  EXPECT_DOUBLE_EQ(parse_power("1.2 kW"), 1200.0);
  EXPECT_THROW(parse_power("700"), UnitError);
  EXPECT_THROW(parse_power("700 V"), UnitError);
}

// Every catalog GPU carries its datasheet TDP (the default cluster.gpu_power).
TEST(GpuCatalog, TdpOfEveryGpu) {
  for (const auto& g : gpu_catalog()) EXPECT_GT(g.tdp, 0) << g.name;
  EXPECT_EQ(find_gpu("a100")->tdp, 400);
  EXPECT_EQ(find_gpu("h100")->tdp, 700);
}

// efficiency_not_fitted marks the measured or published constants `validate --fit` keeps;
// a misspelt entry names the GPU and the accepted words.
TEST(GpuCatalog, EfficiencyNotFitted) {
  EXPECT_TRUE(find_gpu("a100")->efficiency_not_fitted.attention);
  EXPECT_FALSE(find_gpu("a100")->efficiency_not_fitted.gemm);
  const auto h100 = *find_gpu("h100");
  EXPECT_TRUE(h100.efficiency_not_fitted.gemm && h100.efficiency_not_fitted.attention &&
              h100.efficiency_not_fitted.memory);
  const std::string gpu =
      "gpus:\n  - name: x\n    peak: { fp16: \"1 TFLOP/s\" }\n    hbm: \"1 GiB\"\n"
      "    hbm_bandwidth: \"1 GB/s\"\n    nvlink_bandwidth: \"1 GB/s\"\n    pcie_bandwidth: \"1 GB/s\"\n"
      "    tdp: \"1 W\"\n    host_adam_rate: \"1 Gparam/s\"\n    matmul_best: 0.8\n    sm_count: 1\n"
      "    launch_overhead: \"1 us\"\n    blas_workspace: \"1 MiB\"\n    te_workspace: \"1 MiB\"\n    gemm_tile_k: "
      "64\n    gemm_stages: 3\n"
      "    attention_kernel: fa2\n    attention_shape:\n      fa2: { seq_half: 1, backward: 0.9, "
      "backward_seq_half: 2, causal: 0.9, causal_seq_half: 3 }\n";
  EXPECT_TRUE(parse_gpu_catalog(gpu + "    efficiency_not_fitted: [memory]\n").at(0).efficiency_not_fitted.memory);
  try {
    parse_gpu_catalog(gpu + "    efficiency_not_fitted: [gemm, memroy]\n");
    ADD_FAILURE() << "a misspelt entry was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu 'x': efficiency_not_fitted lists 'memroy'"), std::string::npos)
        << e.what();
  }
}

// attention_shape: an entry for every flash kernel the GPU runs, each field given and in
// range; a missing or stray entry names the GPU and the kernel.
TEST(GpuCatalog, AttentionShapeOfEveryKernel) {
  for (const auto& g : gpu_catalog()) {
    EXPECT_TRUE(g.attention_shapes.count(g.attention_kernel)) << g.name;
    for (const auto& [kernel, rate] : g.attention_kernels) EXPECT_TRUE(g.attention_shapes.count(kernel)) << g.name;
  }
  const std::string gpu =
      "gpus:\n  - name: x\n    peak: { fp16: \"1 TFLOP/s\" }\n    hbm: \"1 GiB\"\n"
      "    hbm_bandwidth: \"1 GB/s\"\n    nvlink_bandwidth: \"1 GB/s\"\n    pcie_bandwidth: \"1 GB/s\"\n"
      "    tdp: \"1 W\"\n    host_adam_rate: \"1 Gparam/s\"\n    matmul_best: 0.8\n    sm_count: 1\n"
      "    launch_overhead: \"1 us\"\n    blas_workspace: \"1 MiB\"\n    te_workspace: \"1 MiB\"\n    gemm_tile_k: "
      "64\n    gemm_stages: 3\n    attention_kernel: fa2\n    attention_kernels: { fa1: 0.4 }\n";
  const std::string shape = "{ seq_half: 1, backward: 0.9, backward_seq_half: 2, causal: 0.9, causal_seq_half: 3 }";
  const auto fails = [&](const std::string& yaml, const std::string& says) {
    try {
      parse_gpu_catalog(yaml);
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  const auto ok = parse_gpu_catalog(gpu + "    attention_shape:\n      fa2: " + shape + "\n      fa1: " + shape + "\n");
  EXPECT_DOUBLE_EQ(ok.at(0).attention_shapes.at("fa1").causal_seq_half, 3);
  fails(gpu, "gpu 'x': attention_shape has no entry for kernel 'fa2'");
  fails(gpu + "    attention_shape:\n      fa2: " + shape + "\n", "no entry for kernel 'fa1'");
  fails(gpu + "    attention_shape:\n      fa2: " + shape + "\n      fa1: { seq_half: 1 }\n",
        "attention_shape.fa1 lacks 'backward'");
  fails(gpu + "    attention_shape:\n      fa2: " + shape + "\n      fa1: " + shape + "\n      fa3: " + shape + "\n",
        "names kernel 'fa3', which the GPU does not run");
  std::string bad = shape;
  bad.replace(bad.find("backward: 0.9"), 13, "backward: 0");
  fails(gpu + "    attention_shape:\n      fa2: " + bad + "\n      fa1: " + shape + "\n",
        "attention_shape.fa2.backward is 0, must be > 0");
}

// PyTorch's default cuBLAS workspace per (handle, stream), as CublasHandlePool.cpp sizes it:
// ":4096:2:16:8" (8,519,680 B) before Hopper, 32 MiB on Hopper and Blackwell.
TEST(GpuCatalog, BlasWorkspaceIsPyTorchsDefault) {
  EXPECT_DOUBLE_EQ(find_gpu("a100")->blas_workspace, 8519680.0);
  EXPECT_DOUBLE_EQ(find_gpu("a100-sxm-40gb")->blas_workspace, 8519680.0);
  for (const char* g : {"h100", "h200", "b200"}) EXPECT_DOUBLE_EQ(find_gpu(g)->blas_workspace, 32.0 * 1024 * 1024) << g;
  // Transformer Engine's: 4 MiB before Hopper, 32 MiB from compute capability 9 on.
  EXPECT_DOUBLE_EQ(find_gpu("a100")->te_workspace, 4.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(find_gpu("h100")->te_workspace, 32.0 * 1024 * 1024);
}

}  // namespace
}  // namespace ptsim::hw
