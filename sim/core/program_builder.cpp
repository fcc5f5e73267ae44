#include "sim/core/program_builder.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <string_view>

#include "hw/net/nccl_tuning.h"
#include "models/memory.h"
#include "models/ops.h"
#include "models/params.h"
#include "models/zero3_gathers.h"

namespace ptsim::sim {

std::uint16_t Program::label(std::string_view name) {
  if (const auto it = label_index_.find(name); it != label_index_.end()) return it->second;
  const auto i = static_cast<std::uint16_t>(labels.size());
  labels.emplace_back(name);
  label_index_.emplace(labels.back(), i);
  return i;
}

namespace {

using models::dp_bucket_params;
using models::Op;
using models::OpClass;
using models::OpRole;

std::string gemm_dtype(models::Precision p) {
  switch (p) {
    case models::Precision::fp32:
      return "fp32";
    case models::Precision::fp16:
      return "fp16";
    case models::Precision::bf16:
      return "bf16";
    case models::Precision::fp8:
      return "fp8";
  }
  return "bf16";
}

// An op's duration alone and while a collective's NCCL kernel holds SMs (Instr::
// duration_under_comm).
struct OpTicks {
  Tick plain = 0, under_comm = 0;
  OpTicks& operator+=(const OpTicks& o) {
    plain += o.plain, under_comm += o.under_comm;
    return *this;
  }
};

class Builder {
 public:
  Builder(const Scenario& s, const hw::ComputeCostModel& compute, BuildOptions opt)
      : s_(s), par_(s.plan.par), fw_(s.framework), compute_(&compute), default_compute_(&compute), opt_(opt) {
    const auto& m = s.model;
    // Activations on the wire and in memory: 4 bytes in fp32, else 2 (fp8 training
    // keeps activations in bf16, as Transformer Engine does).
    act_bytes_ = models::activation_element_bytes(par_.precision);
    tokens_ = static_cast<double>(par_.micro_batch_size) * static_cast<double>(m.seq_length) / par_.cp;
    hidden_msg_ = tokens_ * static_cast<double>(m.hidden_size) * act_bytes_;
    deferred_head_wgrad_ = static_cast<Bytes>(models::deferred_head_wgrad_bytes(m, par_));
    dense_layer_local_ =
        static_cast<double>(models::layer_params_per_gpu(m, par_.tp, par_.ep, false, par_.etp).total());
    if (m.moe) {
      const models::LocalParams moe = models::layer_params_per_gpu(m, par_.tp, par_.ep, true, par_.etp);
      moe_layer_local_ = static_cast<double>(moe.total());
      moe_layer_expert_local_ = static_cast<double>(moe.expert);
    }
    // Gradients travel in the dtype the framework reduces in (framework_profile.h);
    // what they occupy in memory is models::model_states.
    grad_elem_bytes_ = grad_reduce_element_bytes(fw_, par_.precision);
  }

  Program build() {
    const int p = par_.pp, v = par_.vpp;
    prog_.schedule = par_.schedule;
    prog_.dp_one_stream = fw_.dp_one_stream;
    // Megatron's deferred output-layer weight gradients: of the step's first micro-batches
    // (all of them without a limit), drained after the schedule.
    if (par_.defer_head_wgrad)
      prog_.deferred_microbatches = par_.wgrad_deferral_limit > 0
                                        ? std::min(par_.wgrad_deferral_limit, par_.num_microbatches)
                                        : par_.num_microbatches;
    for (int stage = 0; stage < p; ++stage) {
      // A mixed cluster costs each stage on its own GPU (sim/core/mixed_cluster.h).
      const auto& own = opt_.stage_compute;
      compute_ = static_cast<std::size_t>(stage) < own.size() && own[static_cast<std::size_t>(stage)]
                     ? own[static_cast<std::size_t>(stage)]
                     : default_compute_;
      StageProgram sp;
      sp.stage = stage;
      sp.states = models::model_states(s_.model, par_, stage);
      sp.buffers = models::buffer_bytes(s_.model, par_, stage);
      pending_bucket_ = pending_expert_bucket_ = 0;
      // Chunks are built in the order their last backward runs (v−1 down to 0) so
      // gradient buckets fill in the order the gradients are produced.
      sp.chunks.resize(static_cast<std::size_t>(v));
      for (int c = v - 1; c >= 0; --c) sp.chunks[static_cast<std::size_t>(c)] = build_chunk(stage, c);
      build_prologue(sp);
      build_epilogue(sp);
      prog_.stages.push_back(std::move(sp));
    }
    compute_ = default_compute_;
    if (!opt_.schedule_steps) return std::move(prog_);
    auto steps = build_schedules(par_.schedule, p, par_.num_microbatches, v, {}, pass_times(), par_.microbatch_group);
    for (int stage = 0; stage < p; ++stage)
      prog_.stages[static_cast<std::size_t>(stage)].steps = std::move(steps[static_cast<std::size_t>(stage)]);
    return std::move(prog_);
  }

  // One pass (forward, recompute, backward) of each kind of block, in seconds.
  BlockSeconds block_seconds() const {
    const auto& m = s_.model;
    auto layer = [&](bool moe) {
      Tick t = 0;
      for (const Op& op : models::layer_ops(m, par_, moe)) {
        t += time_of(op, false).plain + time_of(op, true).plain;
        const bool again = par_.recompute == models::Recompute::full ||
                           (par_.recompute == models::Recompute::selective && op.recomputed_selective);
        if (again) t += time_of(op, false).plain;
      }
      return to_seconds(t);
    };
    auto pass = [&](const std::vector<Op>& ops) {
      Tick t = 0;
      for (const Op& op : ops) t += time_of(op, false).plain + time_of(op, true).plain;
      return to_seconds(t);
    };
    BlockSeconds b;
    b.dense_layer = layer(false);
    b.moe_layer = m.moe ? layer(true) : b.dense_layer;
    b.embedding = pass(models::embedding_ops(m, par_));
    b.head = pass(models::head_ops(m, par_));
    return b;
  }

  // The compute time of each (stage, chunk)'s forward, backward (B) and W: what
  // ZB-V places its passes for (schedule.h); empty when one is 0 (equal times).
  std::vector<PassTimes> pass_times() const {
    auto busy = [](const std::vector<Instr>& list) {
      double t = 0;
      for (const Instr& in : list)
        if (in.kind == InstrKind::compute) t += static_cast<double>(in.duration);
      return t;
    };
    std::vector<PassTimes> out;
    for (const auto& sp : prog_.stages)
      for (const auto& c : sp.chunks) {
        const PassTimes t{busy(c.forward), busy(c.backward), busy(c.weight)};
        if (t.forward <= 0 || t.backward <= 0 || t.weight <= 0) return {};
        out.push_back(t);
      }
    return out;
  }

 private:
  // What the forward and backward of one model chunk share.
  struct ChunkBlocks {
    std::vector<Op> dense_ops, moe_ops;  // one layer's ops
    Bytes activations = 0;               // held from the forward to the backward
    Bytes head = 0;                      // of which the head's, freed once its backward ran
    // The chunk's parameter blocks in forward order: the embedding (kEmbedding) on
    // the first chunk, its transformer layers, the head (kHead) on the last.
    std::vector<int> order;
    // Each op's forward and backward time, the same in every layer of the chunk (costed
    // once per chunk: per op and layer it was a fifth of a plan search).
    std::vector<OpTicks> dense_fwd, dense_bwd, moe_fwd, moe_bwd;
    const std::vector<Op>& ops(const models::ModelSpec& m, int layer) const {
      return m.is_moe_layer(layer) ? moe_ops : dense_ops;
    }
    const std::vector<OpTicks>& fwd(const models::ModelSpec& m, int layer) const {
      return m.is_moe_layer(layer) ? moe_fwd : dense_fwd;
    }
    const std::vector<OpTicks>& bwd(const models::ModelSpec& m, int layer) const {
      return m.is_moe_layer(layer) ? moe_bwd : dense_bwd;
    }
  };

  struct GatherUnit {
    int block = 0;
    int op = -1;  // index in the layer's op list; -1 = the whole block
    Bytes bytes = 0;
    Dim dim = Dim::dp;  // the group it is sharded over: the experts' (edp) when apart
  };
  struct Fetch {
    std::vector<GatherUnit> units;  // in order of first use
    std::vector<bool> freed;        // released right after its use (submodule units)
    std::size_t launched = 0, next_use = 0;
    bool prefetch = false;
  };

  // The backward's two halves under a zero-bubble / DualPipe schedule: B (input
  // gradient: a GEMM's dgrad, the attention core's and every other op's
  // backward) and W (the GEMMs' weight gradients, Qi et al. ICLR 2024 §2).
  bool split() const { return models::splits_backward(par_.schedule); }
  OpTicks backward_time(const Op& op) const { return split() ? gemm_half(op, false) : time_of(op, true); }
  // A frozen weight (LoRA / QLoRA base) has no weight gradient: its backward is the
  // input-gradient GEMM alone (models/ops.cpp freeze).
  OpTicks gemm_half(const Op& op, bool wgrad) const {
    if ((op.cls != OpClass::gemm && op.cls != OpClass::router) || op.frozen)
      return wgrad ? OpTicks{} : time_of(op, true);
    hw::KernelDesc k;
    k.dtype = gemm_dtype(par_.precision);
    k.backward = true;
    k.cls = hw::KernelClass::gemm;
    k.count = op.gemm.count;
    if (wgrad)
      k.m = op.gemm.k, k.n = op.gemm.n, k.k = op.gemm.m;
    else
      k.m = op.gemm.m, k.n = op.gemm.k, k.k = op.gemm.n;
    k.flops = op.bwd_flops / 2;
    k.bytes = op.bwd_bytes / 2;
    return ticks_of({k});
  }

  // An op's kernels alone, and while a collective's NCCL kernel holds comm_sms() SMs
  // (the replay takes the second for the part of the op that overlaps an async
  // collective of the rank): seconds summed over the kernels, then rounded.
  OpTicks ticks_of(std::initializer_list<hw::KernelDesc> ks) const {
    Seconds plain = 0, under = 0;
    const int reserved = comm_sms();
    const BytesPerSecond hbm = reserved > 0 ? comm_hbm() : 0;
    for (hw::KernelDesc k : ks) {
      const Seconds t = compute_->seconds(k);
      plain += t;
      if (reserved == 0) {
        under += t;
        continue;
      }
      if (k.cls != hw::KernelClass::memory) k.reserved_sms = reserved;  // memory-bound kernels need few SMs
      k.hbm_taken = hbm;
      under += compute_->seconds(k);
    }
    return {to_ticks(plain), std::max(to_ticks(plain), to_ticks(under))};
  }
  // SMs a data-parallel collective's NCCL kernel holds: one CTA per channel
  // (hw::net::nccl_channels). DualPipe's overlapped expert-parallel all-to-all is grouped
  // send/recv to every peer, spread over NCCL's p2p channels, pow2Up of those channels
  // (src/graph/paths.cc ncclTopoComputeP2pChannels): the same count when 2 × NICs is a
  // power of two, as on a DGX (16). The tensor-parallel collectives of Megatron's
  // column-parallel backward (async_tp) are taken to hold as many: an approximation, NCCL
  // sets the channels inside an NVSwitch node by its own topology search. 0 when none
  // runs under compute. Other tensor-parallel and pipeline transfers block the compute
  // stream; the context-parallel ring's send/recv with two peers takes 2 × NCCL's
  // channels per peer, a few CTAs, not modelled here.
  int comm_sms() const {
    if (group_size(Dim::dp) <= 1 && !(experts_apart() && group_size(Dim::edp) > 1) && !ep_overlap() && !async_tp() &&
        !ub_overlap())
      return 0;
    return std::min(compute_->gpu().sm_count - 1, hw::net::nccl_channels(s_.cluster.nics_per_node));
  }

