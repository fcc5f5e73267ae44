// `ptsim compare` outputs (compare.h): the terminal table, CSV and JSON, one set of columns.
#include <fmt/format.h>

#include <cmath>

#include "hw/units.h"
#include "sim/io/goodput_output.h"
#include "sim/io/result_json.h"
#include "sim/tools/compare.h"

namespace ptsim::sim {
namespace {

// "1.23M", "456.7k", "12.3": three or four significant digits in few columns.
std::string compact(double x) {
  const double a = std::fabs(x);
  if (a >= 1e12) return fmt::format("{:.3g}T", x / 1e12);
  if (a >= 1e9) return fmt::format("{:.3g}G", x / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", x / 1e6);
  if (a >= 1e4) return fmt::format("{:.1f}k", x / 1e3);
  return fmt::format("{:.4g}", x);
}

std::string short_seconds(double s) {
  if (s < 10) return fmt::format("{:.3f}", s);
  if (s < 100) return fmt::format("{:.2f}", s);
  return fmt::format("{:.0f}", s);
}

// One decimal while it fits in six columns.
std::string one_decimal(double x) {
  return std::fabs(x) < 999.95 ? fmt::format("{:.1f}", x) : fmt::format("{:.0f}", x);
}

std::string plan_words(const Plan& p) {
  const auto& q = p.par;
  std::string w = fmt::format("dp{} tp{} pp{} cp{} ep{}", q.dp, q.tp, q.pp, q.cp, q.ep);
  if (q.expert_tp() != q.tp) w += fmt::format(" etp{}", q.expert_tp());
  if (q.vpp > 1) w += fmt::format(" vpp{}", q.vpp);
  w += fmt::format(" mbs{} gbs{} {} zero{} rc-{}{}", q.micro_batch_size, p.global_batch_size,
                   models::to_string(q.schedule), q.zero_stage, models::to_string(q.recompute),
                   q.sequence_parallel ? " sp" : "");
  return w;
}

// At most `width` characters: the middle of a long label gives way.
std::string fit(const std::string& s, std::size_t width) {
  if (s.size() <= width || width < 5) return s;
  const std::size_t keep = width - 3;
  return s.substr(0, keep / 2) + "..." + s.substr(s.size() - (keep - keep / 2));
}


// One row's cells, in compare_columns() order.
std::vector<nlohmann::json> cells(const CompareRow& r, const ComparedPlan& p) {
  std::vector<nlohmann::json> c = {
      r.rank, r.label, p.file, p.set_plan, r.feasible, r.iteration_time_s, r.tokens_per_s, r.mfu, r.bubble_fraction};
  for (double e : r.exposed_s) c.emplace_back(e);
  for (double x : {r.peak_bytes, r.capacity_bytes, r.headroom_bytes, r.vs_best_pct}) c.emplace_back(x);
  const auto& t = r.time_to_train;
  c.push_back(json_or_null(t ? std::optional<double>(t->days) : std::nullopt));
  c.push_back(json_or_null(t ? std::optional<double>(t->gpu_hours) : std::nullopt));
  c.push_back(json_or_null(t ? t->cost : std::nullopt));
  c.push_back(json_or_null(t ? std::optional<double>(t->energy_kwh) : std::nullopt));
  const auto& g = r.goodput;
  c.push_back(json_or_null(g ? std::optional<double>(g->goodput) : std::nullopt));
  c.push_back(json_or_null(g ? std::optional<double>(g->tokens_per_s) : std::nullopt));
  c.push_back(json_or_null(g ? std::optional<double>(g->failures_per_day) : std::nullopt));
  c.push_back(json_or_null(g ? g->wall_days : std::nullopt));
  c.push_back(json_or_null(g ? g->cost : std::nullopt));
  return c;
}

std::string csv_cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (!v.is_string()) return v.dump();
  const std::string s = v.get<std::string>();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

constexpr const char* kRowFormat =
    "{:>2} {:>7} {:>8} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>6} {:>6} {:>8} {:>7}\n";

std::string table_row(const CompareRow& r) {
  const auto& t = r.time_to_train;
  const std::string days = t ? one_decimal(t->days) : "-";
  const std::string cost = t && t->cost ? compact(*t->cost) : "-";
  const std::string vs = r.rank == 1 ? "best" : fmt::format("{:+.1f}%", r.vs_best_pct);
  return fmt::format(kRowFormat, r.rank, short_seconds(r.iteration_time_s), compact(r.tokens_per_s),
                     fmt::format("{:.1f}", 100 * r.mfu), fmt::format("{:.1f}", 100 * r.bubble_fraction),
                     short_seconds(r.exposed_s[0]), short_seconds(r.exposed_s[1]), short_seconds(r.exposed_s[2]),
                     short_seconds(r.exposed_s[3]), short_seconds(r.exposed_s[4]), one_decimal(r.peak_bytes / kGiB),
                     one_decimal(r.headroom_bytes / kGiB), days, cost, vs);
}

}  // namespace

namespace {
const char* sort_name(CompareSort sort) {
  return sort == CompareSort::speed ? "speed" : sort == CompareSort::cost ? "cost" : "goodput";
}

// Under the table when any plan has a reliability section: goodput and what it does to
// throughput, time and cost (README "Goodput").
std::string goodput_table(const std::vector<CompareRow>& rows) {
  bool any = false;
  for (const auto& r : rows) any = any || r.goodput;
  if (!any) return "";
  std::string out = fmt::format("\n{:>2} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}\n", "#", "goodput", "gp tok/s",
                                "fail/day", "ckpt s", "every", "gp days", "gp cost");
  for (const auto& r : rows) {
    if (!r.goodput) {
      out += fmt::format("{:>2} {:>8}\n", r.rank, "-");
      continue;
    }
    const auto& g = *r.goodput;
    out += fmt::format("{:>2} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}\n", r.rank,
                       fmt::format("{:.1f}%", 100 * g.goodput), compact(g.tokens_per_s),
                       fmt::format("{:.2f}", g.failures_per_day), short_seconds(g.checkpoint_cost_s),
                       fmt::format("{}it", g.interval_iterations), g.wall_days ? one_decimal(*g.wall_days) : "-",
                       g.cost ? compact(*g.cost) : "-");
  }
  out += "goodput: useful training time / wall time under failures and checkpoints; gp tok/s = tok/s x goodput;\n"
         "ckpt s: blocking checkpoint time, every: the checkpoint interval; gp days, gp cost: with failures\n";
  return out;
}
}  // namespace

const std::vector<std::string>& compare_columns() {
  static const std::vector<std::string> cols = {"rank",
                                                "label",
                                                "file",
                                                "set_plan",
                                                "feasible",
                                                "iteration_time_s",
                                                "tokens_per_s",
                                                "mfu",
                                                "bubble_fraction",
                                                "exposed_tp_s",
                                                "exposed_cp_s",
                                                "exposed_ep_s",
                                                "exposed_pp_s",
                                                "exposed_dp_s",
                                                "peak_bytes",
                                                "capacity_bytes",
                                                "headroom_bytes",
                                                "vs_best_pct",
                                                "days",
                                                "gpu_hours",
                                                "cost",
                                                "energy_kwh",
                                                "goodput",
                                                "goodput_tokens_per_s",
                                                "failures_per_day",
                                                "goodput_days",
                                                "goodput_cost"};
  return cols;
}

std::string compare_table_text(const std::vector<CompareRow>& rows, const std::vector<ComparedPlan>& plans,
                               CompareSort sort) {
  std::string out;
  for (const auto& r : rows) {
    out += fmt::format("{:>2} {}\n", r.rank, fit(r.label, 97));
    const auto& sc = plans[r.index].scenario;
    out += fmt::format("   {} ({}){}\n", fit(plan_words(sc.plan), 80 - to_string(sc.framework.framework).size()),
                       to_string(sc.framework.framework), r.feasible ? "" : "  OUT OF MEMORY");
  }
  out += "\n";
  out += fmt::format(kRowFormat, "#", "iter s", "tok/s", "MFU%", "bub%", "TP s", "CP s", "EP s", "PP s", "DP s",
                     "peakGi", "freeGi", "days", "cost", "vs best");
  for (const auto& r : rows) out += table_row(r);
  out += fmt::format(
      "\ntimes in s (TP..DP: communication the compute stream waited for); memory in GiB, free = HBM - peak\n"
      "days, cost: to train training.total_tokens or train_iters (GPU-hours, energy: --csv, --json)\n"
      "vs best: {} relative to the best plan\n",
      sort == CompareSort::speed ? "tokens/s" : sort == CompareSort::cost ? "cost" : "tokens/s x goodput");
  return out + goodput_table(rows);
}

std::string compare_csv(const std::vector<CompareRow>& rows, const std::vector<ComparedPlan>& plans) {
  std::string out;
  for (const auto& c : compare_columns()) out += (out.empty() ? "" : ",") + c;
  out += "\n";
  for (const auto& r : rows) {
    std::string line;
    for (const auto& v : cells(r, plans[r.index])) line += (line.empty() ? "" : ",") + csv_cell(v);
    out += line + "\n";
  }
  return out;
}

nlohmann::json compare_json(const std::vector<CompareRow>& rows, const std::vector<ComparedPlan>& plans,
                            CompareSort sort) {
  nlohmann::json j;
  j["sort"] = sort_name(sort);
  j["columns"] = compare_columns();
  j["plans"] = nlohmann::json::array();
  for (const auto& r : rows) {
    const auto c = cells(r, plans[r.index]);
    nlohmann::json row;
    for (std::size_t k = 0; k < c.size(); ++k) row[compare_columns()[k]] = c[k];
    row["plan"] = plan_to_json(plans[r.index].scenario.plan);
    if (r.time_to_train) row["time_to_train"] = time_to_train_json(*r.time_to_train);
    if (r.goodput) row["goodput_detail"] = goodput_json(*r.goodput);
    j["plans"].push_back(row);
  }
  return j;
}

}  // namespace ptsim::sim
