// The event engine: a binary heap of timed callbacks in a std::vector, ordered by
// (time, insertion sequence) so runs are bit-for-bit deterministic (ns-3's
// EventKey{ts, uid}). No globals: construct as many engines as you like (the plan
// search runs one per thread). The hot loop allocates nothing once the heap and
// the slot pool have grown to the largest number of pending events.
#pragma once
#include <cassert>
#include <cstdint>
#include <vector>

#include "hw/slot_pool.h"
#include "hw/units.h"

namespace ptsim::sim {

class Engine {
 public:
  // A callback is a plain function pointer with a context and a 64-bit argument:
  // no std::function, so scheduling never allocates.
  using Callback = void (*)(void* ctx, std::uint64_t arg);

  struct Handle {
    std::uint32_t slot = UINT32_MAX;
    std::uint32_t generation = 0;
  };

  Tick now() const { return now_; }
  std::uint64_t events_executed() const { return executed_; }
  std::size_t pending() const { return heap_.size(); }

  // Schedules fn(ctx, arg) at absolute time `at` (>= now()).
  Handle schedule(Tick at, Callback fn, void* ctx, std::uint64_t arg = 0) {
    assert(at >= now_ && "events cannot be scheduled in the past");
    const std::uint32_t slot = take_slot(free_slots_, slots_);
    Slot& s = slots_[slot];
    s.cancelled = false;
    heap_.push_back({at, next_seq_++, fn, ctx, arg, slot});
    sift_up(heap_.size() - 1);
    return {slot, s.generation};
  }
  Handle schedule_in(Tick delay, Callback fn, void* ctx, std::uint64_t arg = 0) {
    return schedule(now_ + delay, fn, ctx, arg);
  }

  // Cancels a pending event; cancelling an event that already ran (or twice) is a
  // no-op, detected by the slot's generation.
  void cancel(Handle h) {
    if (h.slot < slots_.size() && slots_[h.slot].generation == h.generation) slots_[h.slot].cancelled = true;
  }

  // Runs until no event is left (or `until` is passed). Returns the final time.
  Tick run(Tick until = INT64_MAX) {
    while (!heap_.empty() && heap_.front().at <= until) step();
    return now_;
  }

  // Executes the earliest event. Precondition: pending() > 0.
  void step() {
    Event e = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    Slot& s = slots_[e.slot];
    const bool cancelled = s.cancelled;
    ++s.generation;  // the handle is dead from here on
    free_slots_.push_back(e.slot);
    if (cancelled) return;
    now_ = e.at;
    ++executed_;
    e.fn(e.ctx, e.arg);
  }

  // Reserves room for n simultaneously pending events (avoids growth in the loop).
  void reserve(std::size_t n) {
    heap_.reserve(n);
    slots_.reserve(n);
    free_slots_.reserve(n);
  }

 private:
  struct Event {
    Tick at;
    std::uint64_t seq;
    Callback fn;
    void* ctx;
    std::uint64_t arg;
    std::uint32_t slot;
  };
  struct Slot {
    std::uint32_t generation = 0;
    bool cancelled = false;
  };

  static bool before(const Event& a, const Event& b) { return a.at != b.at ? a.at < b.at : a.seq < b.seq; }
  void sift_up(std::size_t i) {
    Event e = heap_[i];
    while (i > 0) {
      std::size_t parent = (i - 1) / 2;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void sift_down(std::size_t i) {
    const std::size_t n = heap_.size();
    Event e = heap_[i];
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], e)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  Tick now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t executed_ = 0;
};

}  // namespace ptsim::sim