  // Megatron's column-parallel backward runs tensor-parallel collectives under its GEMMs.
  bool async_tp() const {
    return fw_.async_tp_backward && par_.tp > 1 && !split() && (par_.sequence_parallel || fw_.async_tp_allreduce);
  }
  // Transformer Engine's userbuffer overlap (Megatron's --tp-comm-overlap, FrameworkProfile::
  // tp_comm_overlap) of the sequence-parallel collectives at a dense layer's TE linears.
  bool ub_overlap() const { return fw_.tp_comm_overlap && par_.tp > 1 && par_.sequence_parallel; }
  // TE's "pipeline" GEMM + reduce-scatter runs in num_splits = 4 chunks (module/base.py
  // initialize_ub): each chunk's reduce-scatter under the next chunk's GEMM, the last one's after.
  static constexpr double kUbPipelineSplits = 4;
  // A ring exchange moves the chunks with copy engines (use_ce): the GEMM beside it keeps its SMs.
  static OpTicks on_copy_engines(OpTicks t) { return {t.plain, t.plain}; }
  // ops[j] is the row-parallel GEMM whose output leaves the tensor-parallel region next (proj,
  // FC2 of a dense layer; a MoE layer's experts are not TE's userbuffer linears) and the
  // userbuffers overlap its collective: in forward always, in backward unless the schedule
  // splits the backward (then the collective blocks, as without them).
  bool ub_row_parallel(const std::vector<Op>& ops, std::size_t j, bool backward) const {
    return ub_overlap() && !(backward && split()) && j + 1 < ops.size() && ops[j].cls == OpClass::gemm &&
           !ops[j].shared_expert && !ops[j].routed_expert &&
           (ops[j + 1].role == OpRole::attn_leave || ops[j + 1].role == OpRole::mlp_leave);
  }
  // The block whose tensor-parallel region ops[j + 1] leaves.
  static const char* leaving_block(const std::vector<Op>& ops, std::size_t j) {
    return ops[j + 1].role == OpRole::attn_leave ? "attn" : "mlp";
  }
  // DualPipe runs its expert-parallel all-to-alls under the paired chunk's compute.
  bool ep_overlap() const { return par_.schedule == models::Schedule::dualpipe && par_.ep > 1; }

  // HBM bandwidth the collective of comm_sms() takes: twice the rate each GPU's ring
  // step runs at (NVIDIA/nccl#1428: NCCL stores what it receives and reads it back to send
  // it on), the NVLink rate when the data-parallel group stays in a node, else each GPU's
  // share of the node's NICs.
  BytesPerSecond comm_hbm() const {
    const auto& c = s_.cluster;
    // An EP group spans ep members at the experts' tensor-parallel stride (hw/net/layout.h).
    const bool in_node = par_.tp * group_size(Dim::dp) <= c.gpus_per_node &&
                         !(ep_overlap() && par_.expert_tp() * par_.ep > c.gpus_per_node);
    return 2.0 * (in_node ? c.intra_bandwidth : c.nic_bandwidth * c.nics_per_node / c.gpus_per_node);
  }

  OpTicks time_of(const Op& op, bool backward) const {
    hw::KernelDesc k;
    k.dtype = gemm_dtype(par_.precision);
    k.backward = backward;
    switch (op.cls) {
      case OpClass::gemm:
      case OpClass::router: {
        k.cls = hw::KernelClass::gemm;
        k.m = op.gemm.m, k.n = op.gemm.n, k.k = op.gemm.k, k.count = op.gemm.count;
        if (!backward) {
          k.flops = op.fwd_flops, k.bytes = op.fwd_bytes;
          return ticks_of({k});
        }
        if (op.frozen) {
          // Frozen weight (LoRA base): the input gradient only, no wgrad GEMM.
          hw::KernelDesc dgrad = k;
          dgrad.m = op.gemm.m, dgrad.n = op.gemm.k, dgrad.k = op.gemm.n;
          dgrad.flops = op.bwd_flops, dgrad.bytes = op.bwd_bytes;
          return ticks_of({dgrad});
        }
        // Backward = dgrad (m×k = m×n · n×k) + wgrad (k×n = k×m · m×n), half each.
        hw::KernelDesc dgrad = k, wgrad = k;
        dgrad.m = op.gemm.m, dgrad.n = op.gemm.k, dgrad.k = op.gemm.n;
        wgrad.m = op.gemm.k, wgrad.n = op.gemm.n, wgrad.k = op.gemm.m;
        dgrad.flops = wgrad.flops = op.bwd_flops / 2;
        dgrad.bytes = wgrad.bytes = op.bwd_bytes / 2;
        return ticks_of({dgrad, wgrad});
      }
      case OpClass::attention:
        k.cls = hw::KernelClass::attention;
        if (par_.precision == models::Precision::fp8) k.dtype = "bf16";  // attention stays in bf16 under TE fp8
        k.batch_heads = op.attn.batch_heads, k.seq_q = op.attn.seq_q, k.seq_kv = op.attn.seq_kv;
        k.head_dim = op.attn.head_dim, k.causal = op.attn.causal;
        k.flops = backward ? op.bwd_flops : op.fwd_flops;
        k.bytes = backward ? op.bwd_bytes : op.fwd_bytes;
        return ticks_of({k});
      default:
        k.cls = hw::KernelClass::memory;
        k.flops = backward ? op.bwd_flops : op.fwd_flops;
        k.bytes = backward ? op.bwd_bytes : op.fwd_bytes;
        return ticks_of({k});
    }
  }

  // Host work and memory-bound kernels: as long under a collective as alone.
  // A memory-bound kernel moving `bytes` through HBM (the cost table's rate when calibrated).
  Tick memory_ticks(Bytes bytes) const {
    hw::KernelDesc k;
    k.cls = hw::KernelClass::memory;
    k.bytes = bytes;
    return to_ticks(compute_->seconds(k));
  }
  void push_compute(std::vector<Instr>& out, std::string_view name, Tick dur, std::uint8_t flags = kNoFlags) {
    push_compute(out, name, OpTicks{dur, dur}, flags);
  }
  void push_compute(std::vector<Instr>& out, std::string_view name, OpTicks t, std::uint8_t flags = kNoFlags) {
    if (t.plain <= 0) return;
    // A compute beside a collective (kBesideNext) stays one instruction: nothing fuses into it.
    const bool beside = out.size() >= 2 && (out[out.size() - 2].flags & kBesideNext) != 0;
    if (opt_.fuse_compute && !out.empty() && out.back().kind == InstrKind::compute && out.back().flags == flags &&
        !beside) {
      out.back().duration += t.plain;
      out.back().set_duration_under_comm(out.back().duration_under_comm() + t.under_comm);
      out.back().layer = -1;  // may span layers; tag_layer re-tags it when it stays within one
      return;
    }
    Instr in;
    in.kind = InstrKind::compute;
    in.duration = t.plain;
    in.set_duration_under_comm(t.under_comm);
    in.flags = flags;
    in.label = opt_.fuse_compute ? compute_label() : label_of(name);
    out.push_back(in);
  }

  void push_coll(std::vector<Instr>& out, Dim d, CollectiveKind c, Bytes bytes, std::string_view name,
                 std::uint8_t flags = kNoFlags) {
    if (group_size(d) <= 1 || bytes <= 0) return;
    Instr in;
    in.kind = InstrKind::collective;
    in.dim = d;
    in.coll = c;
    in.bytes = bytes;
    in.flags = flags;
    in.label = label_of(name);
    out.push_back(in);
  }

  void launch(std::vector<Instr>& out, Dim d, int channel, CollectiveKind c, Bytes bytes, std::string_view name,
              std::uint8_t flags = kNoFlags) {
    if (group_size(d) <= 1 || bytes <= 0) return;
    Instr in;
    in.kind = InstrKind::launch;
    in.dim = d;
    in.channel = static_cast<std::uint8_t>(channel);
    in.coll = c;
    in.bytes = bytes;
    in.flags = flags;
    in.label = label_of(name);
    out.push_back(in);
  }

  // Blocks the compute stream until `channel` has at most `outstanding` ops in
  // flight (or, with kAbsoluteWait, has completed `outstanding` ops).
  void wait(std::vector<Instr>& out, Dim d, int channel, int outstanding, std::uint8_t flags = kNoFlags) {
    if (group_size(d) <= 1) return;
    Instr in;
    in.kind = InstrKind::wait;
    in.dim = d;
    in.channel = static_cast<std::uint8_t>(channel);
    in.count = outstanding;
    in.flags = flags;
    int& label = wait_label_[static_cast<std::size_t>(d)];
    if (label < 0) label = label_of(joined({"wait ", to_string(d)}));
    in.label = static_cast<std::uint16_t>(label);
    out.push_back(in);
  }

  int group_size(Dim d) const {
    switch (d) {
      case Dim::tp:
        return par_.tp;
      case Dim::cp:
        return par_.cp;
      case Dim::dp:
        return par_.dp * par_.cp;
      case Dim::ep:
        return par_.ep;
      case Dim::etp:
        return par_.expert_tp();
      case Dim::edp:
        return par_.expert_dp();
      case Dim::pp:
        return par_.pp;
      case Dim::mp:
        return par_.tp * par_.cp * par_.pp;
    }
    return 1;
  }

  // TP communication at a block boundary. `enter`: where activations enter the
  // tensor-parallel region (before QKV / MLP-up); otherwise where they leave it
  // (after the projection / down-projection).
  void tp_boundary(std::vector<Instr>& out, bool enter, bool backward, const char* block, std::uint8_t flags) {
    const bool sp = par_.sequence_parallel;
    CollectiveKind c;
    if (!backward) {
      if (enter && !sp) return;  // identity in forward
      c = enter ? CollectiveKind::all_gather : (sp ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce);
    } else {
      if (!enter && !sp) return;  // identity in backward
      c = enter ? (sp ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce) : CollectiveKind::all_gather;
    }
    push_coll(out, Dim::tp, c, hidden_msg_, joined({"tp ", to_string(c), " ", block}), flags);
  }

  // Forward instructions of one layer's ops (also used for full recomputation).
  // `fetch`: the ZeRO-3 gathers of the pass, for submodule gather units (`block`
  // is the layer; `bwd_pass`: a recomputation inside the backward).
  void layer_forward(std::vector<Instr>& out, const std::vector<Op>& ops, const std::vector<OpTicks>& fwd,
                     std::uint8_t flags, Fetch* fetch = nullptr, int block = 0, bool bwd_pass = false) {
    const SharedBeside shared = shared_beside(ops, fwd);
    for (std::size_t j = 0; j < ops.size(); ++j) {
      const Op& op = ops[j];
      if (shared.on && op.shared_expert) continue;  // beside the all-to-alls below
      if (fetch) fetch_use(out, *fetch, block, static_cast<int>(j), bwd_pass);
      const bool ub_enter =
          ub_overlap() && op.cls == OpClass::gemm && (op.role == OpRole::attn_enter || op.role == OpRole::mlp_enter);
      if (ub_enter) {
        // Ring exchange: the input shards travel around the group while the GEMM runs on the
        // ones at hand (TE's qkv_fprop / fc1_fprop).
        push_coll(out, Dim::tp, CollectiveKind::all_gather, hidden_msg_,
                  joined({"tp all-gather ", op.role == OpRole::attn_enter ? "attn" : "mlp", " (userbuffers)"}),
                  static_cast<std::uint8_t>(flags | kBesideNext));
        push_compute(out, op.name, on_copy_engines(fwd[j]), flags);
        if (fetch) fetch_done(out, *fetch, block, static_cast<int>(j), bwd_pass);
        continue;
      }
      if (ub_row_parallel(ops, j, false)) {
        // Pipelined GEMM + reduce-scatter (TE's proj_fprop / fc2_fprop): all but the last
        // split's reduce-scatter under the GEMM, the last one after it.
        const char* blk = leaving_block(ops, j);
        push_coll(out, Dim::tp, CollectiveKind::reduce_scatter, hidden_msg_ * (1 - 1 / kUbPipelineSplits),
                  joined({"tp reduce-scatter ", blk, " (userbuffers)"}),
                  static_cast<std::uint8_t>(flags | kBesideNext));
        push_compute(out, op.name, fwd[j], flags);
        push_coll(out, Dim::tp, CollectiveKind::reduce_scatter, hidden_msg_ / kUbPipelineSplits,
                  joined({"tp reduce-scatter ", blk, " (userbuffers, last split)"}), flags);
        if (fetch) fetch_done(out, *fetch, block, static_cast<int>(j), bwd_pass);
        continue;
      }
      if (op.role == OpRole::attn_enter) tp_boundary(out, true, false, "attn", flags);
      if (op.role == OpRole::mlp_enter) tp_boundary(out, true, false, "mlp", flags);
      const bool after_ub = j > 0 && ub_row_parallel(ops, j - 1, false);
      if (op.role == OpRole::attn_leave && !after_ub) tp_boundary(out, false, false, "attn", flags);
      if (op.role == OpRole::mlp_leave && !after_ub) tp_boundary(out, false, false, "mlp", flags);
      if (op.role == OpRole::moe_combine) ep_exchange(out, true, false, flags, shared.second);
      if (op.cls == OpClass::attention) cp_launch(out, false, flags);
      push_op(out, op, op.name, fwd[j], false, flags);
      if (fetch) fetch_done(out, *fetch, block, static_cast<int>(j), bwd_pass);
      if (op.cls == OpClass::attention) cp_after(out, false, flags);
      if (op.role == OpRole::moe_dispatch) ep_exchange(out, false, false, flags, shared.first);
    }
  }

