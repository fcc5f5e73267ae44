// Fits of measured points (Eigen least squares on relative error, non-negative
// coefficients), written into a cost table next to the raw points.
#pragma once

#include <vector>

#include "hw/cost_table.h"

namespace ptsim::calibration {

// Minimises Σ ((X·c − t)/t)² subject to c ≥ 0 (active set: the most negative coefficient is
// dropped and the rest refitted). Relative error, because times span six decades and an
// absolute fit would ignore every small point. Throws std::invalid_argument when X and t
// disagree in size, when it is empty or when a t is not positive.
std::vector<double> nonnegative_relative_least_squares(const std::vector<std::vector<double>>& x,
                                                       const std::vector<double>& t);

// GEMM (per dtype): t = overhead + seconds_per_flop·2mnk/wave_efficiency + seconds_per_byte·bytes.
hw::GemmFit fit_gemm(const std::vector<hw::GemmPoint>& points, const std::string& dtype, int tile, int sm_count);
// Attention (per dtype and impl): t = overhead + seconds_per_flop·FLOPs, forward and backward.
hw::AttentionFit fit_attention(const std::vector<hw::AttentionPoint>& points, const std::string& dtype,
                               const std::string& impl);
// Memory bound: t = latency + bytes/bandwidth.
hw::MembwFit fit_membw(const std::vector<hw::MembwPoint>& points);
// Collectives (per op, ranks, algorithm): t = α + β·bytes (Hockney's model).
hw::CollectiveFit fit_collective(const std::vector<hw::CollectivePoint>& points, const std::string& op, int ranks,
                                 const std::string& algorithm);

// Replaces every fit of `table` by one fitted to its points (groups with points only).
// GEMM wave quantisation uses `gemm_tile` × `gemm_tile` tiles on `sm_count` units.
void fit_table(hw::CostTable& table, int gemm_tile, int sm_count);

}  // namespace ptsim::calibration
