// Per-rank programs, generated on the fly: every rank of a pipeline stage runs the
// same instruction templates (one per model chunk and phase) in the order of the
// stage's schedule, so a 16k-GPU simulation stores one template set per stage,
// not one program per rank (DESIGN.md "Per-rank programs are generated").
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hw/net/collectives.h"
#include "hw/net/layout.h"
#include "hw/units.h"
#include "models/memory.h"
#include "sim/core/schedule.h"

namespace ptsim::sim {

// The simulator's vocabulary is hw::net's: the parallel dimensions and rank layout
// (hw/net/layout.h; waiting on `mp` is pipeline imbalance and counts as bubble) and
// the collectives (hw/net/collectives.h), each with its one name table (to_string).
using hw::net::CollectiveKind;
using hw::net::Coords;
using hw::net::Dim;
using hw::net::GroupShape;
using hw::net::kNumDims;
using hw::net::Layout;

// Async streams of a rank: one per dimension (index = Dim), plus a second DP
// channel for parameter all-gathers (ZeRO-3 layer gathers, overlapped ZeRO-1/2
// parameter gathers), whose waits count gathers only, and the same for the experts'
// data-parallel group (edp). Where the framework runs the data-parallel group's
// collectives on one stream (Program::dp_one_stream), the gathers execute in the DP
// (EDP) stream's queue, in issue order with the reductions.
inline constexpr int kGatherChannel = kNumDims;
inline constexpr int kExpertGatherChannel = kNumDims + 1;
inline constexpr int kNumChannels = kNumDims + 2;

enum class InstrKind : std::uint8_t {
  compute,     // occupies the compute stream for `duration`
  collective,  // a collective of `dim`'s group on the compute stream (blocking)
  recv,        // wait for the pipeline input/gradient of the current step
  send,        // send the pipeline output/gradient of the current step (async)
  launch,      // enqueue a collective of `dim`'s group on the rank's async stream `channel`
  wait,        // block until stream `channel` has at most `count` ops outstanding
               // (kAbsoluteWait: until it has completed `count` ops this iteration)
  alloc,       // memory: `bytes` of `mem` category
  release,     // memory: free
};

enum class MemCat : std::uint8_t { activations, buffers, params, grads, optimizer };

enum InstrFlags : std::uint8_t {
  kNoFlags = 0,
  kLastMicrobatch = 1,   // only on the last micro-batch of the chunk (DP bucket launch)
  kFirstMicrobatch = 2,  // only on the first micro-batch of the chunk (ZeRO param waits)
  kRecompute = 4,        // recomputed work (hardware FLOPs only)
  kAbsoluteWait = 8,     // wait: `count` is a number of completed ops, not outstanding ones
  // collective: the next instruction, a compute, runs beside it from the rank's arrival
  // (its NCCL kernel on another stream, holding SMs: the compute's duration_under_comm for
  // as long as the collective runs); the rank goes on when both have ended. Megatron's
  // column-parallel backward (ProgramBuilder::column_parallel_backward): a blocking
  // collective to lockstep sessions, so a tensor-parallel group still replays as one.
  kBesideNext = 16,
  // every micro-batch of the chunk but its first (gradient accumulation into a .grad the
  // first micro-batch's backward created: ProgramBuilder::accumulate_grads)
  kAfterFirstMicrobatch = 32,
  // Megatron's deferred output-layer weight gradient (Program::deferred_microbatches): only
  // on the chunk's micro-batches from the deferred count on / only on those before it.
  kUndeferred = 64,
  kDeferredOnly = 128,
};
inline constexpr std::uint8_t kMicrobatchFlags =
    kLastMicrobatch | kFirstMicrobatch | kAfterFirstMicrobatch | kUndeferred | kDeferredOnly;
// Whether an instruction with `flags` runs on `microbatch` of `chunk` (m micro-batches):
// kLastMicrobatch / kFirstMicrobatch / kAfterFirstMicrobatch work only on its own ones;
// kUndeferred / kDeferredOnly split them at the chunk's `deferred`-th.
inline bool runs_on_microbatch(std::uint8_t flags, models::Schedule kind, int chunk, int microbatch, int m,
                               int deferred = 0) {
  const int first = first_microbatch(kind, chunk, m);
  if ((flags & kLastMicrobatch) && microbatch != last_microbatch(kind, chunk, m)) return false;
  if ((flags & kFirstMicrobatch) && microbatch != first) return false;
  if ((flags & kUndeferred) && microbatch - first < deferred) return false;
  if ((flags & kDeferredOnly) && microbatch - first >= deferred) return false;
  return !((flags & kAfterFirstMicrobatch) && microbatch == first);
}

struct Instr {
  InstrKind kind = InstrKind::compute;
  Dim dim = Dim::tp;
  CollectiveKind coll = CollectiveKind::all_reduce;
  MemCat mem = MemCat::activations;
  std::uint8_t flags = kNoFlags;
  std::uint8_t channel = 0;  // launch / wait: async stream index (< kNumChannels)
  std::uint16_t label = 0;   // index into Program::labels (trace names)
  std::int32_t layer = -1;   // the transformer layer it belongs to, -1 for none (trace args)
  std::int32_t count = 0;    // wait: ops to have completed
  Tick duration = 0;         // compute; a DP / EP launch: its isolated time (expect_collective_times)
  Bytes bytes = 0;           // collective buffer size S, p2p message, or memory
  // compute: its duration while a DP collective's or EP all-to-all's NCCL kernel holds SMs
  // (hw::KernelDesc::reserved_sms), >= duration; the replay takes it for the part that
  // overlaps one. Kept in `bytes`, which a compute instruction has no other use for, so
  // that an Instr stays 32 bytes (the replay's instruction stream is its hottest data;
  // ticks are exact in a double up to 2^53).
  Tick duration_under_comm() const { return static_cast<Tick>(bytes); }
  void set_duration_under_comm(Tick t) { bytes = static_cast<Bytes>(t); }
};

struct ChunkProgram {
  std::vector<Instr> forward;
  std::vector<Instr> backward;  // the input-gradient half (B) when the schedule splits it
  std::vector<Instr> weight;    // the weight-gradient half (W); empty otherwise
  // DualPipe's overlapped F&B pair (DeepSeek-V3 §3.2.1, Fig. 4) of a MoE model with
  // expert parallelism: the forward and the input-gradient backward with their EP
  // all-to-alls launched on the async EP stream, so each chunk's dispatch and combine
  // run under the other chunk's compute; the backward of the pair waits for all of
  // them at its end. Empty when the schedule has no pairs or there is no EP traffic.
  std::vector<Instr> forward_overlap, backward_overlap;
  const std::vector<Instr>& of(Phase p) const {
    return p == Phase::forward ? forward : p == Phase::backward ? backward : weight;
  }
  // The list a step runs: `in_pair` for both steps of an F&B pair.
  const std::vector<Instr>& of(Phase p, bool in_pair) const {
    if (in_pair && p == Phase::forward && !forward_overlap.empty()) return forward_overlap;
    if (in_pair && p == Phase::backward && !backward_overlap.empty()) return backward_overlap;
    return of(p);
  }
};

struct StageProgram {
  int stage = 0;
  std::vector<ScheduleStep> steps;
  std::vector<ChunkProgram> chunks;  // v chunks
  std::vector<Instr> prologue;       // before the first step (static memory, ZeRO param gather)
  std::vector<Instr> epilogue;       // after the last step (grad sync, optimizer)
  models::ModelStates states;        // static model-state bytes of this stage
  Bytes buffers = 0;
};

struct Program {
  models::Schedule schedule = models::Schedule::one_f_one_b;  // placement of the chunks, p2p peers
  std::vector<StageProgram> stages;
  std::vector<std::string> labels;
  // FrameworkProfile::dp_one_stream: gathers queue with the gradient reductions.
  bool dp_one_stream = false;
  // Micro-batches whose output-layer weight gradient waits for the flush (kUndeferred).
  int deferred_microbatches = 0;
  // The index of `name` in labels, appended the first time it is seen.
  std::uint16_t label(std::string_view name);

 private:
  // labels by name (label() runs once per instruction built: the plan search's bound builds
  // a program per candidate, and comparing every stored name was 7 % of its profile).
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::uint16_t, NameHash, std::equal_to<>> label_index_;
};

}  // namespace ptsim::sim
