#include "sim/core/simulate.h"

#include "sim/core/prediction_band.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "models/flops.h"
#include "models/memory.h"
#include "models/params.h"
#include "sim/core/errors.h"
#include "sim/core/input_warnings.h"
#include "sim/core/mixed_cluster.h"
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
  Layout layout(par.tp, par.cp, par.dp, par.pp, par.ep, s.cluster.gpus_per_node, par.etp);
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
  r.nccl_version = s.cluster.nccl_version;
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
  const double peak = mean_peak(s.cluster, precision_name(par.precision));
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
    // What the peak holds beyond these is the optimizer step's own allocation
    // (models::ModelStates::step), when the step is the peak.
    const double held = states.params + states.grads + states.optimizer + pr.activations_at_peak + pr.buffers_at_peak;
    const double at_step = std::max(0.0, static_cast<double>(pr.mem_peak) - held);
    r.per_stage.push_back({st, states.params, states.grads, states.optimizer + at_step, pr.activations_at_peak,
                           pr.buffers_at_peak, peak});
    r.peak_bytes = std::max(r.peak_bytes, peak);
  }
  r.bubble_time_s = bubble / p;
  r.bubble_fraction = r.iteration_time_s > 0 ? r.bubble_time_s / r.iteration_time_s : 0;
}

