#include "sim/core/goodput.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "hw/errors.h"
#include "models/memory.h"
#include "sim/core/errors.h"
#include "sim/core/time_to_train.h"

namespace ptsim::sim {
namespace {

// The run cut into segments: `full` segments of `k` iterations, then one of `rest` (< k).
struct Segments {
  double full = 0;
  std::int64_t k = 1;
  double rest = 0;
};

Segments segments_of(double iterations, std::int64_t k) {
  Segments g;
  g.k = k;
  g.full = std::floor(iterations / static_cast<double>(k));
  g.rest = iterations - g.full * static_cast<double>(k);
  return g;
}

// Expected wall time of the whole run: every segment ends with a checkpoint.
double expected_run_time(const Segments& g, Seconds iteration_s, double delta, double restart, double mtbf) {
  double t = g.full * expected_segment_time(static_cast<double>(g.k) * iteration_s + delta, restart, mtbf);
  if (g.rest > 0) t += expected_segment_time(g.rest * iteration_s + delta, restart, mtbf);
  return t;
}

// Wall time per unit of compute in steady state, for an interval of k iterations.
double overhead_ratio(std::int64_t k, Seconds iteration_s, double delta, double restart, double mtbf) {
  const double tau = static_cast<double>(k) * iteration_s;
  return expected_segment_time(tau + delta, restart, mtbf) / tau;
}

// splitmix64 (Steele, Lea and Flood, OOPSLA 2014): a small generator whose state is one
// word, so that each trial's stream is a pure function of (seed, trial).
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Exponential with mean `mean`, by inversion of a uniform in [0, 1) with 53 bits.
  double exponential(double mean) {
    const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return -mean * std::log1p(-u);
  }
};

// One segment of `work` seconds: attempts until one runs `work` without a failure, each
// failure followed by a restart of `restart` seconds that a failure may interrupt too.
double simulate_segment(SplitMix64& rng, double work, double restart, double mtbf, std::int64_t& failures) {
  double t = 0;
  for (;;) {
    const double x = rng.exponential(mtbf);
    if (x >= work) return t + work;
    t += x;
    ++failures;
    for (;;) {
      const double y = rng.exponential(mtbf);
      if (y >= restart) {
        t += restart;
        break;
      }
      t += y;
      ++failures;
    }
  }
}

}  // namespace

CheckpointSize checkpoint_size(const Scenario& s) {
  const auto& p = s.plan.par;
  const models::ModelStates per = models::state_bytes_per_param(p.precision, p.state_layout);
  const double bytes_per_param = per.params + per.optimizer;  // gradients are not saved
  const double gpus_per_stage = static_cast<double>(p.tp) * p.cp * p.dp;
  CheckpointSize c;
  for (int stage = 0; stage < p.pp; ++stage) {
    const models::LocalParams lp = models::stage_params(s.model, p, stage);
    // stage_params is one GPU's share after TP and EP: the stage's unique parameters are
    // tp copies of the dense share and etp·ep of the expert share (cp and dp replicate).
    const double unique =
        (static_cast<double>(lp.dense) * p.tp + static_cast<double>(lp.expert) * p.expert_tp() * p.ep) *
        bytes_per_param;
    c.total += unique;
    c.per_rank = std::max(c.per_rank, unique / gpus_per_stage);
  }
  return c;
}

double expected_segment_time(double work, double restart, double mtbf) {
  return mtbf * std::exp(restart / mtbf) * std::expm1(work / mtbf);
}

double expected_lost_work(double work, double mtbf) { return mtbf - work / std::expm1(work / mtbf); }

double young_interval(double delta, double mtbf) { return std::sqrt(2 * delta * mtbf); }

double daly_interval(double delta, double mtbf) {
  if (delta >= 2 * mtbf) return mtbf;
  const double r = delta / (2 * mtbf);
  return std::sqrt(2 * delta * mtbf) * (1 + std::sqrt(r) / 3 + r / 9) - delta;
}

