// `ptsim search SCENARIO.yaml` (CONTRACT §1): rank every valid plan by simulated
// throughput. Under `mpirun -n N` (when built with MPI) the candidates of each
// wave are spread over the ranks and every rank receives all outcomes, so the
// branch-and-bound decisions, and the result, equal the single-process search;
// rank 0 prints and writes the files.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "hw/errors.h"
#include "hw/input_file.h"
#include "ptsim/config.h"
#include "sim/cli/commands.h"
#include "sim/core/time_to_train.h"
#include "sim/io/output_file.h"
#include "sim/io/result_json.h"
#include "sim/io/scenario_file.h"
#include "sim/tools/search.h"

#if PTSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace ptsim::cli {
namespace {

// Doubles per outcome on the wire: index, feasible, six metrics, exposed comm per dim.
constexpr int kOutcomeDoubles = 9 + sim::kNumDims;

#if PTSIM_HAVE_MPI
// MPI only when a launcher started us (OpenMPI, MPICH/Hydra, Slurm's PMI): a plain
// `ptsim search` never initialises MPI.
bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

class MpiSession {
 public:
  MpiSession() {
    if (!launched_by_mpirun()) return;
    int ready = 0;
    MPI_Initialized(&ready);
    if (!ready) {
      MPI_Init(nullptr, nullptr);
      owned_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiSession() {
    if (owned_) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  [[noreturn]] void abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
  }

  std::vector<sim::CandidateOutcome> all_gather(const std::vector<sim::CandidateOutcome>& local) const {
    std::vector<double> send;
    for (const auto& o : local) {
      send.push_back(static_cast<double>(o.index));
      send.push_back(o.feasible ? 1.0 : 0.0);
      for (double x :
           {o.tokens_per_s, o.model_tflops_per_gpu, o.mfu, o.bubble_fraction, o.peak_bytes, o.iteration_time_s})
        send.push_back(x);
      for (double x : o.exposed_comm_s) send.push_back(x);
      send.push_back(o.goodput);
    }
    int count = static_cast<int>(send.size());
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      displs[static_cast<std::size_t>(r)] = total;
      total += counts[static_cast<std::size_t>(r)];
    }
    std::vector<double> recv(static_cast<std::size_t>(total));
    MPI_Allgatherv(send.data(), count, MPI_DOUBLE, recv.data(), counts.data(), displs.data(), MPI_DOUBLE,
                   MPI_COMM_WORLD);
    std::vector<sim::CandidateOutcome> out;
    for (std::size_t i = 0; i + kOutcomeDoubles <= recv.size(); i += kOutcomeDoubles) {
      sim::CandidateOutcome o;
      const double* d = &recv[i];
      o.index = static_cast<std::int64_t>(d[0]);
      o.feasible = d[1] != 0.0;
      o.tokens_per_s = d[2], o.model_tflops_per_gpu = d[3], o.mfu = d[4], o.bubble_fraction = d[5];
      o.peak_bytes = d[6], o.iteration_time_s = d[7];
      for (int k = 0; k < sim::kNumDims; ++k) o.exposed_comm_s[static_cast<std::size_t>(k)] = d[8 + k];
      o.goodput = d[8 + sim::kNumDims];
      out.push_back(o);
    }
    return out;
  }

 private:
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};
#endif

// Progress on stderr: a bar redrawn in place on a terminal, plain lines (at most one
// every 2 s, and one at the end of each phase) otherwise. Each phase names what it counts.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(fileno(stderr)) != 0) {}
  void operator()(const sim::SearchProgress& p) {
    const bool check = p.phase == sim::SearchProgress::Phase::check;
    const bool end = p.done >= p.total;
    const std::string counts =
        check ? fmt::format("checking plans: {}/{} candidates", p.done, p.total)
              : fmt::format("simulating: {}/{} plans that fit settled, {} simulated, best {:.0f} tokens/s", p.done,
                            p.total, p.simulated, p.best_tokens_per_s);
    std::string eta = fmt::format("{:.1f} s", p.elapsed_s);
    if (!end && p.eta_s >= 0) eta = fmt::format("ETA {}{}", check ? "" : "<= ", sim::format_eta(p.eta_s));
    if (!end && p.eta_s < 0) eta = check ? "ETA ?" : "ETA once the top plans are simulated";
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s, %s", counts.c_str(), eta.c_str());
      if (end) std::fprintf(stderr, "\n");
      std::fflush(stderr);
      return;
    }
    const int phase = static_cast<int>(p.phase);
    if (end ? phase <= finished_phase_ : p.elapsed_s - last_line_s_ < 2.0) return;
    if (end) finished_phase_ = phase;
    last_line_s_ = p.elapsed_s;
    std::fprintf(stderr, "search: %s, %s\n", counts.c_str(), eta.c_str());
  }

