#include "sim/io/trace.h"
#include "sim/io/scenario_file.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <map>

#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

TEST(Trace, ChromeTraceEventFormatOneProcessPerRankShown) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(4, 2, 2, 8, 8, "", 51200), "test");
  SimulateOptions o;
  o.trace = true;
  o.trace_max_ranks = 4;  // the first rank of each of the 4 stages
  const Simulation sim = simulate(s, o);
  const auto& q = s.plan.par;
  const auto doc =
      nlohmann::json::parse(trace_json(sim, Layout(q.tp, q.cp, q.dp, q.pp, q.ep, s.cluster.gpus_per_node)));
  std::set<int> pids;
  double last_end = 0;
  int complete = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      pids.insert(e["pid"].get<int>());
      EXPECT_GE(e["dur"].get<double>(), 0);
      last_end = std::max(last_end, e["ts"].get<double>() + e["dur"].get<double>());
    }
  }
  EXPECT_GT(complete, 0);
  // Ranks 0, 4, 8, 12 (tp 2 × dp 2 per stage): one per stage.
  EXPECT_EQ(pids, (std::set<int>{0, 4, 8, 12}));
  // Nothing ends after the iteration (µs).
  EXPECT_LE(last_end, sim.result.iteration_time_s * 1e6 + 1e-3);
  EXPECT_EQ(doc["otherData"]["scenario"], "tiny");
}

// As `ptsim run --trace`: kernels not fused, so each has its name and layer.
Simulation traced_run(const Scenario& s) {
  SimulateOptions o;
  o.trace = true;
  o.build.fuse_compute = false;
  return simulate(s, o);
}

nlohmann::json trace_of(const Scenario& s, const Simulation& sim) {
  const auto& q = s.plan.par;
  return nlohmann::json::parse(trace_json(sim, Layout(q.tp, q.cp, q.dp, q.pp, q.ep, s.cluster.gpus_per_node)));
}

TEST(Trace, SpansSayForwardBackwardOrRecomputeAndCarryMicroBatchLayerAndBytes) {
  const Scenario s =
      parse_scenario(testing::tiny_gpt_yaml(2, 1, 2, 4, 8, "  recompute: full", 51200), "test");
  const auto doc = trace_of(s, traced_run(s));
  int fwd = 0, bwd = 0, recompute = 0, with_layer = 0, tp_with_bytes = 0;
  std::set<int> microbatches;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    const bool has_mb = e.contains("args") && e["args"].contains("microbatch");
    if (name.rfind("fwd ", 0) == 0) ++fwd;
    if (name.rfind("bwd ", 0) == 0) ++bwd;
    if (name.rfind("recompute ", 0) == 0) {
      ++recompute;
      EXPECT_EQ(name.find("(recompute)"), std::string::npos) << name;  // said once, in front
    }
    if ((name.rfind("fwd ", 0) == 0 || name.rfind("bwd ", 0) == 0) && e["tid"] == 0) {
      EXPECT_TRUE(has_mb) << name;
      if (has_mb) microbatches.insert(e["args"]["microbatch"].get<int>());
    }
    if (e.contains("args") && e["args"].contains("layer")) {
      ++with_layer;
      EXPECT_GE(e["args"]["layer"].get<int>(), 0);
      EXPECT_LT(e["args"]["layer"].get<int>(), 4);
    }
    if (e["cat"] == "tp" && name.find("tp all-reduce attn") != std::string::npos) {
      ASSERT_TRUE(e.contains("args") && e["args"].contains("bytes")) << name;
      // The attention block's all-reduce: S = b·s·h·2 bytes (bf16) = 1·128·1024·2.
      EXPECT_EQ(e["args"]["bytes"].get<double>(), 1 * 128 * 1024 * 2) << name;
      ++tp_with_bytes;
    }
  }
  EXPECT_GT(fwd, 0);
  EXPECT_GT(bwd, 0);
  EXPECT_GT(recompute, 0);
  EXPECT_GT(with_layer, 0);
  EXPECT_GT(tp_with_bytes, 0);
  EXPECT_EQ(microbatches, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Trace, PipelineSendsAreFlowArrowsToTheReceivingRank) {
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(4, 1, 1, 8, 8, "", 51200), "test");
  const auto doc = trace_of(s, traced_run(s));
  std::map<int, nlohmann::json> starts, finishes;
  int sends = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") starts[e["id"].get<int>()] = e;
    if (e["ph"] == "f") finishes[e["id"].get<int>()] = e;
    if (e["ph"] == "X" && e["cat"] == "pp") {
      ++sends;
      EXPECT_TRUE(e["args"].contains("to_rank"));
      EXPECT_GT(e["args"]["bytes"].get<double>(), 0);
    }
  }
  // 4 stages, 8 micro-batches: 3 forward and 3 backward boundaries each.
  EXPECT_EQ(sends, 2 * 3 * 8);
  ASSERT_EQ(starts.size(), static_cast<std::size_t>(sends));
  ASSERT_EQ(finishes.size(), starts.size());
  for (const auto& [id, st] : starts) {
    const auto& fi = finishes.at(id);
    EXPECT_NE(st["pid"], fi["pid"]);  // from one stage's rank to another's
    EXPECT_EQ(std::abs(st["pid"].get<int>() - fi["pid"].get<int>()), 1);  // neighbouring stages (tp = dp = 1)
    EXPECT_GE(fi["ts"].get<double>(), st["ts"].get<double>());
  }
}

std::string gunzip(const std::string& gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out, buf(1 << 16, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - z.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  inflateEnd(&z);
  return out;
}

TEST(Trace, GzipRoundTripsAndIsDeterministic) {
  EXPECT_TRUE(wants_gzip("t.json.gz"));
  EXPECT_FALSE(wants_gzip("t.json"));
  EXPECT_FALSE(wants_gzip(".gz"));
  const Scenario s = parse_scenario(testing::tiny_gpt_yaml(2, 2, 2, 4, 8, "", 51200), "test");
  const Simulation sim = traced_run(s);
  const auto& q = s.plan.par;
  const std::string text = trace_json(sim, Layout(q.tp, q.cp, q.dp, q.pp, q.ep, s.cluster.gpus_per_node));
  const std::string gz = gzip(text);
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size(), text.size() / 4);
  EXPECT_EQ(gunzip(gz), text);
  EXPECT_EQ(gzip(text), gz);
  EXPECT_EQ(gunzip(gzip("")), "");
}

}  // namespace
}  // namespace ptsim::sim
