// Lockstep sessions (Replay::start_session): a group whose members resume from a
// blocking collective in the same state runs as its first member until it meets
// anything else. The result must be the one every member running on its own gives,
// byte for byte, on every kind of plan: pipeline sends, async data-parallel streams,
// ZeRO-3 gathers, link sharing, stragglers, DualPipe's held sends, context and expert
// parallelism, mixed GPU types. The same plans check the deferred start of a
// tensor-parallel collective (Transport::start_collective_at) against an event at its time,
// and a session's collective run inline (Transport::run_inline) against its event path.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sim/core/simulate.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

struct Both {
  std::string with, without;
  std::uint64_t sessions = 0, skewed = 0;
};

Both run_both(const Scenario& s) {
  auto text = [&](bool lockstep, std::uint64_t* sessions, std::uint64_t* skewed = nullptr) {
    SimulateOptions o;
    o.lockstep_sessions = lockstep;
    o.inline_collectives = false;  // sessions alone (inlining needs them: its own test below)
    Simulation sim = simulate(s, o);
    if (sessions) *sessions = sim.lockstep_sessions;
    if (skewed) *skewed = sim.skewed_sessions;
    sim.result.sim_wall_time_s = 0;  // wall-clock, the only field that is not a function of the input
    return to_json_text(sim.result);
  };
  Both b;
  b.with = text(true, &b.sessions, &b.skewed);
  std::uint64_t none = 1;
  b.without = text(false, &none);
  EXPECT_EQ(none, 0u);
  return b;
}

// The first line where two JSON texts differ (both versions), or "" when they are equal.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(x, la)), more_b = static_cast<bool>(std::getline(y, lb));
    if (!more_a && !more_b) return "";
    if (la != lb || more_a != more_b) return "line " + std::to_string(line) + ": " + la + " | " + lb;
  }
}

Scenario repo(const std::string& file, const std::vector<std::string>& sets) {
  return load_scenario(test::repo_path(file), sets);
}

// ZeRO-3 (megatron-core, plain 1F1B) on 32 nodes of a radix-16 fat tree, ECMP: each tensor-
// parallel rank's gathers ride its own rail, whose ring the hash may put on a spine link with
// another's, so a group's members resume from a tensor-parallel collective with their next
// gathers expected to end at different times (the issue-12 ZeRO-3 benchmark, scaled down).
constexpr const char* kSkewedCase = "ZeRO-3 under megatron-core, 1F1B, ECMP rings";
Scenario zero3_ecmp() {
  return repo("scenarios/default.yaml",
              {"cluster.num_gpus=256", "cluster.inter_node.switch_radix=16", "parallel.pipeline_parallel=4",
               "parallel.zero_stage=3", "training.global_batch_size=32", "model.num_layers=16"});
}

struct Case {
  const char* what;
  Scenario s;
  bool sessions;  // whether a group can run in lockstep at all
};
// Every kind of plan the replay has paths for.
std::vector<Case> plan_kinds() {
  const std::vector<std::string> small = {"cluster.num_gpus=64", "parallel.pipeline_parallel=4",
                                          "training.global_batch_size=16", "model.num_layers=8"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), small.begin(), small.end());
    return extra;
  };
  return {
      {"GPT-3 175B shape, tp 8 pp 4 dp 2, link sharing", repo("scenarios/default.yaml", small), true},
      {"the same, closed-form network", repo("scenarios/default.yaml", with({"cluster.link_sharing=false"})), true},
      {"ZeRO-3 under DeepSpeed 0.3.14 (host-blocking gathers)",
       repo("scenarios/reference/sc21-zero3-175b-384.yaml",
            {"cluster.num_gpus=32", "parallel.tensor_parallel=2", "parallel.data_parallel=16",
             "training.global_batch_size=32", "training.micro_batch_size=1", "model.num_layers=4"}),
       true},
      {"ZeRO-3 under megatron-core, interleaved",
       repo("scenarios/default.yaml", with({"parallel.zero_stage=3", "parallel.pipeline_schedule=interleaved-1f1b",
                                            "parallel.virtual_pipeline_stages=2"})),
       true},
      {"one straggler node",
       repo("scenarios/straggler-llama3-8b-32xh100.yaml",
            {"cluster.slow=[{nodes: [3], factor: 1.1}]", "training.global_batch_size=16"}),
       true},
      {"every rank a different speed",
       repo("scenarios/straggler-llama3-8b-32xh100.yaml", {"training.global_batch_size=16"}), false},
      {"zero-bubble schedule", repo("scenarios/zero-bubble-llama3-70b.yaml", {"training.global_batch_size=32"}), true},
      {"mixed A100 / H100", repo("scenarios/mixed-a100-h100-llama2-13b.yaml", {"training.global_batch_size=16"}), true},
      {kSkewedCase, zero3_ecmp(), true},
      {"context parallel", repo("scenarios/default.yaml", with({"parallel.context_parallel=2"})), true},
      {"Transformer Engine userbuffers (--tp-comm-overlap)",
       repo("scenarios/default.yaml", with({"training.megatron.tp_comm_overlap=true"})), true},
      {"MoE, expert parallel, DualPipe (held sends)",
       parse_scenario(testing::tiny_moe_yaml("dualpipe"), "moe.yaml",
                      {"parallel.tensor_parallel=2", "cluster.num_gpus=8", "cluster.gpus_per_node=8"}),
       true},
  };
}

