#include "sim/io/result_json.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hw/units.h"
#include "sim/io/goodput_output.h"

namespace ptsim::sim {

nlohmann::json plan_to_json(const Plan& p) {
  const auto& q = p.par;
  nlohmann::json j;
  j["dp"] = q.dp;
  j["tp"] = q.tp;
  j["pp"] = q.pp;
  j["cp"] = q.cp;
  j["ep"] = q.ep;
  j["etp"] = q.expert_tp();
  j["vpp"] = q.vpp;
  j["zero_stage"] = q.zero_stage;
  j["micro_batch_size"] = q.micro_batch_size;
  j["global_batch_size"] = p.global_batch_size;
  j["num_microbatches"] = q.num_microbatches;
  j["recompute"] = std::string(models::to_string(q.recompute));
  j["sequence_parallel"] = q.sequence_parallel;
  j["pipeline_schedule"] = std::string(models::to_string(q.schedule));
  j["precision"] = std::string(models::to_string(q.precision));
  j["offload_optimizer"] = q.offload_optimizer;
  j["offload_params"] = q.offload_params;
  j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  j["overlap_param_gather"] = p.overlap_param_gather;
  if (!q.pipeline_layers.empty()) j["pipeline_layers"] = q.pipeline_layers;
  return j;
}

nlohmann::json json_or_null(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json prediction_band_json(const std::optional<PredictionBand>& b) {
  if (!b) return nullptr;
  return {{"low", b->low}, {"high", b->high}, {"regime", b->regime}, {"runs", b->runs}};
}

nlohmann::json time_to_train_json(const TimeToTrain& t) {
  nlohmann::json j;
  j["iterations"] = t.iterations;
  j["tokens"] = t.tokens;
  j["seconds"] = t.seconds;
  j["days"] = t.days;
  j["gpu_hours"] = t.gpu_hours;
  j["cost"] = json_or_null(t.cost);
  j["price_per_gpu_hour"] = json_or_null(t.price_per_gpu_hour);
  j["gpu_power_w"] = t.gpu_power_w;
  j["energy_kwh"] = t.energy_kwh;
  return j;
}

std::string time_to_train_text(const TimeToTrain& t) {
  std::string out = fmt::format("time to train   {:.2f} days: {:.0f} iterations, {:.4g} tokens, {:.0f} GPU-hours\n",
                                t.days, t.iterations, t.tokens, t.gpu_hours);
  if (t.cost) out += fmt::format("cost            {:.0f} at {:g} per GPU-hour\n", *t.cost, *t.price_per_gpu_hour);
  out += fmt::format("energy          {:.0f} kWh (GPUs only, {:g} W each)\n", t.energy_kwh, t.gpu_power_w);
  return out;
}

namespace {
nlohmann::json per_dim(const std::array<double, kNumDims>& v) {
  // nlohmann::json keeps keys sorted, so the document is byte-stable.
  nlohmann::json j = nlohmann::json::object();
  for (int d = 0; d < kNumDims; ++d) j[to_string(static_cast<Dim>(d))] = v[d];
  return j;
}
}  // namespace

nlohmann::json to_json(const Result& r) {
  nlohmann::json j;
  j["scenario"] = r.scenario;
  j["model"] = {{"name", r.model.name},
                {"source", r.model.source},
                {"parameters", r.model.parameters},
                {"active_parameters", r.model.active_parameters},
                {"seq_length", r.model.seq_length},
                {"seq_length_source", r.model.seq_length_source}};
  j["world_size"] = r.world_size;
  j["plan"] = plan_to_json(r.plan);
  j["feasible"] = r.feasible;
  j["infeasible_reasons"] = r.infeasible_reasons;
  j["iteration_time_s"] = r.iteration_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["model_flops_per_iteration"] = r.model_flops_per_iteration;
  j["hardware_flops_per_iteration"] = r.hardware_flops_per_iteration;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["hfu"] = r.hfu;
  j["bubble_time_s"] = r.bubble_time_s;
  j["bubble_fraction"] = r.bubble_fraction;
  j["exposed_comm_s"] = per_dim(r.exposed_comm_s);
  j["comm_bytes_per_gpu"] = per_dim(r.comm_bytes_per_gpu);
  nlohmann::json mem;
  mem["capacity_bytes"] = r.capacity_bytes;
  mem["peak_bytes"] = r.peak_bytes;
  mem["per_stage"] = nlohmann::json::array();
  for (const auto& s : r.per_stage)
    mem["per_stage"].push_back({{"stage", s.stage},
                                {"params", s.params},
                                {"grads", s.grads},
                                {"optimizer", s.optimizer},
                                {"activations", s.activations},
                                {"buffers", s.buffers},
                                {"peak", s.peak}});
  j["memory"] = mem;
  j["stages"] = nlohmann::json::array();
  for (const auto& t : r.stage_timing)
    j["stages"].push_back({{"stage", t.stage},
                           {"busy_s", t.busy_s},
                           {"bubble_s", t.bubble_s},
                           {"end_s", t.end_s},
                           {"exposed_comm_s", per_dim(t.exposed_s)}});
  if (r.time_to_train) j["time_to_train"] = time_to_train_json(*r.time_to_train);
  if (r.goodput) j["goodput"] = goodput_json(*r.goodput);
  if (const auto& g = r.straggler)
    j["straggler"] = {{"slow_ranks", g->slow_ranks},
                      {"critical_rank", g->critical_rank},
                      {"critical_factor", g->critical_factor},
                      {"baseline_iteration_s", g->baseline_iteration_s},
                      {"cost_s", g->cost_s},
                      {"cost_fraction", g->cost_fraction}};
  if (const auto& x = r.mixed)
    j["mixed"] = {{"stage_gpus", x->stage_gpus},
                  {"critical_stage", x->critical_stage},
                  {"critical_rank", x->critical_rank},
                  {"critical_gpu", x->critical_gpu},
                  {"critical_busy_s", x->critical_busy_s},
                  {"fastest_gpu", x->fastest_gpu},
                  {"baseline_iteration_s", x->baseline_iteration_s},
                  {"cost_s", x->cost_s},
                  {"cost_fraction", x->cost_fraction}};
  j["framework"] = r.framework;
  j["nccl_version"] = r.nccl_version;
  j["prediction_band"] = prediction_band_json(r.prediction_band);
  j["regime"] = r.regime;
  if (const auto& ft = r.plan.par.finetune; ft.active())
    j["finetune"] = {{"method", models::to_string(ft.method)},
                     {"rank", ft.rank},
                     {"alpha", ft.alpha},
                     {"targets", models::target_names(ft.targets)},
                     {"base_precision", models::to_string(ft.base_precision)}};
  j["cost_source"] = r.cost_source;
  j["sim_wall_time_s"] = r.sim_wall_time_s;
  j["events"] = r.events;
  j["folded"] = r.folded;
  j["warnings"] = r.warnings;
  return j;
}

std::string to_json_text(const Result& r) { return to_json(r).dump(2) + "\n"; }

namespace {

// A note line wrapped within kSummaryWidth columns at its ";  " separators, continuation
// lines indented to the value column.
constexpr std::size_t kSummaryWidth = 100;
std::size_t columns(const std::string& s) {  // UTF-8 code points ("×" is one column)
  std::size_t n = 0;
  for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
std::string wrap_note(const std::string& note) {
  std::string out, current;
  std::size_t from = 0;
  while (from <= note.size()) {
    const auto sep = note.find(";  ", from);
    const std::string part = note.substr(from, sep == std::string::npos ? std::string::npos : sep + 1 - from);
    if (!current.empty() && columns(current) + 1 + columns(part) > kSummaryWidth) {
      out += current + "\n";
      current = std::string(16, ' ') + part;
    } else {
      current += (current.empty() ? "" : " ") + part;
    }
    if (sep == std::string::npos) break;
    from = sep + 3;
  }
  return out + current + "\n";
}

}  // namespace

std::string summary_text(const Result& r) {
  const auto& q = r.plan.par;
  std::string out;
  auto line = [&](fmt::string_view f, const auto&... a) { out += fmt::vformat(f, fmt::make_format_args(a...)) + "\n"; };
  line("scenario        {}", r.scenario);
  line("model           {}: {}", r.model.name, model_text(r.model));
  line("plan            {} GPUs = dp {} × tp {} × pp {} × cp {}", r.world_size, q.dp, q.tp, q.pp, q.cp);
  line("                ep {}{}, vpp {}, {}, zero {}, recompute {}, sp {}", q.ep,
       q.expert_tp() != q.tp ? fmt::format(" (etp {})", q.expert_tp()) : std::string(), q.vpp,
       models::to_string(q.schedule), q.zero_stage, models::to_string(q.recompute), q.sequence_parallel ? "on" : "off");
  line("batch           global {} = micro {} × {} micro-batches × dp {}", r.plan.global_batch_size, q.micro_batch_size,
       q.num_microbatches, q.dp);
  line("framework       {}", r.framework);
  if (const auto& ft = q.finetune; ft.active())
    line("finetune        {} rank {} on {}, {} base weights frozen", models::to_string(ft.method), ft.rank,
         fmt::join(models::target_names(ft.targets), ", "), models::to_string(ft.base_precision));
  line("feasible        {}", r.feasible ? "yes" : "NO");
  for (const auto& why : r.infeasible_reasons) line("                {}", why);
  line("iteration       {}", format_seconds(r.iteration_time_s));
  if (const auto& g = r.straggler)
    line("stragglers      {} slow GPU{}, critical rank {} (×{:.3f}); costs {} (+{:.1f} %) against {} without", g->slow_ranks,
         g->slow_ranks == 1 ? "" : "s", g->critical_rank, g->critical_factor, format_seconds(g->cost_s),
         100 * g->cost_fraction, format_seconds(g->baseline_iteration_s));
  if (const auto& x = r.mixed)
    line("mixed GPUs      critical stage {} (rank {}, {}: {} compute); costs {} (+{:.1f} %) against {} all {}",
         x->critical_stage, x->critical_rank, x->critical_gpu, format_seconds(x->critical_busy_s),
         format_seconds(x->cost_s), 100 * x->cost_fraction, format_seconds(x->baseline_iteration_s), x->fastest_gpu);
  line("throughput      {:.0f} tokens/s, {:.1f} TFLOP/s per GPU", r.tokens_per_s, r.model_tflops_per_gpu);
  line("utilisation     MFU {:.1f} %, HFU {:.1f} %", 100 * r.mfu, 100 * r.hfu);
  line("validated band  {}", band_text(r.prediction_band, r.regime));
  line("bubble          {} ({:.1f} % of the iteration)", format_seconds(r.bubble_time_s), 100 * r.bubble_fraction);
  std::string exposed, bytes;
  for (int d = 0; d < kNumDims; ++d) {
    if (r.exposed_comm_s[d] > 0)
      exposed += fmt::format("  {} {}", to_string(static_cast<Dim>(d)), format_seconds(r.exposed_comm_s[d]));
    if (r.comm_bytes_per_gpu[d] > 0)
      bytes += fmt::format("  {} {}", to_string(static_cast<Dim>(d)), format_bytes(r.comm_bytes_per_gpu[d]));
  }
  line("exposed comm  {}", exposed.empty() ? "  none" : exposed);
  line("sent per GPU  {}", bytes.empty() ? "  none" : bytes);
  line("memory          peak {} of {}", format_bytes(r.peak_bytes), format_bytes(r.capacity_bytes));
  line("  stage      params       grads   optimizer activations     buffers        peak");
  for (const auto& s : r.per_stage)
    line("  {:>5} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}", s.stage, format_bytes(s.params), format_bytes(s.grads),
         format_bytes(s.optimizer), format_bytes(s.activations), format_bytes(s.buffers), format_bytes(s.peak));
  for (const auto& n : r.notes) out += wrap_note(n);
  if (r.time_to_train) out += time_to_train_text(*r.time_to_train);
  if (r.goodput) out += goodput_text(*r.goodput);
  line("cost source     {}", r.cost_source);
  line("simulated       {} events in {}{}", r.events, format_seconds(r.sim_wall_time_s),
       r.folded ? " (folded ranks)" : "");
  return out;
}

std::string warnings_text(const std::vector<std::string>& warnings) {
  std::string out;
  for (const auto& w : warnings) out += "warning: " + w + "\n";
  return out;
}

std::string model_text(const ResolvedModel& m) {
  std::string out = fmt::format("{:.2f} B parameters", m.parameters / 1e9);
  if (m.active_parameters > 0 && m.active_parameters < m.parameters)
    out += fmt::format(" ({:.2f} B active)", m.active_parameters / 1e9);
  return out + fmt::format(", sequence {} ({})", m.seq_length, m.seq_length_source);
}

}  // namespace ptsim::sim