  // Megatron's --moe-shared-expert-overlap (FrameworkProfile::moe_shared_expert_overlap): the
  // shared experts' ops of a pass, as the two computes that run beside the dispatch's and the
  // combine's all-to-alls: the first GEMM and the activation, then the second GEMM (in the
  // pass's own order: backward, `t` the backward times, the combine's comes first).
  struct SharedBeside {
    bool on = false;
    OpTicks first, second;  // beside the dispatch's all-to-all, beside the combine's
  };
  SharedBeside shared_beside(const std::vector<Op>& ops, const std::vector<OpTicks>& t) const {
    SharedBeside s;
    s.on = fw_.moe_shared_expert_overlap && par_.ep > 1 && !par_.moe_allgather && !overlap_ep_;
    if (!s.on) return s;
    s.on = false;
    std::size_t second = ops.size();  // the shared MLP's last GEMM
    for (std::size_t j = 0; j < ops.size(); ++j)
      if (ops[j].shared_expert && ops[j].cls == OpClass::gemm) second = j;
    for (std::size_t j = 0; j < ops.size(); ++j)
      if (ops[j].shared_expert) {
        s.on = true;
        (j == second ? s.second : s.first) += t[j];
      }
    return s;
  }

  void layer_backward(std::vector<Instr>& out, const std::vector<Op>& ops, const std::vector<OpTicks>& fwd,
                      const std::vector<OpTicks>& bwd, Fetch& fetch, int block) {
    const SharedBeside shared = shared_beside(ops, bwd);
    for (std::size_t j = ops.size(); j-- > 0;) {
      const Op& op = ops[j];
      if (shared.on && op.shared_expert) continue;  // beside the all-to-alls below
      fetch_use(out, fetch, block, static_cast<int>(j), true);
      if (op.role == OpRole::moe_dispatch) ep_exchange(out, false, true, kNoFlags, shared.first);
      if (op.recomputed_selective && par_.recompute == models::Recompute::selective) {
        cp_launch(out, false, kRecompute);
        push_op(out, op, joined({op.name, " (recompute)"}), fwd[j], false, kRecompute);
        cp_after(out, false, kRecompute);
      }
      if (op.cls == OpClass::attention) cp_launch(out, true, kNoFlags);
      if (ub_row_parallel(ops, j, true)) {
        // The output gradient's all-gather by ring exchange beside the input-gradient GEMM
        // (TE's proj_dgrad / fc2_dgrad); the weight-gradient GEMM, which needs all of it, after.
        push_coll(out, Dim::tp, CollectiveKind::all_gather, hidden_msg_,
                  joined({"tp all-gather ", leaving_block(ops, j), " (bwd, userbuffers)"}), kBesideNext);
        push_compute(out, joined({op.name, " dgrad"}), on_copy_engines(gemm_half(op, false)));
        push_compute(out, joined({op.name, " wgrad"}), gemm_half(op, true));
        fetch_done(out, fetch, block, static_cast<int>(j), false);
        continue;
      }
      const bool enter = op.role == OpRole::attn_enter || op.role == OpRole::mlp_enter;
      if (enter && async_tp_backward(op)) {
        column_parallel_backward(out, op, op.role == OpRole::attn_enter ? "attn" : "mlp");
        fetch_done(out, fetch, block, static_cast<int>(j), false);
        continue;
      }
      push_op(out, op, op.name, bwd[j], true, kNoFlags);
      fetch_done(out, fetch, block, static_cast<int>(j), false);
      if (op.cls == OpClass::attention) cp_after(out, true, kNoFlags);
      if (op.role == OpRole::moe_combine) ep_exchange(out, true, true, kNoFlags, shared.second);
      const bool before_ub = j > 0 && ub_row_parallel(ops, j - 1, true);
      if (op.role == OpRole::attn_leave && !before_ub) tp_boundary(out, false, true, "attn", kNoFlags);
      if (op.role == OpRole::mlp_leave && !before_ub) tp_boundary(out, false, true, "mlp", kNoFlags);
      if (op.role == OpRole::attn_enter) tp_boundary(out, true, true, "attn", kNoFlags);
      if (op.role == OpRole::mlp_enter) tp_boundary(out, true, true, "mlp", kNoFlags);
    }
  }

  // Whether the backward of `op`, a column-parallel linear where activations enter a
  // tensor-parallel region, overlaps its communication with its GEMMs as Megatron does
  // (FrameworkProfile::async_tp_backward). Not for a frozen weight (no weight-gradient
  // GEMM to hide under; Megatron's LinearWithFrozenWeight all-reduces blocking), a MoE
  // router, or a schedule that splits the backward into B and W.
  bool async_tp_backward(const Op& op) const { return async_tp() && op.cls == OpClass::gemm && !op.frozen; }
  // Megatron's LinearWithGradAccumulationAndAsyncCommunication.backward (framework_profile.cpp):
  // under sequence parallelism the saved input shard is all-gathered again beside the
  // input-gradient GEMM (the weight-gradient GEMM needs the whole input) and the input
  // gradient reduce-scattered beside the weight-gradient GEMM; without it the input
  // gradient is all-reduced beside the weight-gradient GEMM. Started before the GEMM and
  // waited for after it: a collective beside the next compute (kBesideNext).
  // `deferrable`: the output layer under Megatron's deferred weight gradient
  // (Program::deferred_microbatches): on a deferred micro-batch neither the input's gather
  // nor the weight-gradient GEMM runs, and the input gradient's collective blocks.
  void column_parallel_backward(std::vector<Instr>& out, const Op& op, const char* block, bool deferrable = false) {
    const bool sp = par_.sequence_parallel;
    const bool defer = deferrable && prog_.deferred_microbatches > 0;
    const std::uint8_t undeferred = defer ? kUndeferred : kNoFlags;
    const OpTicks dgrad = gemm_half(op, false), wgrad = gemm_half(op, true);
    if (sp)
      push_coll(out, Dim::tp, CollectiveKind::all_gather, hidden_msg_,
                joined({"tp all-gather ", block, " input (bwd)"}),
                static_cast<std::uint8_t>((dgrad.plain > 0 ? kBesideNext : kNoFlags) | undeferred));
    push_compute(out, joined({op.name, " dgrad"}), dgrad);
    const CollectiveKind c = sp ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce;
    // Before the beside-next one, whose next instruction must be the GEMM it runs beside.
    if (defer)
      push_coll(out, Dim::tp, c, hidden_msg_, joined({"tp ", to_string(c), " ", block, " (bwd)"}), kDeferredOnly);
    push_coll(out, Dim::tp, c, hidden_msg_, joined({"tp ", to_string(c), " ", block, " (bwd)"}),
              static_cast<std::uint8_t>((wgrad.plain > 0 ? kBesideNext : kNoFlags) | undeferred));
    push_compute(out, joined({op.name, " wgrad"}), wgrad, undeferred);
  }

  // Token dispatch / combine of a MoE layer in the EP group (`combine`: the way back;
  // `backward`: the gradients' pass, which runs the forward's collectives mirrored).
  // `beside`: compute that runs beside the all-to-all (the shared experts', shared_beside()).
  void ep_exchange(std::vector<Instr>& out, bool combine, bool backward, std::uint8_t flags, OpTicks beside = {}) {
    if (!s_.model.moe || par_.ep <= 1) {
      push_compute(out, "shared experts", beside, flags);
      return;
    }
    const double h = static_cast<double>(s_.model.hidden_size);
    // What the GPU holds of the layer's tokens: the sequence-parallel shard, or (in a
    // tensor-parallel MoE region) the tp-gathered tokens.
    const double held = par_.sequence_parallel && par_.expert_tp() != par_.tp ? tokens_ / par_.tp : tokens_;
    CollectiveKind kind = CollectiveKind::all_to_all;
    double bytes = 0;
    if (par_.moe_allgather) {
      // Megatron-core's MoEAllGatherTokenDispatcher (token_dispatcher.py, snapshot d98e8a64):
      // token_dispatch all-gathers the hidden states of the tensor-and-expert-parallel group
      // ([(S/TP)·B, H] → [S·B·EP, H]; here the tp part is the region's own gather), and
      // token_combine reduce-scatters the unpermuted output cast to the probabilities' dtype,
      // fp32. Backward mirrors them. Sizes are the gathered tensor's.
      const bool gather = combine == backward;
      kind = gather ? CollectiveKind::all_gather : CollectiveKind::reduce_scatter;
      bytes = par_.ep * held * h * (combine ? 4.0 : act_bytes_);
    } else {
      // All-to-all of the routed copies: dropless routing moves top_k copies of every
      // token; with a capacity factor the buffers are padded to capacity (GShard); DeepEP
      // sends a token once to each rank holding one of its experts (models::moe_copies_per_token).
      const double tp_share = par_.sequence_parallel && par_.expert_tp() == par_.tp ? 1.0 / par_.tp : 1.0;
      bytes = held * models::moe_copies_per_token(s_.model, par_) * tp_share * h * act_bytes_;
    }
    const char* name =
        combine ? (backward ? "ep combine bwd" : "ep combine") : (backward ? "ep dispatch bwd" : "ep dispatch");
    // Experts tensor-parallel over a part of the TP group (1 < etp < tp): Megatron-core's
    // MoEAlltoAllTokenDispatcher all-gathers the received tokens over the expert
    // tensor-parallel group after the dispatch and reduce-scatters the expert output before
    // the combine (token_dispatcher.py, gather_from_sequence_parallel_region /
    // reduce_scatter_to_sequence_parallel_region on its tp_group); backward mirrors them.
    // The all-gather dispatcher's gather spans the etp × ep group: its ep part above, its
    // etp part here, of the ep-gathered tokens (its combine in fp32).
    const int etp = par_.expert_tp();
    const bool etp_collectives = etp > 1 && etp != par_.tp;
    const double cf = par_.moe_capacity_factor > 0 ? par_.moe_capacity_factor : 1.0;
    const double exchanged = par_.moe_allgather ? par_.ep * held : held * s_.model.moe->top_k * cf;
    const double etp_bytes = etp * exchanged * h * (par_.moe_allgather && combine ? 4.0 : act_bytes_);
    // Forward: a2a then gather (dispatch), scatter then a2a (combine); backward: the
    // combine's a2a then its scatter's gradient, a gather; the dispatch's gather's gradient,
    // a scatter, then its a2a. So a scatter always comes first, a gather after.
    const bool etp_first = combine != backward;
    if (etp_collectives && etp_first)
      push_coll(out, Dim::etp, CollectiveKind::reduce_scatter, etp_bytes,
                combine ? "etp reduce-scatter" : "etp reduce-scatter (bwd)", flags);
    if (overlap_ep_) {
      launch(out, Dim::ep, static_cast<int>(Dim::ep), kind, bytes, name, flags);
    } else {
      push_coll(out, Dim::ep, kind, bytes, name,
                static_cast<std::uint8_t>(flags | (beside.plain > 0 ? kBesideNext : kNoFlags)));
    }
    push_compute(out, "shared experts (beside the all-to-all)", beside, flags);
    if (etp_collectives && !etp_first)
      push_coll(out, Dim::etp, CollectiveKind::all_gather, etp_bytes,
                combine ? "etp all-gather (bwd)" : "etp all-gather", flags);
  }

