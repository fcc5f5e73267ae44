#include "hw/gemm_model.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "hw/cost_table.h"

namespace ptsim::hw {

namespace {

// CUTLASS's large tensor-op threadblock tiles (default_gemm_configuration.h: 128×256 for
// Sm80 16-bit, with its transpose and the square 128×128 of the same family). Their
// arithmetic intensity (2·tm·tn / ((tm+tn)·2 B) ≥ 64 FLOP/B) keeps the main loop
// compute-bound, so one per-SM rate serves all three.
constexpr GemmTile kTiles[] = {{256, 128}, {128, 256}, {128, 128}};

}  // namespace

GemmTiming gemm_timing(const GpuSpec& gpu, FlopsPerSecond peak, double eff, std::int64_t m, std::int64_t n,
                       std::int64_t k, int count, int reserved_sms) {
  const int sms = gpu.sm_count - reserved_sms;
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0 || !(peak > 0) || !(eff > 0) || reserved_sms < 0 || sms <= 0)
    throw std::invalid_argument(
        fmt::format("gemm_timing: bad arguments m={} n={} k={} count={} peak={} eff={} sms={} reserved={}", m, n, k,
                    count, peak, eff, gpu.sm_count, reserved_sms));
  const double per_sm = peak * eff / gpu.sm_count;
  const double slices = std::ceil(static_cast<double>(k) / gpu.gemm_tile_k) + gpu.gemm_stages;
  GemmTiming best;
  for (const GemmTile& t : kTiles) {
    const GemmWaves w = gemm_waves(m, n, count, t.m, t.n, gpu.sm_count);
    const double slice_s = 2.0 * t.m * t.n * gpu.gemm_tile_k / per_sm;
    const Seconds s = w.waves * slices * slice_s;
    if (best.waves == 0 || s < best.seconds) best = {s, t, w.waves};
  }
  if (reserved_sms > 0) {  // the tile was chosen for the whole GPU; its tiles now share fewer SMs
    const double waves = gemm_waves(m, n, count, best.tile.m, best.tile.n, sms).waves;
    best.seconds *= waves / best.waves;
    best.waves = waves;
  }
  return best;
}

double attention_length_factor(const GpuSpec& gpu, std::int64_t length) {
  if (length <= 0) throw std::invalid_argument(fmt::format("attention_length_factor: length {} <= 0", length));
  const double l = static_cast<double>(length);
  return l / (l + gpu.attention_seq_half);
}

}  // namespace ptsim::hw
