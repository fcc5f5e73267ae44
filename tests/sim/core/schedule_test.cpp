#include "sim/core/schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

namespace ptsim::sim {
namespace {

using models::Schedule;

TEST(Schedule, OneFOneBWarmupSteadyCooldown) {
  // p = 4, m = 6, stage 1: warm-up p − s − 1 = 2 forwards, then 4 × (F, B), then 2 B.
  const auto s = build_schedule(Schedule::one_f_one_b, 1, 4, 6, 1);
  ASSERT_EQ(s.size(), 12u);
  const char* expected = "FFFBFBFBFBBB";
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i].phase == Phase::forward ? 'F' : 'B', expected[i]) << i;
  EXPECT_EQ(s[2].microbatch, 2);  // first steady forward
  EXPECT_EQ(s[3].microbatch, 0);  // first backward
  // The last stage alternates from the start.
  const auto last = build_schedule(Schedule::one_f_one_b, 3, 4, 6, 1);
  EXPECT_EQ(last[0].phase, Phase::forward);
  EXPECT_EQ(last[1].phase, Phase::backward);
}

// The per-thread cache answers what build_schedules builds, for every kind, across more
// keys than it holds (so entries are evicted and rebuilt) and back again.
TEST(Schedule, CachedSchedulesAreTheBuiltOnes) {
  const auto same = [](const std::vector<std::vector<ScheduleStep>>& a,
                       const std::vector<std::vector<ScheduleStep>>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t s = 0; s < a.size(); ++s) {
      if (a[s].size() != b[s].size()) return false;
      for (std::size_t i = 0; i < a[s].size(); ++i)
        if (a[s][i].phase != b[s][i].phase || a[s][i].microbatch != b[s][i].microbatch ||
            a[s][i].chunk != b[s][i].chunk || a[s][i].paired != b[s][i].paired)
          return false;
    }
    return true;
  };
  struct Key {
    Schedule kind;
    int p, m, v;
  };
  std::vector<Key> keys;
  for (int m : {4, 8, 12})
    for (auto [kind, v] :
         {std::pair{Schedule::gpipe, 1}, std::pair{Schedule::one_f_one_b, 1}, std::pair{Schedule::interleaved_1f1b, 2},
          std::pair{Schedule::zb_h1, 1}, std::pair{Schedule::zb_h2, 1}, std::pair{Schedule::zb_v, 2},
          std::pair{Schedule::dualpipe, 2}})
      if (schedule_requirement(kind, 4, m, v).empty()) keys.push_back({kind, 4, m, v});
  ASSERT_GT(keys.size(), 8u);  // more than the cache holds
  for (int round = 0; round < 2; ++round)
    for (const Key& k : keys)
      EXPECT_TRUE(same(cached_schedules(k.kind, k.p, k.m, k.v), build_schedules(k.kind, k.p, k.m, k.v)))
          << static_cast<int>(k.kind) << " m=" << k.m;
}

// What the plan search's bound reads of ZB-V without placing its steps (zb_v_counts) is
// what the placed steps say, whatever the pass times.
TEST(Schedule, ZbVCountsHoldForAnyPassTimes) {
  for (int p : {2, 4, 8})
    for (int m : {4, 9, 32})
      for (const PassTimes t : {PassTimes{1, 1, 1}, PassTimes{1, 2.5, 0.3}, PassTimes{3, 1, 2}}) {
        const StepCounts want = zb_v_counts(m);
        for (const auto& steps : build_schedules(Schedule::zb_v, p, m, 2, t)) {
          const StepCounts got = count_steps(steps);
          EXPECT_EQ(got.runs, want.runs) << "p=" << p << " m=" << m;
          EXPECT_EQ(got.starts_fwd0, want.starts_fwd0) << "p=" << p << " m=" << m;
          EXPECT_EQ(got.ends_bwd0, want.ends_bwd0) << "p=" << p << " m=" << m;
        }
      }
}

TEST(Schedule, EveryMicrobatchRunsOnceEachWay) {
  for (auto kind : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved_1f1b}) {
    const int p = 4, m = 8, v = kind == Schedule::interleaved_1f1b ? 3 : 1;
    for (int stage = 0; stage < p; ++stage) {
      std::map<std::tuple<int, int, int>, int> seen;
      int forwards_before = 0;
      for (const auto& st : build_schedule(kind, stage, p, m, v)) {
        ++seen[{static_cast<int>(st.phase), st.microbatch, st.chunk}];
        if (st.phase == Phase::backward) {
          // A backward never precedes its own forward on the same rank.
          EXPECT_EQ(seen.count({0, st.microbatch, st.chunk}), 1u);
        } else {
          ++forwards_before;
        }
      }
      EXPECT_EQ(seen.size(), static_cast<std::size_t>(2 * m * v));
      for (const auto& [k, n] : seen) EXPECT_EQ(n, 1);
    }
  }
}