  // Gradient buckets: reduced on the DP stream as soon as the backward has
  // produced a bucket's worth (Megatron-core DDP overlap_grad_reduce). ZeRO 0/1
  // accumulate gradients over the micro-batches and reduce once, on the last one;
  // ZeRO-2/3 keep only a gradient shard, so they reduce-scatter after every
  // micro-batch's backward (DeepSpeed stage 2/3 with gradient accumulation).
  // The framework's gradient bucket, in parameters (framework_profile.h).
  double bucket_params() const { return fw_.grad_bucket_params.value_or(dp_bucket_params(par_.dp)); }
  // Sharded gradients are reduce-scattered; DeepSpeed before 0.6 without
  // contiguous_gradients all-reduces them and keeps its partition.
  CollectiveKind grad_collective() const {
    const bool scatter =
        par_.zero_stage >= 1 && !(par_.zero_stage == 3 && fw_.grads_all_reduced) && !fw_.bf16_optimizer;
    return scatter ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce;
  }
  // `params` dense and `expert` routed-expert gradients are ready; each kind fills buckets
  // of its own (experts_apart()), reduced over its group on that group's stream.
  void dp_launch(std::vector<Instr>& out, double params, double expert, bool force) {
    bucket_launch(out, Dim::dp, pending_bucket_, params, force);
    bucket_launch(out, Dim::edp, pending_expert_bucket_, expert, force);
  }
  void bucket_launch(std::vector<Instr>& out, Dim d, double& pending, double params, bool force) {
    pending += params;
    if (group_size(d) <= 1 || grads_after_schedule(cur_stage_) || reduce_after_schedule()) return;
    if (pending <= 0 || (!force && pending < bucket_params())) return;
    const CollectiveKind c = grad_collective();
    const std::uint8_t flags = par_.zero_stage >= 2 ? kNoFlags : kLastMicrobatch;
    bucket_passes(out, d, pending, flags);
    launch(out, d, static_cast<int>(d), c, pending * grad_elem_bytes_, joined({to_string(d), " grad ", to_string(c)}),
           flags);
    if (!s_.plan.overlap_grad_reduce) wait(out, d, static_cast<int>(d), 0, flags);
    pending = 0;
  }
  // Without overlap_grad_reduce, ZeRO 0/1 reduce their accumulated gradients once, after the
  // schedule (build_epilogue). Sharded gradients (ZeRO-2/3) cannot wait for the step: each
  // micro-batch's are reduced as its buckets fill, on the compute stream (DeepSpeed's
  // overlap_comm false: the hook reduces on the current stream), so the backward waits.
  bool reduce_after_schedule() const { return !s_.plan.overlap_grad_reduce && par_.zero_stage < 2; }
  // Megatron-core's delay_grad_reduce (FrameworkProfile): a stage after the first reduces its
  // gradients after its schedule, as without overlap_grad_reduce (build_epilogue). Plain 1F1B
  // only: the interleaved schedule delays each chunk's start by the stage's pipeline rank in
  // backward steps, which ptsim does not follow (it starts them in the chunk's last backward).
  // Only the once-a-step reduction of ZeRO 0/1 is delayed: sharded gradients (ZeRO-2/3) are
  // reduced every micro-batch.
  bool grads_after_schedule(int stage) const {
    return fw_.delay_grad_reduce && par_.pp > 1 && stage != 0 && par_.zero_stage <= 1 &&
           par_.schedule == models::Schedule::one_f_one_b;
  }
  // Megatron's passes over a bucket before its reduction, on the compute stream
  // (FrameworkProfile::grad_bucket_prescale, grad_bucket_nan_check): the scaling by 1/dp reads
  // and writes it, the NaN check's norm reads it. (The check's `assert not norm.isnan()` also
  // synchronises the host with the GPU: not modelled.)
  void bucket_passes(std::vector<Instr>& out, Dim d, double params, std::uint8_t flags) {
    const double passes = (fw_.grad_bucket_prescale && group_size(d) > 1 ? 2 : 0) + (fw_.grad_bucket_nan_check ? 1 : 0);
    if (passes <= 0 || params <= 0) return;
    push_compute(out, "grad bucket scale and check", memory_ticks(passes * params * grad_elem_bytes_), flags);
  }
  // The routed experts' weights lie apart from the dense ones when expert parallelism or a
  // smaller expert tensor-parallel size shards them differently: ranks holding the same
  // experts form the expert-data-parallel group (Dim::edp), over which their gradients are
  // reduced, their optimizer state sharded and their updated weights gathered, in buffers of
  // their own: Megatron-core's DDP `expert_parallel_buffers` over
  // its `expt_dp_group` (parallel_state.get_expert_data_parallel_group) with the same bucket size
  // (megatron/core/distributed/distributed_data_parallel.py), its distributed optimizer's
  // expert shards (the same group); DeepSpeed-MoE's `_reduce_expert_gradients` over the
  // expert-data-parallel group (deepspeed/runtime/engine.py). Otherwise they are ordinary
  // weights of the dp group.
  bool experts_apart() const { return models::experts_apart(s_.model, par_); }
  // Of a block's parameters on this GPU, the routed experts' when they lie apart (else 0).
  double expert_block_params(int block) const {
    return experts_apart() && block >= 0 && s_.model.is_moe_layer(block) ? moe_layer_expert_local_ : 0;
  }
  // Of a block's trainable parameters, the routed experts' when they lie apart (else 0).
  double trainable_block_expert_params(int block) const {
    if (!experts_apart() || block < 0 || !s_.model.is_moe_layer(block)) return 0;
    if (!par_.finetune.active()) return moe_layer_expert_local_;
    return static_cast<double>(models::trainable_layer_params(s_.model, par_, true).expert);
  }
  // Of a stage's expert-weight gathers (the prologue's, in first-use order), how many
  // come up to and including layer l's of `chunk`.
  int expert_gathers_through(int stage, int chunk, int l) const {
    int n = 0;
    for (int c = 0; c <= chunk; ++c) {
      const auto r = models::chunk_layers(s_.model, par_, stage, c);
      for (int k = r.first; k < r.first + r.count && (c < chunk || k <= l); ++k)
        n += trainable_block_expert_params(k) > 0 ? 1 : 0;
    }
    return n;
  }
  double trainable_stage_expert_params(int stage) const {
    double total = 0;
    for (int c = 0; c < par_.vpp; ++c) {
      const auto r = models::chunk_layers(s_.model, par_, stage, c);
      for (int l = r.first; l < r.first + r.count; ++l) total += trainable_block_expert_params(l);
    }
    return total;
  }

  // Gradient accumulation outside the GEMM (FrameworkProfile::fused_grad_accumulation
  // false): once a block's gradients are computed, each is added into the gradient held
  // from the earlier micro-batches, in place (read both, write one), in the dtype the
  // framework keeps gradients in (models::state_bytes_per_param). Autograd's
  // AccumulateGrad does it into the 16-bit param.grad from a chunk's second micro-batch
  // on (the first one's gradient becomes param.grad as it is); Megatron's DDP hook adds
  // every micro-batch's into its fp32 main_grad when it reduces in fp32. ZeRO-2/3 add the
  // reduced shard only, FSDP too, cast to its fp32 flat parameter's dtype first
  // (_runtime_utils.py _accumulate_sharded_grad: `_saved_grad_shard += sharded_grad` from
  // the second backward on). DeepSpeed's BF16_Optimizer has its own pass (chunk_backward).
  void accumulate_grads(std::vector<Instr>& out, double params, double expert) {
    if (fw_.fused_grad_accumulation || fw_.bf16_optimizer || params + expert <= 0) return;
    const models::StateLayout layout = state_layout_of(fw_.framework);
    const double held = models::state_bytes_per_param(par_.precision, layout).grads;
    const bool main_grad = layout == models::StateLayout::megatron && held > act_bytes_;
    const double added = layout == models::StateLayout::fsdp ? held : act_bytes_;
    const bool shard = par_.zero_stage >= 2;
    const double bytes =
        (params / (shard ? group_size(Dim::dp) : 1) + expert / (shard ? group_size(Dim::edp) : 1)) * (added + 2 * held);
    push_compute(out, "grad accumulation", memory_ticks(bytes), main_grad ? kNoFlags : kAfterFirstMicrobatch);
  }

  // Megatron's gradient_accumulation_fusion covers the GEMM weights only: the embedding's
  // dense gradient (models/ops.cpp embedding_ops) reaches param.grad, which the DDP hook adds
  // into main_grad every micro-batch (megatron/core/distributed/distributed_data_parallel.py
  // _make_param_hook, `param.main_grad.add_(param.grad.data)` unless grad_added_to_main_grad):
  // read both, write main_grad. Norms and biases take the same path, a small fraction of a
  // layer's parameters: not counted. Without the fusion accumulate_grads adds every block's.
  void embedding_grad_hook(std::vector<Instr>& out) {
    if (!fw_.fused_grad_accumulation || par_.finetune.active()) return;
    const double held = models::state_bytes_per_param(par_.precision, models::StateLayout::megatron).grads;
    const double params = static_cast<double>(models::embedding_block_params(s_.model, par_));
    push_compute(out, "embedding grad into main_grad", memory_ticks(params * (act_bytes_ + 2 * held)));
  }

