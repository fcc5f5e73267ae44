#include "sim/tools/validate.h"

#include "hw/input_file.h"
#include "hw/yaml_limits.h"
#include "hw/strict_yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/core/errors.h"
#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"

namespace ptsim::sim {

namespace {

const std::vector<std::string> kTopKeys = {"runs", "rankings"};
const std::vector<std::string> kRankingKeys = {"a", "b", "what", "source"};
const std::vector<std::string> kRunKeys = {"scenario", "metric",    "value", "flops_formula",
                                           "fitted",   "source_id", "quote", "source"};

std::string metric_name(RefMetric m) {
  switch (m) {
    case RefMetric::tflops_per_gpu: return "tflops_per_gpu";
    case RefMetric::iteration_time_s: return "iteration_time_s";
    case RefMetric::tokens_per_s: return "tokens_per_s";
    case RefMetric::tokens_per_s_per_gpu: return "tokens_per_s_per_gpu";
  }
  return "";
}

void check_keys(const YAML::Node& n, const std::vector<std::string>& allowed, const std::string& file,
                const std::string& prefix) {
  if (const auto u = hw::unknown_key(n, allowed))
    throw ScenarioError(file, prefix + u->key, "unknown key", fmt::format("did you mean '{}'?", u->suggestion));
}

ReferenceRun parse_run(const YAML::Node& n, const std::string& file, const std::string& prefix) {
  const hw::StrictReader reader([&file](const std::string& key, const std::string& what, const std::string& hint) {
    throw ScenarioError(file, key, what, hint);
  });
  if (!n.IsMap()) throw ScenarioError(file, prefix, "expected a map with keys scenario, metric, value, ...");
  check_keys(n, kRunKeys, file, prefix + ".");
  for (const auto& k : {"scenario", "metric", "value", "fitted", "source"}) {
    if (!n[k]) throw ScenarioError(file, prefix + "." + k, "missing");
  }
  ReferenceRun r;
  r.scenario = reader.string(n["scenario"], prefix + ".scenario");
  const auto metric = reader.string(n["metric"], prefix + ".metric");
  if (metric == "tflops_per_gpu") {
    r.metric = RefMetric::tflops_per_gpu;
  } else if (metric == "iteration_time_s") {
    r.metric = RefMetric::iteration_time_s;
  } else if (metric == "tokens_per_s") {
    r.metric = RefMetric::tokens_per_s;
  } else if (metric == "tokens_per_s_per_gpu") {
    r.metric = RefMetric::tokens_per_s_per_gpu;
  } else {
    throw ScenarioError(file, prefix + ".metric", fmt::format("'{}' is not a metric", metric),
                        "use tflops_per_gpu, iteration_time_s, tokens_per_s or tokens_per_s_per_gpu");
  }
  r.value = reader.number(n["value"], prefix + ".value");
  if (!(r.value > 0) || !std::isfinite(r.value)) {
    throw ScenarioError(file, prefix + ".value", fmt::format("{} must be a positive number", r.value));
  }
  if (n["flops_formula"]) {
    const auto f = reader.string(n["flops_formula"], prefix + ".flops_formula");
    if (f == "megatron-eq3") {
      r.flops_formula = FlopsFormula::megatron_eq3;
    } else if (f == "megatron-core") {
      r.flops_formula = FlopsFormula::megatron_core;
    } else if (f == "model") {
      r.flops_formula = FlopsFormula::model;
    } else {
      throw ScenarioError(file, prefix + ".flops_formula", fmt::format("'{}' is not a FLOPs formula", f),
                          "use megatron-eq3, megatron-core or model");
    }
  } else if (r.metric == RefMetric::tflops_per_gpu) {
    throw ScenarioError(file, prefix + ".flops_formula", "missing (needed to convert tflops_per_gpu)",
                        "megatron-eq3, megatron-core or model");
  }
  r.fitted = reader.boolean(n["fitted"], prefix + ".fitted");
  r.source = reader.string(n["source"], prefix + ".source");
  r.source_id = n["source_id"] ? reader.string(n["source_id"], prefix + ".source_id") : r.source;
  if (r.source_id.empty()) throw ScenarioError(file, prefix + ".source_id", "must not be empty");
  if (n["quote"]) r.quote = reader.string(n["quote"], prefix + ".quote");
  return r;
}

struct Loaded {
  ReferenceRun ref;
  Scenario scenario;
};

std::vector<Loaded> load_all(const std::string& dir, const std::string& source = "") {
  std::vector<Loaded> out;
  const auto refs = load_published(dir);
  if (!source.empty() &&
      std::none_of(refs.begin(), refs.end(), [&](const ReferenceRun& r) { return r.source_id == source; })) {
    std::string ids;
    std::set<std::string> seen;
    for (const auto& r : refs)
      if (seen.insert(r.source_id).second) ids += (ids.empty() ? "" : ", ") + r.source_id;
    throw ScenarioError((std::filesystem::path(dir) / "published.yaml").string(), "runs[].source_id",
                        fmt::format("no run has source_id '{}'", source), "one of: " + ids);
  }
  for (const auto& ref : refs) {
    if (!source.empty() && ref.source_id != source) continue;
    const auto path = (std::filesystem::path(dir) / ref.scenario).string();
    out.push_back({ref, load_scenario(path)});
  }
  return out;
}

ValidationRow evaluate(const Loaded& l, const ValidateOptions& opt) {
  Scenario s = l.scenario;
  if (const auto e = opt.efficiency.find(s.cluster.gpu.name); e != opt.efficiency.end())
    s.cluster.gpu.efficiency = e->second;
  SimulateOptions so;
  so.fold = opt.fold;
  so.build.fuse_compute = true;  // no trace: fused compute spans, same times
  const Result res = simulate(s, so).result;

  ValidationRow row;
  row.run = l.ref.scenario;
  row.scenario = s.name;
  row.metric = metric_name(l.ref.metric);
  row.published = l.ref.value;
  row.fitted = l.ref.fitted;
  row.iteration_time_s = res.iteration_time_s;
  row.source = l.ref.source;
  row.source_id = l.ref.source_id;
  row.regime = regime_of(s);
  row.feasible = res.feasible;
  if (!(res.iteration_time_s > 0)) {
    // No iteration to compare (nothing simulated): a 100 % miss, so the bound fails loudly.
    row.feasible = false;
    row.predicted = 0;
    row.error_pct = -100.0;
    return row;
  }
  // A published run ptsim finds out of memory is a memory-model error (the run fit): its
  // time is still compared, the row is marked, and the bound fails while any is left.
  const double tokens = static_cast<double>(s.plan.global_batch_size) * static_cast<double>(s.model.seq_length);
  if (l.ref.metric == RefMetric::iteration_time_s) {
    row.predicted = res.iteration_time_s;
  } else if (l.ref.metric == RefMetric::tokens_per_s) {
    row.predicted = tokens / res.iteration_time_s;
  } else if (l.ref.metric == RefMetric::tokens_per_s_per_gpu) {
    row.predicted = tokens / res.iteration_time_s / res.world_size;
  } else {
    const double batch = static_cast<double>(s.plan.global_batch_size);
    const double flops = l.ref.flops_formula == FlopsFormula::megatron_eq3 ? megatron_eq3_flops(s.model, batch)
                         : l.ref.flops_formula == FlopsFormula::megatron_core
                             ? megatron_core_flops(s.model, batch, s.plan.par.tp)
                             : res.model_flops_per_iteration;
    // The source's own conversion: TFLOP/s per GPU = FLOPs / (iteration time · GPUs).
    row.predicted = flops / (res.iteration_time_s * res.world_size) / 1e12;
  }
  row.error_pct = (row.predicted - row.published) / row.published * 100.0;
  // Published throughput over predicted: for a time, predicted / published.
  const double ratio = l.ref.metric == RefMetric::iteration_time_s ? row.predicted / row.published
                                                                   : row.published / row.predicted;
  row.deviation_pct = (ratio - 1.0) * 100.0;
  row.tokens_per_gpu_s = tokens / res.iteration_time_s / res.world_size;
  return row;
}

ValidationReport evaluate_all(const std::vector<Loaded>& all, const ValidateOptions& opt) {
  ValidationReport rep;
  rep.bound = opt.bound;
  rep.efficiency_overrides = opt.efficiency;
  for (const auto& l : all) rep.rows.push_back(evaluate(l, opt));
  std::vector<ValidationRow> fitted, held;
  for (const auto& r : rep.rows) (r.fitted ? fitted : held).push_back(r);
  rep.all = error_stats(rep.rows);
  rep.fitted = error_stats(fitted);
  rep.held_out = error_stats(held);
  std::vector<std::string> order;
  for (const auto& r : rep.rows)
    if (std::find(order.begin(), order.end(), r.source_id) == order.end()) order.push_back(r.source_id);
  for (const auto& id : order) {
    std::vector<ValidationRow> mine;
    for (const auto& r : rep.rows)
      if (r.source_id == id) mine.push_back(r);
    rep.per_source.push_back({id, error_stats(mine)});
  }
  const ErrorStats& judged = rep.held_out.count > 0 ? rep.held_out : rep.all;
  const bool all_fit = std::all_of(rep.rows.begin(), rep.rows.end(), [](const auto& r) { return r.feasible; });
  rep.bound_holds =
      all_fit && judged.count > 0 && judged.mae_pct <= rep.bound.mae_pct && judged.worst_pct <= rep.bound.worst_pct;
  return rep;
}

}  // namespace

namespace {

YAML::Node load_published_doc(const std::string& file) {
  if (!std::filesystem::exists(file)) {
    throw ScenarioError(file, "", "no such file", "a reference folder needs published.yaml next to its scenarios");
  }
  YAML::Node doc;
  try {
    const std::string text = hw::read_input_file(file, "published runs file", hw::kMaxPublishedRunsBytes);
    hw::check_yaml_depth(text, file, "published runs file");
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ScenarioError(file, "", fmt::format("not valid YAML: {}", e.what()));
  }
  if (!doc.IsMap()) throw ScenarioError(file, "", "expected a map with key 'runs'");
  if (const auto d = hw::duplicate_key(doc))
    throw ScenarioError(file, d->path,
                        fmt::format("duplicate key at line {} (first at line {})", d->line, d->first_line));
  check_keys(doc, kTopKeys, file, "");
  return doc;
}

}  // namespace

std::vector<ReferenceRun> load_published(const std::string& dir) {
  const auto file = (std::filesystem::path(dir) / "published.yaml").string();
  const YAML::Node doc = load_published_doc(file);
  const auto runs = doc["runs"];
  if (!runs || !runs.IsSequence() || runs.size() == 0) throw ScenarioError(file, "runs", "expected a non-empty list");
  std::vector<ReferenceRun> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto prefix = fmt::format("runs[{}]", i);
    auto r = parse_run(runs[i], file, prefix);
    if (!seen.insert(r.scenario).second) {
      throw ScenarioError(file, prefix + ".scenario", fmt::format("'{}' is listed twice", r.scenario));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<RankingCheck> load_rankings(const std::string& dir) {
  const auto file = (std::filesystem::path(dir) / "published.yaml").string();
  const YAML::Node doc = load_published_doc(file);
  std::vector<RankingCheck> out;
  const auto list = doc["rankings"];
  if (!list) return out;
  if (!list.IsSequence()) throw ScenarioError(file, "rankings", "expected a list of {a, b, what, source}");
  std::set<std::string> runs;
  for (const auto& r : load_published(dir)) runs.insert(r.scenario);
  const hw::StrictReader reader([&file](const std::string& key, const std::string& what, const std::string& hint) {
    throw ScenarioError(file, key, what, hint);
  });
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto prefix = fmt::format("rankings[{}]", i);
    const auto n = list[i];
    if (!n.IsMap()) throw ScenarioError(file, prefix, "expected a map with keys a, b, what, source");
    check_keys(n, kRankingKeys, file, prefix + ".");
    RankingCheck c;
    for (const auto& k : {"a", "b", "what", "source"})
      if (!n[k]) throw ScenarioError(file, prefix + "." + k, "missing");
    c.a = reader.string(n["a"], prefix + ".a");
    c.b = reader.string(n["b"], prefix + ".b");
    c.what = reader.string(n["what"], prefix + ".what");
    c.source = reader.string(n["source"], prefix + ".source");
    for (const auto& [key, run] : {std::pair{"a", c.a}, std::pair{"b", c.b}})
      if (!runs.count(run))
        throw ScenarioError(file, prefix + "." + key, fmt::format("'{}' is not one of the runs", run),
                            "list it under runs first");
    if (c.a == c.b) throw ScenarioError(file, prefix + ".b", "compares a run with itself");
    out.push_back(std::move(c));
  }
  return out;
}

double megatron_eq3_flops(const models::ModelSpec& m, double global_batch) {
  // Narayanan et al. SC'21 (arXiv 2104.04473) Eq. 3.
  const double B = global_batch, s = static_cast<double>(m.seq_length), l = m.num_layers;
  const double h = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double megatron_core_flops(const models::ModelSpec& m, double global_batch, int tp) {
  // megatron/training/training.py num_floating_point_operations (NVIDIA/Megatron-LM core_r0.8.0).
  const double B = global_batch, s = static_cast<double>(m.seq_length), l = m.num_layers;
  const double h = static_cast<double>(m.hidden_size), a = m.num_attention_heads;
  const double g = m.num_query_groups > 0 ? m.num_query_groups : a;
  const double q_ratio = a * static_cast<double>(m.head_dim()) / h;
  const double k = m.moe ? m.moe->top_k : 1;
  const double f =
      static_cast<double>(m.moe && m.moe->ffn_hidden_size > 0 ? m.moe->ffn_hidden_size : m.ffn_hidden_size);
  const double gated = m.mlp == models::Mlp::swiglu ? 1.5 : 1.0;
  // The vocabulary as Megatron pads it, make_vocab_size_divisible_by at its default 128.
  const auto V = static_cast<double>(models::megatron_padded_vocab(m.vocab_size, 128, std::max(tp, 1)));
  return 12.0 * B * s * l * h * h * ((1.0 + g / a + s / h) * q_ratio + f / h * k * gated + V / (2.0 * l * h));
}

ErrorStats error_stats(const std::vector<ValidationRow>& rows) {
  ErrorStats st;
  st.count = static_cast<int>(rows.size());
  if (rows.empty()) return st;
  double sum = 0;
  for (const auto& r : rows) {
    const double a = std::abs(r.error_pct);
    sum += a;
    if (a > st.worst_pct || st.worst_run.empty()) {
      st.worst_pct = a;
      st.worst_run = r.run;
    }
  }
  st.mae_pct = sum / st.count;
  return st;
}

ValidationReport run_validation(const std::string& dir, const ValidateOptions& opt) {
  auto rep = evaluate_all(load_all(dir, opt.source), opt);
  for (const auto& c : load_rankings(dir)) {
    const ValidationRow *a = nullptr, *b = nullptr;
    for (const auto& row : rep.rows) {
      if (row.run == c.a) a = &row;
      if (row.run == c.b) b = &row;
    }
    if (!a || !b || !(a->predicted > 0) || !(b->predicted > 0)) continue;  // filtered out by --source, or no time
    RankingRow rr;
    rr.check = c;
    const double pub_a = a->tokens_per_gpu_s * (1 + a->deviation_pct / 100);
    const double pub_b = b->tokens_per_gpu_s * (1 + b->deviation_pct / 100);
    rr.published_ratio = pub_a / pub_b;
    rr.predicted_ratio = a->tokens_per_gpu_s / b->tokens_per_gpu_s;
    rr.direction_ok = (rr.published_ratio - 1) * (rr.predicted_ratio - 1) > 0;
    rr.ratio_error_pct = (rr.predicted_ratio / rr.published_ratio - 1) * 100;
    rep.rankings.push_back(rr);
  }
  return rep;
}

namespace {

FitResult fit_one_gpu(const std::vector<Loaded>& fit_set, const ValidateOptions& base) {
  const hw::GpuSpec gpu = fit_set.front().scenario.cluster.gpu;
  FitResult fr;
  fr.gpu = gpu.name;
  const auto given = base.efficiency.find(gpu.name);
  fr.start = given != base.efficiency.end() ? given->second : gpu.efficiency;

  ValidateOptions opt = base;
  auto mae = [&](const hw::GpuSpec::Efficiency& e) {
    opt.efficiency[gpu.name] = e;
    ++fr.evaluations;
    return evaluate_all(fit_set, opt).all.mae_pct;
  };
  // Bounds: a fraction of peak in (0, 1]; GEMMs never beat the best measured matmul
  // (ml-engineering "maximum achievable matmul FLOPS": 271.2 of 312 TFLOP/s on A100).
  const double gemm_max = gpu.matmul_best > 0 ? gpu.matmul_best : 1.0;
  double* coords[3];
  hw::GpuSpec::Efficiency cur = fr.start;
  coords[0] = &cur.gemm;
  coords[1] = &cur.attention;
  coords[2] = &cur.memory;
  const double lower = 0.05, upper[3] = {gemm_max, 1.0, 1.0};
  // Measured or published constants (hw/gpus.yaml efficiency_not_fitted) stay as they are.
  const bool kept[3] = {gpu.efficiency_not_fitted.gemm, gpu.efficiency_not_fitted.attention,
                        gpu.efficiency_not_fitted.memory};
  for (int i = 0; i < 3; ++i)
    if (!kept[i]) *coords[i] = std::clamp(*coords[i], lower, upper[i]);
  double best = mae(cur);
  fr.start_mae_pct = best;
  // Coordinate descent with a halving step: iteration time is monotone in each
  // efficiency, so the error is unimodal along each coordinate for these runs.
  for (double step = 0.08; step >= 0.0025; step /= 2) {
    bool improved = true;
    while (improved) {
      improved = false;
      for (int i = 0; i < 3; ++i) {
        if (kept[i]) continue;
        for (const double dir_sign : {+1.0, -1.0}) {
          const double old = *coords[i];
          const double next = std::clamp(old + dir_sign * step, lower, upper[i]);
          if (next == old) continue;
          *coords[i] = next;
          const double e = mae(cur);
          if (e < best - 1e-9) {
            best = e;
            improved = true;
            break;
          }
          *coords[i] = old;
        }
      }
    }
  }
  fr.best = cur;
  fr.best_mae_pct = best;
  return fr;
}

}  // namespace

std::vector<FitResult> fit_efficiency(const std::string& dir, const ValidateOptions& base) {
  std::vector<Loaded> all_fitted;
  for (auto& l : load_all(dir, base.source))
    if (l.ref.fitted) all_fitted.push_back(std::move(l));
  if (all_fitted.empty()) {
    throw ScenarioError((std::filesystem::path(dir) / "published.yaml").string(), "runs",
                        "no run is marked 'fitted: true'", "mark the runs to fit on");
  }
  std::vector<std::string> gpus;
  for (const auto& l : all_fitted)
    if (std::find(gpus.begin(), gpus.end(), l.scenario.cluster.gpu.name) == gpus.end())
      gpus.push_back(l.scenario.cluster.gpu.name);
  std::vector<FitResult> out;
  for (const auto& name : gpus) {
    std::vector<Loaded> fit_set;
    for (const auto& l : all_fitted)
      if (l.scenario.cluster.gpu.name == name) fit_set.push_back(l);
    out.push_back(fit_one_gpu(fit_set, base));
  }
  return out;
}

std::vector<PredictionBand> prediction_bands(const ValidationReport& r) {
  std::vector<Residual> res;
  for (const auto& row : r.rows)
    if (row.predicted > 0) res.push_back({row.regime, row.deviation_pct});  // a time residual, out of memory or not
  return bands_from_residuals(res);
}

std::string validation_text(const ValidationReport& r) {
  std::string out;
  for (const auto& [gpu, e] : r.efficiency_overrides)
    out += fmt::format("efficiency override for {}: gemm {:.4f}, attention {:.4f}, memory {:.4f}\n", gpu, e.gemm,
                       e.attention, e.memory);
  out += fmt::format("{:<36} {:<20} {:>10} {:>10} {:>8} {:>11}  {}\n", "run", "metric", "published", "predicted",
                     "error", "iteration", "fitted");
  for (const auto& row : r.rows) {
    out += fmt::format("{:<36} {:<20} {:>10.2f} {:>10.2f} {:>+7.1f}% {:>10.2f}s  {}{}\n", row.run, row.metric,
                       row.published, row.predicted, row.error_pct, row.iteration_time_s, row.fitted ? "yes" : "no",
                       row.feasible ? "" : "  OUT OF MEMORY in ptsim (the published run fit)");
  }
  out += fmt::format("{:<24} {:>4} {:>14} {:>9}  {}\n", "source", "runs", "mean |error|", "worst", "worst run");
  for (const auto& ps : r.per_source) {
    out += fmt::format("{:<24} {:>4} {:>12.2f} % {:>7.2f} %  {}\n", ps.source_id, ps.stats.count, ps.stats.mae_pct,
                       ps.stats.worst_pct, ps.stats.worst_run);
  }
  auto line = [](const char* what, const ErrorStats& st) {
    if (st.count == 0) return fmt::format("{:<9} (none)\n", what);
    return fmt::format("{:<9} {:>2} runs  mean |error| {:5.2f} %  worst {:5.2f} % ({})\n", what, st.count, st.mae_pct,
                       st.worst_pct, st.worst_run);
  };
  if (!r.rankings.empty()) {
    out += fmt::format("{:<56} {:>9} {:>9} {:>9} {:>7}\n", "published A/B (throughput per GPU, a / b)", "published",
                       "predicted", "direction", "ratio");
    for (const auto& k : r.rankings)
      out += fmt::format("{:<56} {:>9.3f} {:>9.3f} {:>9} {:>+6.1f}%{}\n", k.check.what, k.published_ratio,
                         k.predicted_ratio, k.direction_ok ? "ok" : "WRONG", k.ratio_error_pct,
                         k.holds() ? "" : "  (misses)");
  }
  out += line("fitted", r.fitted);
  out += line("held-out", r.held_out);
  out += line("all", r.all);
  const auto oom = std::count_if(r.rows.begin(), r.rows.end(), [](const auto& row) { return !row.feasible; });
  out += fmt::format("bound     {} mean |error| <= {:.0f} %, worst <= {:.0f} %{}: {}\n",
                     r.held_out.count > 0 ? "held-out" : "all-runs", r.bound.mae_pct, r.bound.worst_pct,
                     oom > 0 ? fmt::format(", every run fits ({} out of memory)", oom) : std::string(),
                     r.bound_holds ? "holds" : "MISSED");
  return out;
}

nlohmann::json validation_json(const ValidationReport& r) {
  auto stats = [](const ErrorStats& st) {
    return nlohmann::json{
        {"count", st.count}, {"mae_pct", st.mae_pct}, {"worst_pct", st.worst_pct}, {"worst_run", st.worst_run}};
  };
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& row : r.rows) {
    runs.push_back({{"run", row.run},
                    {"scenario", row.scenario},
                    {"metric", row.metric},
                    {"published", row.published},
                    {"predicted", row.predicted},
                    {"error_pct", row.error_pct},
                    {"fitted", row.fitted},
                    {"iteration_time_s", row.iteration_time_s},
                    {"source_id", row.source_id},
                    {"regime", row.regime},
                    {"feasible", row.feasible},
                    {"deviation_pct", row.deviation_pct},
                    {"source", row.source}});
  }
  nlohmann::json rankings = nlohmann::json::array();
  for (const auto& k : r.rankings)
    rankings.push_back({{"a", k.check.a},
                        {"b", k.check.b},
                        {"what", k.check.what},
                        {"source", k.check.source},
                        {"published_ratio", k.published_ratio},
                        {"predicted_ratio", k.predicted_ratio},
                        {"direction_ok", k.direction_ok},
                        {"ratio_error_pct", k.ratio_error_pct},
                        {"holds", k.holds()}});
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& ps : r.per_source) {
    auto j = stats(ps.stats);
    j["source_id"] = ps.source_id;
    sources.push_back(j);
  }
  nlohmann::json j{{"runs", runs},
                   {"fitted", stats(r.fitted)},
                   {"held_out", stats(r.held_out)},
                   {"all", stats(r.all)},
                   {"per_source", sources},
                   {"rankings", rankings},
                   {"bound", {{"mae_pct", r.bound.mae_pct}, {"worst_pct", r.bound.worst_pct}}},
                   {"bound_holds", r.bound_holds}};
  if (!r.efficiency_overrides.empty()) {
    nlohmann::json o = nlohmann::json::array();
    for (const auto& [gpu, e] : r.efficiency_overrides)
      o.push_back({{"gpu", gpu}, {"gemm", e.gemm}, {"attention", e.attention}, {"memory", e.memory}});
    j["efficiency_overrides"] = o;
  }
  return j;
}

}  // namespace ptsim::sim
