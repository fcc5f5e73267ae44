#include "sim/core/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>
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

// The workload's decisions, drawn from one generator in the order events run, so the two
// queues see the same workload as long as they run events in the same order. Ids count up
// with insertion; Load (CRTP) schedules an id with add(time) and drops it with cancel(id).
template <class Load>
struct RandomLoad {
  std::uint64_t x;
  std::vector<std::pair<Tick, std::uint64_t>> seen;
  std::uint64_t next_id = 0;
  std::uint64_t draw() { return x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 17; }
  Tick delay() {
    switch (draw() % 5) {
      case 0:
        return 0;
      case 1:
        return static_cast<Tick>(draw() % 16);
      case 2:
        return static_cast<Tick>(draw() % 4096);
      case 3:
        return static_cast<Tick>(draw() % (1u << 20));
      default:
        return static_cast<Tick>(draw() % (std::uint64_t{1} << 45));
    }
  }
  // An event at `now` schedules 0-3 others and, one time in four, cancels one of the last 8
  // scheduled (perhaps already run: then nothing happens).
  void react(Tick now) {
    auto& load = static_cast<Load&>(*this);
    if (next_id >= 20000) return;
    for (std::uint64_t k = draw() % 4; k > 0; --k) load.add(now + delay());
    if (draw() % 4 == 0 && next_id > 0) load.cancel(next_id - 1 - draw() % std::min<std::uint64_t>(next_id, 8));
  }
};

struct EngineLoad : RandomLoad<EngineLoad> {
  Engine* engine;
  std::vector<Engine::Handle> handles;  // by id
  static void on_event(void* ctx, std::uint64_t id) {
    auto* l = static_cast<EngineLoad*>(ctx);
    l->seen.emplace_back(l->engine->now(), id);
    l->react(l->engine->now());
  }
  void add(Tick at) { handles.push_back(engine->schedule(at, on_event, this, next_id++)); }
  void cancel(std::uint64_t id) { engine->cancel(handles[id]); }
};

struct ReferenceLoad : RandomLoad<ReferenceLoad> {
  std::set<std::tuple<Tick, std::uint64_t>> queue;  // (time, id): ids grow with insertion
  std::map<std::uint64_t, Tick> pending;
  Tick now = 0;
  void add(Tick at) {
    queue.emplace(at, next_id);
    pending[next_id++] = at;
  }
  void cancel(std::uint64_t id) {
    if (auto it = pending.find(id); it != pending.end()) queue.erase({it->second, id}), pending.erase(it);
  }
  void run(Tick until) {
    while (!queue.empty() && std::get<0>(*queue.begin()) <= until) {
      const auto [at, id] = *queue.begin();
      queue.erase(queue.begin());
      pending.erase(id);
      now = at;
      seen.emplace_back(at, id);
      react(at);
    }
  }
};

// A random workload against a reference queue (a std::set ordered by time, then
// insertion): events schedule 0-3 others at delays from 0 to 2^45 ticks (ties, short
// and long), cancel recent ones (some already run), and the run stops early now and then
// and schedules events before the earliest pending time (the rebase). Both must run the
// same events at the same times in the same order.
TEST(Engine, MatchesAReferenceQueueOnRandomWorkloads) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    Engine e;
    EngineLoad a;
    a.x = seed;
    a.engine = &e;
    ReferenceLoad b;
    b.x = seed;
    for (int i = 0; i < 64; ++i) {
      a.add(a.delay());
      b.add(b.delay());
    }
    // Stop early five times; after each stop schedule a few events from now on (some
    // before the earliest pending time, which was peeked past the stop).
    for (int stop = 1; stop <= 5; ++stop) {
      const Tick until = static_cast<Tick>(stop) * (Tick{1} << 43);
      e.run(until);
      b.run(until);
      ASSERT_EQ(e.now(), b.now);
      for (int k = 0; k < 4; ++k) {
        const Tick d = static_cast<Tick>(a.draw() % 64);
        b.draw();
        a.add(e.now() + d);
        b.add(b.now + d);
      }
    }
    e.run();
    b.run(INT64_MAX);
    ASSERT_EQ(a.seen.size(), b.seen.size());
    EXPECT_GT(a.seen.size(), 1000u);
    EXPECT_EQ(a.seen, b.seen);
  }
}

}  // namespace
}  // namespace ptsim::sim