  // PyTorch FSDP's work on a unit's unsharded gradient, measured on an H100 as memory-bound
  // kernels of these bytes (bench/gpu/layer_step.py, fsdp_step.py; README "Training
  // frameworks"). The unit's weights are views of its flat parameter
  // (torch/distributed/fsdp/flat_param.py _get_unflat_views: torch.split, then view), so
  // autograd assembles the flat gradient by the split's backward, a cat: every gradient
  // element read and written once in the compute dtype. Then _post_backward_hook
  // (_runtime_utils.py) casts it to reduce_dtype when that differs (`flat_param.grad.to(
  // reduce_dtype)`) and _reduce_grad divides it in place by the pre-divide factor
  // (fsdp_predivide_factor) before the reduce-scatter and the shard by the rest after it.
  // They run on FSDP's post-backward stream, but beside the next unit's backward they cost
  // no less than in line (measured: 16.8 against 16.1 ms per MPT-13B layer), so they are
  // in line here. Under no_sync (ZeRO 0/1 accumulating) the hook returns before the cast.
  void fsdp_unit_grads(std::vector<Instr>& out, double params) {
    if (fw_.framework != Framework::fsdp || params <= 0) return;
    push_compute(out, "fsdp flat grad (split backward)", memory_ticks(2 * act_bytes_ * params));
    const int world = group_size(Dim::dp);
    const int pre = fsdp_predivide_factor(world);
    const double per_param = (grad_elem_bytes_ != act_bytes_ ? act_bytes_ + grad_elem_bytes_ : 0) +
                             (pre > 1 ? 2 * grad_elem_bytes_ : 0) +
                             (world / pre > 1 ? 2 * grad_elem_bytes_ / world : 0);
    if (per_param * params > 0)
      push_compute(out, "fsdp grad cast and divide", memory_ticks(per_param * params),
                   par_.zero_stage >= 2 ? kNoFlags : kLastMicrobatch);
  }
  // A block's gradients are complete: the framework's work on them, then into the DP bucket
  // (`ops`: a transformer layer's, else null).
  void block_grads_ready(std::vector<Instr>& out, int block, const std::vector<Op>* ops) {
    const double params = trainable_block_params(block), expert = trainable_block_expert_params(block);
    fsdp_unit_grads(out, params);
    accumulate_grads(out, params - expert, expert);
    if (grads_per_param() && expert == 0) {
      for (const double t : grad_tensors(block, ops)) param_grad_launch(out, t);
      return;
    }
    dp_launch(out, params - expert, expert, fw_.grad_reduce_per_unit);
  }
  // DeepSpeed's ZeRO-3 before 0.6.0 with contiguous_gradients (FrameworkProfile::
  // grads_per_param_list): each parameter's gradient is reduce-scattered on its own.
  bool grads_per_param() const {
    return fw_.grads_per_param_list && par_.zero_stage == 3 && group_size(Dim::dp) > 1 && !par_.finetune.active();
  }
  // One parameter's reduce-scatter in list form: per rank DeepSpeed's narrow() view and
  // PyTorch's select and copy_ into the flat input, three eager calls that the host (the
  // autograd thread, inside the gradient hook) issues before the NCCL call, the backward
  // waiting behind them; the copies themselves run on the NCCL stream while the host issues
  // the next (a copy of one rank's shard takes about the launch overhead, less than its
  // calls' host time).
  void param_grad_launch(std::vector<Instr>& out, double params) {
    const double host = 3 * group_size(Dim::dp) * kEagerOpHostSeconds;
    push_compute(out, "zero3 grad per-rank views and copies", to_ticks(host));
    launch(out, Dim::dp, static_cast<int>(Dim::dp), CollectiveKind::reduce_scatter, params * grad_elem_bytes_,
           "dp grad reduce_scatter (per parameter)");
    if (!s_.plan.overlap_grad_reduce) wait(out, Dim::dp, static_cast<int>(Dim::dp), 0);  // reduce_after_schedule
  }
  // A block's parameter tensors on this GPU (elements each, in the order backward produces
  // their gradients), summing to its trainable parameters: of a transformer layer (`ops`)
  // each GEMM's weight (k x n, per count) and bias (n, with add_bias_linear), and its two
  // norms (weight, and bias for LayerNorm: h each); of the embedding its table and the
  // learned positions' (s x h); of the head its final norm and, untied, its output weight.
  std::vector<double> grad_tensors(int block, const std::vector<Op>* ops) const {
    const auto& m = s_.model;
    const double total = trainable_block_params(block), h = static_cast<double>(m.hidden_size);
    const int norm_tensors = m.norm == models::Norm::layernorm ? 2 : 1;
    std::vector<double> t;
    if (block == kEmbedding) {
      const double positions = m.learned_position_embeddings ? static_cast<double>(m.seq_length) * h : 0;
      if (positions > 0 && positions < total) t.push_back(positions);
      t.push_back(total - (t.empty() ? 0 : positions));
      return t;
    }
    if (block == kHead || !ops) {
      const double norms = norm_tensors * h;
      if (total > norms) t.push_back(total - norms);  // the untied output weight
      for (int i = 0; i < norm_tensors; ++i) t.push_back(std::min(h, total / norm_tensors));
      return t;
    }
    const auto trains = [](const Op& op) {
      return (op.cls == OpClass::gemm || op.cls == OpClass::router) && !op.frozen;
    };
    const auto has_bias = [&](const Op& op) { return m.add_bias_linear && op.cls == OpClass::gemm; };
    const auto weight = [](const Op& op) { return static_cast<double>(op.gemm.k) * static_cast<double>(op.gemm.n); };
    double big = 0, small = 2 * norm_tensors * h;
    for (const Op& op : *ops) {
      if (!trains(op)) continue;
      big += weight(op) * op.gemm.count;
      if (has_bias(op)) small += static_cast<double>(op.gemm.n) * op.gemm.count;
    }
    // The layer's other tensors as counted (rounding, shared experts, tp-replicated
    // parameters) scale the weights so that the tensors sum to the layer's parameters.
    const double scale = big > 0 ? std::max(0.0, total - small) / big : 0;
    for (int i = 0; i < norm_tensors; ++i) t.push_back(h);  // the MLP's norm, last in backward
    for (auto op = ops->rbegin(); op != ops->rend(); ++op) {
      if (!trains(*op)) continue;
      for (int c = 0; c < op->gemm.count; ++c) {
        if (has_bias(*op)) t.push_back(static_cast<double>(op->gemm.n));
        t.push_back(weight(*op) * scale);
      }
    }
    for (int i = 0; i < norm_tensors; ++i) t.push_back(h);  // the input norm
    return t;
  }

  // ZeRO-3 / FSDP (and ZeRO-Infinity parameter offload): parameters are
  // all-gathered before use in forward and again in backward, in the framework's
  // gather units (framework_profile.h): one per block, or one per linear submodule
  // (DeepSpeed). Units ahead are prefetched while earlier ones compute
  // (overlap_param_gather): one unit ahead, or, for DeepSpeed, while fewer than
  // stage3_prefetch_bucket_size elements are in flight. A block's gathered copy is
  // freed after use (FSDP without reshard_after_forward keeps it to the backward).
  bool zero3() const { return models::zero3_gathers(s_.model, par_); }
  // Parameters on this GPU of a block: a transformer layer, or the embedding /
  // head (pseudo-layers kEmbedding / kHead).
  static constexpr int kEmbedding = -1, kHead = -2;
  double block_params(int block) const {
    if (block == kEmbedding) return embedding_local_params();
    if (block == kHead) return head_local_params();
    return s_.model.is_moe_layer(block) ? moe_layer_local_ : dense_layer_local_;
  }
  double layer_param_bytes(int block) const { return block_params(block) * act_bytes_; }
  // Of which the parameters that train and have gradients to reduce and updated
  // weights to gather: everything, or only a layer's LoRA adapters when fine-tuning
  // (the frozen base, embedding and head have none).
  double trainable_block_params(int block) const {
    if (!par_.finetune.active()) return block_params(block);
    if (block < 0) return 0;
    return static_cast<double>(models::trainable_layer_params(s_.model, par_, s_.model.is_moe_layer(block)).total());
  }

  // A block's gather units on this GPU (models::gather_pieces): the block whole, its dense
  // and expert weights apart, or DeepSpeed's linear submodules (`ops` given; embedding and
  // head whole).
  std::vector<GatherUnit> block_units(int block, const std::vector<Op>* ops) const {
    std::vector<GatherUnit> out;
    for (const models::GatherPiece& g : models::gather_pieces(par_, block < 0 ? nullptr : ops, block_params(block),
                                                              expert_block_params(block), act_bytes_))
      out.push_back({block, g.op, g.bytes, g.expert ? Dim::edp : Dim::dp});
    return out;
  }

  // The gather units of one chunk's pass over `order` (its blocks in execution order).
  // Backward prefetches one unit ahead under FSDP's BACKWARD_PRE and BACKWARD_POST alike
  // (framework_profile.h: the host runs ahead of the GPU), not under none.
  Fetch plan_fetch(const ChunkBlocks& blocks, const std::vector<int>& order, bool backward) const {
    Fetch f;
    // The rules come from the framework through Parallelism::zero3, which the closed-form
    // memory model walks the same way (models/zero3_gathers.h).
    const auto& z = par_.zero3;
    if (!zero3() || (backward && !z.reshard_after_forward)) return f;
    f.prefetch = backward ? z.backward_prefetch : z.prefetch;
    for (int l : order) {
      // A block without parameters here (the embedding of a single stage) has no gather.
      auto pieces = block_units(l, l < 0 ? nullptr : &blocks.ops(s_.model, l));
      if (l < 0 || !z.per_submodule) {
        f.units.insert(f.units.end(), pieces.begin(), pieces.end());
        continue;
      }
      if (!backward) {
        f.units.insert(f.units.end(), pieces.begin(), pieces.end());
        continue;
      }
      // Backward uses them in reverse; full recomputation re-runs the forward first
      // (forward order), and a layer beyond the reuse distance is gathered again
      // for the backward proper.
      const bool recompute = par_.recompute == models::Recompute::full;
      if (recompute) f.units.insert(f.units.end(), pieces.begin(), pieces.end());
      if (!recompute || (z.reuse_elems > 0 && block_params(l) > z.reuse_elems))
        f.units.insert(f.units.end(), pieces.rbegin(), pieces.rend());
    }
    f.freed.assign(f.units.size(), false);
    return f;
  }

  // After computing `op` of `block`: DeepSpeed releases a submodule's gathered
  // parameters as soon as its hook has run (partitioned_param_coordinator
  // release_sub_module), unless this pass uses them again: a recomputed forward
  // whose backward reuses the gathered copy (within stage3_max_reuse_distance).
  void fetch_done(std::vector<Instr>& out, Fetch& f, int block, int op, bool recompute_pass) {
    if (f.next_use == 0) return;
    const std::size_t u = f.next_use - 1;
    if (f.units[u].block != block || f.units[u].op != op || op < 0 || f.freed[u]) return;
    if (recompute_pass) {
      bool again = false;
      for (std::size_t k = u + 1; k < f.units.size() && !again; ++k)
        again = f.units[k].block == block && f.units[k].op == op;
      if (!again) return;  // the backward uses this copy; freed with the block
    }
    f.freed[u] = true;
    out.push_back(mem(InstrKind::release, MemCat::buffers, f.units[u].bytes, "gathered params"));
  }

  void launch_unit(std::vector<Instr>& out, const GatherUnit& u, bool backward) {
    out.push_back(mem(InstrKind::alloc, MemCat::buffers, u.bytes, "gathered params"));
    // DeepSpeed before 0.6 calls torch.cuda.synchronize() before each gather
    // (framework_profile.cpp): the host waits for every stream, the gradient reductions
    // on the DP stream included, before it builds the gather's views.
    if (fw_.gather_blocks_host) {
      wait(out, Dim::dp, static_cast<int>(Dim::dp), 0);
      if (experts_apart()) wait(out, Dim::edp, static_cast<int>(Dim::edp), 0);
    }
    const ListGather list = list_gather(u.bytes, u.dim);
    push_compute(out, "zero3 gather buffer and per-rank views", list.before);
    launch(out, u.dim, gather_channel(u.dim), CollectiveKind::all_gather, u.bytes,
           backward ? "zero3 gather (bwd)" : "zero3 gather");
    push_compute(out, "zero3 gather per-rank copies issued", list.during);
  }

