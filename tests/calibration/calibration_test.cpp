#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "calibration/backend.h"
#include "calibration/calibrate.h"
#include "calibration/cuda_module.h"
#include "calibration/fit.h"
#include "calibration/nccl_tests_import.h"
#include "calibration/sweep.h"
#include "hw/cost_table.h"
#include "hw/errors.h"
#include "ptsim/config.h"
#include "tests/test_paths.h"

namespace ptsim::calibration {
namespace {

namespace fs = std::filesystem;

const std::string kData = test::repo_path("tests/calibration/data/");

fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("ptsim_calibration_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::size_t files_in(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(Sweep, TransformerGemmShapesDeduplicated) {
  // h=4, ffn=16, vocab=32, tokens=8: 5 linears × (fwd, dgrad, wgrad) = 15 GEMMs, minus the
  // proj dgrad (8,4,4) = proj fwd, and mlp-down fwd (8,4,16) / dgrad (8,16,4) = mlp-up dgrad /
  // fwd: 12 distinct shapes.
  const auto shapes = transformer_gemm_shapes(4, 16, 32, 8);
  EXPECT_EQ(shapes.size(), 12u);
  // QKV forward first: M = tokens, N = 3h, K = h.
  EXPECT_EQ(shapes[0].m, 8);
  EXPECT_EQ(shapes[0].n, 12);
  EXPECT_EQ(shapes[0].k, 4);
  // QKV wgrad: M = h, N = 3h, K = tokens.
  EXPECT_EQ(shapes[2].m, 4);
  EXPECT_EQ(shapes[2].k, 8);
  EXPECT_THROW(transformer_gemm_shapes(0, 1, 1, 1), std::invalid_argument);
}

TEST(Sweep, CollectiveSizesSpan1KiBTo4GiB) {
  const auto s = gpu_sweep(false);
  // 1 KiB·4^i up to 4 GiB = 2^32: i = 0..11, 12 sizes.
  ASSERT_EQ(s.collective_bytes.size(), 12u);
  EXPECT_EQ(s.collective_bytes.front(), 1024.0);
  EXPECT_EQ(s.collective_bytes.back(), 4294967296.0);
}

TEST(Fit, NonNegativeRelativeLeastSquares) {
  // Exact data t = 2 + 3x is recovered.
  const std::vector<std::vector<double>> x{{1, 1}, {1, 2}, {1, 4}};
  auto c = nonnegative_relative_least_squares(x, {5, 8, 14});
  EXPECT_NEAR(c[0], 2, 1e-12);
  EXPECT_NEAR(c[1], 3, 1e-12);
  // t = 3x − 1 would need a negative intercept: it is dropped, and the slope alone minimises
  // Σ((s·x − t)/t)²: s = Σ(x/t) / Σ(x/t)² with x/t = 1/2, 2/5, 4/11.
  c = nonnegative_relative_least_squares(x, {2, 5, 11});
  EXPECT_EQ(c[0], 0.0);
  const double r1 = 0.5, r2 = 0.4, r3 = 4.0 / 11;
  EXPECT_NEAR(c[1], (r1 + r2 + r3) / (r1 * r1 + r2 * r2 + r3 * r3), 1e-12);
  EXPECT_THROW(nonnegative_relative_least_squares(x, {1, 2}), std::invalid_argument);
  EXPECT_THROW(nonnegative_relative_least_squares(x, {1, 0, 2}), std::invalid_argument);
}

TEST(Fit, CollectiveAlphaBetaAndMembw) {
  // t = 5 us + bytes / 50 GB/s exactly -> α = 5e-6, β = 2e-11.
  std::vector<hw::CollectivePoint> pts;
  for (double b : {1e3, 1e5, 1e7, 1e9}) pts.push_back({"all-reduce", 4, "nccl", b, 5e-6 + b * 2e-11});
  const auto f = fit_collective(pts, "all-reduce", 4, "nccl");
  EXPECT_NEAR(f.alpha_s, 5e-6, 1e-15);
  EXPECT_NEAR(f.beta_s_per_byte, 2e-11, 1e-20);
  std::vector<hw::MembwPoint> m;
  for (double b : {1e6, 1e8}) m.push_back({b, 1e-6 + b / 2e12});
  const auto mf = fit_membw(m);
  EXPECT_NEAR(mf.latency_s, 1e-6, 1e-15);
  EXPECT_NEAR(mf.bandwidth_bytes_per_s, 2e12, 1e3);
}

TEST(Fit, GemmRecoversThroughputWithWaveQuantisation) {
  // Synthetic device: 4 units, 128-tiles, 1e-12 s/FLOP at full waves, 3 us overhead.
  // 384×128 = 3 tiles on 4 units: efficiency 3/4, so it costs as if it did 4/3 the FLOPs.
  std::vector<hw::GemmPoint> pts;
  for (auto [m, n, k] : {std::tuple{128, 128, 64}, {384, 128, 512}, {512, 512, 512}, {640, 256, 1024}}) {
    const double flops = 2.0 * m * n * k;
    pts.push_back({m, n, k, "bf16", 3e-6 + 1e-12 * flops / hw::wave_efficiency(m, n, 128, 128, 4)});
  }
  const auto f = fit_gemm(pts, "bf16", 128, 4);
  EXPECT_NEAR(f.overhead_s, 3e-6, 1e-12);
  EXPECT_NEAR(f.seconds_per_flop, 1e-12, 1e-18);
  EXPECT_NEAR(f.seconds_per_byte, 0.0, 1e-15);
}

TEST(NcclTestsImport, AllReduceLog) {
  const auto log = load_nccl_tests(kData + "all_reduce_perf.log");
  EXPECT_EQ(log.op, "all-reduce");
  EXPECT_EQ(log.ranks, 8);  // eight "#  Rank" lines
  ASSERT_EQ(log.points.size(), 11u);
  // First row: 1024 B in 20.01 us (out-of-place column).
  EXPECT_EQ(log.points[0].bytes, 1024.0);
  EXPECT_NEAR(log.points[0].seconds, 20.01e-6, 1e-12);
  EXPECT_EQ(log.points[0].algorithm, "nccl");
  // The log was generated with t = 20 us + size / (1e5 B/us), rounded to 0.01 us.
  const auto f = fit_collective(log.points, "all-reduce", 8, "nccl");
  EXPECT_NEAR(f.alpha_s, 20e-6, 0.1e-6);
  EXPECT_NEAR(f.beta_s_per_byte, 1e-11, 1e-14);
}

TEST(NcclTestsImport, OpFromFileNameWhenNoHeader) {
  const auto log = load_nccl_tests(kData + "all_gather_perf.log");
  EXPECT_EQ(log.op, "all-gather");
  EXPECT_EQ(log.ranks, 8);
  // Last row: 1 GiB in 10 + 1073741824/2e5 = 5378.71 us.
  EXPECT_NEAR(log.points.back().seconds, 5378.71e-6, 1e-11);
}

TEST(NcclTestsImport, RowsWithoutRootColumnAndBadInput) {
  // 12-field rows (nccl-tests before the root column), ranks from nGpus × nThread.
  const std::string old =
      "# nThread 2 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
      "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
      "           8             2     float     sum    10.00    0.00    0.00  0e+00    10.00    0.00    0.00  0e+00\n"
      "node1:123:123 [0] NCCL INFO Launch mode Parallel\n"
      "          16             4     float     sum    12.50    0.00    0.00  0e+00    11.00    0.00    0.00  0e+00\n";
  const auto log = parse_nccl_tests(old, "runs/reduce_scatter_perf.out");
  EXPECT_EQ(log.op, "reduce-scatter");
  EXPECT_EQ(log.ranks, 4);  // nThread 2 × nGpus 2
  ASSERT_EQ(log.points.size(), 2u);
  EXPECT_NEAR(log.points[1].seconds, 12.5e-6, 1e-15);
  EXPECT_THROW(parse_nccl_tests(old, "mystery.log"), std::invalid_argument);  // which collective?
  EXPECT_THROW(parse_nccl_tests("# nThread 1 nGpus 2\n", "all_reduce_perf.log"), std::invalid_argument);  // no rows
  // Found by fuzz_nccl_tests: nGpus × nThread overflowed int (65536 × 65536); now a range error.
  const std::string huge =
      "# nThread 65536 nGpus 65536\n"
      "           8             2     float     sum    10.00    0.00    0.00  0e+00    10.00    0.00    0.00  0e+00\n";
  try {
    parse_nccl_tests(huge, "all_reduce_perf.log");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("4294967296 ranks is out of range"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_nccl_tests(kData + "does_not_exist.log"), ptsim::InputError);
}

// A truncated row or an over-long line is an error with file and line (rows used to be dropped).
TEST(NcclTestsImport, TruncatedRowAndLongLineAreErrorsWithFileAndLine) {
  const std::string head = "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 8\n";
  const std::string row = "1024 256 float sum -1 20.01 0.05 0.09 0 19.81 0.05 0.09 0\n";
  try {
    parse_nccl_tests(head + row + "4096 1024 float sum -1 20.04\n", "x.log");
    ADD_FAILURE() << "a truncated row was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("x.log:4: a data row with 6 fields"), std::string::npos) << e.what();
  }
  try {
    parse_nccl_tests(head + std::string(5000, 'y') + "\n" + row, "x.log");
    ADD_FAILURE() << "an over-long line was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("x.log:3: line of 5000 characters"), std::string::npos) << e.what();
  }
}

// The op comes from the content: "…allreduce…" (no underscore) used to be imported as reduce.
TEST(NcclTestsImport, OpFromContentAndNameContentMismatch) {
  std::string rows;
  for (const auto& line :
       {"# nThread 1 nGpus 8\n", "67108864 16777216 float sum -1 691.09 97.11 169.94 0 684 98 171 0\n"})
    rows += line;
  EXPECT_EQ(parse_nccl_tests(rows, "runs/allreduce.log").op, "all-reduce");
  EXPECT_EQ(parse_nccl_tests(rows, "runs/unnamed.log").op, "all-reduce");               // busbw/algbw = 2·7/8
  EXPECT_THROW(parse_nccl_tests(rows, "runs/reduce_perf.log"), std::invalid_argument);  // root -1, ratio 1.75
  EXPECT_THROW(parse_nccl_tests(rows, "runs/unnamed.log", "all-gather"), std::invalid_argument);
  EXPECT_THROW(parse_nccl_tests("# Collective test starting: all_gather_perf\n" + rows, "x.log"),
               std::invalid_argument);
  // all-gather rows (redop none, ratio 7/8) fit all-gather and all-to-all: the name or --op decides.
  const std::string gather =
      "# nThread 1 nGpus 8\n67108864 16777216 float none -1 345.54 194.21 169.94 0 342 196 171 0\n";
  EXPECT_THROW(parse_nccl_tests(gather, "unnamed.log"), std::invalid_argument);
  EXPECT_EQ(parse_nccl_tests(gather, "unnamed.log", "all-to-all").op, "all-to-all");
  EXPECT_EQ(parse_nccl_tests(gather, "all_gather_perf.log").op, "all-gather");
  EXPECT_THROW(parse_nccl_tests(gather, "all_reduce_perf.log"), std::invalid_argument);
}

CalibrateOptions cpu_options(const fs::path& out, std::ostream* progress) {
  CalibrateOptions o;
  o.out = out.string();
  o.cpu = true;
  o.quick = true;
  o.timing = {0, 1};  // one timed run per point: the test checks the path, not the numbers
  o.progress = progress;
  return o;
}

TEST(RunCalibrate, CpuBackendEndToEnd) {
  const auto dir = fresh_dir("cpu");
  const auto out = dir / "cpu-test.yaml";
  std::ostringstream progress, errors;
  auto o = cpu_options(out, &progress);
  o.errors = &errors;
  ASSERT_EQ(run_calibrate(o), 0) << errors.str();
  const auto t = hw::load_cost_table(out.string());
  const auto sweep = cpu_sweep(true);
  EXPECT_EQ(t.name, "cpu-test");  // the file stem
  EXPECT_EQ(t.backend, "cpu");
  EXPECT_EQ(t.gemm.size(), sweep.gemm.size());
  // Two implementations (flash, naive) per attention shape, each with a backward time.
  EXPECT_EQ(t.attention.size(), 2 * sweep.attention.size());
  EXPECT_TRUE(t.attention.front().bwd_seconds.has_value());
  EXPECT_EQ(t.membw.size(), sweep.membw_bytes.size());
  EXPECT_TRUE(t.collectives.empty());
  ASSERT_EQ(t.gemm_fits.size(), 1u);
  EXPECT_EQ(t.attention_fits.size(), 2u);
  EXPECT_TRUE(t.membw_fit.has_value());
  // Looking up a measured point returns its measurement.
  const auto& g = t.gemm.front();
  EXPECT_NEAR(*t.gemm_seconds(g.m, g.n, g.k, "fp32"), g.seconds, 1e-12 * g.seconds);
  // Far outside the measured range the fit answers.
  EXPECT_TRUE(t.gemm_seconds(8192, 8192, 8192, "fp32").has_value());
  EXPECT_TRUE(t.attention_seconds(t.attention.front().shape, "fp32", true).has_value());
  EXPECT_NE(progress.str().find("sweep skipped"), std::string::npos) << progress.str();
  EXPECT_NE(progress.str().find("[gemm 1/"), std::string::npos);
  EXPECT_EQ(files_in(dir), 1u);  // no temporary left behind
}

// The test executable is not beside the CUDA module: point at the one this build made.
void use_built_cuda_module() { ::setenv(kCudaModuleEnv, PTSIM_CUDA_MODULE_PATH, 1); }

TEST(RunCalibrate, BadTimingOptionsExit2NamingThem) {
  for (auto [warmup, repeats, seconds] : {std::tuple{2, 0, 0.2}, {-1, 5, 0.2}, {2, 5, -0.1}}) {
    const auto dir = fresh_dir("badtiming");
    std::ostringstream errors;
    auto o = cpu_options(dir / "t.yaml", nullptr);
    o.errors = &errors;
    o.timing = {warmup, repeats, seconds};
    EXPECT_EQ(run_calibrate(o), 2);
    EXPECT_NE(errors.str().find("--warmup-seconds >= 0"), std::string::npos) << errors.str();
    EXPECT_EQ(files_in(dir), 0u);
  }
}

TEST(RunCalibrate, GpuRequestedWithoutDeviceExits3) {
  use_built_cuda_module();
  std::string why;
  if (make_cuda_backend({}, why)) GTEST_SKIP() << "a CUDA device is present";
  const auto dir = fresh_dir("nogpu");
  std::ostringstream errors;
  CalibrateOptions o;
  o.out = (dir / "t.yaml").string();
  o.errors = &errors;
  EXPECT_EQ(run_calibrate(o), 3);
  // One line: with CUDA the module loads and finds no device; without, there is no module.
  const std::string msg = errors.str();
  EXPECT_EQ(msg.rfind(PTSIM_HAVE_CUDA ? "no CUDA device found" : "the CUDA calibration module", 0), 0u) << msg;
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 1);
  EXPECT_EQ(files_in(dir), 0u);
}

TEST(RunCalibrate, MissingCudaModuleExits3NamingIt) {
  ::setenv(kCudaModuleEnv, "/nonexistent/libptsim_cuda.so", 1);
  std::ostringstream errors;
  CalibrateOptions o;
  o.out = (fresh_dir("nomodule") / "t.yaml").string();
  o.errors = &errors;
  EXPECT_EQ(run_calibrate(o), 3);
  EXPECT_NE(errors.str().find("/nonexistent/libptsim_cuda.so is not there"), std::string::npos) << errors.str();
  use_built_cuda_module();
}

TEST(RunCalibrate, ImportNcclTestsNewTableAndMerge) {
  const auto dir = fresh_dir("import");
  const auto out = dir / "cluster.yaml";
  CalibrateOptions o;
  o.out = out.string();
  o.import_nccl_tests = {kData + "all_reduce_perf.log", kData + "all_gather_perf.log"};
  ASSERT_EQ(run_calibrate(o), 0);
  auto t = hw::load_cost_table(out.string());
  EXPECT_EQ(t.backend, "nccl-tests");
  EXPECT_EQ(t.collectives.size(), 22u);
  EXPECT_EQ(t.collective_fits.size(), 2u);
  // 1 MiB all-reduce on 8 ranks is a measured row: 20 + 1048576/1e5 = 30.49 us.
  EXPECT_NEAR(*t.collective_seconds("all-reduce", 8, 1048576), 30.49e-6, 1e-11);
  // 4 GiB is past the log: the α–β fit, ≈ 20 us + 4294967296 B · 1e-11 s/B = 42.97 ms.
  EXPECT_NEAR(*t.collective_seconds("all-reduce", 8, 4294967296.0), 42.97e-3, 0.05e-3);

  // Merging into a CPU table keeps its GEMM section and replaces the collectives.
  const auto cpu_out = dir / "merged.yaml";
  ASSERT_EQ(run_calibrate(cpu_options(cpu_out, nullptr)), 0);
  const auto before = hw::load_cost_table(cpu_out.string());
  o.out = cpu_out.string();
  o.import_nccl_tests = {kData + "all_gather_perf.log"};
  ASSERT_EQ(run_calibrate(o), 0);
  t = hw::load_cost_table(cpu_out.string());
  EXPECT_EQ(t.gemm.size(), before.gemm.size());
  EXPECT_EQ(t.gemm_fits.size(), before.gemm_fits.size());
  EXPECT_EQ(t.collectives.size(), 11u);
  EXPECT_EQ(t.backend, "cpu");
}

TEST(RunCalibrate, FailedRunLeavesPreviousTableIntact) {
  const auto dir = fresh_dir("atomic");
  const auto out = dir / "t.yaml";
  {
    std::ofstream f(out);
    f << "previous contents\n";
  }
  // A malformed log fails after the run started: exit 2, the old file untouched, no temporary.
  const auto bad = dir / "all_reduce_perf.log";
  {
    std::ofstream f(bad);
    f << "#  Rank  0 Group  0 Pid 1 on n device 0 [0x18] X\n        1024  256  float  sum  -1  abc  0  0  0  1  0  0  "
         "0\n";
  }
  CalibrateOptions o;
  o.out = out.string();
  o.import_nccl_tests = {bad.string()};
  std::ostringstream errors;
  o.errors = &errors;
  EXPECT_EQ(run_calibrate(o), 2);
  EXPECT_NE(errors.str().find("all_reduce_perf.log"), std::string::npos) << errors.str();
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "previous contents");
  EXPECT_EQ(files_in(dir), 2u);  // t.yaml and the bad log, nothing else

