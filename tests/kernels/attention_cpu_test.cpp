#include "kernels/attention_cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ptsim::kernels {
namespace {

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// |x − ref| ≤ atol + rtol·|ref| element by element (STYLE.md item 9).
void expect_close(const std::vector<float>& x, const std::vector<float>& ref, double atol, double rtol,
                  const char* what) {
  ASSERT_EQ(x.size(), ref.size()) << what;
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_LE(std::abs(double(x[i]) - ref[i]), atol + rtol * std::abs(double(ref[i])))
        << what << "[" << i << "]: " << x[i] << " vs " << ref[i];
}

struct Case {
  AttentionDims dims;
  AttentionTiles tiles;
};

class FlashVsNaive : public ::testing::TestWithParam<Case> {};

TEST_P(FlashVsNaive, ForwardAndBackwardMatch) {
  const auto [d, tiles] = GetParam();
  const auto q = random_vector(d.q_elements(), 1), k = random_vector(d.kv_elements(), 2),
             v = random_vector(d.kv_elements(), 3), d_o = random_vector(d.q_elements(), 4);
  std::vector<float> o_ref(d.q_elements()), lse_ref(d.batch_heads * d.seq_q), o(o_ref.size()), lse(lse_ref.size());
  naive_attention_forward(d, q, k, v, o_ref, lse_ref);
  flash_attention_forward_cpu(d, q, k, v, o, lse, tiles);
  // Both accumulate in double; only the summation order differs, so agreement is ~1e-6.
  expect_close(o, o_ref, 1e-5, 1e-5, "O");
  expect_close(lse, lse_ref, 1e-5, 1e-5, "lse");

  std::vector<float> dq_ref(d.q_elements()), dk_ref(d.kv_elements()), dv_ref(d.kv_elements());
  std::vector<float> dq(dq_ref.size()), dk(dk_ref.size()), dv(dv_ref.size());
  naive_attention_backward(d, q, k, v, o_ref, d_o, dq_ref, dk_ref, dv_ref);
  flash_attention_backward_cpu(d, q, k, v, o, lse, d_o, dq, dk, dv, tiles);
  expect_close(dq, dq_ref, 1e-4, 1e-4, "dQ");
  expect_close(dk, dk_ref, 1e-4, 1e-4, "dK");
  expect_close(dv, dv_ref, 1e-4, 1e-4, "dV");
}

// Tiles that divide the sequence, tiles that do not (ragged last tile), causal with
// seq_q < seq_kv (bottom-right mask), and a single tile covering everything.
INSTANTIATE_TEST_SUITE_P(
    Shapes, FlashVsNaive,
    ::testing::Values(Case{{2, 64, 64, 16, false, 0}, {16, 16}}, Case{{2, 64, 64, 16, true, 0}, {16, 16}},
                      Case{{1, 50, 70, 8, false, 0}, {16, 32}}, Case{{1, 37, 61, 8, true, 0}, {8, 16}},
                      Case{{3, 24, 24, 32, true, 0.1f}, {64, 64}}, Case{{1, 33, 33, 64, true, 0}, {32, 16}}));

TEST(NaiveAttention, ForwardIsSoftmaxWeightedAverage) {
  // One query, two keys with scores 0 and ln 3 (scale 1): weights 1/4 and 3/4, so the
  // output is 1/4·v0 + 3/4·v1 and lse = log(1 + 3) = log 4.
  AttentionDims d{1, 1, 2, 1, false, 1.0f};
  const std::vector<float> q{1.0f}, k{0.0f, std::log(3.0f)}, v{4.0f, 8.0f};
  std::vector<float> o(1), lse(1);
  naive_attention_forward(d, q, k, v, o, lse);
  EXPECT_NEAR(o[0], 0.25 * 4 + 0.75 * 8, 1e-6);
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-6);
  // Causal with seq_q = seq_kv = 2: the first query sees only the first key, so o = v0.
  AttentionDims c{1, 2, 2, 1, true, 1.0f};
  const std::vector<float> q2{1.0f, 1.0f};
  std::vector<float> o2(2), lse2(2);
  naive_attention_forward(c, q2, k, v, o2, lse2);
  EXPECT_NEAR(o2[0], 4.0, 1e-6);
  EXPECT_NEAR(o2[1], 7.0, 1e-6);
}

TEST(NaiveAttention, BackwardMatchesFiniteDifferences) {
  // Loss = Σ O∘G for a fixed random G, so dL/dO = G; compare the analytic gradients with
  // central differences (O(h²) error, h = 1e-2 -> ~1e-4 relative, float noise ~1e-5/h).
  const AttentionDims d{2, 5, 7, 4, true, 0};
  auto q = random_vector(d.q_elements(), 11), k = random_vector(d.kv_elements(), 12),
       v = random_vector(d.kv_elements(), 13);
  const auto g = random_vector(d.q_elements(), 14);
  auto loss = [&]() {
    std::vector<float> o(d.q_elements()), lse(d.batch_heads * d.seq_q);
    naive_attention_forward(d, q, k, v, o, lse);
    double s = 0;
    for (std::size_t i = 0; i < o.size(); ++i) s += double(o[i]) * g[i];
    return s;
  };
  std::vector<float> o(d.q_elements()), lse(d.batch_heads * d.seq_q);
  naive_attention_forward(d, q, k, v, o, lse);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  naive_attention_backward(d, q, k, v, o, g, dq, dk, dv);
  constexpr float h = 1e-2f;
  auto check = [&](std::vector<float>& x, const std::vector<float>& grad, const char* what) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float saved = x[i];
      x[i] = saved + h;
      const double up = loss();
      x[i] = saved - h;
      const double down = loss();
      x[i] = saved;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(grad[i], fd, 2e-3 + 1e-2 * std::abs(fd)) << what << "[" << i << "]";
    }
  };
  check(q, dq, "dQ");
  check(k, dk, "dK");
  check(v, dv, "dV");
}

TEST(AttentionDims, RejectsBadInput) {
  EXPECT_THROW((AttentionDims{0, 1, 1, 1, false, 0}.validate()), std::invalid_argument);
  // Causal with more queries than keys would leave the first rows with no key at all.
  EXPECT_THROW((AttentionDims{1, 8, 4, 1, true, 0}.validate()), std::invalid_argument);
  const AttentionDims d{1, 2, 2, 2, false, 0};
  std::vector<float> q(4), k(4), v(3), o(4), lse(2);
  EXPECT_THROW(naive_attention_forward(d, q, k, v, o, lse), std::invalid_argument);
  std::vector<float> v4(4);
  EXPECT_THROW(flash_attention_forward_cpu(d, q, k, v4, o, lse, {0, 1}), std::invalid_argument);
  // 1/sqrt(head_dim) by default: 1/sqrt(16) = 0.25.
  EXPECT_FLOAT_EQ((AttentionDims{1, 1, 1, 16, false, 0}.softmax_scale()), 0.25f);
}

}  // namespace
}  // namespace ptsim::kernels