  // The parameter-gather channel of a group: the dense one's, or the experts'.
  static int gather_channel(Dim d) { return d == Dim::edp ? kExpertGatherChannel : kGatherChannel; }
  // Past the units used together with unit k: a whole block's dense and expert units.
  static std::size_t block_units_end(const Fetch& f, std::size_t k) {
    std::size_t end = k + 1;
    while (end < f.units.size() && f.units[k].op < 0 && f.units[end].block == f.units[k].block && f.units[end].op < 0 &&
           f.units[end].dim != f.units[end - 1].dim)
      ++end;
    return end;
  }
  // Before computing `op` of `block` (-1: the block as a whole): its unit gathered.
  void fetch_use(std::vector<Instr>& out, Fetch& f, int block, int op, bool backward) {
    std::size_t u = f.next_use;
    while (u < f.units.size() && !(f.units[u].block == block && f.units[u].op == op)) ++u;
    if (u >= f.units.size()) return;
    const std::size_t last = block_units_end(f, u) - 1;  // a MoE layer's dense and expert units
    f.next_use = last + 1;
    while (f.launched <= last) launch_unit(out, f.units[f.launched++], backward);
    if (f.prefetch) {
      const auto ahead = [&] {
        double elems = 0;
        for (std::size_t k = last + 1; k < f.launched; ++k) elems += f.units[k].bytes / act_bytes_;
        return elems;
      };
      if (!par_.zero3.per_submodule) {
        if (f.launched < f.units.size() && f.launched == last + 1)
          for (const std::size_t end = block_units_end(f, f.launched); f.launched < end;)
            launch_unit(out, f.units[f.launched++], backward);
      } else {
        while (f.launched < f.units.size() && ahead() < par_.zero3.prefetch_elems)
          launch_unit(out, f.units[f.launched++], backward);
      }
    }
    for (std::size_t k = u; k <= last; ++k) {
      const Dim d = f.units[k].dim;
      int later = 0;  // gathers of its group launched after it
      for (std::size_t j = k + 1; j < f.launched; ++j) later += f.units[j].dim == d ? 1 : 0;
      wait(out, d, gather_channel(d), later);
      push_compute(out, "zero3 gather per-rank copies", list_gather(f.units[k].bytes, d).after);
      if (par_.offload_params) {
        // ZeRO-Infinity: the shard comes from host memory over PCIe first.
        const double shard = f.units[k].bytes / group_size(d);
        push_compute(out, "param h2d", to_ticks(shard / compute_->gpu().pcie_bandwidth));
      }
    }
  }
  // What a list-form gather (DeepSpeed before 0.5.5, framework_profile.cpp) adds to
  // its collective, with the host blocked throughout. Before it: the gathered buffer
  // zeroed (torch.zeros) and one narrow() view per rank on the host (DeepSpeed's
  // _allgather_param). Then PyTorch's ProcessGroupNCCL::allgather enqueues the NCCL
  // kernel and, at once (collective() runs its `post` right after the NCCL call), the
  // copy of the flat result into each view: two eager calls per rank, the flat
  // result's row (outputFlattened[i][j], a select) and its copy_, issued while the
  // gather runs; the copies move the bytes (read and write) on the NCCL stream after it,
  // one copy per rank (ProcessGroupNCCL::allgather's `post` loop), so the stream runs dp
  // kernels back to back, each with its launch overhead (the GPU's launch_overhead).
  struct ListGather {
    Tick before = 0, during = 0, after = 0;
  };
  ListGather list_gather(Bytes bytes, Dim d) const {
    if (!fw_.gather_per_rank_ops) return {};
    hw::KernelDesc zero, copy;
    zero.cls = copy.cls = hw::KernelClass::memory;
    zero.bytes = bytes;
    copy.bytes = 2 * bytes;
    const double views = group_size(d) * kEagerOpHostSeconds;
    const double copies = 2 * group_size(d) * kEagerOpHostSeconds;
    const double launches = (group_size(d) - 1) * compute_->gpu().launch_overhead;  // the first is in seconds()
    return {to_ticks(compute_->seconds(zero) + views), to_ticks(copies), to_ticks(compute_->seconds(copy) + launches)};
  }
  // Bytes of a block that its gathers bring in (persistent submodules excluded).
  Bytes gathered_bytes(const ChunkBlocks& blocks, int block) const {
    if (block < 0 || !par_.zero3.per_submodule) return layer_param_bytes(block);
    Bytes total = 0;
    for (const auto& u : block_units(block, &blocks.ops(s_.model, block))) total += u.bytes;
    return total;
  }
  // After a block: free what this pass gathered of it (a backward without gathers
  // frees what the forward kept).
  void zero3_after(std::vector<Instr>& out, const Fetch& f, const ChunkBlocks& blocks, int block, bool backward) {
    if (!zero3() || (!backward && !par_.zero3.reshard_after_forward)) return;
    Bytes bytes = 0;
    for (std::size_t k = 0; k < f.units.size(); ++k)
      if (f.units[k].block == block && !f.freed[k]) bytes += f.units[k].bytes;
    if (f.units.empty()) bytes = gathered_bytes(blocks, block);
    out.push_back(mem(InstrKind::release, MemCat::buffers, bytes, "gathered params"));
  }

  // ZeRO-1/2 with overlap_param_gather (Megatron distributed optimizer): the
  // updated parameters of the previous step are all-gathered layer by layer while
  // the first micro-batch's forward runs; layer k waits for its own gather.
  bool overlapped_param_gather() const {
    return (par_.zero_stage == 1 || par_.zero_stage == 2) && s_.plan.overlap_param_gather && group_size(Dim::dp) > 1 &&
           !fw_.allgather_bucket_params;  // DeepSpeed gathers after the step, not under the forward
  }

  // Context parallelism around the attention kernel, as FrameworkProfile::cp_comm says.
  // Ring (p2p): K and V chunks travel around the CP ring while attention computes on the
  // chunk at hand (Liu et al. 2023; Megatron-core CP), i.e. an all-gather of K/V in forward
  // and, in backward, K/V again plus a reduce-scatter of dK/dV, both overlapping the kernel;
  // cp_after waits for them. allgather: the all-gather waited for before the kernel, the
  // backward's reduce-scatter issued after it. a2a (Ulysses): Q, K and V all-to-all'd to head
  // shards before the kernel and its output back after it (backward: dO before, dQ, dK and dV
  // after), each waited for.
  double cp_kv_bytes() const {
    const auto& m = s_.model;
    return 2.0 * tokens_ * static_cast<double>(m.num_query_groups / par_.tp) * static_cast<double>(m.head_dim()) *
           act_bytes_ * par_.cp;
  }
  // A rank's share of the a2a's tensors: Q (or O, dO, dQ) alone, or with K and V.
  double cp_a2a_bytes(bool with_kv) const {
    const auto& m = s_.model;
    const double heads = static_cast<double>(m.num_attention_heads / par_.tp),
                 groups = static_cast<double>(m.num_query_groups / par_.tp);
    return tokens_ * (heads + (with_kv ? 2 * groups : 0)) * static_cast<double>(m.head_dim()) * act_bytes_;
  }
  void cp_exchange(std::vector<Instr>& out, CollectiveKind kind, double bytes, std::string_view name,
                   std::uint8_t flags) {
    launch(out, Dim::cp, static_cast<int>(Dim::cp), kind, bytes, name, flags);
    wait(out, Dim::cp, static_cast<int>(Dim::cp), 0, flags);
  }
  void cp_launch(std::vector<Instr>& out, bool backward, std::uint8_t flags) {
    if (par_.cp <= 1) return;
    switch (fw_.cp_comm) {
      case CpComm::rotate_allgather:
        launch(out, Dim::cp, static_cast<int>(Dim::cp), CollectiveKind::all_gather, cp_kv_bytes(), "cp kv all-gather",
               flags);
        return;
      case CpComm::allgather:
        cp_exchange(out, CollectiveKind::all_gather, cp_kv_bytes(), "cp kv all-gather", flags);
        return;
      case CpComm::a2a:
        cp_exchange(out, CollectiveKind::all_to_all, cp_a2a_bytes(!backward),
                    backward ? "cp all-to-all dO" : "cp all-to-all qkv", flags);
        return;
      case CpComm::p2p:
        launch(out, Dim::cp, static_cast<int>(Dim::cp), CollectiveKind::all_gather, cp_kv_bytes(), "cp kv ring", flags);
        if (backward)
          launch(out, Dim::cp, static_cast<int>(Dim::cp), CollectiveKind::reduce_scatter, cp_kv_bytes(), "cp dkv ring",
                 flags);
        return;
    }
  }
  void cp_after(std::vector<Instr>& out, bool backward, std::uint8_t flags) {
    if (par_.cp <= 1) return;
    switch (fw_.cp_comm) {
      case CpComm::allgather:
        if (backward) cp_exchange(out, CollectiveKind::reduce_scatter, cp_kv_bytes(), "cp dkv reduce-scatter", flags);
        return;
      case CpComm::a2a:
        cp_exchange(out, CollectiveKind::all_to_all, cp_a2a_bytes(backward),
                    backward ? "cp all-to-all dqkv" : "cp all-to-all output", flags);
        return;
      case CpComm::rotate_allgather:
        if (backward) wait(out, Dim::cp, static_cast<int>(Dim::cp), 0, flags);
        return;
      case CpComm::p2p:
        wait(out, Dim::cp, static_cast<int>(Dim::cp), 0, flags);
        return;
    }
  }
  // A layer op's compute: one instruction, except the attention kernel under PyTorch's
  // all-gather rotation: the ring's first step (its local K/V: 1/cp of the work, as
  // load-balanced chunks give every step the same) beside the all-gather, the wait, then the
  // other steps, in backward beside the dK/dV ring that cp_after waits for.
  void push_op(std::vector<Instr>& out, const Op& op, std::string_view name, OpTicks t, bool backward,
               std::uint8_t flags) {
    if (op.cls != OpClass::attention || par_.cp <= 1 || fw_.cp_comm != CpComm::rotate_allgather) {
      push_compute(out, name, t, flags);
      return;
    }
    const OpTicks first{t.plain / par_.cp, t.under_comm / par_.cp};
    push_compute(out, name, first, flags);
    wait(out, Dim::cp, static_cast<int>(Dim::cp), 0, flags);
    if (backward)
      launch(out, Dim::cp, static_cast<int>(Dim::cp), CollectiveKind::reduce_scatter, cp_kv_bytes(), "cp dkv ring",
             flags);
    push_compute(out, name, {t.plain - first.plain, t.under_comm - first.under_comm}, flags);
  }

  ChunkProgram build_chunk(int stage, int chunk) {
    const auto& m = s_.model;
    const bool first = models::holds_embedding(par_, stage, chunk);
    const bool last = models::holds_head(par_, stage, chunk);
    cur_stage_ = stage, cur_chunk_ = chunk;
    const auto range = models::chunk_layers(m, par_, stage, chunk);
    ChunkBlocks blocks;
    blocks.dense_ops = models::layer_ops(m, par_, false);
    if (m.moe) blocks.moe_ops = models::layer_ops(m, par_, true);
    for (const Op& op : blocks.dense_ops) blocks.dense_fwd.push_back(time_of(op, false));
    for (const Op& op : blocks.dense_ops) blocks.dense_bwd.push_back(backward_time(op));
    for (const Op& op : blocks.moe_ops) blocks.moe_fwd.push_back(time_of(op, false));
    for (const Op& op : blocks.moe_ops) blocks.moe_bwd.push_back(backward_time(op));
    for (int l = range.first; l < range.first + range.count; ++l)
      blocks.activations += models::activation_bytes_per_layer(m, par_, m.is_moe_layer(l));
    if (first) blocks.activations += models::embedding_activation_bytes(m, par_);
    if (last) blocks.head = models::head_activation_bytes(m, par_);
    blocks.activations += blocks.head;
    if (first) blocks.order.push_back(kEmbedding);
    for (int l = range.first; l < range.first + range.count; ++l) blocks.order.push_back(l);
    if (last) blocks.order.push_back(kHead);
    ChunkProgram cp;
    cp.forward = chunk_forward(stage, chunk, blocks, range.first);
    cp.backward = chunk_backward(stage, chunk, blocks);
    if (split()) cp.weight = chunk_weight(chunk, blocks);
    if (par_.schedule == models::Schedule::dualpipe && m.moe && par_.ep > 1) {
      // DualPipe's F&B pairs: the same passes with the EP all-to-alls on the async
      // EP stream (ChunkProgram::forward_overlap), waited for at the pair's end.
      overlap_ep_ = true;
      cp.forward_overlap = chunk_forward(stage, chunk, blocks, range.first);
      cp.backward_overlap = chunk_backward(stage, chunk, blocks);
      overlap_ep_ = false;
      const auto send = std::find_if(cp.backward_overlap.begin(), cp.backward_overlap.end(),
                                     [](const Instr& in) { return in.kind == InstrKind::send; });
      Instr w;
      w.kind = InstrKind::wait;
      w.dim = Dim::ep;
      w.channel = static_cast<std::uint8_t>(Dim::ep);
      w.count = 0;
      w.label = label_of("wait ep (F&B pair)");
      cp.backward_overlap.insert(send, w);  // before the gradient leaves: it needs the combine's backward
    }
    return cp;
  }