  // Writing into a directory that does not exist: exit 2 as for every other output, nothing created.
  EXPECT_EQ(run_calibrate(cpu_options(dir / "no-such-dir" / "t.yaml", nullptr)), 2);
  EXPECT_FALSE(fs::exists(dir / "no-such-dir"));
}

// A backend that fails in the middle of the sweep, as an interrupted run would.
class FailingBackend final : public Backend {
 public:
  std::string name() const override { return "failing"; }
  hw::DeviceInfo device() const override { return {"none", 1, 0, 0, "", "", "", ""}; }
  std::vector<std::string> gemm_dtypes() const override { return {"fp32"}; }
  std::vector<std::string> attention_dtypes() const override { return {}; }
  std::vector<std::string> attention_impls() const override { return {}; }
  int gemm_tile() const override { return 64; }
  int parallel_units() const override { return 1; }
  Seconds gemm(std::int64_t, std::int64_t, std::int64_t, const std::string&) override {
    if (++calls_ == 2) throw std::runtime_error("interrupted");
    return 1e-3;
  }
  std::optional<AttentionTiming> attention(const hw::AttentionShape&, const std::string&, const std::string&) override {
    return std::nullopt;
  }
  Seconds membw(Bytes) override { return 1e-3; }
  int collective_ranks() const override { return 1; }
  std::vector<std::string> collective_ops() const override { return {}; }
  Seconds collective(const std::string&, int, Bytes) override { return 1; }
  FlopsPerSecond peak_flops(const std::string&) const override { return 0; }
  BytesPerSecond peak_bandwidth() const override { return 0; }

 private:
  int calls_ = 0;
};

TEST(Calibrate, InterruptedSweepThrowsBeforeAnythingIsWritten) {
  FailingBackend b;
  EXPECT_THROW(calibrate(b, cpu_sweep(true), "x", nullptr), std::runtime_error);
}

TEST(Slug, DeviceNames) {
  EXPECT_EQ(slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
  EXPECT_EQ(slug("  Intel(R) Xeon(R)  "), "intel-r-xeon-r");
  EXPECT_EQ(slug("!!"), "device");
}

}  // namespace
}  // namespace ptsim::calibration
