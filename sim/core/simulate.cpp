#include "sim/core/simulate.h"

#include "sim/core/prediction_band.h"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "models/flops.h"
#include "models/memory.h"
#include "models/params.h"
#include "sim/core/errors.h"
#include "sim/core/input_warnings.h"
#include "sim/core/network_cost.h"
#include "sim/core/network_transport.h"
#include "sim/core/program_builder.h"
#include "sim/core/goodput.h"
#include "sim/core/time_to_train.h"

namespace ptsim::sim {

namespace {

// The scenario's calibration table (cluster.calibration), or null.
std::shared_ptr<const hw::CostTable> load_table(const Scenario& s) {
  if (s.cluster.calibration.empty()) return nullptr;
  try {
    return std::make_shared<const hw::CostTable>(hw::load_cost_table(s.cluster.calibration));
  } catch (const std::exception& e) {
    throw ScenarioError(s.file, "cluster.calibration", e.what(), "make one with `ptsim calibrate`");
  }
}

hw::ComputeCostModel compute_cost_from(const Scenario& s, std::shared_ptr<const hw::CostTable> table) {
  hw::ComputeCostModel m =
      table ? hw::ComputeCostModel(s.cluster.gpu, std::move(table)) : hw::ComputeCostModel(s.cluster.gpu);
  try {
    m.set_attention_kernel(std::string(models::to_string(s.plan.par.attention)));
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(s.file, "training.attention", e.what(), "use flash (the GPU's default kernel) or naive");
  }
  return m;
}

}  // namespace

hw::ComputeCostModel make_compute_cost(const Scenario& s) { return compute_cost_from(s, load_table(s)); }

// The network model of hw/net (README "Network model"): the scenario's topology,
// Megatron rank placement, NCCL's algorithm choice, sibling groups of a stage at
// once; measured collectives of a calibration table take precedence where they apply.
std::unique_ptr<CollectiveCost> make_collective_cost(const Scenario& s) {
  const auto& par = s.plan.par;
  Layout layout(par.tp, par.cp, par.dp, par.pp, par.ep, s.cluster.gpus_per_node);
  std::shared_ptr<NetworkModel> model;
  try {
    model = std::make_shared<NetworkModel>(s.cluster, layout);
  } catch (const std::invalid_argument& e) {  // topology sizes ("fat-tree: ... need 256 pods"): name the scenario
    throw ScenarioError(s.file, "", e.what());
  }
  std::unique_ptr<CollectiveCost> net = std::make_unique<NetworkCost>(std::move(model));
  auto table = load_table(s);
  if (table && (!table->collectives.empty() || !table->collective_fits.empty()))
    return std::make_unique<TableCollectiveCost>(std::move(net), std::move(table));
  return net;
}

namespace {

std::string precision_name(models::Precision p) { return std::string(models::to_string(p)); }

// Link sharing (cluster.link_sharing, default on): transfers that overlap in time share
// the fabric. Folded runs simulate one rank per stage, so most concurrent traffic is
// absent: they keep the closed-form network cost. Null: use the closed form.
std::unique_ptr<NetworkTransport> shared_network(const Scenario& s, const SimulateOptions& opt,
                                                 const CollectiveCost& coll, Result& r) {
  if (opt.transport || !s.cluster.link_sharing || opt.fold) return nullptr;
  if (const auto* nc = dynamic_cast<const NetworkCost*>(&coll))
    return std::make_unique<NetworkTransport>(nc->model(), coll);
  if (dynamic_cast<const TableCollectiveCost*>(&coll))
    r.warnings.push_back(
        "measured collective times from the calibration table are used as they are: link sharing is off");
  return nullptr;
}

// Iteration time, throughput, FLOPs, MFU/HFU and where the costs came from.
void fill_headline(Result& r, const Scenario& s, const hw::ComputeCostModel& compute, const CollectiveCost& coll,
                   const Replay& replay, bool folded) {
  const auto& par = s.plan.par;
  r.scenario = s.name;
  const auto params = models::count_params(s.model);
  r.model = {
      s.model.name,       s.model.source,     static_cast<double>(params.total), static_cast<double>(params.active),
      s.model.seq_length, s.seq_length_source};
  r.world_size = s.plan.world_size();
  r.plan = s.plan;
  r.framework = std::string(to_string(s.framework.framework));
  r.regime = regime_of(s);
  r.prediction_band = find_band(s);
  r.cost_source = compute.source();
  if (const auto* t = dynamic_cast<const TableCollectiveCost*>(&coll); t && t->used_table())
    r.cost_source = t->table_name();
  r.folded = folded;
  r.events = replay.events();
  r.iteration_time_s = to_seconds(replay.iteration_ticks());
  const double tokens = static_cast<double>(s.plan.global_batch_size) * static_cast<double>(s.model.seq_length);
  r.tokens_per_s = r.iteration_time_s > 0 ? tokens / r.iteration_time_s : 0;
  r.model_flops_per_iteration = models::model_flops_per_iteration(s.model, s.plan.global_batch_size, par.finetune);
  r.hardware_flops_per_iteration =
      models::hardware_flops_per_iteration(s.model, s.plan.global_batch_size, par.recompute, par.finetune);
  const double peak = s.cluster.gpu.peak(precision_name(par.precision));
  const double denom = r.iteration_time_s * r.world_size;
  if (denom > 0) {
    r.model_tflops_per_gpu = r.model_flops_per_iteration / denom / 1e12;
    r.mfu = r.model_flops_per_iteration / (denom * peak);
    r.hfu = r.hardware_flops_per_iteration / (denom * peak);
  }
}

// Per-stage timing (mean over the stage's simulated ranks), exposed communication,
// bytes per GPU, bubble, and per-stage memory at the peak of the stage's fullest rank.
void fill_stages(Result& r, const Scenario& s, const Replay& replay) {
  const int p = s.plan.par.pp;
  r.stage_timing.resize(static_cast<std::size_t>(p));
  std::vector<int> count(static_cast<std::size_t>(p), 0);
  std::vector<RankStats> peak_rank(static_cast<std::size_t>(p));
  std::array<double, kNumDims> wire{};
  for (const auto& st : replay.stats()) {
    auto& t = r.stage_timing[static_cast<std::size_t>(st.stage)];
    t.stage = st.stage;
    t.busy_s += to_seconds(st.busy);
    t.bubble_s += to_seconds(st.bubble);
    t.end_s = std::max(t.end_s, to_seconds(st.end));
    for (int d = 0; d < kNumDims; ++d) t.exposed_s[d] += to_seconds(st.exposed[d]);
    for (int d = 0; d < kNumDims; ++d) wire[d] += st.wire[d];
    auto& pr = peak_rank[static_cast<std::size_t>(st.stage)];
    if (count[static_cast<std::size_t>(st.stage)] == 0 || st.mem_peak > pr.mem_peak) pr = st;
    ++count[static_cast<std::size_t>(st.stage)];
  }
  const double nranks = static_cast<double>(replay.stats().size());
  for (int d = 0; d < kNumDims; ++d) r.comm_bytes_per_gpu[d] = wire[d] / nranks;

  double bubble = 0;
  for (int st = 0; st < p; ++st) {
    auto& t = r.stage_timing[static_cast<std::size_t>(st)];
    const double n = std::max(1, count[static_cast<std::size_t>(st)]);
    t.busy_s /= n;
    t.bubble_s /= n;
    for (int d = 0; d < kNumDims; ++d) {
      t.exposed_s[d] /= n;
      r.exposed_comm_s[d] += t.exposed_s[d] / p;
    }
    bubble += t.bubble_s;
    const auto& pr = peak_rank[static_cast<std::size_t>(st)];
    const auto states = models::model_states(s.model, s.plan.par, st);
    // The allocator's reserved-vs-allocated gap (training.memory.allocator_overhead).
    const double peak = models::reserved_bytes(s.plan.par, pr.mem_peak);
    r.per_stage.push_back(
        {st, states.params, states.grads, states.optimizer, pr.activations_at_peak, pr.buffers_at_peak, peak});
    r.peak_bytes = std::max(r.peak_bytes, peak);
  }
  r.bubble_time_s = bubble / p;
  r.bubble_fraction = r.iteration_time_s > 0 ? r.bubble_time_s / r.iteration_time_s : 0;
}

// Out of memory is an answer (feasible = false), plus warnings about the inputs.
void add_verdicts(Result& r, const Scenario& s) {
  r.capacity_bytes = s.cluster.gpu.hbm;
  if (r.peak_bytes > r.capacity_bytes) {
    r.feasible = false;
    int worst = 0;
    for (const auto& m : r.per_stage)
      if (m.peak > r.per_stage[static_cast<std::size_t>(worst)].peak) worst = m.stage;
    r.infeasible_reasons.push_back(fmt::format("out of memory: stage {} needs {} but the GPU has {}", worst,
                                               format_bytes(r.peak_bytes), format_bytes(r.capacity_bytes)));
  }
  if (s.plan.par.tp > s.cluster.gpus_per_node)
    r.warnings.push_back(
        fmt::format("tensor_parallel {} spans nodes (gpus_per_node {}): TP all-reduces cross the network",
                    s.plan.par.tp, s.cluster.gpus_per_node));
  if (r.cost_source == "datasheet")
    r.warnings.push_back("costs from the GPU datasheet roofline (no calibration table; see `ptsim calibrate`)");
}

// Runs the replay; a run past its event bound is an input error naming the scenario and what to change.
void run_bounded(Replay& replay, const Scenario& s) {
  try {
    replay.run();
  } catch (const EventLimitError& e) {
    const std::string what = e.estimated()
                                 ? fmt::format(
                                       "this run would simulate more than the limit of {} events: its ranks run {} "
                                       "synchronising instructions (1/6 to 1 event each)",
                                       e.limit(), e.events())
                                 : fmt::format("the simulation passed the limit of {} events", e.limit());
    throw ScenarioError(s.file, "", what,
                        "simulate one rank per stage with --fold, use fewer GPUs (parallel sizes) or micro-batches "
                        "(training.global_batch_size), or raise the bound with --max-events");
  }
}

// cluster.slow: the slowest GPU and what the slowdown costs, from a second replay of
// the same program at nominal speed (folded when its network allows: the ranks are
// then identical again).
StragglerReport straggler_report(const Scenario& s, const SimulateOptions& opt, const CollectiveCost& coll,
                                 const Program& program, const Layout& layout, const ReplayOptions& ro,
                                 bool shared, Tick slow_ticks) {
  StragglerReport sr;
  const auto& f = s.cluster.slow_factor;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] > 1.0) ++sr.slow_ranks;
    if (f[i] > sr.critical_factor) sr.critical_factor = f[i], sr.critical_rank = static_cast<int>(i);
  }
  ReplayOptions bo = ro;
  bo.compute_scale.clear();
  bo.trace = false;
  Result unused;
  AnalyticTransport analytic(coll);
  SimulateOptions unfolded = opt;
  unfolded.fold = false;
  const auto net = shared ? shared_network(s, unfolded, coll, unused) : nullptr;
  Transport* transport = net ? static_cast<Transport*>(net.get()) : opt.transport ? opt.transport : &analytic;
  bo.fold = !net && !opt.transport;
  Replay base(program, layout, s.plan.par.num_microbatches, *transport, bo);
  run_bounded(base, s);
  sr.baseline_iteration_s = to_seconds(base.iteration_ticks());
  sr.cost_s = to_seconds(slow_ticks) - sr.baseline_iteration_s;
  sr.cost_fraction = sr.baseline_iteration_s > 0 ? sr.cost_s / sr.baseline_iteration_s : 0;
  return sr;
}

}  // namespace