  std::vector<Instr> chunk_forward(int stage, int chunk, const ChunkBlocks& blocks, int first_layer) {
    const auto& m = s_.model;
    const int p = par_.pp, v = par_.vpp;
    std::vector<Instr> f;
    if (remote(pipeline_source(par_.schedule, Phase::forward, stage, chunk, p, v), stage)) recv(f, "pp recv act");
    f.push_back(mem(InstrKind::alloc, MemCat::activations, blocks.activations, "activations"));
    // Index of this chunk's first layer among the stage's parameter gathers (the
    // prologue launches them in first-use order: embedding, chunk 0, chunk 1, ...).
    // (Fine-tuning: the frozen embedding has no updated weights to gather.)
    int gather_index = stage_holds(stage, models::holds_embedding) && !par_.finetune.active() ? 1 : 0;
    for (int c = 0; c < chunk; ++c) gather_index += models::chunk_layers(m, par_, stage, c).count;
    const auto& order = blocks.order;
    Fetch fetch = plan_fetch(blocks, order, false);
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int l = order[i];
      if (overlapped_param_gather() && l >= 0) {
        wait(f, Dim::dp, kGatherChannel, gather_index + (l - first_layer) + 1, kFirstMicrobatch | kAbsoluteWait);
        if (trainable_block_expert_params(l) > 0)
          wait(f, Dim::edp, kExpertGatherChannel, expert_gathers_through(stage, chunk, l),
               kFirstMicrobatch | kAbsoluteWait);
      }
      const std::size_t first_instr = f.size();
      fetch_use(f, fetch, l, -1, false);
      if (l == kEmbedding) {
        for (const Op& op : models::embedding_ops(m, par_)) push_compute(f, op.name, time_of(op, false));
        push_coll(f, Dim::tp, par_.sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                  hidden_msg_, "tp embedding");
      } else if (l == kHead) {
        head_forward(f);
      } else {
        layer_forward(f, blocks.ops(m, l), blocks.fwd(m, l), kNoFlags, &fetch, l);
      }
      zero3_after(f, fetch, blocks, l, false);
      tag_layer(f, first_instr, l);
    }
    if (remote(pipeline_destination(par_.schedule, Phase::forward, stage, chunk, p, v), stage))
      f.push_back(p2p(InstrKind::send, "pp send act"));
    return f;
  }

  std::vector<Instr> chunk_backward(int stage, int chunk, const ChunkBlocks& blocks) {
    const auto& m = s_.model;
    const int p = par_.pp, v = par_.vpp;
    std::vector<Instr> b;
    if (remote(pipeline_source(par_.schedule, Phase::backward, stage, chunk, p, v), stage)) recv(b, "pp recv grad");
    const std::vector<int> reverse(blocks.order.rbegin(), blocks.order.rend());
    Fetch fetch = plan_fetch(blocks, reverse, true);
    for (std::size_t i = 0; i < reverse.size(); ++i) {
      const int l = reverse[i];
      const std::size_t first_instr = b.size();
      fetch_use(b, fetch, l, -1, true);
      if (l == kHead) {
        head_backward(b);
        // The loss's fp32 softmax and the logits gradient are dead once the output
        // layer's backward has produced the hidden-state gradient, but for the deferred
        // weight gradients' inputs, held from the step's first backward on.
        if (deferred_head_wgrad_ > 0)
          b.push_back(mem(InstrKind::alloc, MemCat::activations, deferred_head_wgrad_,
                          "deferred output-layer wgrad inputs", kFirstMicrobatch));
        b.push_back(mem(InstrKind::release, MemCat::activations, blocks.head, "head activations"));
      } else if (l == kEmbedding) {
        // The embedding's forward reduce-scatter (SP) has an all-gather as gradient;
        // its forward all-reduce (no SP) has the identity.
        if (par_.sequence_parallel) push_coll(b, Dim::tp, CollectiveKind::all_gather, hidden_msg_, "tp embedding bwd");
        for (const Op& op : models::embedding_ops(m, par_)) push_compute(b, op.name, time_of(op, true));
        embedding_grad_hook(b);
      } else {
        // The recompute pass re-creates the layer's saved tensors (full) or the
        // attention core's (selective); they live until the layer's backward ends, beside
        // the backward's largest transient gradient.
        const Bytes ws = models::backward_working_set_bytes(m, par_, m.is_moe_layer(l));
        if (ws > 0) b.push_back(mem(InstrKind::alloc, MemCat::activations, ws, "backward working set"));
        if (par_.recompute == models::Recompute::full)
          layer_forward(b, blocks.ops(m, l), blocks.fwd(m, l), kRecompute, &fetch, l, true);
        layer_backward(b, blocks.ops(m, l), blocks.fwd(m, l), blocks.bwd(m, l), fetch, l);
        if (ws > 0) b.push_back(mem(InstrKind::release, MemCat::activations, ws, "backward working set"));
      }
      zero3_after(b, fetch, blocks, l, true);
      if (!split()) block_grads_ready(b, l, l >= 0 ? &blocks.ops(m, l) : nullptr);
      tag_layer(b, first_instr, l);
    }
    if (fw_.bf16_optimizer) {
      // update_hp_grads after this micro-batch's backward: per parameter, read the bf16
      // gradient (2 bytes), write and read its fp32 conversion (4 + 4), read and write
      // the fp32 accumulator (4 + 4): 18 bytes (framework_profile.h).
      double params = 0;
      for (int l : reverse) params += trainable_block_params(l);
      push_compute(b, "bf16 grads into fp32 (update_hp_grads)", memory_ticks(18.0 * params));
    }
    if (!split()) {
      // The last chunk to finish backward on this stage flushes the partial bucket.
      if (chunk == 0) dp_launch(b, 0, 0, true);
      b.push_back(mem(InstrKind::release, MemCat::activations, blocks.activations - blocks.head, "activations"));
    }
    if (remote(pipeline_destination(par_.schedule, Phase::backward, stage, chunk, p, v), stage))
      b.push_back(p2p(InstrKind::send, "pp send grad"));
    return b;
  }

  // W: the weight-gradient GEMMs of the chunk's blocks in backward order, each
  // block's gradients then ready for the DP bucket; the chunk's activations (the
  // GEMM inputs W reads) are freed after it (the head's went with its B).
  std::vector<Instr> chunk_weight(int chunk, const ChunkBlocks& blocks) {
    const auto& m = s_.model;
    std::vector<Instr> w;
    for (auto it = blocks.order.rbegin(); it != blocks.order.rend(); ++it) {
      const int l = *it;
      const std::vector<Op> ops = l == kHead        ? models::head_ops(m, par_)
                                  : l == kEmbedding ? std::vector<Op>{}
                                                    : blocks.ops(m, l);
      for (auto op = ops.rbegin(); op != ops.rend(); ++op)
        push_compute(w, joined({op->name, " wgrad"}), gemm_half(*op, true));  // none for a frozen weight
      block_grads_ready(w, l, l >= 0 ? &ops : nullptr);
    }
    if (chunk == 0) dp_launch(w, 0, 0, true);
    w.push_back(mem(InstrKind::release, MemCat::activations, blocks.activations - blocks.head, "activations"));
    return w;
  }

  // A pipeline peer on another stage: ZB-V's bottom hands its chunk 0 output to
  // chunk 1 of the same stage (and the gradient back) without a message; the
  // schedule orders the two passes.
  static bool remote(const PipelinePeer& peer, int stage) { return peer.stage >= 0 && peer.stage != stage; }

  // Whether some chunk of `stage` holds the embedding / head (models/memory.h).
  bool stage_holds(int stage, bool (*holds)(const models::Parallelism&, int, int)) const {
    for (int c = 0; c < par_.vpp; ++c)
      if (holds(par_, stage, c)) return true;
    return false;
  }

  void head_forward(std::vector<Instr>& f) {
    const auto& m = s_.model;
    for (const Op& op : models::head_ops(m, par_)) {
      if (op.cls == OpClass::gemm && par_.sequence_parallel)
        push_coll(f, Dim::tp, CollectiveKind::all_gather, hidden_msg_, "tp logits gather");
      push_compute(f, op.name, time_of(op, false));
      // Vocab-parallel cross entropy: all-reduce of the max, the sum of exps and
      // the target logit per token (Megatron-LM cross_entropy.py), fp32.
      if (op.cls == OpClass::loss)
        push_coll(f, Dim::tp, CollectiveKind::all_reduce, 3 * tokens_ * 4, "tp cross-entropy");
    }
  }

  void head_backward(std::vector<Instr>& b) {
    const auto ops = models::head_ops(s_.model, par_);
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      if (async_tp_backward(*it)) {  // the logits GEMM: a column-parallel linear
        column_parallel_backward(b, *it, "logits", true);
        continue;
      }
      if (it->cls == OpClass::gemm && prog_.deferred_microbatches > 0) {
        // The deferred weight gradient (drain_head_wgrads) runs on the later micro-batches only.
        push_compute(b, joined({it->name, " dgrad"}), gemm_half(*it, false));
        push_compute(b, joined({it->name, " wgrad"}), gemm_half(*it, true), kUndeferred);
      } else {
        push_compute(b, it->name, backward_time(*it));
      }
      if (it->cls == OpClass::gemm)
        push_coll(b, Dim::tp, par_.sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                  hidden_msg_, "tp logits bwd");
    }
  }

  // Megatron's finish_embedding_wgrad_compute (pipeline_parallel/schedules.py) after the
  // schedule: drain_embedding_wgrad_compute runs each deferred micro-batch's output-layer
  // weight-gradient GEMM, its input all-gathered first under sequence parallelism; then the
  // buffers they held are freed (models::deferred_head_wgrad_bytes).
  void drain_head_wgrads(std::vector<Instr>& e) {
    for (const Op& op : models::head_ops(s_.model, par_)) {
      if (op.cls != OpClass::gemm) continue;
      for (int i = 0; i < prog_.deferred_microbatches; ++i) {
        if (par_.sequence_parallel && par_.tp > 1)
          push_coll(e, Dim::tp, CollectiveKind::all_gather, hidden_msg_, "tp all-gather logits input (deferred)");
        push_compute(e, joined({op.name, " wgrad (deferred)"}), gemm_half(op, true));
      }
    }
    if (deferred_head_wgrad_ > 0)
      e.push_back(
          mem(InstrKind::release, MemCat::activations, deferred_head_wgrad_, "deferred output-layer wgrad inputs"));
  }

  // Parameters of the embedding and the head block on one GPU (models::embedding_params_held).
  double embedding_local_params() const { return models::embedding_params_held(s_.model, par_); }
  double head_local_params() const { return head_local_params(cur_stage_, cur_chunk_); }
  double head_local_params(int stage, int chunk) const {
    return models::head_params_held(s_.model, par_, stage, chunk);
  }

  // Pipeline messages use Megatron's scatter/gather (Narayanan et al. SC'21
  // §4.1, on by default): each TP rank sends 1/t of the activation over its own
  // NIC and the receivers all-gather it over NVLink. With sequence parallelism
  // the activation is already split by t and stays split.
  // The instructions from `first` on belong to block `l` (a transformer layer, or the
  // embedding / head, which have no layer index).
  static void tag_layer(std::vector<Instr>& out, std::size_t first, int l) {
    for (std::size_t k = first; k < out.size(); ++k) out[k].layer = l >= 0 ? l : -1;
  }

  Instr p2p(InstrKind k, const char* name) {
    Instr in;
    in.kind = k;
    in.dim = Dim::pp;
    in.coll = CollectiveKind::send_recv;
    in.bytes = hidden_msg_ / par_.tp;
    in.label = label_of(name);
    return in;
  }
  void recv(std::vector<Instr>& out, const char* name) {
    out.push_back(p2p(InstrKind::recv, name));
    if (!par_.sequence_parallel) push_coll(out, Dim::tp, CollectiveKind::all_gather, hidden_msg_, "tp pp gather");
  }