TEST(Schedule, InterleavedFollowsMegatronOrder) {
  // Megatron-LM schedules.py, p = 2, v = 2, m = 4, stage 0: warm-up
  // (p − 0 − 1)·2 + (v − 1)·p = 4 forwards: k = 0..3 → (mb, chunk) = (0,0) (1,0) (0,1) (1,1).
  const auto s = build_schedule(Schedule::interleaved_1f1b, 0, 2, 4, 2);
  ASSERT_EQ(s.size(), 16u);
  EXPECT_EQ(s[0].microbatch, 0);
  EXPECT_EQ(s[0].chunk, 0);
  EXPECT_EQ(s[1].microbatch, 1);
  EXPECT_EQ(s[1].chunk, 0);
  EXPECT_EQ(s[2].microbatch, 0);
  EXPECT_EQ(s[2].chunk, 1);
  EXPECT_EQ(s[3].microbatch, 1);
  EXPECT_EQ(s[3].chunk, 1);
  // Steady state starts with forward k = 4 → (mb 2, chunk 0), then the first
  // backward k = 0 → (mb 0, chunk v−1 = 1).
  EXPECT_EQ(s[4].phase, Phase::forward);
  EXPECT_EQ(s[4].microbatch, 2);
  EXPECT_EQ(s[5].phase, Phase::backward);
  EXPECT_EQ(s[5].microbatch, 0);
  EXPECT_EQ(s[5].chunk, 1);
}

TEST(Schedule, InterleavedMicroBatchGroupsFollowMegatronCoresTable) {
  // Megatron-core schedules.py, get_schedule_table's own example, "PP2 N3M5 with VP2":
  // micro-batches 0 1 2 0 1 2 3 4 3 4 on chunks 0 0 0 1 1 1 0 0 1 1; stage 0 warms up
  // (p − 0 − 1)·2 + (v − 1)·N = 5 forwards, then alternates, the k-th backward on the
  // k-th entry's micro-batch and chunk v − 1 − chunk.
  const auto s = build_schedule(Schedule::interleaved_1f1b, 0, 2, 5, 2, 3);
  ASSERT_EQ(s.size(), 20u);
  std::vector<std::pair<int, int>> fwd, bwd;
  for (const auto& st : s) (st.phase == Phase::forward ? fwd : bwd).emplace_back(st.microbatch, st.chunk);
  EXPECT_EQ(fwd, (std::vector<std::pair<int, int>>{
                     {0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}}));
  EXPECT_EQ(bwd, (std::vector<std::pair<int, int>>{
                     {0, 1}, {1, 1}, {2, 1}, {0, 0}, {1, 0}, {2, 0}, {3, 1}, {4, 1}, {3, 0}, {4, 0}}));
  for (int k = 0; k < 5; ++k) EXPECT_EQ(s[k].phase, Phase::forward) << k;
  EXPECT_EQ(s[5].phase, Phase::forward);
  EXPECT_EQ(s[6].phase, Phase::backward);
  // The default group is p: the same steps as without it.
  const auto d = build_schedule(Schedule::interleaved_1f1b, 1, 4, 8, 3);
  const auto g = build_schedule(Schedule::interleaved_1f1b, 1, 4, 8, 3, 4);
  ASSERT_EQ(d.size(), g.size());
  for (std::size_t i = 0; i < d.size(); ++i)
    EXPECT_TRUE(d[i].phase == g[i].phase && d[i].microbatch == g[i].microbatch && d[i].chunk == g[i].chunk) << i;
  // Megatron-core's limits: N in [p, m], a last group of 0 or at least p.
  EXPECT_NE(schedule_requirement(Schedule::interleaved_1f1b, 4, 16, 2, 3), "");
  EXPECT_NE(schedule_requirement(Schedule::interleaved_1f1b, 4, 16, 2, 17), "");
  EXPECT_NE(schedule_requirement(Schedule::interleaved_1f1b, 4, 16, 2, 5), "");  // last group 1
  EXPECT_EQ(schedule_requirement(Schedule::interleaved_1f1b, 4, 16, 2, 6), "");  // last group 4
  EXPECT_NE(schedule_requirement(Schedule::interleaved_1f1b, 4, 10, 2), "");     // N = p = 4: last group 2
}

TEST(Schedule, PipelinePeersWrapAroundChunks) {
  // Stage p−1 chunk 0 feeds stage 0 chunk 1 in the interleaved layout.
  const auto d = pipeline_destination(Phase::forward, 3, 0, 4, 2);
  EXPECT_EQ(d.stage, 0);
  EXPECT_EQ(d.chunk, 1);
  const auto src = pipeline_source(Phase::forward, 0, 1, 4, 2);
  EXPECT_EQ(src.stage, 3);
  EXPECT_EQ(src.chunk, 0);
  EXPECT_EQ(pipeline_source(Phase::forward, 0, 0, 4, 2).stage, -1);
  EXPECT_EQ(pipeline_destination(Phase::forward, 3, 1, 4, 2).stage, -1);
  EXPECT_EQ(pipeline_source(Phase::backward, 3, 1, 4, 2).stage, -1);
}

}  // namespace
}  // namespace ptsim::sim
