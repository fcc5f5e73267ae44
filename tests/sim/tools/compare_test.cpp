#include "sim/tools/compare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hw/errors.h"
#include "sim/io/compare_html.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "tests/sim/test_scenarios.h"

namespace ptsim::sim {
namespace {

namespace fs = std::filesystem;

// Two tiny-GPT scenario files on 8 A100s (pp 2 × dp 4 and pp 4 × dp 2), with a training goal.
class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptsim_compare_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const std::string goal = "  total_tokens: 2.048e9\n";
    write("a.yaml", testing::tiny_gpt_yaml(2, 4, 1, 8, 16) + goal);
    write("b.yaml", testing::tiny_gpt_yaml(4, 2, 1, 8, 16) + goal);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
  // What `ptsim run --fold FILE --set …` reports.
  static Result run(const std::string& file, const std::vector<std::string>& sets = {}) {
    SimulateOptions o;
    o.fold = true;
    return simulate(load_scenario(file, sets), o).result;
  }
  std::vector<ComparedPlan> compare_files(const std::vector<std::string>& sets = {}) const {
    CompareOptions o;
    o.files = {path("a.yaml"), path("b.yaml")};
    o.sets = sets;
    o.fold = true;
    return run_comparison(o);
  }
  fs::path dir_;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  if (sep == ',' && !s.empty() && s.back() == sep) out.emplace_back();  // a trailing empty cell
  return out;
}

TEST(SetPlan, ShortNamesBecomeScenarioKeys) {
  EXPECT_EQ(set_plan_overrides("tp=8 pp=4  dp=16 mbs=1 zero=1 recompute=full sp=true parallel.overlap_p2p=false"),
            (std::vector<std::string>{"parallel.tensor_parallel=8", "parallel.pipeline_parallel=4",
                                      "parallel.data_parallel=16", "training.micro_batch_size=1",
                                      "parallel.zero_stage=1", "parallel.recompute=full",
                                      "parallel.sequence_parallel=true", "parallel.overlap_p2p=false"}));
  EXPECT_EQ(set_plan_overrides("ep=8 etp=1"),
            (std::vector<std::string>{"parallel.expert_parallel=8", "parallel.expert_tensor_parallel=1"}));
  EXPECT_TRUE(set_plan_overrides("").empty());
}

TEST(SetPlan, BadWordsAreInputErrorsNamingThem) {
  auto message = [](const std::string& spec) {
    try {
      set_plan_overrides(spec);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("tq=8").find("--set-plan: tq=8: 'tq' is not a plan key (did you mean 'tp'?"), std::string::npos);
  EXPECT_NE(message("tp8").find("expected KEY=VALUE"), std::string::npos);
  EXPECT_NE(message("tp=").find("expected KEY=VALUE"), std::string::npos);
}

TEST_F(CompareTest, RowsEqualTheIndividualRuns) {
  const auto plans = compare_files();
  const auto rows = compare_rows(plans, CompareSort::speed);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    const Result r = run(plans[row.index].file);
    EXPECT_EQ(row.iteration_time_s, r.iteration_time_s);
    EXPECT_EQ(row.tokens_per_s, r.tokens_per_s);
    EXPECT_EQ(row.mfu, r.mfu);
    EXPECT_EQ(row.bubble_fraction, r.bubble_fraction);
    EXPECT_EQ(row.exposed_s[0], r.exposed_comm_s[static_cast<int>(Dim::tp)]);
    EXPECT_EQ(row.exposed_s[3], r.exposed_comm_s[static_cast<int>(Dim::pp)]);
    EXPECT_EQ(row.exposed_s[4], r.exposed_comm_s[static_cast<int>(Dim::dp)]);
    EXPECT_EQ(row.peak_bytes, r.peak_bytes);
    EXPECT_EQ(row.headroom_bytes, r.capacity_bytes - r.peak_bytes);
    ASSERT_TRUE(row.time_to_train && r.time_to_train);
    EXPECT_EQ(row.time_to_train->days, r.time_to_train->days);
  }
  // Best first, and the difference from the best is the throughput ratio.
  EXPECT_GE(rows[0].tokens_per_s, rows[1].tokens_per_s);
  EXPECT_EQ(rows[0].vs_best_pct, 0);
  EXPECT_DOUBLE_EQ(rows[1].vs_best_pct, 100 * (rows[1].tokens_per_s / rows[0].tokens_per_s - 1));
}

TEST_F(CompareTest, CsvAndJsonCarryTheRunValues) {
  const auto plans = compare_files({"cluster.price_per_gpu_hour=2"});
  const auto rows = compare_rows(plans, CompareSort::speed);
  const auto lines = split(compare_csv(rows, plans), '\n');
  ASSERT_EQ(lines.size(), 3u);
  const auto header = split(lines[0], ',');
  EXPECT_EQ(header, compare_columns());
  const auto json = compare_json(rows, plans, CompareSort::speed);
  EXPECT_EQ(json["columns"].get<std::vector<std::string>>(), compare_columns());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto cells = split(lines[i + 1], ',');
    ASSERT_EQ(cells.size(), header.size());
    const auto run_json = to_json(run(plans[rows[i].index].file, {"cluster.price_per_gpu_hour=2"}));
    auto cell = [&](const std::string& col) {
      return cells[static_cast<std::size_t>(std::find(header.begin(), header.end(), col) - header.begin())];
    };
    // The same shortest round-trip text as the run's JSON.
    EXPECT_EQ(cell("iteration_time_s"), run_json["iteration_time_s"].dump());
    EXPECT_EQ(cell("tokens_per_s"), run_json["tokens_per_s"].dump());
    EXPECT_EQ(cell("mfu"), run_json["mfu"].dump());
    EXPECT_EQ(cell("exposed_dp_s"), run_json["exposed_comm_s"]["dp"].dump());
    EXPECT_EQ(cell("peak_bytes"), run_json["memory"]["peak_bytes"].dump());
    EXPECT_EQ(cell("days"), run_json["time_to_train"]["days"].dump());
    EXPECT_EQ(cell("cost"), run_json["time_to_train"]["cost"].dump());
    EXPECT_EQ(cell("energy_kwh"), run_json["time_to_train"]["energy_kwh"].dump());
    const auto& row = json["plans"][i];
    for (const auto& col : compare_columns()) EXPECT_TRUE(row.contains(col)) << col;
    EXPECT_EQ(row["iteration_time_s"], run_json["iteration_time_s"]);
    EXPECT_EQ(row["gpu_hours"], run_json["time_to_train"]["gpu_hours"]);
    EXPECT_EQ(row["plan"], run_json["plan"]);
  }
}

