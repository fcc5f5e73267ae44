// Start-up budget of the `ptsim` executable (issue: "start in milliseconds"): each iteration
// spawns the real binary and waits for it; wall time and the child's peak RSS (wait4's
// ru_maxrss) are reported as counters.
//   BM_Help         `ptsim --help`                       budget < 20 ms, < 20 MB peak RSS
//   BM_DefaultRun   `ptsim run scenarios/default.yaml`   wall − reported sim_wall_time_s < 20 ms
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "ptsim/config.h"

extern char** environ;

namespace {

struct ChildRun {
  double wall_s = 0;
  double peak_rss_mb = 0;
};

// Runs PTSIM_EXE with `args`, stdout and stderr to /dev/null; throws unless it exits 0.
ChildRun spawn_ptsim(const std::vector<std::string>& args) {
  std::vector<std::string> all{PTSIM_EXE};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int err = posix_spawn(&pid, PTSIM_EXE, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) throw std::runtime_error("cannot spawn " + std::string(PTSIM_EXE));
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  ChildRun r;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("ptsim exited with an error");
  return r;
}

void report(benchmark::State& state, double wall_sum, double rss_max) {
  state.counters["wall_ms"] = 1e3 * wall_sum / static_cast<double>(state.iterations());
  state.counters["peak_rss_MB"] = rss_max;
}

void BM_Help(benchmark::State& state) {
  double wall = 0, rss = 0;
  for (auto _ : state) {
    const auto r = spawn_ptsim({"--help"});
    wall += r.wall_s;
    rss = std::max(rss, r.peak_rss_mb);
  }
  report(state, wall, rss);
}
BENCHMARK(BM_Help)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DefaultRun(benchmark::State& state) {
  const std::string json = "/tmp/ptsim_startup_bench_" + std::to_string(getpid()) + ".json";
  double wall = 0, rss = 0, overhead = 0;
  for (auto _ : state) {
    const auto r = spawn_ptsim({"run", std::string(PTSIM_SOURCE_DIR) + "/scenarios/default.yaml", "--json", json});
    std::ifstream in(json);
    const double sim_s = nlohmann::json::parse(in).at("sim_wall_time_s").get<double>();
    wall += r.wall_s;
    overhead += r.wall_s - sim_s;
    rss = std::max(rss, r.peak_rss_mb);
  }
  std::remove(json.c_str());
  report(state, wall, rss);
  state.counters["outside_sim_ms"] = 1e3 * overhead / static_cast<double>(state.iterations());
}
BENCHMARK(BM_DefaultRun)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