Simulation simulate(const Scenario& s, const SimulateOptions& opt_in) {
  // Slow GPUs make ranks differ: every rank is simulated, whatever --fold asked.
  const bool slow = !s.cluster.slow_factor.empty();
  SimulateOptions opt = opt_in;
  if (slow) opt.fold = false;
  const auto wall_start = std::chrono::steady_clock::now();
  const auto& par = s.plan.par;
  std::optional<hw::ComputeCostModel> own_compute;
  const hw::ComputeCostModel* compute = opt.compute;
  Simulation sim;
  sim.result.warnings = s.warnings;
  if (!compute) {
    auto table = load_table(s);
    if (table)
      for (auto& w : calibration_warnings(s, *table)) sim.result.warnings.push_back(std::move(w));
    compute = &own_compute.emplace(compute_cost_from(s, std::move(table)));
  }
  std::unique_ptr<CollectiveCost> own_coll;
  const CollectiveCost* coll = opt.collectives;
  if (!coll) {
    own_coll = make_collective_cost(s);
    coll = own_coll.get();
  }

  sim.program = build_program(s, *compute, opt.build);
  Layout layout(par.tp, par.cp, par.dp, par.pp, par.ep, s.cluster.gpus_per_node);
  ReplayOptions ro;
  ro.fold = opt.fold;
  ro.trace = opt.trace;
  ro.trace_max_ranks = opt.trace_max_ranks;
  ro.max_events = opt.max_events;
  if (slow) ro.compute_scale = s.cluster.slow_factor;
  AnalyticTransport analytic(*coll);
  const auto shared_net = shared_network(s, opt, *coll, sim.result);
  Transport* transport = &analytic;
  if (opt.transport) transport = opt.transport;
  if (shared_net) transport = shared_net.get();
  Replay replay(sim.program, layout, par.num_microbatches, *transport, ro);
  run_bounded(replay, s);

  Result& r = sim.result;
  fill_headline(r, s, *compute, *coll, replay, opt.fold);
  fill_stages(r, s, replay);
  add_verdicts(r, s);
  if (slow) {
    if (opt_in.fold) r.warnings.push_back("--fold ignored: cluster.slow makes the ranks differ, every rank simulated");
    r.straggler = straggler_report(s, opt, *coll, sim.program, layout, ro, shared_net != nullptr,
                                   replay.iteration_ticks());
  }
  r.time_to_train = time_to_train(s, r);
  if (r.iteration_time_s > 0) r.goodput = goodput(s, r.iteration_time_s, r.tokens_per_s);
  r.notes.push_back(layout.placement_summary());
  for (auto& line : transport->report()) r.notes.push_back(std::move(line));
  sim.spans = replay.spans();
  r.sim_wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return sim;
}

}  // namespace ptsim::sim
