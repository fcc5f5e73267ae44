#include "sim/io/goodput_output.h"

#include <fmt/format.h>

#include "hw/units.h"
#include "sim/io/result_json.h"

namespace ptsim::sim {
namespace {

// Hours and minutes for the long times of this section ("3.09 h", "4.2 min", "2.8 s").
std::string span(double s) {
  if (s >= 86400 * 2) return fmt::format("{:.2f} d", s / 86400);
  if (s >= 3600) return fmt::format("{:.2f} h", s / 3600);
  if (s >= 60) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.3g} s", s);
}
}  // namespace

nlohmann::json goodput_json(const Goodput& g) {
  nlohmann::json j;
  j["goodput"] = g.goodput;
  j["tokens_per_s"] = g.tokens_per_s;
  j["job_failures_per_hour"] = g.job_failures_per_hour;
  j["mtbf_s"] = g.mtbf_s;
  j["failures_per_day"] = g.failures_per_day;
  j["failures_per_run"] = json_or_null(g.failures_per_run);
  j["lost_work_per_failure_s"] = g.lost_work_per_failure_s;
  j["checkpoint_bytes"] = g.checkpoint_bytes;
  j["checkpoint_bytes_per_rank"] = g.checkpoint_bytes_per_rank;
  j["checkpoint_size_given"] = g.checkpoint_size_given;
  j["checkpoint_mode"] = g.mode;
  j["checkpoint_write_s"] = g.checkpoint_write_s;
  j["checkpoint_cost_s"] = g.checkpoint_cost_s;
  j["checkpoint_load_s"] = g.checkpoint_load_s;
  j["restart_s"] = g.restart_s;
  j["interval_source"] = g.interval_source;
  j["interval_iterations"] = g.interval_iterations;
  j["interval_s"] = g.interval_s;
  j["young_interval_s"] = g.young_interval_s;
  j["daly_interval_s"] = g.daly_interval_s;
  j["optimal_interval_s"] = g.optimal_interval_s;
  j["wall_s"] = json_or_null(g.wall_s);
  j["wall_days"] = json_or_null(g.wall_days);
  j["gpu_hours"] = json_or_null(g.gpu_hours);
  j["cost"] = json_or_null(g.cost);
  j["energy_kwh"] = json_or_null(g.energy_kwh);
  j["default_failure_rates"] = g.rates_default;
  j["default_relaunch_time"] = g.relaunch_default;
  if (g.trials) {
    const auto& t = *g.trials;
    j["trials"] = {{"trials", t.trials},   {"seed", t.seed},   {"mean_s", t.mean_s}, {"stddev_s", t.stddev_s},
                   {"p10_s", t.p10_s},     {"p50_s", t.p50_s}, {"p90_s", t.p90_s},   {"mean_failures", t.mean_failures}};
  }
  return j;
}

std::string goodput_text(const Goodput& g) {
  std::string out;
  auto line = [&](fmt::string_view f, const auto&... a) { out += fmt::vformat(f, fmt::make_format_args(a...)) + "\n"; };
  line("goodput         {:.1f} % -> {:.0f} tokens/s after failures and checkpoints", 100 * g.goodput, g.tokens_per_s);
  line("failures        one per {} (MTBF of the job), {:.2f} per day{}{}", span(g.mtbf_s), g.failures_per_day,
       g.failures_per_run ? fmt::format(", {:.1f} per run", *g.failures_per_run) : std::string(),
       g.rates_default ? " (rates: Llama 3 405B run)" : "");
  line("checkpoint      {} ({} per GPU{}), {} write{}, {} load", format_bytes(g.checkpoint_bytes),
       format_bytes(g.checkpoint_bytes_per_rank), g.checkpoint_size_given ? ", size given" : "",
       span(g.checkpoint_write_s),
       g.mode == "async" ? fmt::format(" (async: {} blocks)", span(g.checkpoint_cost_s)) : std::string(),
       span(g.checkpoint_load_s));
  line("interval        every {} iterations = {} ({}; Young {}, Daly {}, exact optimum {})", g.interval_iterations,
       span(g.interval_s), g.interval_source, span(g.young_interval_s), span(g.daly_interval_s),
       span(g.optimal_interval_s));
  line("per failure     {} of work lost + {} restart{}", span(g.lost_work_per_failure_s), span(g.restart_s),
       g.relaunch_default ? " (relaunch 10 min assumed: set reliability.relaunch_time)" : "");
  if (g.wall_s) {
    std::string extra = fmt::format(", {:.0f} GPU-hours", *g.gpu_hours);
    if (g.cost) extra += fmt::format(", cost {:.0f}", *g.cost);
    extra += fmt::format(", {:.0f} kWh", *g.energy_kwh);
    line("with failures   {:.2f} days to train{}", *g.wall_days, extra);
  }
  if (g.trials) {
    const auto& t = *g.trials;
    line("monte carlo     {} trials (seed {}): mean {:.2f} d, p10 {:.2f} d, p50 {:.2f} d, p90 {:.2f} d, "
         "{:.1f} failures",
         t.trials, t.seed, t.mean_s / 86400, t.p10_s / 86400, t.p50_s / 86400, t.p90_s / 86400, t.mean_failures);
  }
  return out;
}

}  // namespace ptsim::sim