 private:
  bool tty_;
  int finished_phase_ = -1;
  double last_line_s_ = -10;
};

// "--min-headroom 10%": a percentage from 0 to below 100, as a fraction.
double parse_headroom(const std::string& v) {
  std::size_t used = 0;
  double x = -1;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used + 1 != v.size() || v.back() != '%' || !(x >= 0 && x < 100))
    throw std::invalid_argument(
        fmt::format("--min-headroom '{}': expected a percentage of the GPU memory from 0% to below 100%, e.g. 10%", v));
  return x / 100;
}

// "--emit-scenario N FILE": N as numbered in the table.
const sim::RankedPlan& plan_to_emit(const sim::SearchResult& r, const std::string& n) {
  std::size_t used = 0;
  long long k = 0;
  try {
    k = std::stoll(n, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != n.size() || k < 1 || k > static_cast<long long>(r.plans.size()))
    throw std::invalid_argument(
        fmt::format("--emit-scenario {}: not a plan number of the table (1 to {})", n, r.plans.size()));
  return r.plans[static_cast<std::size_t>(k - 1)];
}

// --sort cost needs the cost of a plan: a training goal and a price (exit 2 naming the key).
void require_cost(const sim::Scenario& base, const std::string& file) {
  const auto t = sim::time_to_train(base, 1.0);
  if (!t)
    throw InputError(file, "training.total_tokens", "--sort cost needs a cost to train",
                     "give training.total_tokens (or train_iters) and cluster.price_per_gpu_hour");
  if (!t->cost)
    throw InputError(file, "cluster.price_per_gpu_hour", "--sort cost needs a price",
                     "give cluster.price_per_gpu_hour (e.g. 2.5)");
}

}  // namespace

