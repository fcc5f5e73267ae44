#include "hw/gemm_model.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "hw/cost_table.h"

namespace ptsim::hw {

namespace {

// CUTLASS's large tensor-op threadblock tiles (default_gemm_configuration.h: 128×256 for
// Sm80 16-bit, with its transpose and the square 128×128 of the same family). Their
// arithmetic intensity (2·tm·tn / ((tm+tn)·2 B) ≥ 64 FLOP/B) keeps the main loop
// compute-bound, so one per-SM rate serves all three.
constexpr GemmTile kTiles[] = {{256, 128}, {128, 256}, {128, 128}};

// Everything gemm_timing reads.
struct TimingKey {
  std::int64_t m = 0, n = 0, k = 0;
  double peak = 0, eff = 0;
  int count = 0, reserved_sms = 0, sm_count = 0, tile_k = 0, stages = 0;
  bool operator==(const TimingKey&) const = default;
};

GemmTiming compute_timing(const TimingKey& key) {
  const double per_sm = key.peak * key.eff / key.sm_count;
  const double slices = std::ceil(static_cast<double>(key.k) / key.tile_k) + key.stages;
  GemmTiming best;
  for (const GemmTile& t : kTiles) {
    const GemmWaves w = gemm_waves(key.m, key.n, key.count, t.m, t.n, key.sm_count);
    const double slice_s = 2.0 * t.m * t.n * key.tile_k / per_sm;
    const Seconds s = w.waves * slices * slice_s;
    if (best.waves == 0 || s < best.seconds) best = {s, t, w.waves};
  }
  if (key.reserved_sms > 0) {  // the tile was chosen for the whole GPU; its tiles now share fewer SMs
    const double waves =
        gemm_waves(key.m, key.n, key.count, best.tile.m, best.tile.n, key.sm_count - key.reserved_sms).waves;
    best.seconds *= waves / best.waves;
    best.waves = waves;
  }
  return best;
}

}  // namespace

GemmTiming gemm_timing(const GpuSpec& gpu, FlopsPerSecond peak, double eff, std::int64_t m, std::int64_t n,
                       std::int64_t k, int count, int reserved_sms) {
  const int sms = gpu.sm_count - reserved_sms;
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0 || !(peak > 0) || !(eff > 0) || reserved_sms < 0 || sms <= 0)
    throw std::invalid_argument(
        fmt::format("gemm_timing: bad arguments m={} n={} k={} count={} peak={} eff={} sms={} reserved={}", m, n, k,
                    count, peak, eff, gpu.sm_count, reserved_sms));
  // The plan search times the same few hundred shapes for every candidate it bounds (its
  // programs differ in parallel sizes, not in layer shapes): each thread remembers the
  // last result per slot of a small table. A pure function of the key, so nothing moves.
  const TimingKey key{m, n, k, peak, eff, count, reserved_sms, gpu.sm_count, gpu.gemm_tile_k, gpu.gemm_stages};
  struct Slot {
    TimingKey key;
    GemmTiming value;
  };
  constexpr std::size_t kSlots = 1024;
  thread_local std::array<Slot, kSlots> memo{};
  std::uint64_t h = static_cast<std::uint64_t>(m) * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<std::uint64_t>(n) * 0xC2B2AE3D27D4EB4Full + (h >> 29);
  h ^= static_cast<std::uint64_t>(k) * 0x165667B19E3779F9ull + (h >> 31);
  h ^= static_cast<std::uint64_t>(count) * 31 + static_cast<std::uint64_t>(reserved_sms) + (h >> 27);
  Slot& slot = memo[(h ^ (h >> 32)) & (kSlots - 1)];
  if (slot.key == key) return slot.value;  // an empty slot's m = 0 never matches (m > 0 here)
  slot = {key, compute_timing(key)};
  return slot.value;
}

double attention_rate_factor(const GpuSpec& gpu, const std::string& kernel, std::int64_t length, bool backward,
                             bool causal) {
  if (length < 0) throw std::invalid_argument(fmt::format("attention_rate_factor: length {} < 0", length));
  const auto it = gpu.attention_shapes.find(kernel);
  if (it == gpu.attention_shapes.end())
    throw std::invalid_argument(
        fmt::format("attention_rate_factor: {} has no shape for kernel '{}'", gpu.name, kernel));
  const GpuSpec::AttentionShape& a = it->second;
  const double half = (backward ? a.backward_seq_half : a.seq_half) + (causal ? a.causal_seq_half : 0);
  const double l = static_cast<double>(length);
  return (backward ? a.backward : 1) * (causal ? a.causal : 1) * (length > 0 ? l / (l + half) : 1.0);
}

}  // namespace ptsim::hw
