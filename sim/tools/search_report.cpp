// `ptsim search --report F.html` (search.h: search_report_html): the top plans side by
// side, drawn by the compare page (sim/io/compare_html.h), after a throughput-vs-memory
// scatter of every plan the search simulated.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hw/units.h"
#include "sim/io/compare_html.h"
#include "sim/io/report_html_parts.h"
#include "sim/tools/compare.h"
#include "sim/tools/search.h"

namespace ptsim::sim {
namespace {

// The plan as `ptsim compare FILE --set-plan "…"` words (sim/tools/compare.h).
std::string set_plan_words(const RankedPlan& p) {
  const auto& q = p.plan.par;
  return fmt::format("gpus={} tp={} pp={} dp={} cp={} ep={}{} vpp={} schedule={} mbs={} zero={} recompute={} sp={}",
                     p.num_gpus, q.tp, q.pp, q.dp, q.cp, q.ep,
                     q.expert_tp() != q.tp ? fmt::format(" etp={}", q.expert_tp()) : std::string(), q.vpp,
                     models::to_string(q.schedule), q.micro_batch_size, q.zero_stage, models::to_string(q.recompute),
                     q.sequence_parallel ? "true" : "false");
}

// An axis maximum: `v` rounded up to 1, 2 or 5 times a power of ten.
double nice_ceiling(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (v <= m * p) return m * p;
  return 10 * p;
}

struct Frame {
  double left = 70, top = 20, width = 700, height = 340;
  double x_max = 1, y_max = 1;
  double x(double gib) const { return left + width * gib / x_max; }
  double y(double tps) const { return top + height * (1 - tps / y_max); }
};

std::string axes_svg(const Frame& f) {
  std::string svg;
  for (int i = 0; i <= 5; ++i) {
    const double gx = f.x_max * i / 5, gy = f.y_max * i / 5;
    svg += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#eee"/>)", f.x(gx), f.top,
                       f.top + f.height);
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{:g}</text>)", f.x(gx),
                       f.top + f.height + 15, gx);
    svg += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" stroke="#eee"/>)", f.left, f.y(gy),
                       f.left + f.width);
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{:.0f}</text>)", f.left - 4, f.y(gy) + 4, gy);
  }
  svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">peak memory per GPU (GiB)</text>)",
                     f.left + f.width / 2, f.top + f.height + 32);
  svg += fmt::format(
      R"svg(<text x="12" y="{:.1f}" transform="rotate(-90 12 {:.1f})" text-anchor="middle">tokens/s</text>)svg",
      f.top + f.height / 2, f.top + f.height / 2);
  return svg;
}

// Every simulated plan (grey: fits, hollow: over the memory limit), the GPU memory as a
// dashed line, the top plans in red with their rank.
std::string scatter_svg(const SearchResult& r) {
  Frame f;
  double x_max = r.capacity_bytes / kGiB, y_max = 0;
  for (const auto& p : r.simulated_points) {
    x_max = std::max(x_max, p.peak_bytes / kGiB);
    y_max = std::max(y_max, p.tokens_per_s);
  }
  f.x_max = nice_ceiling(x_max * 1.05);
  f.y_max = nice_ceiling(y_max * 1.05);
  std::string svg =
      fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" font-family="sans-serif" )"
                  R"(font-size="11">)",
                  f.left + f.width + 20, f.top + f.height + 45);
  svg += axes_svg(f);
  const double hbm = f.x(r.capacity_bytes / kGiB);
  svg += fmt::format(R"(<line class="hbm" x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#d62728" )"
                     R"(stroke-dasharray="5,3"/><text x="{3:.1f}" y="{4:.1f}" fill="#d62728">HBM {5}</text>)",
                     hbm, f.top, f.top + f.height, hbm - 4, f.top + 10, html::escape(format_bytes(r.capacity_bytes)));
  for (const auto& p : r.simulated_points)
    svg += fmt::format(
        R"(<circle class="pt" cx="{:.1f}" cy="{:.1f}" r="2.5" fill="{}" stroke="#777"><title>{} GPUs: {:.0f} )"
        R"(tokens/s, {}</title></circle>)",
        f.x(p.peak_bytes / kGiB), f.y(p.tokens_per_s), p.fits ? "#999" : "none", p.num_gpus, p.tokens_per_s,
        html::escape(format_bytes(p.peak_bytes)));
  for (const auto& p : r.plans)
    svg += fmt::format(
        R"(<circle class="top" cx="{0:.1f}" cy="{1:.1f}" r="5" fill="none" stroke="#d62728" stroke-width="2">)"
        R"(<title>#{2}</title></circle><text x="{3:.1f}" y="{4:.1f}" fill="#d62728">{2}</text>)",
        f.x(p.peak_bytes / kGiB), f.y(p.tokens_per_s), p.rank, f.x(p.peak_bytes / kGiB) + 6, f.y(p.tokens_per_s) - 6);
  return svg + "</svg>";
}

}  // namespace

std::string search_report_html(const Scenario& base, const std::string& file, const SearchResult& r, bool full) {
  SimulateOptions so;
  so.fold = !full;
  so.trace = true;  // each plan's timeline
  std::vector<ComparedPlan> plans;
  const std::size_t n = std::min(r.plans.size(), kSearchReportPlans);
  for (std::size_t i = 0; i < n; ++i) {
    const RankedPlan& p = r.plans[i];
    ComparedPlan c;
    c.file = file;
    c.set_plan = set_plan_words(p);
    c.scenario = candidate_scenario(base, {p.num_gpus, p.plan.par});
    c.sim = simulate(c.scenario, so);
    plans.push_back(std::move(c));
  }
  const CompareSort sort = r.sort == SearchSort::cost      ? CompareSort::cost
                          : r.sort == SearchSort::goodput ? CompareSort::goodput
                                                          : CompareSort::speed;
  const auto rows = compare_rows(plans, sort);
  std::vector<ComparePagePlan> page;
  for (const auto& row : rows)
    page.push_back({fmt::format("#{}  gpus {}  {}", r.plans[row.index].rank, r.plans[row.index].num_gpus,
                                plans[row.index].set_plan.substr(plans[row.index].set_plan.find(' ') + 1)),
                    &plans[row.index].scenario, &plans[row.index].sim});
  ComparePageExtras extras;
  extras.title = fmt::format("ptsim search: top {} of {} simulated plans", n, r.simulated);
  extras.after_table = fmt::format(
      "<h2>Throughput against memory</h2><p>Every simulated plan ({}): grey fits, hollow is over the memory "
      "limit; red circles: the top plans, by rank; dashed: the GPU memory.</p>{}",
      r.simulated_points.size(), scatter_svg(r));
  return compare_html(page, compare_table_text(rows, plans, sort), extras);
}

}  // namespace ptsim::sim