double optimal_interval(double delta, double mtbf) {
  // f(x) = e^{x + d}·(x − 1) + 1 with x = τ/M, d = δ/M: f(0) = 1 − e^d < 0, f(1) = 1 > 0,
  // f'(x) = x·e^{x+d} > 0, so one root in (0, 1); bisection to the last bit.
  const double d = delta / mtbf;
  double lo = 0, hi = 1;
  for (int i = 0; i < 200 && hi - lo > 0; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    const double f = std::exp(mid + d) * (mid - 1) + 1;
    (f < 0 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi) * mtbf;
}

// Everything of the goodput that does not depend on the iteration time; `min_interval`:
// the compute time an async checkpoint's background write needs before the next one.
static Goodput costs_of(const Scenario& s, double& min_interval) {
  const ReliabilityConfig& c = *s.reliability;
  Goodput g;
  const double gpus = s.plan.world_size();
  const double nodes = std::ceil(gpus / s.cluster.gpus_per_node);
  g.job_failures_per_hour = gpus * c.gpu_failures_per_hour + nodes * c.node_failures_per_hour;
  PTSIM_CHECK(g.job_failures_per_hour > 0, "no failure rate (the reader requires one)");
  g.mtbf_s = 3600 / g.job_failures_per_hour;
  g.failures_per_day = 24 * g.job_failures_per_hour;
  g.rates_default = c.rates_default;
  g.relaunch_default = c.relaunch_default;

  // The checkpoint: the plan's model states, or the given total with the plan's shares.
  const CheckpointSize derived = checkpoint_size(s);
  g.checkpoint_bytes = derived.total;
  g.checkpoint_bytes_per_rank = derived.per_rank;
  if (c.checkpoint_size) {
    g.checkpoint_size_given = true;
    g.checkpoint_bytes_per_rank =
        derived.total > 0 ? derived.per_rank * (*c.checkpoint_size / derived.total) : *c.checkpoint_size / gpus;
    g.checkpoint_bytes = *c.checkpoint_size;
  }
  // Writing and reading take the longer of the aggregate limit and the busiest node's.
  const double node_bytes = g.checkpoint_bytes_per_rank * std::min<double>(s.cluster.gpus_per_node, gpus);
  auto transfer = [&](BytesPerSecond aggregate, BytesPerSecond node) {
    double t = g.checkpoint_bytes / aggregate;
    if (node > 0) t = std::max(t, node_bytes / node);
    return t;
  };
  g.checkpoint_write_s = transfer(c.aggregate_write, c.node_write);
  g.checkpoint_load_s = transfer(c.aggregate_read, c.node_read);
  g.restart_s = c.relaunch_time + g.checkpoint_load_s + c.warmup_time;
  min_interval = 0;
  if (c.mode == CheckpointMode::sync) {
    g.mode = "sync";
    g.checkpoint_cost_s = g.checkpoint_write_s;
  } else {
    g.mode = "async";
    const BytesPerSecond snap = c.snapshot_bandwidth > 0 ? c.snapshot_bandwidth : s.cluster.gpu.pcie_bandwidth;
    if (!(snap > 0))
      throw ScenarioError(s.file, "reliability.snapshot_bandwidth", "the GPU catalog gives no PCIe bandwidth",
                          "give the device-to-host bandwidth, e.g. \"50 GB/s\"");
    g.checkpoint_cost_s = std::min(g.checkpoint_write_s, g.checkpoint_bytes_per_rank / snap);
    // The write goes on in the background: a failure before it ends rolls back one more
    // checkpoint. Counted as that much more restart on every failure (an upper bound),
    // and the next snapshot waits for it.
    const double background = g.checkpoint_write_s - g.checkpoint_cost_s;
    g.restart_s += background;
    min_interval = background;
  }
  return g;
}

double goodput_upper_bound(const Scenario& s) {
  if (!s.reliability) return 1;
  double min_interval = 0;
  const Goodput g = costs_of(s, min_interval);
  const double tau = optimal_interval(g.checkpoint_cost_s, g.mtbf_s);
  return tau / expected_segment_time(tau + g.checkpoint_cost_s, g.restart_s, g.mtbf_s);
}

std::optional<Goodput> goodput(const Scenario& s, Seconds iteration_time_s, double tokens_per_s) {
  if (!s.reliability) return std::nullopt;
  const ReliabilityConfig& c = *s.reliability;
  PTSIM_CHECK(iteration_time_s > 0, "iteration time {} s", iteration_time_s);
  double min_interval = 0;
  Goodput g = costs_of(s, min_interval);
  const double delta = g.checkpoint_cost_s, R = g.restart_s, M = g.mtbf_s;
  g.young_interval_s = young_interval(delta, M);
  g.daly_interval_s = daly_interval(delta, M);
  g.optimal_interval_s = optimal_interval(delta, M);

  // The interval in whole iterations.
  const std::int64_t k_min =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(min_interval / iteration_time_s - 1e-9)));
  std::int64_t k = 0;
  if (c.interval_iterations > 0) {
    g.interval_source = "iterations";
    k = c.interval_iterations;
  } else if (c.interval_time > 0) {
    g.interval_source = "time";
    k = static_cast<std::int64_t>(std::llround(c.interval_time / iteration_time_s));
  } else {
    g.interval_source = "optimal";
    const double x = g.optimal_interval_s / iteration_time_s;
    const double most = 1e15;  // beyond any run; keeps the conversion defined
    const auto lo = static_cast<std::int64_t>(std::min(most, std::floor(x)));
    k = std::max(lo, k_min);
    const std::int64_t up = std::max(lo + 1, k_min);
    if (overhead_ratio(up, iteration_time_s, delta, R, M) < overhead_ratio(k, iteration_time_s, delta, R, M)) k = up;
  }
  k = std::max(k, k_min);
  g.interval_iterations = k;
  g.interval_s = static_cast<double>(k) * iteration_time_s;
  const double segment = g.interval_s + delta;
  g.lost_work_per_failure_s = expected_lost_work(segment, M);
  g.goodput = g.interval_s / expected_segment_time(segment, R, M);

  if (const auto t = time_to_train(s, iteration_time_s)) {
    const Segments seg = segments_of(t->iterations, k);
    const double wall = expected_run_time(seg, iteration_time_s, delta, R, M);
    g.goodput = t->seconds / wall;
    g.wall_s = wall;
    g.wall_days = wall / 86400;
    g.failures_per_run = wall / M;
    const double gpus = s.plan.world_size();
    g.gpu_hours = wall * gpus / 3600;
    if (t->price_per_gpu_hour) g.cost = *g.gpu_hours * *t->price_per_gpu_hour;
    g.energy_kwh = t->gpu_power_w * gpus * wall / 3.6e6;
  }
  // Failures so frequent (or intervals and restarts so long) that e^{…} overflows: no
  // interval completes in expectation, the run never ends.
  if (!(std::isfinite(g.goodput) && g.goodput > 0 && (!g.wall_s || std::isfinite(*g.wall_s))))
    throw ScenarioError(s.file, c.interval_iterations > 0 || c.interval_time > 0 ? "reliability.checkpoint_interval"
                                                                               : "reliability",
                        fmt::format("one failure every {:.3g} s against {:.3g} s between checkpoints and a {:.3g} s "
                                    "restart: the expected wall time has no finite value",
                                    M, g.interval_s + delta, R),
                        "lower the failure rates, the restart time or the checkpoint interval");
  g.tokens_per_s = tokens_per_s * g.goodput;
  return g;
}

