#include "models/zero3_gathers.h"

#include <algorithm>

#include "models/memory.h"
#include "models/params.h"

namespace ptsim::models {

bool experts_apart(const ModelSpec& m, const Parallelism& p) { return m.moe && (p.ep > 1 || p.expert_tp() != p.tp); }

bool zero3_gathers(const ModelSpec& m, const Parallelism& p) {
  return p.zero_stage == 3 && (p.dp * p.cp > 1 || (experts_apart(m, p) && p.expert_dp() > 1));
}

std::vector<GatherPiece> gather_pieces(const Parallelism& p, const std::vector<Op>* ops, double params, double expert,
                                       double elem_bytes) {
  std::vector<GatherPiece> out;
  if (!ops || !p.zero3.per_submodule) {
    if (params - expert > 0) out.push_back({-1, (params - expert) * elem_bytes, false});
    if (expert > 0) out.push_back({-1, expert * elem_bytes, true});
    return out;
  }
  const auto weights = [](const Op& op) {
    return static_cast<double>(op.gemm.k) * static_cast<double>(op.gemm.n) * op.gemm.count;
  };
  const auto apart = [&](const Op& op) { return op.routed_expert && expert > 0; };
  double total[2] = {0, 0};  // dense, expert GEMM weights
  for (const Op& op : *ops)
    if (op.cls == OpClass::gemm || op.cls == OpClass::router) total[apart(op)] += weights(op);
  const double bytes[2] = {(params - expert) * elem_bytes, expert * elem_bytes};
  for (std::size_t j = 0; j < ops->size(); ++j) {
    const Op& op = (*ops)[j];
    if (op.cls != OpClass::gemm && op.cls != OpClass::router) continue;
    const bool e = apart(op);
    if (weights(op) < p.zero3.persistence_elems || total[e] <= 0) continue;
    out.push_back({static_cast<int>(j), bytes[e] * weights(op) / total[e], e});
  }
  return out;
}

namespace {

struct Unit {
  int block = 0;
  GatherPiece piece;
  bool recompute = false;  // the recompute pass's use, inside the backward
};

// The bytes held at once over one pass's units, used in order: a unit and those used with it
// (a block's dense and expert parts) are gathered at first use, the next block's once the
// current one is in use (per layer) or while fewer than the prefetch bucket's elements are
// ahead (per submodule); a submodule's copy is freed after its use unless the recompute pass
// keeps it for the backward; what is left of a block is freed at its end.
double pass_peak(const std::vector<Unit>& u, const Parallelism& p, bool prefetch, double elem_bytes) {
  const std::size_t n = u.size();
  const auto together_end = [&](std::size_t k) {
    std::size_t e = k + 1;
    while (e < n && u[k].piece.op < 0 && u[e].block == u[k].block && u[e].piece.op < 0 &&
           u[e].piece.expert != u[e - 1].piece.expert)
      ++e;
    return e;
  };
  std::vector<char> freed(n, 0);
  double held = 0, peak = 0;
  std::size_t launched = 0;
  for (std::size_t k = 0; k < n;) {
    const std::size_t end = together_end(k);
    while (launched < end) held += u[launched++].piece.bytes;
    if (prefetch && !p.zero3.per_submodule) {
      if (launched == end && launched < n)
        for (const std::size_t next = together_end(launched); launched < next;) held += u[launched++].piece.bytes;
    } else if (prefetch) {
      const auto ahead = [&] {
        double elems = 0;
        for (std::size_t j = end; j < launched; ++j) elems += u[j].piece.bytes / elem_bytes;
        return elems;
      };
      while (launched < n && ahead() < p.zero3.prefetch_elems) held += u[launched++].piece.bytes;
    }
    peak = std::max(peak, held);
    for (std::size_t j = k; j < end; ++j) {
      if (u[j].piece.op < 0) continue;
      bool keep = u[j].recompute;  // kept for the backward unless gathered again for it
      for (std::size_t q = j + 1; keep && q < n; ++q)
        keep = !(u[q].block == u[j].block && u[q].piece.op == u[j].piece.op);
      if (!keep) freed[j] = 1, held -= u[j].piece.bytes;
    }
    if (end == n || u[end].block != u[k].block)
      for (std::size_t j = 0; j < launched; ++j)
        if (u[j].block == u[k].block && !freed[j]) freed[j] = 1, held -= u[j].piece.bytes;
    k = end;
  }
  return peak;
}

}  // namespace

double zero3_gathered_peak(const ModelSpec& m, const Parallelism& p, int stage) {
  if (!zero3_gathers(m, p)) return 0;
  const double e = activation_element_bytes(p.precision);
  const bool apart = experts_apart(m, p);
  const LocalParams dense_layer = layer_params_per_gpu(m, p.tp, p.ep, false, p.etp);
  const LocalParams moe_layer = m.moe ? layer_params_per_gpu(m, p.tp, p.ep, true, p.etp) : LocalParams{};
  const std::vector<Op> dense_ops = layer_ops(m, p, false);
  const std::vector<Op> moe_ops = m.moe ? layer_ops(m, p, true) : std::vector<Op>{};
  const auto chunk_units = [&](int c, bool backward) {
    std::vector<int> order;  // -1 embedding, -2 head
    if (holds_embedding(p, stage, c)) order.push_back(-1);
    const LayerRange r = chunk_layers(m, p, stage, c);
    for (int l = r.first; l < r.first + r.count; ++l) order.push_back(l);
    if (holds_head(p, stage, c)) order.push_back(-2);
    if (backward) std::reverse(order.begin(), order.end());
    std::vector<Unit> units;
    for (int b : order) {
      if (b < 0) {
        // The embedding and the head: whole blocks, as the simulator holds them.
        const double params = b == -1 ? embedding_params_held(m, p) : head_params_held(m, p, stage, c);
        for (const GatherPiece& g : gather_pieces(p, nullptr, params, 0, e)) units.push_back({b, g, false});
        continue;
      }
      const bool moe = m.is_moe_layer(b);
      const LocalParams lp = moe ? moe_layer : dense_layer;
      const double expert = apart && moe ? static_cast<double>(lp.expert) : 0;
      const auto pieces = gather_pieces(p, &(moe ? moe_ops : dense_ops), static_cast<double>(lp.total()), expert, e);
      if (!backward || !p.zero3.per_submodule) {
        for (const GatherPiece& g : pieces) units.push_back({b, g, false});
        continue;
      }
      // Full recomputation re-runs the forward first; a layer beyond the reuse distance is
      // gathered again for the backward proper.
      const bool recompute = p.recompute == Recompute::full;
      if (recompute)
        for (const GatherPiece& g : pieces) units.push_back({b, g, true});
      if (!recompute || (p.zero3.reuse_elems > 0 && static_cast<double>(lp.total()) > p.zero3.reuse_elems))
        for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) units.push_back({b, *it, false});
    }
    return units;
  };
  double peak = 0;
  if (!p.zero3.reshard_after_forward) {
    // Every forward in flight keeps its chunk's gathers; the backward gathers nothing.
    for (int k = 0, n = in_flight_microbatch_chunks(p, stage); k < n; ++k)
      for (const Unit& u : chunk_units(forward_chunk(p, k), false)) peak += u.piece.bytes;
    return peak;
  }
  for (int c = 0; c < p.vpp; ++c) {
    peak = std::max(peak, pass_peak(chunk_units(c, false), p, p.zero3.prefetch, e));
    peak = std::max(peak, pass_peak(chunk_units(c, true), p, p.zero3.backward_prefetch, e));
  }
  return peak;
}

}  // namespace ptsim::models
