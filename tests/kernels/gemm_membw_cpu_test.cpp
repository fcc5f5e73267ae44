#include "kernels/gemm_cpu.h"
#include "kernels/membw_cpu.h"
#include "kernels/timing.h"

#include <gtest/gtest.h>

#include <vector>

namespace ptsim::kernels {
namespace {

TEST(GemmCpu, SmallProductByHand) {
  // [1 2 3; 4 5 6] · [7 8; 9 10; 11 12] = [58 64; 139 154].
  const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{7, 8, 9, 10, 11, 12};
  std::vector<float> c(4);
  gemm_cpu(2, 2, 3, a, b, c);
  EXPECT_EQ(c, (std::vector<float>{58, 64, 139, 154}));
  EXPECT_THROW(gemm_cpu(2, 2, 2, a, b, c), std::invalid_argument);
}

TEST(MembwCpu, CopyAndTriadCountBytes) {
  const std::vector<float> b{1, 2, 3}, c{10, 20, 30};
  std::vector<float> a(3);
  // Copy moves 2·3·4 = 24 bytes; triad 3·3·4 = 36 bytes.
  EXPECT_EQ(copy_cpu(b, a), 24.0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(triad_cpu(a, b, c, 0.5f), 36.0);
  EXPECT_EQ(a, (std::vector<float>{6, 12, 18}));
  std::vector<float> short_dst(2);
  EXPECT_THROW(copy_cpu(b, short_dst), std::invalid_argument);
}

TEST(TimeCpu, RunsWarmupPlusRepeatsAndTakesMedian) {
  int calls = 0, flushes = 0;
  const auto stats = time_cpu([&] { ++calls; }, [&] { ++flushes; }, 2, 5);
  // 2 warm-up + 5 timed calls, each preceded by the flush.
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(flushes, 7);
  EXPECT_EQ(stats.repeats, 5);
  EXPECT_LE(stats.min_s, stats.median_s);
  EXPECT_LE(stats.median_s, stats.max_s);
  EXPECT_THROW(time_cpu([] {}, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace ptsim::kernels
