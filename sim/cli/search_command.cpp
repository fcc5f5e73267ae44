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

#include "ptsim/config.h"
#include "sim/cli/commands.h"
#include "sim/io/output_file.h"
#include "sim/io/scenario_file.h"
#include "sim/tools/search.h"

#if PTSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace ptsim::cli {
namespace {

// Doubles per outcome on the wire: index, feasible, six metrics, exposed comm per dim.
constexpr int kOutcomeDoubles = 8 + sim::kNumDims;

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
      out.push_back(o);
    }
    return out;
  }

 private:
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};
#endif

std::string format_eta(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  if (s < 60) return fmt::format("{:.0f}s", s);
  return fmt::format("{:.0f}m{:02.0f}s", std::floor(s / 60), std::fmod(s, 60));
}

// A progress bar on a terminal; plain lines (at most one every 2 s) otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(fileno(stderr)) != 0) {}
  void operator()(const sim::SearchProgress& p) {
    const double frac = p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 1.0;
    const double eta = frac > 0 ? p.elapsed_s * (1 - frac) / frac : -1;
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(frac * kWidth);
      std::string bar(static_cast<std::size_t>(filled), '#');
      bar.resize(kWidth, '.');
      std::fprintf(stderr, "\r[%s] %3.0f%% %lld/%lld plans, %lld simulated, best %.0f tokens/s, ETA %s   ", bar.c_str(),
                   100 * frac, static_cast<long long>(p.done), static_cast<long long>(p.total),
                   static_cast<long long>(p.simulated), p.best_tokens_per_s, format_eta(eta).c_str());
      if (p.done >= p.total) std::fprintf(stderr, "\n");
      std::fflush(stderr);
      return;
    }
    if (p.done < p.total && p.elapsed_s - last_line_s_ < 2.0) return;
    if (p.done >= p.total && finished_) return;
    finished_ = p.done >= p.total;
    last_line_s_ = p.elapsed_s;
    std::fprintf(stderr,
                 "search: %lld/%lld plans settled, %lld simulated, best %.0f tokens/s, %.1f s elapsed, ETA %s\n",
                 static_cast<long long>(p.done), static_cast<long long>(p.total), static_cast<long long>(p.simulated),
                 p.best_tokens_per_s, p.elapsed_s, format_eta(eta).c_str());
  }

 private:
  bool tty_;
  bool finished_ = false;
  double last_line_s_ = -10;
};

}  // namespace

Command search_command() {
  struct Opts {
    std::string scenario, json, csv;
    std::vector<std::string> sets, fix;
    std::vector<int> gpus;
    int top = 10, threads = 0, max_mbs = 8, max_vpp = 8, max_cp = 8;
    bool full = false, quiet = false, no_progress = false;
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
    int rank = 0;
#if PTSIM_HAVE_MPI
    MpiSession mpi;
    rank = mpi.rank();
    if (mpi.size() > 1) {
      so.shard_rank = mpi.rank();
      so.shard_count = mpi.size();
      so.exchange = [&mpi](const std::vector<sim::CandidateOutcome>& local) { return mpi.all_gather(local); };
    }
#endif
    auto printer = std::make_shared<ProgressPrinter>();
    if (!o->no_progress && rank == 0) so.progress = [printer](const sim::SearchProgress& p) { (*printer)(p); };
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
    const bool to_stdout = o->json == "-" || o->csv == "-";
    if (!o->quiet && !to_stdout) std::cout << sim::search_summary_text(r);
    if (!o->json.empty()) sim::write_output(o->json, sim::search_to_json(r).dump(2) + "\n");
    if (!o->csv.empty()) sim::write_output(o->csv, sim::search_to_csv(r));
    return 0;
  };
  return c;
}

}  // namespace ptsim::cli