// Out of memory is an answer (feasible = false), plus warnings about the inputs.
void add_verdicts(Result& r, const Scenario& s) {
  r.capacity_bytes = s.cluster.gpu.hbm;
  if (s.cluster.mixed()) {
    // Each stage against its own GPU's HBM; the capacity shown is the tightest stage's.
    double tightest = -1;
    for (const auto& m : r.per_stage) {
      const auto& g = stage_gpu(s.cluster, s.plan.par.pp, m.stage);
      if (m.peak / g.hbm > tightest) tightest = m.peak / g.hbm, r.capacity_bytes = g.hbm;
      if (m.peak > g.hbm) {
        r.feasible = false;
        r.infeasible_reasons.push_back(fmt::format("out of memory: stage {} ({}) needs {} but the GPU has {}",
                                                   m.stage, g.name, format_bytes(m.peak), format_bytes(g.hbm)));
      }
    }
  } else if (r.peak_bytes > r.capacity_bytes) {
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

// Runs `attempt`, which builds a fresh transport and replay from `ro` and runs it; when the
// transport finds traffic that could have met a collective the replay ran inline
// (InlineConflict, Transport::run_inline), runs it again with less inlining. Returns how many
// times it had to (0 to 2).
template <class Attempt>
int run_with_inline_fallback(ReplayOptions& ro, Attempt attempt) {
  for (int conflicts = 0;; ++conflicts) {
    try {
      attempt();
      return conflicts;
    } catch (const InlineConflict&) {
      if (!ro.inline_collectives) throw;
      // First without the groups' inlining (more ranks ahead of the clock, more chances to
      // conflict), then without the sessions' too.
      if (ro.inline_groups)
        ro.inline_groups = false;
      else
        ro.inline_collectives = false;
    }
  }
}

// Runs the replay; a run past its event bound is an input error naming the scenario and what to change.
void run_bounded(Replay& replay, const Scenario& s) {
  try {
    replay.run();
  } catch (const EventLimitError& e) {
    const std::string what = e.estimated()
                                 ? fmt::format(
                                       "this run would simulate more than the limit of {} events: its ranks run {} "
                                       "synchronising instructions (1/9 to 1 event each)",
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
// The iteration of a second replay of `program` at datasheet speed (no compute_scale),
// on the same network as the first (folded when its network allows).
Tick baseline_ticks(const Scenario& s, const SimulateOptions& opt, const CollectiveCost& coll, const Program& program,
                    const Layout& layout, const ReplayOptions& ro, bool shared) {
  ReplayOptions bo = ro;
  bo.compute_scale.clear();
  bo.trace = false;
  Result unused;
  AnalyticTransport analytic(coll);
  SimulateOptions unfolded = opt;
  unfolded.fold = false;
  std::unique_ptr<NetworkTransport> net;
  std::optional<Replay> base;
  run_with_inline_fallback(bo, [&] {
    base.reset();  // before the transport it runs on
    net = shared ? shared_network(s, unfolded, coll, unused) : nullptr;
    Transport* transport = net ? static_cast<Transport*>(net.get()) : opt.transport ? opt.transport : &analytic;
    bo.fold = !net && !opt.transport;
    base.emplace(program, layout, s.plan.par.num_microbatches, *transport, bo);
    run_bounded(*base, s);
  });
  return base->iteration_ticks();
}

StragglerReport straggler_report(const Scenario& s, const SimulateOptions& opt, const CollectiveCost& coll,
                                 const Program& program, const Layout& layout, const ReplayOptions& ro,
                                 bool shared, Tick slow_ticks) {
  StragglerReport sr;
  const auto& f = s.cluster.slow_factor;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] > 1.0) ++sr.slow_ranks;
    if (f[i] > sr.critical_factor) sr.critical_factor = f[i], sr.critical_rank = static_cast<int>(i);
  }
  sr.baseline_iteration_s = to_seconds(baseline_ticks(s, opt, coll, program, layout, ro, shared));
  sr.cost_s = to_seconds(slow_ticks) - sr.baseline_iteration_s;
  sr.cost_fraction = sr.baseline_iteration_s > 0 ? sr.cost_s / sr.baseline_iteration_s : 0;
  return sr;
}

// Each stage's compute model on a mixed cluster (one per GPU group), or none.
struct StageCompute {
  std::vector<hw::ComputeCostModel> own;
  std::vector<const hw::ComputeCostModel*> groups;
  std::vector<int> stage_group;
  std::vector<const hw::ComputeCostModel*> of_stage() const {
    std::vector<const hw::ComputeCostModel*> out;
    for (int g : stage_group) out.push_back(groups[static_cast<std::size_t>(g)]);
    return out;
  }
};

StageCompute stage_compute(const Scenario& s, const SimulateOptions& opt) {
  StageCompute sc;
  if (!s.cluster.mixed()) return sc;
  try {
    sc.stage_group = stage_groups(s.cluster, s.plan.par.pp);
  } catch (const std::invalid_argument& e) {
    throw ScenarioError(s.file, "cluster.gpus", e.what());
  }
  const std::size_t n = s.cluster.gpu_groups.size();
  if (!opt.group_compute.empty()) {
    if (opt.group_compute.size() != n)
      throw std::logic_error("SimulateOptions::group_compute needs one model per cluster.gpus group");
    sc.groups = opt.group_compute;
    return sc;
  }
  sc.own.reserve(n);
  for (std::size_t g = 0; g < n; ++g) sc.own.push_back(group_compute(s, static_cast<int>(g)));
  for (const auto& m : sc.own) sc.groups.push_back(&m);
  return sc;
}

// cluster.gpus: the critical stage and what the slower types cost, against the same plan
// on the fastest type (the least time per transformer layer) from a second replay.
MixedReport mixed_report(const Scenario& s, const SimulateOptions& opt, const CollectiveCost& coll,
                         const StageCompute& sc, const Layout& layout, const ReplayOptions& ro, bool shared,
                         const Result& r, Tick ticks) {
  MixedReport mr;
  const int p = s.plan.par.pp;
  for (int st = 0; st < p; ++st) {
    mr.stage_gpus.push_back(stage_gpu(s.cluster, p, st).name);
    const double busy = r.stage_timing[static_cast<std::size_t>(st)].busy_s;
    if (st == 0 || busy > mr.critical_busy_s) mr.critical_stage = st, mr.critical_busy_s = busy;
  }
  mr.critical_rank = mr.critical_stage * (s.plan.world_size() / p);
  mr.critical_gpu = mr.stage_gpus[static_cast<std::size_t>(mr.critical_stage)];
  std::size_t fastest = 0;
  double best = 0;
  for (std::size_t g = 0; g < sc.groups.size(); ++g) {
    const double t = block_seconds(s, *sc.groups[g]).dense_layer;
    if (g == 0 || t < best) fastest = g, best = t;
  }
  mr.fastest_gpu = s.cluster.gpu_groups[fastest].gpu.name;
  SimulateOptions o = opt;
  o.build.stage_compute.assign(static_cast<std::size_t>(p), sc.groups[fastest]);
  const Program program = build_program(s, *sc.groups[fastest], o.build);
  mr.baseline_iteration_s = to_seconds(baseline_ticks(s, opt, coll, program, layout, ro, shared));
  mr.cost_s = to_seconds(ticks) - mr.baseline_iteration_s;
  mr.cost_fraction = mr.baseline_iteration_s > 0 ? mr.cost_s / mr.baseline_iteration_s : 0;
  return mr;
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

  // A mixed cluster costs each stage on its own GPU type; opt.compute, one model for
  // every GPU, does not apply there.
  const StageCompute sc = stage_compute(s, opt);
  BuildOptions build = opt.build;
  if (s.cluster.mixed()) build.stage_compute = sc.of_stage();
  sim.program = build_program(s, *compute, build);
  Layout layout(par.tp, par.cp, par.dp, par.pp, par.ep, s.cluster.gpus_per_node, par.etp);
  expect_collective_times(sim.program, layout, *coll);
  ReplayOptions ro;
  ro.fold = opt.fold;
  ro.trace = opt.trace;
  ro.trace_max_ranks = opt.trace_max_ranks;
  ro.max_events = opt.max_events;
  ro.lockstep_sessions = opt.lockstep_sessions;
  ro.deferred_starts = opt.deferred_starts;
  ro.inline_collectives = opt.inline_collectives && !opt.transport;  // a given transport cannot start over
  ro.inline_groups = opt.inline_groups;
  if (opt.progress) ro.progress = [&opt](std::uint64_t events, Tick now) { opt.progress(events, to_seconds(now)); };
  if (slow) ro.compute_scale = s.cluster.slow_factor;
  AnalyticTransport analytic(*coll);
  std::unique_ptr<NetworkTransport> shared_net;
  Transport* transport = nullptr;
  std::optional<Replay> replay_slot;
  sim.inline_conflicts = run_with_inline_fallback(ro, [&] {
    replay_slot.reset();  // before the transport it runs on
    shared_net = shared_network(s, opt, *coll, sim.result);
    transport = &analytic;
    if (opt.transport) transport = opt.transport;
    if (shared_net) transport = shared_net.get();
    replay_slot.emplace(sim.program, layout, par.num_microbatches, *transport, ro);
    run_bounded(*replay_slot, s);
  });
  const Replay& replay = *replay_slot;
  sim.lockstep_sessions = replay.sessions();
  sim.skewed_sessions = replay.skewed_sessions();

  Result& r = sim.result;
  fill_headline(r, s, *compute, *coll, replay, opt.fold);
  if (s.cluster.mixed()) {  // the stages' own models: a group's table once it answered, else "datasheet"
    std::vector<std::string> sources;
    for (const auto* g : sc.groups)
      if (std::find(sources.begin(), sources.end(), g->source()) == sources.end()) sources.push_back(g->source());
    r.cost_source = fmt::format("{}", fmt::join(sources, " + "));
  }
  fill_stages(r, s, replay);
  add_verdicts(r, s);
  if (slow) {
    if (opt_in.fold) r.warnings.push_back("--fold ignored: cluster.slow makes the ranks differ, every rank simulated");
    r.straggler = straggler_report(s, opt, *coll, sim.program, layout, ro, shared_net != nullptr,
                                   replay.iteration_ticks());
  }
  if (s.cluster.mixed()) {
    r.mixed = mixed_report(s, opt, *coll, sc, layout, ro, shared_net != nullptr, r, replay.iteration_ticks());
    if (s.pipeline_balanced)
      r.notes.push_back(fmt::format("pipeline_layers [{}] balanced for the stages' GPU types (cluster.gpus)",
                                    fmt::join(s.plan.par.pipeline_layers, ", ")));
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
