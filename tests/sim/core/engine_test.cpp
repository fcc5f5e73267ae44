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