TEST(ReplayLockstep, EveryMemberOnItsOwnGivesTheSameJson) {
  for (const auto& c : plan_kinds()) {
    const Both b = run_both(c.s);
    EXPECT_EQ(first_difference(b.with, b.without), "") << c.what;
    if (c.sessions)
      EXPECT_GT(b.sessions, 0u) << c.what;
    else
      EXPECT_EQ(b.sessions, 0u) << c.what;
  }
}

// Members whose async gathers are expected to end at different times (each rank's
// comm_until) still run as one while every compute is wholly under each member's gather
// (Replay::session_uniform); the leader ends the session before the first compute that sets
// them apart. The JSON is the one above (every member on its own); here, that such sessions
// happen at all.
TEST(ReplayLockstep, MembersWhoseGathersEndApartRunAsOne) {
  const Both b = run_both(zero3_ecmp());
  EXPECT_EQ(first_difference(b.with, b.without), "");
  EXPECT_GT(b.skewed, 0u);
  EXPECT_GT(b.sessions, b.skewed);
}

// Replay::arrive hands a tensor-parallel collective whose last member is ahead of the
// clock to the transport at once (Transport::start_collective_at): the same JSON as
// starting it by an event at its time, but the event count, which must drop.
TEST(ReplayLockstep, DeferredStartsGiveTheSameJsonWithFewerEvents) {
  for (const auto& c : plan_kinds()) {
    auto result = [&](bool deferred) {
      SimulateOptions o;
      o.deferred_starts = deferred;
      o.inline_collectives = false;  // an inline collective needs no start at all
      Result r = simulate(c.s, o).result;
      r.sim_wall_time_s = 0;
      return r;
    };
    Result with = result(true), without = result(false);
    EXPECT_LE(with.events, without.events) << c.what;
    if (c.s.plan.par.tp > 1) EXPECT_LT(with.events, without.events) << c.what;
    with.events = without.events = 0;
    EXPECT_EQ(first_difference(to_json_text(with), to_json_text(without)), "") << c.what;
  }
}

// A run with the sessions' and the groups' inlining on or off (the wall time zeroed: the only
// field that is not a function of the input).
Simulation inlined(const Scenario& s, bool sessions, bool groups) {
  SimulateOptions o;
  o.inline_collectives = sessions;
  o.inline_groups = groups;
  Simulation sim = simulate(s, o);
  sim.result.sim_wall_time_s = 0;
  return sim;
}

// A session's tensor-parallel collective that the transport can time at once runs inline
// (Transport::run_inline): the leader goes through it as through compute. The same JSON
// as its event path but the event count, which must drop where a session has one; a
// conflict (traffic that could have met an inline collective) replays without inlining.
TEST(ReplayLockstep, InlineCollectivesGiveTheSameJsonWithFewerEvents) {
  int fewer = 0;
  for (const auto& c : plan_kinds()) {
    // The sessions' inlining alone (the groups': their own test below).
    const Simulation on = inlined(c.s, true, false), off = inlined(c.s, false, false);
    Result with = on.result, without = off.result;
    EXPECT_LE(with.events, without.events) << c.what;
    EXPECT_EQ(on.inline_conflicts, 0) << c.what;
    fewer += with.events < without.events;
    with.events = without.events = 0;
    EXPECT_EQ(first_difference(to_json_text(with), to_json_text(without)), "") << c.what;
  }
  // All but the two plans whose tensor-parallel groups never run private: every rank a
  // different speed (no session) and tp 2 with data-parallel rings on the same NVSwitch ports.
  EXPECT_EQ(fewer, static_cast<int>(plan_kinds().size()) - 2);
}

