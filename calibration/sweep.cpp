#include "calibration/sweep.h"

#include <fmt/format.h>

#include <set>
#include <stdexcept>
#include <tuple>

namespace ptsim::calibration {

std::vector<GemmShape> transformer_gemm_shapes(std::int64_t hidden, std::int64_t ffn_hidden, std::int64_t vocab,
                                               std::int64_t tokens) {
  if (hidden <= 0 || ffn_hidden <= 0 || vocab <= 0 || tokens <= 0)
    throw std::invalid_argument(fmt::format("transformer_gemm_shapes: bad sizes h={} ffn={} vocab={} tokens={}", hidden,
                                            ffn_hidden, vocab, tokens));
  struct Linear {
    const char* name;
    std::int64_t in, out;
  };
  // QKV is 3h wide for multi-head attention (Megatron's fused QKV projection).
  const Linear layers[] = {{"qkv", hidden, 3 * hidden},
                           {"proj", hidden, hidden},
                           {"mlp-up", hidden, ffn_hidden},
                           {"mlp-down", ffn_hidden, hidden},
                           {"logits", hidden, vocab}};
  std::vector<GemmShape> out;
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
  auto add = [&](std::int64_t m, std::int64_t n, std::int64_t k, const std::string& label) {
    if (seen.insert({m, n, k}).second) out.push_back({m, n, k, label});
  };
  for (const auto& l : layers) {
    const auto tag = fmt::format("h={} tokens={} {}", hidden, tokens, l.name);
    add(tokens, l.out, l.in, tag + " fwd");    // Y[tokens×out] = X[tokens×in]·W[in×out]
    add(tokens, l.in, l.out, tag + " dgrad");  // dX[tokens×in] = dY[tokens×out]·Wᵀ
    add(l.in, l.out, tokens, tag + " wgrad");  // dW[in×out] = Xᵀ[in×tokens]·dY
  }
  return out;
}

namespace {

std::vector<Bytes> geometric(Bytes from, Bytes to, double factor) {
  std::vector<Bytes> v;
  for (Bytes b = from; b <= to * (1 + 1e-12); b *= factor) v.push_back(b);
  return v;
}

}  // namespace

Sweep gpu_sweep(bool quick) {
  Sweep s;
  // Hidden sizes of GPT-3 1.3B … 175B-class layers divided by typical tensor parallelism;
  // tokens = micro-batch × sequence length.
  const std::vector<std::int64_t> hiddens =
      quick ? std::vector<std::int64_t>{2048, 8192} : std::vector<std::int64_t>{1024, 2048, 4096, 8192, 12288};
  const std::vector<std::int64_t> tokens =
      quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{2048, 4096, 8192, 16384};
  for (auto h : hiddens)
    for (auto t : tokens)
      for (auto& g : transformer_gemm_shapes(h, 4 * h, 32768, t)) s.gemm.push_back(g);

  const std::vector<std::int64_t> bhs = quick ? std::vector<std::int64_t>{32} : std::vector<std::int64_t>{16, 64};
  const std::vector<std::int64_t> seqs =
      quick ? std::vector<std::int64_t>{512, 2048} : std::vector<std::int64_t>{512, 1024, 2048, 4096, 8192};
  for (auto bh : bhs)
    for (auto seq : seqs)
      for (std::int64_t d : {64, 128})
        for (bool causal : {false, true}) s.attention.push_back({bh, seq, seq, d, causal});

  s.membw_bytes = geometric(kMiB, quick ? 256 * kMiB : 4 * kGiB, 4);
  s.collective_bytes = geometric(kKiB, quick ? 256 * kMiB : 4 * kGiB, quick ? 16 : 4);
  return s;
}

Sweep cpu_sweep(bool quick) {
  Sweep s;
  const std::vector<std::int64_t> hiddens =
      quick ? std::vector<std::int64_t>{32, 64} : std::vector<std::int64_t>{64, 128, 256};
  const std::vector<std::int64_t> tokens = quick ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{128, 512};
  for (auto h : hiddens)
    for (auto t : tokens)
      for (auto& g : transformer_gemm_shapes(h, 4 * h, quick ? 256 : 1024, t)) s.gemm.push_back(g);
  const std::vector<std::int64_t> seqs =
      quick ? std::vector<std::int64_t>{32, 64} : std::vector<std::int64_t>{64, 128, 256};
  for (std::int64_t bh : quick ? std::vector<std::int64_t>{2} : std::vector<std::int64_t>{2, 4})
    for (auto seq : seqs)
      for (bool causal : {false, true}) s.attention.push_back({bh, seq, seq, quick ? 16 : 64, causal});
  s.membw_bytes = geometric(64 * kKiB, quick ? 1 * kMiB : 64 * kMiB, 4);
  return s;
}

}  // namespace ptsim::calibration
