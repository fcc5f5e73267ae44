#include "kernels/attention_cpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace ptsim::kernels {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void check_size(std::span<const float> s, std::int64_t want, const char* what) {
  if (static_cast<std::int64_t>(s.size()) != want)
    throw std::invalid_argument(fmt::format("attention: {} has {} elements, expected {}", what, s.size(), want));
}
void check_size(std::span<float> s, std::int64_t want, const char* what) {
  check_size(std::span<const float>(s.data(), s.size()), want, what);
}

double dot(const float* a, const float* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

void check_forward(const AttentionDims& d, std::span<const float> q, std::span<const float> k, std::span<const float> v,
                   std::span<float> o, std::span<float> lse) {
  d.validate();
  check_size(q, d.q_elements(), "Q");
  check_size(k, d.kv_elements(), "K");
  check_size(v, d.kv_elements(), "V");
  check_size(o, d.q_elements(), "O");
  check_size(lse, d.batch_heads * d.seq_q, "lse");
}

void check_backward(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                    std::span<const float> v, std::span<const float> o, std::span<const float> d_o, std::span<float> dq,
                    std::span<float> dk, std::span<float> dv) {
  d.validate();
  check_size(q, d.q_elements(), "Q");
  check_size(k, d.kv_elements(), "K");
  check_size(v, d.kv_elements(), "V");
  check_size(o, d.q_elements(), "O");
  check_size(d_o, d.q_elements(), "dO");
  check_size(dq, d.q_elements(), "dQ");
  check_size(dk, d.kv_elements(), "dK");
  check_size(dv, d.kv_elements(), "dV");
}

}  // namespace