  Instr mem(InstrKind k, MemCat c, Bytes bytes, const char* name, std::uint8_t flags = kNoFlags) {
    Instr in;
    in.kind = k;
    in.mem = c;
    in.bytes = bytes;
    in.flags = flags;
    in.label = label_of(name);
    return in;
  }

  void build_prologue(StageProgram& sp) {
    sp.prologue.push_back(mem(InstrKind::alloc, MemCat::params, sp.states.params, "params"));
    sp.prologue.push_back(mem(InstrKind::alloc, MemCat::grads, sp.states.grads, "grads"));
    sp.prologue.push_back(mem(InstrKind::alloc, MemCat::optimizer, sp.states.optimizer, "optimizer"));
    // The analytical buffers include ZeRO-3's gathered parameters at their most
    // (models::zero3_gathered_peak); the replay allocates those as it gathers, so hold the
    // rest here.
    const Bytes gathered = models::zero3_gathered_peak(s_.model, par_, sp.stage);
    sp.prologue.push_back(mem(InstrKind::alloc, MemCat::buffers, sp.buffers - gathered, "buffers"));
    if (overlapped_param_gather()) {
      if (stage_holds(sp.stage, models::holds_embedding))
        launch(sp.prologue, Dim::dp, kGatherChannel, CollectiveKind::all_gather, (par_.finetune.active() ? trainable_block_params(kEmbedding) : embedding_local_params()) * act_bytes_,
               "dp param all-gather");
      for (int c = 0; c < par_.vpp; ++c) {
        const auto r = models::chunk_layers(s_.model, par_, sp.stage, c);
        for (int l = r.first; l < r.first + r.count; ++l) {
          const double expert = trainable_block_expert_params(l);
          launch(sp.prologue, Dim::dp, kGatherChannel, CollectiveKind::all_gather,
                 (trainable_block_params(l) - expert) * act_bytes_, "dp param all-gather");
          // The experts' weights over their own group, on its stream (experts_apart()).
          launch(sp.prologue, Dim::edp, kExpertGatherChannel, CollectiveKind::all_gather, expert * act_bytes_,
                 "edp param all-gather");
        }
      }
      for (int c = 0; c < par_.vpp; ++c)
        if (models::holds_head(par_, sp.stage, c))
          launch(sp.prologue, Dim::dp, kGatherChannel, CollectiveKind::all_gather,
                 (par_.finetune.active() ? trainable_block_params(kHead) : head_local_params(sp.stage, c)) * act_bytes_, "dp param all-gather");
    }
    zero_grad_buffer(sp.prologue, sp.stage);
  }

  // Gradient buffers zeroed once a step, a memset of the stage's whole buffer: Megatron's
  // train_step begins with model_chunk.zero_grad_buffer() (megatron/training/training.py;
  // ParamAndGradBuffer.reset: grad_data.zero_(), the distributed optimizer's buffer is not
  // sharded; Megatron-LM's local DDP the same since its contiguous buffers, 2021-03), and
  // DeepSpeed's BF16_Optimizer zeroes its fp32 gradient accumulators after each step
  // (bf16_optimizer.py step -> clear_hp_grads, flat_gradients.zero_()). ZeRO-2/3 and FSDP
  // set their gradients to None instead.
  void zero_grad_buffer(std::vector<Instr>& out, int stage) {
    if (!(fw_.bf16_optimizer || (is_megatron(fw_.framework) && par_.zero_stage <= 1))) return;
    const double held =
        fw_.bf16_optimizer ? 4.0 : models::state_bytes_per_param(par_.precision, models::StateLayout::megatron).grads;
    const double params = static_cast<double>(models::trainable_stage_params(s_.model, par_, stage).total());
    push_compute(out, "zero grad buffer", memory_ticks(params * held));
  }

  void build_epilogue(StageProgram& sp) {
    auto& e = sp.epilogue;
    if (stage_holds(sp.stage, models::holds_head)) drain_head_wgrads(e);
    // Gradients, the optimizer step and the updated-weight gathers concern the
    // parameters that train (all of them, or the LoRA adapters).
    // (The routed experts' apart, over their own group: experts_apart().)
    const double local_params =
        static_cast<double>(models::trainable_stage_params(s_.model, par_, sp.stage).total());
    const double expert_params = trainable_stage_expert_params(sp.stage);
    const double dense_params = local_params - expert_params;
    if (reduce_after_schedule() || grads_after_schedule(sp.stage)) {
      // All gradient buckets reduced after the backward pass, nothing overlapped.
      const CollectiveKind c = grad_collective();
      for (const auto& [d, params] : {std::pair{Dim::dp, dense_params}, std::pair{Dim::edp, expert_params}}) {
        if (group_size(d) <= 1) continue;
        for (double left = params; left > 0; left -= bucket_params()) {
          bucket_passes(e, d, std::min(left, bucket_params()), kNoFlags);
          launch(e, d, static_cast<int>(d), c, std::min(left, bucket_params()) * grad_elem_bytes_,
                 joined({to_string(d), " grad ", to_string(c)}));
        }
      }
    }
    wait(e, Dim::dp, static_cast<int>(Dim::dp), 0);
    if (expert_params > 0) wait(e, Dim::edp, static_cast<int>(Dim::edp), 0);
    // Overlapped parameter gathers of this step must be done before the next.
    if (overlapped_param_gather()) wait(e, Dim::dp, kGatherChannel, 0);
    if (overlapped_param_gather() && expert_params > 0) wait(e, Dim::edp, kExpertGatherChannel, 0);
    // Gradient norm (clip) and inf check: an all-reduce over the model-parallel group.
    push_coll(e, Dim::mp, CollectiveKind::all_reduce, 8, "grad-norm all-reduce");
    // Adam step on this GPU's optimizer shard: the framework's kernels over fp32 master
    // weights, m, v and the gradient (optimizer_step_bytes: a fused kernel reading master,
    // m, v and the gradient and writing master, m, v and the 16-bit weights, 4+4+4+2 read +
    // 4+4+4+2 written = 28 bytes per parameter; FSDP's scripts' unfused passes and clipping).
    const bool sharded = par_.zero_stage >= 1 || fw_.bf16_optimizer;  // BF16_Optimizer: a ZeRO-1 equivalent
    const double shard = sharded ? dense_params / (par_.dp * par_.cp) + expert_params / par_.expert_dp() : local_params;
    if (par_.offload_optimizer) {
      // ZeRO-Offload (Ren et al. 2021): gradients down and weights up over PCIe,
      // the Adam step at the host's rate.
      const auto& g = compute_->gpu();
      const Seconds t = shard / g.host_adam_params_per_s + 2 * shard * grad_elem_bytes_ / g.pcie_bandwidth;
      push_compute(e, "optimizer (host)", to_ticks(t));
    } else {
      // What the step alone allocates (Megatron fp16's fp32 main grads, models::ModelStates).
      const Bytes step = sp.states.step;
      if (step > 0) e.push_back(mem(InstrKind::alloc, MemCat::optimizer, step, "fp32 main grads"));
      push_compute(e, "optimizer", memory_ticks(shard * (optimizer_step_bytes(fw_) + megatron_step_extra_bytes())));
      if (step > 0) e.push_back(mem(InstrKind::release, MemCat::optimizer, step, "fp32 main grads"));
    }
    if ((par_.zero_stage == 1 || par_.zero_stage == 2 || fw_.bf16_optimizer) && !overlapped_param_gather()) {
      // Distributed optimizer: all-gather the updated 16-bit weights, exposed; in
      // DeepSpeed's allgather_bucket_size buckets, else as one message (the experts'
      // over their own group, on its stream).
      for (const auto& [d, params, channel] : {std::tuple{Dim::dp, dense_params, kGatherChannel},
                                               std::tuple{Dim::edp, expert_params, kExpertGatherChannel}}) {
        const double bucket = fw_.allgather_bucket_params.value_or(params);
        for (double left = params; left > 0; left -= bucket)
          launch(e, d, channel, CollectiveKind::all_gather, std::min(left, bucket) * act_bytes_,
                 joined({to_string(d), " param all-gather"}));
      }
      wait(e, Dim::dp, kGatherChannel, 0);
      if (expert_params > 0) wait(e, Dim::edp, kExpertGatherChannel, 0);
    }
  }

  // Megatron's mixed-precision optimizer around its Adam kernel, per parameter of the shard
  // (megatron/core/optimizer/optimizer.py MixedPrecisionOptimizer: prepare_grads, clip_grad_norm,
  // step_with_ready_grads; 2021's megatron/optimizer/optimizer.py the same): the Adam kernel reads
  // an fp32 gradient and writes no 16-bit weights (its 28 bytes as above, the grad read 4 and no
  // weight write), _copy_model_grads_to_main_grads makes that gradient from a 16-bit main_grad
  // (`main_grad.float()`, 2 + 4; a view of an fp32 one), a loss scaler (fp16) unscales it and
  // checks for inf/nan (_amp_foreach_non_finite_check_and_unscale_, 4 + 4), the gradient norm
  // reads it (multi_tensor_l2norm, 4; clip_grad's scaling runs only when the norm exceeds it: not
  // counted), and _copy_main_params_to_model_params writes the 16-bit weights (4 + 2). FP32
  // training keeps no copies: the norm only. Other frameworks: the fused kernel alone.
  double megatron_step_extra_bytes() const {
    if (!is_megatron(fw_.framework)) return 0;
    if (par_.precision == models::Precision::fp32) return 4;
    const double grads = models::state_bytes_per_param(par_.precision, models::StateLayout::megatron).grads;
    return (grads < 4 ? 2 + 4 : 0) + (par_.precision == models::Precision::fp16 ? 4 + 4 : 0) + 4 + (4 + 2);
  }

  std::uint16_t label_of(std::string_view name) { return opt_.labels ? prog_.label(name) : 0; }

  // `parts` joined in a scratch string (no allocation once it has grown): the names built per
  // instruction, which label() looks up (it copies a name it has not seen).
  std::string_view joined(std::initializer_list<std::string_view> parts) {
    name_.clear();
    for (const std::string_view p : parts) name_ += p;
    return name_;
  }

  const Scenario& s_;
  const models::Parallelism& par_;
  const FrameworkProfile& fw_;
  const hw::ComputeCostModel* compute_;          // the stage being built's
  const hw::ComputeCostModel* default_compute_;  // every stage's unless BuildOptions::stage_compute names one
  BuildOptions opt_;
  Program prog_;
  double act_bytes_ = 2, tokens_ = 0, hidden_msg_ = 0, grad_elem_bytes_ = 2;
  Bytes deferred_head_wgrad_ = 0;  // models::deferred_head_wgrad_bytes
  double dense_layer_local_ = 0, moe_layer_local_ = 0, moe_layer_expert_local_ = 0;
  double pending_bucket_ = 0, pending_expert_bucket_ = 0;  // gradients not yet in a launched bucket
  int cur_stage_ = 0, cur_chunk_ = 0;  // the chunk being built (its head's parameters)
  bool overlap_ep_ = false;            // building a DualPipe F&B pair's passes (EP all-to-alls async)
  std::string name_;                   // joined()'s scratch
  // Labels of the most frequent instructions, looked up once (-1: not yet).
  int compute_label_ = -1;
  std::array<int, kNumDims> wait_label_ = [] {
    std::array<int, kNumDims> a{};
    a.fill(-1);
    return a;
  }();
  std::uint16_t compute_label() {
    if (compute_label_ < 0) compute_label_ = label_of("compute");
    return static_cast<std::uint16_t>(compute_label_);
  }
};

}  // namespace

Program build_program(const Scenario& s, const hw::ComputeCostModel& compute, BuildOptions opt) {
  return Builder(s, compute, opt).build();
}

BlockSeconds block_seconds(const Scenario& s, const hw::ComputeCostModel& compute) {
  return Builder(s, compute, {}).block_seconds();
}

}  // namespace ptsim::sim