GoodputTrials goodput_trials(const Scenario& s, Seconds iteration_time_s, const Goodput& g, std::int64_t trials,
                             std::uint64_t seed) {
  const auto t = time_to_train(s, iteration_time_s);
  if (!t)
    throw ScenarioError(s.file, "training.total_tokens", "--trials needs a training goal",
                        "give training.total_tokens or training.train_iters");
  PTSIM_CHECK(trials >= 1, "{} trials", trials);
  const Segments seg = segments_of(t->iterations, g.interval_iterations);
  const double per_run = seg.full + (seg.rest > 0 ? 1 : 0);
  if (per_run * static_cast<double>(trials) > kMaxTrialSegments)
    throw InputError("--trials", std::to_string(trials),
                     fmt::format("{} trials of {:.0f} checkpoint intervals each is more than {:g} to simulate", trials,
                                 per_run, kMaxTrialSegments),
                     "fewer trials, or a longer reliability.checkpoint_interval");
  const double full_work = static_cast<double>(seg.k) * iteration_time_s + g.checkpoint_cost_s;
  const double rest_work = seg.rest * iteration_time_s + g.checkpoint_cost_s;
  const auto full_count = static_cast<std::int64_t>(seg.full);
  std::vector<double> walls(static_cast<std::size_t>(trials));
  double failures = 0;
  for (std::int64_t i = 0; i < trials; ++i) {
    SplitMix64 seeder{seed};
    SplitMix64 rng{seeder.next() ^ (static_cast<std::uint64_t>(i) * 0xD1B54A32D192ED03ULL)};
    std::int64_t n = 0;
    double wall = 0;
    for (std::int64_t j = 0; j < full_count; ++j) wall += simulate_segment(rng, full_work, g.restart_s, g.mtbf_s, n);
    if (seg.rest > 0) wall += simulate_segment(rng, rest_work, g.restart_s, g.mtbf_s, n);
    walls[static_cast<std::size_t>(i)] = wall;
    failures += static_cast<double>(n);
  }
  GoodputTrials out;
  out.trials = trials;
  out.seed = seed;
  double sum = 0;
  for (double w : walls) sum += w;
  out.mean_s = sum / static_cast<double>(trials);
  double sq = 0;
  for (double w : walls) sq += (w - out.mean_s) * (w - out.mean_s);
  out.stddev_s = trials > 1 ? std::sqrt(sq / static_cast<double>(trials - 1)) : 0;
  out.mean_failures = failures / static_cast<double>(trials);
  std::sort(walls.begin(), walls.end());
  auto pct = [&](double q) {  // nearest rank
    const auto idx = static_cast<std::size_t>(std::max(1.0, std::ceil(q * static_cast<double>(trials))) - 1);
    return walls[std::min(idx, walls.size() - 1)];
  };
  out.p10_s = pct(0.10);
  out.p50_s = pct(0.50);
  out.p90_s = pct(0.90);
  return out;
}

}  // namespace ptsim::sim
