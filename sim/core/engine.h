// The event engine: timed callbacks ordered by (time, insertion sequence) so runs are
// bit-for-bit deterministic (ns-3's EventKey{ts, uid}). No globals: construct as many
// engines as you like (the plan search runs one per thread). The hot loop allocates
// nothing once the buckets and the slot pool have grown to their largest sizes.
//
// Queue: a radix heap on the integer time (Ahuja, Mehlhorn, Orlin, Tarjan, "Faster
// algorithms for the shortest path problem", JACM 1990), here with base-16 digits
// rather than binary ones: the clock never goes backwards, so every
// pending time is >= `last_` (the latest minimum taken out), and an entry lives in the
// bucket of the highest hexadecimal digit in which its time differs from last_ and of
// its own digit there (bucket 0: equal to last_). Buckets in index order hold
// increasing times. Taking the minimum empties the lowest non-empty bucket into lower
// ones relative to its smallest time; an entry moves down at most 16 times over its
// life (64 with binary digits; the delays of a replay, ns to seconds, span ~8 hex
// digits), through sequential vectors (no pointer chasing, no sift through a 16k-entry
// tree). Bucket 0 holds the events of the current time in insertion order: entries
// moved there together are sorted by sequence, later ones arrive with larger sequences.
// Heap entries are 16 bytes — the time and one word holding the insertion sequence
// (high 40 bits) above the event's slot (low 24 bits) — and the callback, context and
// argument live out of line in the slot, read once when the event runs.
// Measured in bench/engine_bench (docs/performance-history.md): at 16,384 pending events the
// radix heap beats the binary heap it replaced (16-byte entries, Floyd's bottom-up
// pop), which had beaten a 48-byte in-line binary heap and a 4-ary heap. Stop 42: base-16
// digits beat binary ones by 10-30 % in interleaved runs (15 % fewer instructions and 24 %
// fewer L1 misses under cachegrind at 16,384 pending), base 8 and 32 by a few percent and
// base 64 (slower at 16,384 pending); the callback, context and argument in a 40-byte
// entry instead of the slot lost 15 % (more bytes per move).
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

  // Bucket 0: times equal to last_. Otherwise the highest base-16 digit in which the time
  // differs from last_ (level 0..15) and the time's digit there (1..15 possible values
  // above last_'s): bucket 1 + 16 * level + digit. Buckets in index order hold increasing
  // times, so the lowest non-empty one holds the minimum.
  static constexpr int kBuckets = 1 + 16 * 16;
  static int bucket_of(Tick at, Tick last) {
    const auto x = static_cast<std::uint64_t>(at ^ last);
    if (x == 0) return 0;
    const int level = (63 - __builtin_clzll(x)) >> 2;
    return 1 + (level << 4) + static_cast<int>((static_cast<std::uint64_t>(at) >> (level << 2)) & 15);
  }
  void mark(int b) { nonempty_[b >> 6] |= std::uint64_t{1} << (b & 63); }
  void unmark(int b) { nonempty_[b >> 6] &= ~(std::uint64_t{1} << (b & 63)); }
  int lowest_nonempty() const {
    for (int w = 0;; ++w)
      if (nonempty_[w]) return (w << 6) + __builtin_ctzll(nonempty_[w]);
  }
  void push(const Entry& e) {
    if (e.at < last_) rebase(e.at);  // only after run(until) peeked past an early stop
    const int b = bucket_of(e.at, last_);
    buckets_[b].push_back(e);
    mark(b);
    ++size_;
  }
  // Makes bucket 0 hold the earliest entries (precondition: size_ > 0).
  void refill() {
    auto& b0 = buckets_[0];
    if (head0_ < b0.size()) return;
    b0.clear();
    head0_ = 0;
    unmark(0);
    const int i = lowest_nonempty();
    auto& from = buckets_[i];
    Tick m = from.front().at;
    for (const Entry& e : from) m = e.at < m ? e.at : m;
    last_ = m;
    for (const Entry& e : from) {
      const int b = bucket_of(e.at, m);
      buckets_[b].push_back(e);
      mark(b);
    }
    from.clear();
    unmark(i);
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
    nonempty_ = {};
    last_ = at;
    size_ = 0;
    for (const Entry& e : all) push(e);  // none equals `at`: bucket 0 stays empty here
  }

  std::array<std::vector<Entry>, kBuckets> buckets_;
  // Bit b: buckets_[b] may hold entries (bucket 0: see head0_).
  std::array<std::uint64_t, (kBuckets + 63) / 64> nonempty_{};
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
