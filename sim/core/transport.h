// How the replay moves bytes: it hands every collective (a whole group, once all
// members arrived) and every pipeline message to a Transport, which calls back
// through the engine when the transfer is complete.
//   AnalyticTransport: each transfer takes the CollectiveCost's idle-network time,
//     independent of everything else in flight (fast; no link sharing).
//   A network transport (hw/net FlowNetwork) expands transfers into flows on the
//     topology's links, where overlapping transfers share bandwidth max-min fairly.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hw/net/layout.h"
#include "sim/core/collective_cost.h"
#include "sim/core/engine.h"

namespace ptsim::sim {

// Thrown by a transport when a collective it ran inline (Transport::run_inline) could have
// met traffic that appeared after it was timed: the run must be replayed without inlining.
struct InlineConflict {};

class Transport {
 public:
  virtual ~Transport() = default;
  // A collective `c` of group `gid` of dimension `d` with buffer size S starts at
  // engine.now(); `done(ctx, arg)` must be scheduled for its completion.
  virtual void start_collective(Engine& engine, CollectiveKind c, Dim d, int gid, const GroupShape& shape, Bytes S,
                                Engine::Callback done, void* ctx, std::uint64_t arg) = 0;
  // The same collective starting at `at`, later than engine.now(): true when the transport
  // can tell now what it will do then and took it (`done` scheduled for its completion),
  // saving the event that would start it at `at`; false to be asked again at `at` through
  // start_collective. The replay offers only tensor-parallel collectives, which block
  // every member of the group: no other transfer of the group can start before `at`.
  virtual bool start_collective_at(Engine& /*engine*/, Tick /*at*/, CollectiveKind, Dim, int /*gid*/, const GroupShape&,
                                   Bytes, Engine::Callback, void* /*ctx*/, std::uint64_t /*arg*/) {
    return false;
  }
  // The same collective when every member reaches it at `at` together (a lockstep
  // session's tensor-parallel collective): its duration in ticks when the transport knows
  // now that nothing can change it, counted as done with no event (the replay runs on
  // through it as through compute); -1 to take the event path (start_collective_at). A
  // transport that later finds traffic that would have met such a collective before its
  // end throws InlineConflict, and the caller runs the replay again without them.
  virtual Tick run_inline(Engine& /*engine*/, Tick /*at*/, CollectiveKind, Dim, int /*gid*/, const GroupShape&, Bytes) {
    return -1;
  }
  // A point-to-point message of `bytes` from global rank src to dst, starting now.
  virtual void start_p2p(Engine& engine, int src, int dst, const GroupShape& pair, Bytes bytes, Engine::Callback done,
                         void* ctx, std::uint64_t arg) = 0;
  // Bytes each member of the group sends on the wire for this collective.
  virtual Bytes wire_bytes(CollectiveKind c, Dim d, const GroupShape& shape, Bytes S) const = 0;
  // True when a transfer's time depends on nothing else in flight (closed form):
  // the replay may then time a single-member collective without events.
  virtual bool immediate() const { return false; }
  virtual Seconds collective_seconds(CollectiveKind, Dim, int /*gid*/, const GroupShape&, Bytes) const { return 0; }
  // Extra summary lines (e.g. the busiest links) after the run.
  virtual std::vector<std::string> report() const { return {}; }
};

class AnalyticTransport : public Transport {
 public:
  explicit AnalyticTransport(const CollectiveCost& cost) : cost_(cost) {}
  void start_collective(Engine& e, CollectiveKind c, Dim d, int, const GroupShape& g, Bytes S, Engine::Callback done,
                        void* ctx, std::uint64_t arg) override {
    e.schedule(e.now() + to_ticks(cost_.seconds(c, d, g, S)), done, ctx, arg);
  }
  // Its time depends on nothing in flight: known at any start.
  bool start_collective_at(Engine& e, Tick at, CollectiveKind c, Dim d, int, const GroupShape& g, Bytes S,
                           Engine::Callback done, void* ctx, std::uint64_t arg) override {
    e.schedule(at + to_ticks(cost_.seconds(c, d, g, S)), done, ctx, arg);
    return true;
  }
  // Closed form: nothing in flight changes it.
  Tick run_inline(Engine&, Tick, CollectiveKind c, Dim d, int, const GroupShape& g, Bytes S) override {
    return to_ticks(cost_.seconds(c, d, g, S));
  }
  void start_p2p(Engine& e, int, int, const GroupShape& pair, Bytes bytes, Engine::Callback done, void* ctx,
                 std::uint64_t arg) override {
    e.schedule(e.now() + to_ticks(cost_.seconds(CollectiveKind::send_recv, Dim::pp, pair, bytes)), done, ctx, arg);
  }
  Bytes wire_bytes(CollectiveKind c, Dim, const GroupShape& g, Bytes S) const override {
    return cost_.wire_bytes(c, g, S);
  }
  bool immediate() const override { return true; }
  Seconds collective_seconds(CollectiveKind c, Dim d, int, const GroupShape& g, Bytes S) const override {
    return cost_.seconds(c, d, g, S);
  }

 private:
  const CollectiveCost& cost_;
};

}  // namespace ptsim::sim