TEST_F(CompareTest, TableFitsOneHundredColumns) {
  const auto plans = compare_files({"cluster.price_per_gpu_hour=2"});
  auto rows = compare_rows(plans, CompareSort::speed);
  // Extreme figures still fit: 3 years, 2 TiB over capacity, a trillion tokens/s, 10^15 cost, 1,000 s waits.
  auto extreme = rows[1];
  extreme.rank = 3;
  extreme.iteration_time_s = 12345;
  extreme.tokens_per_s = 1.5e12;
  extreme.mfu = 1;
  extreme.exposed_s = {1234, 99999, 0.001, 10.5, 100};
  extreme.peak_bytes = 2.2e12;
  extreme.headroom_bytes = -2.1e12;
  extreme.vs_best_pct = -99.99;
  extreme.time_to_train->days = 123456;
  extreme.time_to_train->cost = 1e15;
  rows.push_back(extreme);
  const std::string text = compare_table_text(rows, plans, CompareSort::speed);
  for (const auto& line : split(text, '\n')) {
    std::size_t width = 0;  // code points
    for (unsigned char ch : line) width += (ch & 0xC0) != 0x80;
    EXPECT_LE(width, 100u) << line;
  }
  EXPECT_NE(text.find("best"), std::string::npos);
  EXPECT_NE(text.find("dp4 tp1 pp2"), std::string::npos);
  EXPECT_NE(text.find("dp2 tp1 pp4"), std::string::npos);
}

TEST_F(CompareTest, VariantsOfOneScenario) {
  CompareOptions o;
  o.files = {path("a.yaml")};
  o.set_plans = {"pp=2 dp=4", "pp=4 dp=2 mbs=2"};
  o.fold = true;
  const auto plans = run_comparison(o);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[1].scenario.plan.par.pp, 4);
  EXPECT_EQ(plans[1].scenario.plan.par.micro_batch_size, 2);
  EXPECT_EQ(
      plans[1].sim.result.iteration_time_s,
      run(path("a.yaml"), {"parallel.pipeline_parallel=4", "parallel.data_parallel=2", "training.micro_batch_size=2"})
          .iteration_time_s);
  EXPECT_EQ(plans[1].label(), path("a.yaml") + " [pp=4 dp=2 mbs=2]");
  // An invalid variant names the --set-plan, the file and the key.
  o.set_plans = {"tp=64"};
  try {
    run_comparison(o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--set-plan \"tp=64\""), std::string::npos) << m;
    EXPECT_NE(m.find("a.yaml: cluster.num_gpus: 8 is not divisible"), std::string::npos) << m;
  }
}

TEST_F(CompareTest, SortByCost) {
  const auto plans = compare_files({"cluster.price_per_gpu_hour=3"});
  EXPECT_THROW(compare_rows(compare_files(), CompareSort::cost), InputError);  // no price
  const auto speed = compare_rows(plans, CompareSort::speed);
  const auto cost = compare_rows(plans, CompareSort::cost);
  // Same GPUs and price: cheapest = fastest.
  EXPECT_EQ(cost[0].index, speed[0].index);
  EXPECT_EQ(cost[0].vs_best_pct, 0);
  EXPECT_DOUBLE_EQ(cost[1].vs_best_pct, 100 * (*cost[1].time_to_train->cost / *cost[0].time_to_train->cost - 1));
  EXPECT_GE(cost[1].vs_best_pct, 0);
}

TEST_F(CompareTest, HtmlHasEveryChartPerPlan) {
  CompareOptions o;
  o.files = {path("a.yaml"), path("b.yaml")};
  o.fold = true;
  o.trace = true;
  const auto plans = run_comparison(o);
  const auto rows = compare_rows(plans, CompareSort::speed);
  std::vector<ComparePagePlan> page;
  for (const auto& r : rows) page.push_back({r.label, &plans[r.index].scenario, &plans[r.index].sim});
  const std::string html = compare_html(page, compare_table_text(rows, plans, CompareSort::speed));
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  std::size_t svgs = 0;
  for (auto pos = html.find("<svg"); pos != std::string::npos; pos = html.find("<svg", pos + 1)) ++svgs;
  EXPECT_EQ(svgs, 1u + 3u * plans.size());  // time bars; memory, bytes and timeline per plan
  for (const auto& r : rows) EXPECT_NE(html.find(r.label), std::string::npos);
  for (const char* seg : {"compute: ", "bubble: "}) EXPECT_NE(html.find(seg), std::string::npos) << seg;
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
}

}  // namespace
}  // namespace ptsim::sim
