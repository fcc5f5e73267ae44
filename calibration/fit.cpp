#include "calibration/fit.h"

#include <fmt/format.h>
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace ptsim::calibration {

std::vector<double> nonnegative_relative_least_squares(const std::vector<std::vector<double>>& x,
                                                       const std::vector<double>& t) {
  if (x.empty() || x.size() != t.size())
    throw std::invalid_argument(fmt::format("least squares: {} rows of X but {} times", x.size(), t.size()));
  const auto cols = x.front().size();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].size() != cols)
      throw std::invalid_argument(
          fmt::format("least squares: row {} has {} columns, expected {}", i, x[i].size(), cols));
    if (!(t[i] > 0) || !std::isfinite(t[i]))
      throw std::invalid_argument(fmt::format("least squares: time {} at row {} is not positive", t[i], i));
  }
  std::vector<bool> active(cols, true);
  std::vector<double> c(cols, 0.0);
  for (std::size_t round = 0; round < cols; ++round) {
    std::vector<std::size_t> idx;
    for (std::size_t j = 0; j < cols; ++j)
      if (active[j]) idx.push_back(j);
    if (idx.empty()) break;
    // Row i divided by t_i: minimising ‖A·c − 1‖ is the relative-error objective.
    Eigen::MatrixXd a(static_cast<Eigen::Index>(x.size()), static_cast<Eigen::Index>(idx.size()));
    Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i)
      for (std::size_t j = 0; j < idx.size(); ++j) a(Eigen::Index(i), Eigen::Index(j)) = x[i][idx[j]] / t[i];
    const Eigen::VectorXd sol = a.colPivHouseholderQr().solve(b);
    std::size_t worst = cols;
    double worst_value = 0;
    for (std::size_t j = 0; j < idx.size(); ++j)
      if (sol(Eigen::Index(j)) < worst_value) {
        worst_value = sol(Eigen::Index(j));
        worst = idx[j];
      }
    std::fill(c.begin(), c.end(), 0.0);
    if (worst == cols) {
      for (std::size_t j = 0; j < idx.size(); ++j) c[idx[j]] = sol(Eigen::Index(j));
      return c;
    }
    active[worst] = false;
  }
  return c;
}

namespace {

double dtype_bytes(const std::string& dtype) { return dtype == "fp8" ? 1 : dtype == "fp32" ? 4 : 2; }

// The median of t/x: the slope a one-parameter model through the origin would use; the
// fallback when least squares leaves the main coefficient at zero (degenerate data).
double median_ratio(const std::vector<std::vector<double>>& x, const std::vector<double>& t, std::size_t col) {
  std::vector<double> r;
  for (std::size_t i = 0; i < x.size(); ++i) r.push_back(t[i] / x[i][col]);
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

}  // namespace

hw::GemmFit fit_gemm(const std::vector<hw::GemmPoint>& points, const std::string& dtype, int tile, int sm_count) {
  std::vector<std::vector<double>> x;
  std::vector<double> t;
  for (const auto& p : points) {
    if (p.dtype != dtype) continue;
    const double flops = 2.0 * double(p.m) * double(p.n) * double(p.k);
    const double bytes = (double(p.m) * p.k + double(p.k) * p.n + double(p.m) * p.n) * dtype_bytes(dtype);
    x.push_back({1.0, flops / hw::wave_efficiency(p.m, p.n, tile, tile, sm_count), bytes});
    t.push_back(p.seconds);
  }
  if (x.empty()) throw std::invalid_argument(fmt::format("fit_gemm: no points for dtype '{}'", dtype));
  auto c = nonnegative_relative_least_squares(x, t);
  if (c[1] <= 0) c = {0.0, median_ratio(x, t, 1), 0.0};
  return {dtype, c[0], c[1], c[2], tile, tile, sm_count};
}

hw::AttentionFit fit_attention(const std::vector<hw::AttentionPoint>& points, const std::string& dtype,
                               const std::string& impl) {
  std::vector<std::vector<double>> xf, xb;
  std::vector<double> tf, tb;
  for (const auto& p : points) {
    if (p.dtype != dtype || p.impl != impl) continue;
    xf.push_back({1.0, hw::attention_flops(p.shape, false)});
    tf.push_back(p.fwd_seconds);
    if (p.bwd_seconds) {
      xb.push_back({1.0, hw::attention_flops(p.shape, true)});
      tb.push_back(*p.bwd_seconds);
    }
  }
  if (xf.empty()) throw std::invalid_argument(fmt::format("fit_attention: no points for {} {}", dtype, impl));
  hw::AttentionFit f;
  f.dtype = dtype;
  f.impl = impl;
  auto c = nonnegative_relative_least_squares(xf, tf);
  if (c[1] <= 0) c = {0.0, median_ratio(xf, tf, 1)};
  f.fwd_overhead_s = c[0];
  f.fwd_seconds_per_flop = c[1];
  if (!xb.empty()) {
    auto b = nonnegative_relative_least_squares(xb, tb);
    if (b[1] <= 0) b = {0.0, median_ratio(xb, tb, 1)};
    f.bwd_overhead_s = b[0];
    f.bwd_seconds_per_flop = b[1];
  }
  return f;
}

hw::MembwFit fit_membw(const std::vector<hw::MembwPoint>& points) {
  std::vector<std::vector<double>> x;
  std::vector<double> t;
  for (const auto& p : points) {
    x.push_back({1.0, p.bytes});
    t.push_back(p.seconds);
  }
  if (x.empty()) throw std::invalid_argument("fit_membw: no points");
  auto c = nonnegative_relative_least_squares(x, t);
  if (c[1] <= 0) c = {0.0, median_ratio(x, t, 1)};
  return {c[0], 1.0 / c[1]};
}

hw::CollectiveFit fit_collective(const std::vector<hw::CollectivePoint>& points, const std::string& op, int ranks,
                                 const std::string& algorithm) {
  std::vector<std::vector<double>> x;
  std::vector<double> t;
  for (const auto& p : points)
    if (p.op == op && p.ranks == ranks && p.algorithm == algorithm) {
      x.push_back({1.0, p.bytes});
      t.push_back(p.seconds);
    }
  if (x.empty())
    throw std::invalid_argument(fmt::format("fit_collective: no points for {} ranks={} {}", op, ranks, algorithm));
  auto c = nonnegative_relative_least_squares(x, t);
  return {op, ranks, algorithm, c[0], c[1]};
}

void fit_table(hw::CostTable& table, int gemm_tile, int sm_count) {
  table.gemm_fits.clear();
  std::set<std::string> gemm_dtypes;
  for (const auto& p : table.gemm) gemm_dtypes.insert(p.dtype);
  for (const auto& d : gemm_dtypes) table.gemm_fits.push_back(fit_gemm(table.gemm, d, gemm_tile, sm_count));

  table.attention_fits.clear();
  std::set<std::pair<std::string, std::string>> groups;
  for (const auto& p : table.attention) groups.insert({p.dtype, p.impl});
  for (const auto& [d, impl] : groups) table.attention_fits.push_back(fit_attention(table.attention, d, impl));

  table.membw_fit.reset();
  if (!table.membw.empty()) table.membw_fit = fit_membw(table.membw);

  table.collective_fits.clear();
  std::set<std::tuple<std::string, int, std::string>> cgroups;
  for (const auto& p : table.collectives) cgroups.insert({p.op, p.ranks, p.algorithm});
  for (const auto& [op, ranks, alg] : cgroups)
    table.collective_fits.push_back(fit_collective(table.collectives, op, ranks, alg));
}

}  // namespace ptsim::calibration
