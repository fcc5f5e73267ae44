// One transformer layer's time against a published per-layer measurement: Korthikanti
// et al. 2022 (arXiv 2205.05198) Table 4, the 22B model (h 6144, 64 heads, s 2048,
// micro-batch 4, tensor parallel 8 on one DGX A100), forward and backward of one layer
// under each activation-memory technique. The scenario is the reference run
// scenarios/reference/korthikanti-22b-full.yaml with the technique set by key; the
// layer's time is the sum of its spans (kernels and its tensor-parallel collectives)
// on rank 0, from the first one's start to the last one's end (a tensor-parallel
// collective that runs beside a GEMM counts once). Nothing was fitted on these figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "sim/core/simulate.h"
#include "sim/io/scenario_file.h"
#include "tests/test_paths.h"

namespace ptsim::sim {
namespace {

struct LayerTime {
  double fwd_ms = 0, bwd_ms = 0;
  double total() const { return fwd_ms + bwd_ms; }
};

LayerTime simulated_layer(const std::vector<std::string>& overrides) {
  const Scenario s = load_scenario(test::repo_path("scenarios/reference/korthikanti-22b-full.yaml"), overrides);
  SimulateOptions o;
  o.trace = true;
  o.trace_max_ranks = 1;
  o.build.fuse_compute = false;  // each kernel keeps its layer (as for --trace)
  const Simulation sim = simulate(s, o);
  // One micro-batch (global batch 4 = micro-batch 4): each phase of the layer is one interval.
  const Tick far = std::numeric_limits<Tick>::max();
  Tick begin[2] = {far, far}, end[2] = {0, 0};
  for (const Span& sp : sim.spans) {
    if (sp.rank != 0 || sp.layer != 5) continue;  // a layer away from the embedding
    if (sp.phase != SpanPhase::forward && sp.phase != SpanPhase::backward) continue;
    const int k = sp.phase == SpanPhase::backward;  // the recomputed forward is in backward
    begin[k] = std::min(begin[k], sp.start);
    end[k] = std::max(end[k], sp.end);
  }
  return {to_seconds(end[0] - begin[0]) * 1e3, to_seconds(end[1] - begin[1]) * 1e3};
}

TEST(LayerTimeReference, Korthikanti22bTable4) {
  struct Row {
    const char* what;
    std::vector<std::string> set;
    LayerTime published;  // Table 4, ms
  };
  const std::vector<Row> rows = {
      {"baseline, no recompute", {"parallel.recompute=none"}, {7.7, 11.9}},
      {"sequence parallelism", {"parallel.recompute=none", "parallel.sequence_parallel=true"}, {7.2, 11.8}},
      {"full recompute", {}, {7.7, 19.5}},
      {"selective recompute", {"parallel.recompute=selective"}, {7.7, 13.2}},
      {"selective + sequence", {"parallel.recompute=selective", "parallel.sequence_parallel=true"}, {7.2, 13.1}},
  };
  const LayerTime base = simulated_layer(rows[0].set);
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    const LayerTime t = simulated_layer(r.set);
    // Absolute: within 6 % (+1.0 to +3.8 %). The A100 constants were fitted on SC'21's
    // 2021 runs; the 2022 software of this table all-reduces (or reduce-scatters) a
    // column-parallel linear's input gradient beside its weight-gradient GEMM
    // (framework_profile.cpp), which brought the backward from 8-11 % slow to within
    // -2.5 to +2.3 % of the table; the forward, whose collectives block, is 6-7 % slow.
    EXPECT_NEAR(t.total() / r.published.total(), 1.0, 0.06) << t.fwd_ms << " + " << t.bwd_ms << " ms";
    // What each technique costs or saves against the baseline layer, the paper's
    // "overhead" column (-3 %, 39 %, 7 %, 4 %): within 3 percentage points (2 before
    // the backward's overlap: every row was then uniformly 8-9 % slow, so the ratios
    // hid it; now the slow forward weighs more in the recompute rows).
    const double published = r.published.total() / rows[0].published.total() - 1;
    const double predicted = t.total() / base.total() - 1;
    EXPECT_NEAR(predicted, published, 0.03) << predicted * 100 << " % against " << published * 100 << " %";
  }
}

}  // namespace
}  // namespace ptsim::sim
