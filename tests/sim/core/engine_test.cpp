#include "sim/core/engine.h"

#include <gtest/gtest.h>

#include <vector>

namespace ptsim::sim {
namespace {

struct Log {
  Engine* engine;
  std::vector<std::pair<Tick, std::uint64_t>> seen;
};

void record(void* ctx, std::uint64_t arg) {
  auto* log = static_cast<Log*>(ctx);
  log->seen.emplace_back(log->engine->now(), arg);
}

TEST(Engine, OrdersByTimeThenInsertion) {
  Engine e;
  Log log{&e, {}};
  e.schedule(30, record, &log, 1);
  e.schedule(10, record, &log, 2);
  e.schedule(30, record, &log, 3);  // same time as #1: runs after it (inserted later)
  e.schedule(20, record, &log, 4);
  e.schedule(10, record, &log, 5);
  e.run();
  const std::vector<std::pair<Tick, std::uint64_t>> expected{{10, 2}, {10, 5}, {20, 4}, {30, 1}, {30, 3}};
  EXPECT_EQ(log.seen, expected);
  EXPECT_EQ(e.now(), 30);
  EXPECT_EQ(e.events_executed(), 5u);
}

TEST(Engine, CancelSkipsTheEventAndIsIdempotent) {
  Engine e;
  Log log{&e, {}};
  e.schedule(5, record, &log, 1);
  const auto h = e.schedule(6, record, &log, 2);
  e.schedule(7, record, &log, 3);
  e.cancel(h);
  e.cancel(h);
  e.run();
  ASSERT_EQ(log.seen.size(), 2u);
  EXPECT_EQ(log.seen[0].second, 1u);
  EXPECT_EQ(log.seen[1].second, 3u);
  // A handle whose event already ran cannot cancel the event that reuses its slot.
  const auto h2 = e.schedule(8, record, &log, 4);
  e.cancel(h);  // stale: generation moved on
  e.run();
  EXPECT_EQ(log.seen.back().second, 4u);
  (void)h2;
}

struct Chain {
  Engine* engine;
  int left;
  std::vector<Tick> times;
};
void chain_step(void* ctx, std::uint64_t arg) {
  auto* c = static_cast<Chain*>(ctx);
  c->times.push_back(c->engine->now());
  if (--c->left > 0) c->engine->schedule_in(static_cast<Tick>(arg % 7 + 1), chain_step, c, arg * 31 + 17);
}

TEST(Engine, RunsAreDeterministic) {
  auto once = [] {
    Engine e;
    Chain a{&e, 1000, {}}, b{&e, 1000, {}};
    e.schedule(0, chain_step, &a, 1);
    e.schedule(0, chain_step, &b, 2);
    e.run();
    std::vector<Tick> all = a.times;
    all.insert(all.end(), b.times.begin(), b.times.end());
    return all;
  };
  EXPECT_EQ(once(), once());
}

TEST(Engine, RunUntilStopsBeforeLaterEvents) {
  Engine e;
  Log log{&e, {}};
  e.schedule(10, record, &log, 1);
  e.schedule(100, record, &log, 2);
  e.run(50);
  EXPECT_EQ(log.seen.size(), 1u);
  EXPECT_EQ(e.pending(), 1u);
  e.run();
  EXPECT_EQ(log.seen.size(), 2u);
}

// run(until) looks at the earliest time past `until`; an event scheduled after that,
// earlier than it but not before now(), still runs first (radix heap rebase), and ties
// keep insertion order.
TEST(Engine, ScheduleAfterAnEarlyStopRunsInOrder) {
  Engine e;
  Log log{&e, {}};
  e.schedule(10, record, &log, 1);
  e.schedule(1000, record, &log, 2);
  e.schedule(1000, record, &log, 3);
  e.schedule(70000, record, &log, 4);
  e.run(50);
  e.schedule(60, record, &log, 5);
  e.schedule(1000, record, &log, 6);
  e.schedule(50, record, &log, 7);
  e.run();
  const std::vector<std::pair<Tick, std::uint64_t>> expected{{10, 1},   {50, 7},   {60, 5},   {1000, 2},
                                                             {1000, 3}, {1000, 6}, {70000, 4}};
  EXPECT_EQ(log.seen, expected);
}

// Ties among many random times come out in insertion order, times never decrease.
TEST(Engine, ManyTiesKeepInsertionOrder) {
  Engine e;
  Log log{&e, {}};
  std::uint64_t x = 1;
  for (std::uint64_t i = 0; i < 5000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    e.schedule(static_cast<Tick>(x >> 57), record, &log, i);  // 128 distinct times
  }
  e.run();
  ASSERT_EQ(log.seen.size(), 5000u);
  for (std::size_t i = 1; i < log.seen.size(); ++i) {
    ASSERT_LE(log.seen[i - 1].first, log.seen[i].first);
    if (log.seen[i - 1].first == log.seen[i].first) ASSERT_LT(log.seen[i - 1].second, log.seen[i].second);
  }
}

void schedule_in_the_past(void* ctx, std::uint64_t) {
  auto* e = static_cast<Engine*>(ctx);
  e->schedule(e->now() - 1, record, nullptr);
}

TEST(Engine, TheClockNeverGoesBackwards) {
  Engine e;
  e.schedule(5, schedule_in_the_past, &e);
  EXPECT_THROW(e.run(), InternalError);
}

TEST(Engine, TwoEnginesAreIndependent) {
  Engine a, b;
  Log la{&a, {}}, lb{&b, {}};
  a.schedule(3, record, &la, 1);
  b.schedule(9, record, &lb, 2);
  a.run();
  EXPECT_EQ(a.now(), 3);
  EXPECT_EQ(b.now(), 0);
  b.run();
  EXPECT_EQ(b.now(), 9);
}

}  // namespace
}  // namespace ptsim::sim