Command search_command() {
  struct Opts {
    std::string scenario, json, csv, report, headroom = "0%", sort = "speed";
    std::vector<std::string> sets, fix, emit;
    std::vector<int> gpus;
    int top = 10, threads = 0, max_mbs = 8, max_vpp = 8, max_cp = 8;
    bool full = false, quiet = false, no_progress = false, progress = false, explain = false;
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.add = [o](CLI::App& app) {
    auto* sub = app.add_subcommand("search", "rank every valid parallel plan of a scenario by simulated throughput");
    sub->add_option("scenario", o->scenario, "scenario YAML (its model, cluster and global batch)")->required();
    sub->add_option(
           "--fix", o->fix,
           "restrict a searched key to value(s), e.g. --fix parallel.tensor_parallel=8 --fix parallel.zero_stage=1,2")
        ->take_all();
    sub->add_option("--gpus", o->gpus, "cluster sizes to sweep, e.g. --gpus 512,1024,2048 (1 to 1048576)")
        ->delimiter(',')
        ->check(CLI::Range(1, 1 << 20));
    sub->add_option("--top", o->top, "plans to print (K), 1 to 100000")->check(CLI::Range(1, 100000));
    sub->add_option("--json", o->json, "write the ranking (CONTRACT §1) to FILE ('-' = stdout)");
    sub->add_option("--csv", o->csv, "write the top plans as CSV to FILE ('-' = stdout)");
    sub->add_option("--report", o->report,
                    "write an HTML page: the top plans side by side and throughput vs memory of every plan");
    sub->add_option("--sort", o->sort,
                    "rank by speed (tokens/s), by cost to train (needs a goal and a price), or by goodput "
                    "(tokens/s x goodput under failures and checkpoints: needs a reliability section)")
        ->check(CLI::IsMember({"speed", "cost", "goodput"}));
    sub->add_option("--threads", o->threads, "worker threads, 0 to 1024 (default 0: every core)")
        ->check(CLI::Range(0, 1024));
    sub->add_flag("--full", o->full, "simulate every rank (default: one representative rank per stage)");
    sub->add_option("--set", o->sets, "override a scenario key before searching")->take_all();
    sub->add_option("--max-micro-batch", o->max_mbs, "largest micro-batch size tried, 1 to 1024")
        ->check(CLI::Range(1, 1024));
    sub->add_option("--max-virtual-stages", o->max_vpp, "largest interleaving degree tried, 1 to 128")
        ->check(CLI::Range(1, 128));
    sub->add_option("--max-context-parallel", o->max_cp, "largest context-parallel degree tried, 1 to 1024")
        ->check(CLI::Range(1, 1024));
    sub->add_option("--min-headroom", o->headroom, "GPU memory a plan must leave free, e.g. 10% (default 0%)");
    sub->add_option("--emit-scenario", o->emit, "write plan N of the table as a runnable scenario: N FILE.yaml")
        ->expected(2)
        ->type_name("N FILE");
    sub->add_flag("--explain", o->explain, "list every prune reason and why each losing family lost");
    sub->add_flag("--progress", o->progress, "progress on stderr even when it is not a terminal");
    sub->add_flag("--no-progress", o->no_progress, "no progress output on stderr");
    sub->add_flag("-q,--quiet", o->quiet, "no summary on stdout");
    return sub;
  };
  c.execute = [o]() {
    const sim::Scenario base = sim::load_scenario(o->scenario, o->sets);
    sim::SearchOptions so;
    so.fix = o->fix;
    so.gpus = o->gpus;
    so.top_k = o->top;
    so.threads = o->threads;
    so.full = o->full;
    so.max_micro_batch_size = o->max_mbs;
    so.max_virtual_stages = o->max_vpp;
    so.max_context_parallel = o->max_cp;
    so.min_headroom = parse_headroom(o->headroom);
    so.sort = o->sort == "cost"      ? sim::SearchSort::cost
              : o->sort == "goodput" ? sim::SearchSort::goodput
                                     : sim::SearchSort::speed;
    if (so.sort == sim::SearchSort::cost) require_cost(base, o->scenario);
    if (so.sort == sim::SearchSort::goodput && !base.reliability)
      throw InputError(o->scenario, "reliability", "--sort goodput needs a reliability section",
                       "add `reliability:` (README \"Goodput\"); an empty one takes every default");
    if (!o->emit.empty() && (o->emit[0].empty() || o->emit[0].find_first_not_of("0123456789") != std::string::npos ||
                             std::stoll(o->emit[0].substr(0, 9)) < 1))
      throw std::invalid_argument(
          fmt::format("--emit-scenario {}: N must be a plan number of the table (1, 2, …)", o->emit[0]));
    const bool to_stdout = o->json == "-" || o->csv == "-";
    const bool show_progress = !o->no_progress && !to_stdout && (o->progress || isatty(fileno(stderr)) != 0);
    int rank = 0;
#if PTSIM_HAVE_MPI
    MpiSession mpi;
    rank = mpi.rank();
#endif
    // README "Warnings": what the scenario left to a default, once on stderr and in the JSON.
    if (rank == 0) std::cerr << sim::warnings_text(base.warnings);
#if PTSIM_HAVE_MPI
    if (mpi.size() > 1) {
      so.shard_rank = mpi.rank();
      so.shard_count = mpi.size();
      so.exchange = [&mpi](const std::vector<sim::CandidateOutcome>& local) { return mpi.all_gather(local); };
    }
#endif
    auto printer = std::make_shared<ProgressPrinter>();
    if (show_progress && rank == 0) so.progress = [printer](const sim::SearchProgress& p) { (*printer)(p); };
    sim::SearchResult r;
#if PTSIM_HAVE_MPI
    if (mpi.size() > 1) {
      try {
        r = sim::search(base, so);
      } catch (const std::exception& e) {
        std::cerr << "error (MPI rank " << mpi.rank() << "): " << e.what() << "\n";
        mpi.abort(2);
      }
    } else {
      r = sim::search(base, so);
    }
#else
    r = sim::search(base, so);
#endif
    if (rank != 0) return 0;
    if (!o->quiet && !to_stdout) std::cout << sim::search_summary_text(r, o->explain);
    if (!o->emit.empty()) {
      const sim::RankedPlan& p = plan_to_emit(r, o->emit[0]);
      sim::write_output(o->emit[1], sim::plan_scenario_yaml(hw::read_input_file(o->scenario, "scenario file"),
                                                            o->scenario, o->sets, p));
      if (!o->quiet && !to_stdout) std::cout << fmt::format("plan #{} written to {}\n", p.rank, o->emit[1]);
    }
    if (!o->json.empty()) {
      nlohmann::json j = sim::search_to_json(r);
      j["warnings"] = base.warnings;
      sim::write_output(o->json, j.dump(2) + "\n");
    }
    if (!o->csv.empty()) sim::write_output(o->csv, sim::search_to_csv(r));
    if (!o->report.empty()) sim::write_output(o->report, sim::search_report_html(base, o->scenario, r, o->full));
    return 0;
  };
  return c;
}

}  // namespace ptsim::cli