// A tensor-parallel collective outside a session that the transport can time when its
// last member arrives runs inline too (ReplayOptions::inline_groups): its members run on
// from its end without an event. The same JSON as without, with fewer events on every plan
// with tensor parallelism (its members need not resume in one state), as many on the
// others; where it conflicts, the replay goes on with the sessions' inlining alone.
TEST(ReplayLockstep, InlineGroupsGiveTheSameJsonWithFewerEvents) {
  for (const auto& c : plan_kinds()) {
    const Simulation on = inlined(c.s, true, true), off = inlined(c.s, true, false);
    Result with = on.result, without = off.result;
    EXPECT_EQ(on.inline_conflicts, 0) << c.what;
    if (c.s.plan.par.tp > 1)
      EXPECT_LT(with.events, without.events) << c.what;
    else
      EXPECT_EQ(with.events, without.events) << c.what;
    with.events = without.events = 0;
    EXPECT_EQ(first_difference(to_json_text(with), to_json_text(without)), "") << c.what;
  }
}

// A conflict: tp 2 x dp 4 in one node, ZeRO-0, rank 0's tensor-parallel group 1.5x slow.
// The fast groups launch their first gradient bucket and run on, inline, into the last
// backward; the bucket's ring starts only when the slow group launches it, and its first
// template takes NVSwitch ports of groups whose inline collectives have not ended. The
// iteration is replayed with the sessions' inlining alone, which conflicts again, then
// without inlining: the same JSON as never inlining. With tp 4 the ring meets an open
// inline collective of the slow group (no session: its members differ in speed) only when
// groups inline: one replay with the sessions' alone, fewer events, the same JSON.
TEST(ReplayLockstep, InlineConflictReplaysWithoutInlining) {
  for (const int tp : {2, 4}) {
    const Scenario s =
        repo("scenarios/default.yaml", {"cluster.num_gpus=8", "parallel.tensor_parallel=" + std::to_string(tp),
                                        "parallel.data_parallel=" + std::to_string(8 / tp),
                                        "parallel.pipeline_parallel=1", "parallel.zero_stage=0", "model.num_layers=8",
                                        "training.global_batch_size=8", "cluster.slow=[{ranks: [0, 1], factor: 1.5}]"});
    SimulateOptions off;
    off.inline_collectives = false;
    Simulation a = simulate(s), b = simulate(s, off);
    // One conflict turns the groups' inlining off, a second the sessions' too (then the run
    // is the one without inlining, event for event); how many the straggler causes depends
    // on timing.
    EXPECT_GE(a.inline_conflicts, 1) << tp;
    EXPECT_EQ(b.inline_conflicts, 0) << tp;
    if (a.inline_conflicts == 2)
      EXPECT_EQ(a.result.events, b.result.events);
    else
      EXPECT_LT(a.result.events, b.result.events);
    a.result.sim_wall_time_s = b.result.sim_wall_time_s = 0;
    a.result.events = b.result.events = 0;
    EXPECT_EQ(first_difference(to_json_text(a.result), to_json_text(b.result)), "") << tp;
  }
}

TEST(ReplayLockstep, NoSessionsWhenTracingOrFolded) {
  const Scenario s = repo("scenarios/default.yaml", {"cluster.num_gpus=64", "parallel.pipeline_parallel=4",
                                                     "training.global_batch_size=16", "model.num_layers=8"});
  SimulateOptions traced, folded;
  traced.trace = true;
  folded.fold = true;
  EXPECT_EQ(simulate(s, traced).lockstep_sessions, 0u);
  EXPECT_EQ(simulate(s, folded).lockstep_sessions, 0u);
}

}  // namespace
}  // namespace ptsim::sim
