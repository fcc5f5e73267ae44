// The event engine: timed callbacks ordered by (time, insertion sequence) so runs are
// bit-for-bit deterministic (ns-3's EventKey{ts, uid}). No globals: construct as many
// engines as you like (the plan search runs one per thread). The hot loop allocates
// nothing once the buckets and the slot pool have grown to their largest sizes.
//
// Queue: a radix heap on the integer time (Ahuja, Mehlhorn, Orlin, Tarjan, "Faster
// algorithms for the shortest path problem", JACM 1990): the clock never goes
// backwards, so every pending time is >= `last_` (the latest minimum taken out), and an
// entry lives in bucket b = the bit length of (time XOR last_) (0: equal to last_).
// Taking the minimum empties the lowest non-empty bucket into lower ones relative to
// its smallest time; an entry moves down at most 64 times over its life, through
// sequential vectors (no pointer chasing, no sift through a 16k-entry tree). Bucket 0
// holds the events of the current time in insertion order: entries moved there
// together are sorted by sequence, later ones arrive with larger sequences.
// Heap entries are 16 bytes — the time and one word holding the insertion sequence
// (high 40 bits) above the event's slot (low 24 bits) — and the callback, context and
// argument live out of line in the slot, read once when the event runs.
// Measured in bench/engine_bench (docs/performance-history.md): at 16,384 pending events the
// radix heap beats the binary heap it replaced (16-byte entries, Floyd's bottom-up
// pop), which had beaten a 48-byte in-line binary heap and a 4-ary heap.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "hw/errors.h"
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
  std::size_t pending() const { return size_; }

  // Schedules fn(ctx, arg) at absolute time `at` (>= now()).
  Handle schedule(Tick at, Callback fn, void* ctx, std::uint64_t arg = 0) {
    PTSIM_CHECK(at >= now_, "Engine: event at tick {} scheduled before the clock ({}): time never goes backwards", at,
                now_);
    const std::uint32_t slot = take_slot(free_slots_, slots_);
    PTSIM_CHECK(slot <= kSlotMask && next_seq_ < (std::uint64_t{1} << (64 - kSlotBits)),
                "Engine: more than 2^24 pending events or 2^40 events scheduled");
    Slot& s = slots_[slot];
    s.cancelled = false;
    s.fn = fn;
    s.ctx = ctx;
    s.arg = arg;
    push({at, (next_seq_++ << kSlotBits) | slot});
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
    while (size_ > 0) {
      refill();
      if (buckets_[0][head0_].at > until) break;
      step();
    }
    return now_;
  }

  // Executes the earliest event. Precondition: pending() > 0.
  void step() {
    refill();
    const Entry e = buckets_[0][head0_++];
    // Events of one time come in bursts (every group of a stage finishing together):
    // fetch the next one's slot while this one runs.
    if (head0_ < buckets_[0].size()) __builtin_prefetch(&slots_[buckets_[0][head0_].seq_slot & kSlotMask]);
    --size_;
    const auto slot = static_cast<std::uint32_t>(e.seq_slot & kSlotMask);
    Slot& s = slots_[slot];
    const bool cancelled = s.cancelled;
    ++s.generation;  // the handle is dead from here on
    free_slots_.push_back(slot);
    if (cancelled) return;
    now_ = e.at;
    ++executed_;
    const Callback fn = s.fn;  // the callback may reuse the slot (and grow slots_)
    void* const ctx = s.ctx;
    const std::uint64_t arg = s.arg;
    fn(ctx, arg);
  }

  // Reserves room for n simultaneously pending events (avoids growth in the loop).
  void reserve(std::size_t n) {
    slots_.reserve(n);
    free_slots_.reserve(n);
  }

 private:
  static constexpr int kSlotBits = 24;
  static constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << kSlotBits) - 1;
  struct Entry {
    Tick at;
    std::uint64_t seq_slot;  // insertion sequence << kSlotBits | slot: unique, so it orders ties
  };
  struct Slot {
    Callback fn = nullptr;
    void* ctx = nullptr;
    std::uint64_t arg = 0;
    std::uint32_t generation = 0;
    bool cancelled = false;
  };

  static constexpr int kBuckets = 64;  // times are >= 0, so (time XOR last_) < 2^63
  static int bucket_of(Tick at, Tick last) {
    const auto x = static_cast<std::uint64_t>(at ^ last);
    return x == 0 ? 0 : 64 - __builtin_clzll(x);
  }
  void push(const Entry& e) {
    if (e.at < last_) rebase(e.at);  // only after run(until) peeked past an early stop
    const int b = bucket_of(e.at, last_);
    buckets_[b].push_back(e);
    nonempty_ |= std::uint64_t{1} << b;
    ++size_;
  }
  // Makes bucket 0 hold the earliest entries (precondition: size_ > 0).
  void refill() {
    auto& b0 = buckets_[0];
    if (head0_ < b0.size()) return;
    b0.clear();
    head0_ = 0;
    nonempty_ &= ~std::uint64_t{1};
    const int i = __builtin_ctzll(nonempty_);
    auto& from = buckets_[i];
    Tick m = from.front().at;
    for (const Entry& e : from) m = e.at < m ? e.at : m;
    last_ = m;
    for (const Entry& e : from) {
      const int b = bucket_of(e.at, m);
      buckets_[b].push_back(e);
      nonempty_ |= std::uint64_t{1} << b;
    }
    from.clear();
    nonempty_ &= ~(std::uint64_t{1} << i);
    if (b0.size() > 1)
      std::sort(b0.begin(), b0.end(), [](const Entry& a, const Entry& b) { return a.seq_slot < b.seq_slot; });
  }
  // An entry earlier than last_ (allowed down to now_): every entry is filed again
  // relative to it. Bucket 0's unread entries keep their order (same time, sorted).
  void rebase(Tick at) {
    std::vector<Entry> all;
    all.reserve(size_);
    all.insert(all.end(), buckets_[0].begin() + static_cast<std::ptrdiff_t>(head0_), buckets_[0].end());
    for (int b = 1; b < kBuckets; ++b) all.insert(all.end(), buckets_[b].begin(), buckets_[b].end());
    for (auto& b : buckets_) b.clear();
    head0_ = 0;
    nonempty_ = 0;
    last_ = at;
    size_ = 0;
    for (const Entry& e : all) push(e);  // none equals `at`: bucket 0 stays empty here
  }

  std::array<std::vector<Entry>, kBuckets> buckets_;
  std::uint64_t nonempty_ = 0;  // bit b: buckets_[b] may hold entries (bucket 0: see head0_)
  std::size_t head0_ = 0;       // next unread entry of bucket 0
  std::size_t size_ = 0;        // pending entries, cancelled ones included
  Tick last_ = 0;               // every pending time is >= last_
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  Tick now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t executed_ = 0;
};

}  // namespace ptsim::sim