float AttentionDims::softmax_scale() const {
  return scale != 0 ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

void AttentionDims::validate() const {
  if (batch_heads <= 0 || seq_q <= 0 || seq_kv <= 0 || head_dim <= 0)
    throw std::invalid_argument(
        fmt::format("attention: dimensions must be positive, got batch_heads={} seq_q={} "
                    "seq_kv={} head_dim={}",
                    batch_heads, seq_q, seq_kv, head_dim));
  if (causal && seq_q > seq_kv)
    throw std::invalid_argument(
        fmt::format("attention: causal needs seq_q <= seq_kv (bottom-right mask), got "
                    "seq_q={} seq_kv={}",
                    seq_q, seq_kv));
  if (!std::isfinite(scale) || scale < 0)
    throw std::invalid_argument(fmt::format("attention: bad softmax scale {}", scale));
}

void naive_attention_forward(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                             std::span<const float> v, std::span<float> o, std::span<float> lse) {
  check_forward(d, q, k, v, o, lse);
  const double scale = d.softmax_scale();
  const auto D = d.head_dim;
  std::vector<double> s(static_cast<std::size_t>(d.seq_q * d.seq_kv));  // [seq_q × seq_kv] scores
  for (std::int64_t b = 0; b < d.batch_heads; ++b) {
    const float* Q = q.data() + b * d.seq_q * D;
    const float* K = k.data() + b * d.seq_kv * D;
    const float* V = v.data() + b * d.seq_kv * D;
    float* O = o.data() + b * d.seq_q * D;
    for (std::int64_t i = 0; i < d.seq_q; ++i) {
      double* row = s.data() + i * d.seq_kv;
      double mx = kNegInf;
      for (std::int64_t j = 0; j < d.seq_kv; ++j) {
        row[j] = d.masked(i, j) ? kNegInf : scale * dot(Q + i * D, K + j * D, D);
        mx = std::max(mx, row[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j < d.seq_kv; ++j) sum += (row[j] = std::exp(row[j] - mx));
      for (std::int64_t j = 0; j < d.seq_kv; ++j) row[j] /= sum;
      for (std::int64_t c = 0; c < D; ++c) {
        double acc = 0;
        for (std::int64_t j = 0; j < d.seq_kv; ++j) acc += row[j] * V[j * D + c];
        O[i * D + c] = static_cast<float>(acc);
      }
      lse[b * d.seq_q + i] = static_cast<float>(mx + std::log(sum));
    }
  }
}

void naive_attention_backward(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                              std::span<const float> v, std::span<const float> o, std::span<const float> d_o,
                              std::span<float> dq, std::span<float> dk, std::span<float> dv) {
  check_backward(d, q, k, v, o, d_o, dq, dk, dv);
  const double scale = d.softmax_scale();
  const auto D = d.head_dim, Sq = d.seq_q, Skv = d.seq_kv;
  std::vector<double> p(static_cast<std::size_t>(Sq * Skv));   // [Sq × Skv] probabilities
  std::vector<double> ds(static_cast<std::size_t>(Sq * Skv));  // [Sq × Skv] score gradients
  std::fill(dq.begin(), dq.end(), 0.0f);
  std::fill(dk.begin(), dk.end(), 0.0f);
  std::fill(dv.begin(), dv.end(), 0.0f);
  for (std::int64_t b = 0; b < d.batch_heads; ++b) {
    const float* Q = q.data() + b * Sq * D;
    const float* K = k.data() + b * Skv * D;
    const float* V = v.data() + b * Skv * D;
    const float* dO = d_o.data() + b * Sq * D;
    // P = softmax(scale·QKᵀ + mask), recomputed (same as the forward).
    for (std::int64_t i = 0; i < Sq; ++i) {
      double* row = p.data() + i * Skv;
      double mx = kNegInf;
      for (std::int64_t j = 0; j < Skv; ++j) {
        row[j] = d.masked(i, j) ? kNegInf : scale * dot(Q + i * D, K + j * D, D);
        mx = std::max(mx, row[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j < Skv; ++j) sum += (row[j] = std::exp(row[j] - mx));
      for (std::int64_t j = 0; j < Skv; ++j) row[j] /= sum;
    }
    // dP = dO·Vᵀ; dS = P∘(dP − Σ_j P_ij dP_ij). (Σ_j P_ij dP_ij = rowsum(dO∘O), Dao 2023 eq. in §3.1.2.)
    for (std::int64_t i = 0; i < Sq; ++i) {
      double rowdot = 0;
      for (std::int64_t j = 0; j < Skv; ++j) {
        const double dp = dot(dO + i * D, V + j * D, D);
        ds[i * Skv + j] = dp;
        rowdot += p[i * Skv + j] * dp;
      }
      for (std::int64_t j = 0; j < Skv; ++j) ds[i * Skv + j] = p[i * Skv + j] * (ds[i * Skv + j] - rowdot);
    }
    float* dQ = dq.data() + b * Sq * D;
    float* dK = dk.data() + b * Skv * D;
    float* dV = dv.data() + b * Skv * D;
    for (std::int64_t i = 0; i < Sq; ++i)
      for (std::int64_t c = 0; c < D; ++c) {
        double acc = 0;
        for (std::int64_t j = 0; j < Skv; ++j) acc += ds[i * Skv + j] * K[j * D + c];
        dQ[i * D + c] = static_cast<float>(scale * acc);
      }
    for (std::int64_t j = 0; j < Skv; ++j)
      for (std::int64_t c = 0; c < D; ++c) {
        double gk = 0, gv = 0;
        for (std::int64_t i = 0; i < Sq; ++i) {
          gk += ds[i * Skv + j] * Q[i * D + c];
          gv += p[i * Skv + j] * dO[i * D + c];
        }
        dK[j * D + c] = static_cast<float>(scale * gk);
        dV[j * D + c] = static_cast<float>(gv);
      }
  }
}

void flash_attention_forward_cpu(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                                 std::span<const float> v, std::span<float> o, std::span<float> lse,
                                 AttentionTiles tiles) {
  check_forward(d, q, k, v, o, lse);
  if (tiles.q <= 0 || tiles.kv <= 0)
    throw std::invalid_argument(fmt::format("flash attention: bad tiles {}x{}", tiles.q, tiles.kv));
  const double scale = d.softmax_scale();
  const auto D = d.head_dim, Br = tiles.q, Bc = tiles.kv;
  std::vector<double> s(static_cast<std::size_t>(Br * Bc));   // [Br × Bc] one tile of scores
  std::vector<double> acc(static_cast<std::size_t>(Br * D));  // [Br × D] unnormalised output
  std::vector<double> m(static_cast<std::size_t>(Br)), l(static_cast<std::size_t>(Br));  // running max, sum
  for (std::int64_t b = 0; b < d.batch_heads; ++b) {
    const float* Q = q.data() + b * d.seq_q * D;
    const float* K = k.data() + b * d.seq_kv * D;
    const float* V = v.data() + b * d.seq_kv * D;
    for (std::int64_t i0 = 0; i0 < d.seq_q; i0 += Br) {
      const std::int64_t br = std::min(Br, d.seq_q - i0);
      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(m.begin(), m.end(), kNegInf);
      std::fill(l.begin(), l.end(), 0.0);
      // With the causal mask, key tiles past the last row's diagonal are skipped entirely.
      const std::int64_t kv_end = d.causal ? std::min(d.seq_kv, i0 + br + (d.seq_kv - d.seq_q)) : d.seq_kv;
      for (std::int64_t j0 = 0; j0 < kv_end; j0 += Bc) {
        const std::int64_t bc = std::min(Bc, d.seq_kv - j0);
        for (std::int64_t r = 0; r < br; ++r) {
          const std::int64_t i = i0 + r;
          double tile_max = kNegInf;
          for (std::int64_t c = 0; c < bc; ++c) {
            const std::int64_t j = j0 + c;
            s[r * Bc + c] = d.masked(i, j) ? kNegInf : scale * dot(Q + i * D, K + j * D, D);
            tile_max = std::max(tile_max, s[r * Bc + c]);
          }
          const double m_new = std::max(m[r], tile_max);
          if (m_new == kNegInf) continue;  // whole row masked so far: nothing to add
          // Online softmax: rescale what was accumulated under the old max.
          const double alpha = std::exp(m[r] - m_new);
          double rowsum = 0;
          for (std::int64_t c = 0; c < bc; ++c) rowsum += (s[r * Bc + c] = std::exp(s[r * Bc + c] - m_new));
          l[r] = alpha * l[r] + rowsum;
          m[r] = m_new;
          double* a = acc.data() + r * D;
          for (std::int64_t x = 0; x < D; ++x) a[x] *= alpha;
          for (std::int64_t c = 0; c < bc; ++c) {
            const double pc = s[r * Bc + c];
            const float* vr = V + (j0 + c) * D;
            for (std::int64_t x = 0; x < D; ++x) a[x] += pc * vr[x];
          }
        }
      }
      for (std::int64_t r = 0; r < br; ++r) {
        float* out = o.data() + (b * d.seq_q + i0 + r) * D;
        for (std::int64_t x = 0; x < D; ++x) out[x] = static_cast<float>(acc[r * D + x] / l[r]);
        lse[b * d.seq_q + i0 + r] = static_cast<float>(m[r] + std::log(l[r]));
      }
    }
  }
}

void flash_attention_backward_cpu(const AttentionDims& d, std::span<const float> q, std::span<const float> k,
                                  std::span<const float> v, std::span<const float> o, std::span<const float> lse,
                                  std::span<const float> d_o, std::span<float> dq, std::span<float> dk,
                                  std::span<float> dv, AttentionTiles tiles) {
  check_backward(d, q, k, v, o, d_o, dq, dk, dv);
  check_size(lse, d.batch_heads * d.seq_q, "lse");
  if (tiles.q <= 0 || tiles.kv <= 0)
    throw std::invalid_argument(fmt::format("flash attention: bad tiles {}x{}", tiles.q, tiles.kv));
  const double scale = d.softmax_scale();
  const auto D = d.head_dim, Br = tiles.q, Bc = tiles.kv, Sq = d.seq_q, Skv = d.seq_kv;
  std::vector<double> delta(static_cast<std::size_t>(Sq));    // D_i = rowsum(dO∘O)
  std::vector<double> p(static_cast<std::size_t>(Br * Bc));   // [Br × Bc] recomputed probabilities
  std::vector<double> ds(static_cast<std::size_t>(Br * Bc));  // [Br × Bc] score gradients
  std::vector<double> dk_acc(static_cast<std::size_t>(Bc * D)), dv_acc(static_cast<std::size_t>(Bc * D));
  std::vector<double> dq_acc(static_cast<std::size_t>(Sq * D));  // dQ of one head, accumulated over kv tiles
  for (std::int64_t b = 0; b < d.batch_heads; ++b) {
    const float* Q = q.data() + b * Sq * D;
    const float* K = k.data() + b * Skv * D;
    const float* V = v.data() + b * Skv * D;
    const float* O = o.data() + b * Sq * D;
    const float* dO = d_o.data() + b * Sq * D;
    const float* L = lse.data() + b * Sq;
    for (std::int64_t i = 0; i < Sq; ++i) delta[i] = dot(dO + i * D, O + i * D, D);
    std::fill(dq_acc.begin(), dq_acc.end(), 0.0);
    for (std::int64_t j0 = 0; j0 < Skv; j0 += Bc) {
      const std::int64_t bc = std::min(Bc, Skv - j0);
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0);
      // Causal: query rows before j0 − (Skv − Sq) cannot see this key tile.
      const std::int64_t first_q = d.causal ? std::max<std::int64_t>(0, j0 - (Skv - Sq)) : 0;
      for (std::int64_t i0 = (first_q / Br) * Br; i0 < Sq; i0 += Br) {
        const std::int64_t br = std::min(Br, Sq - i0);
        for (std::int64_t r = 0; r < br; ++r) {
          const std::int64_t i = i0 + r;
          for (std::int64_t c = 0; c < bc; ++c) {
            const std::int64_t j = j0 + c;
            // P_ij = exp(scale·q_i·k_j − lse_i): the forward's probabilities, recomputed.
            const double pij = d.masked(i, j) ? 0.0 : std::exp(scale * dot(Q + i * D, K + j * D, D) - L[i]);
            const double dp = dot(dO + i * D, V + j * D, D);
            p[r * Bc + c] = pij;
            ds[r * Bc + c] = pij * (dp - delta[i]);
          }
        }
        for (std::int64_t c = 0; c < bc; ++c)
          for (std::int64_t r = 0; r < br; ++r) {
            const double pij = p[r * Bc + c], dsij = ds[r * Bc + c];
            const float* dOr = dO + (i0 + r) * D;
            const float* Qr = Q + (i0 + r) * D;
            for (std::int64_t x = 0; x < D; ++x) {
              dv_acc[c * D + x] += pij * dOr[x];
              dk_acc[c * D + x] += dsij * Qr[x];
            }
          }
        for (std::int64_t r = 0; r < br; ++r)
          for (std::int64_t c = 0; c < bc; ++c) {
            const double dsij = ds[r * Bc + c];
            const float* Kc = K + (j0 + c) * D;
            double* dqr = dq_acc.data() + (i0 + r) * D;
            for (std::int64_t x = 0; x < D; ++x) dqr[x] += dsij * Kc[x];
          }
      }
      for (std::int64_t c = 0; c < bc; ++c)
        for (std::int64_t x = 0; x < D; ++x) {
          dk[(b * Skv + j0 + c) * D + x] = static_cast<float>(scale * dk_acc[c * D + x]);
          dv[(b * Skv + j0 + c) * D + x] = static_cast<float>(dv_acc[c * D + x]);
        }
    }
    for (std::int64_t x = 0; x < Sq * D; ++x) dq[b * Sq * D + x] = static_cast<float>(scale * dq_acc[x]);
  }
}

}  // namespace ptsim::kernels
