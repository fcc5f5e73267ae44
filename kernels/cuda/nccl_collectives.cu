// NCCL collective drivers over the local GPUs of one process (ncclCommInitAll): all-reduce,
// all-gather, reduce-scatter, all-to-all (grouped send/recv), send/recv. Sizes follow
// nccl-tests' `size` convention (hw/cost_table.h). Timing: warm-up, then per repeat CUDA
// events on every rank's stream; the repeat's time is the slowest rank's, the result the
// median. (Multi-node runs under MPI — unique-id broadcast — are not implemented here; use
// nccl-tests on the cluster and `ptsim calibrate --import-nccl-tests`.)
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/timing.cuh"
#include "kernels/cuda_api.h"

namespace ptsim::kernels::cuda {
namespace {

struct Rank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

// Elements per rank of the send and receive buffers for `bytes` in nccl-tests' convention.
struct Counts {
  std::size_t send, recv;
};
Counts counts_for(const std::string& op, int ranks, Bytes bytes) {
  const auto total = static_cast<std::size_t>(bytes / sizeof(float));
  const auto r = static_cast<std::size_t>(ranks);
  if (total < r || total % r != 0)
    throw std::invalid_argument(str("collective: ", bytes, " bytes do not split into ", ranks, " float chunks"));
  if (op == "all-reduce" || op == "send-recv") return {total, total};
  if (op == "all-gather") return {total / r, total};
  if (op == "reduce-scatter") return {total, total / r};
  if (op == "all-to-all") return {total, total};
  throw std::invalid_argument(
      str("collective: unknown op '", op, "' (all-reduce, all-gather, reduce-scatter, all-to-all, send-recv)"));
}

class Communicator {
 public:
  Communicator(const std::string& op, int ranks, Bytes bytes) : op_(op), counts_(counts_for(op, ranks, bytes)) {
    if (ranks < 2) throw std::invalid_argument(str("collective: needs at least 2 ranks, got ", ranks));
    if (op == "send-recv" && ranks != 2) throw std::invalid_argument("collective: send-recv runs between 2 ranks");
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    if (ranks > devices) throw std::invalid_argument(str("collective: ", ranks, " ranks but ", devices, " GPUs"));
    ranks_.resize(static_cast<std::size_t>(ranks));
    std::vector<int> devs(static_cast<std::size_t>(ranks));
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) devs[r] = r;
    NCCL_CHECK(ncclCommInitAll(comms.data(), ranks, devs.data()));
    for (int r = 0; r < ranks; ++r) {
      Rank& x = ranks_[r];
      x.device = r;
      x.comm = comms[r];
      CUDA_CHECK(cudaSetDevice(r));
      CUDA_CHECK(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking));
      CUDA_CHECK(cudaMalloc(&x.send, counts_.send * sizeof(float)));
      CUDA_CHECK(cudaMalloc(&x.recv, counts_.recv * sizeof(float)));
      CUDA_CHECK(cudaEventCreate(&x.start));
      CUDA_CHECK(cudaEventCreate(&x.stop));
    }
  }
  ~Communicator() {
    for (auto& x : ranks_) {
      cudaSetDevice(x.device);
      if (x.comm) ncclCommDestroy(x.comm);
      if (x.send) cudaFree(x.send);
      if (x.recv) cudaFree(x.recv);
      if (x.start) cudaEventDestroy(x.start);
      if (x.stop) cudaEventDestroy(x.stop);
      if (x.stream) cudaStreamDestroy(x.stream);
    }
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  std::vector<Rank>& ranks() { return ranks_; }
  const Counts& counts() const { return counts_; }

  // Issues the collective on every rank (one NCCL group, as a single thread must).
  void issue() {
    const int n = static_cast<int>(ranks_.size());
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      Rank& x = ranks_[r];
      if (op_ == "all-reduce")
        NCCL_CHECK(ncclAllReduce(x.send, x.recv, counts_.send, ncclFloat, ncclSum, x.comm, x.stream));
      else if (op_ == "all-gather")
        NCCL_CHECK(ncclAllGather(x.send, x.recv, counts_.send, ncclFloat, x.comm, x.stream));
      else if (op_ == "reduce-scatter")
        NCCL_CHECK(ncclReduceScatter(x.send, x.recv, counts_.recv, ncclFloat, ncclSum, x.comm, x.stream));
      else if (op_ == "all-to-all") {
        const std::size_t chunk = counts_.send / static_cast<std::size_t>(n);
        for (int p = 0; p < n; ++p) {
          NCCL_CHECK(ncclSend(x.send + p * chunk, chunk, ncclFloat, p, x.comm, x.stream));
          NCCL_CHECK(ncclRecv(x.recv + p * chunk, chunk, ncclFloat, p, x.comm, x.stream));
        }
      } else {  // send-recv: rank 0 → rank 1
        if (r == 0) NCCL_CHECK(ncclSend(x.send, counts_.send, ncclFloat, 1, x.comm, x.stream));
        if (r == 1) NCCL_CHECK(ncclRecv(x.recv, counts_.recv, ncclFloat, 0, x.comm, x.stream));
      }
    }
    NCCL_CHECK(ncclGroupEnd());
  }
  void synchronize() {
    for (auto& x : ranks_) {
      CUDA_CHECK(cudaSetDevice(x.device));
      CUDA_CHECK(cudaStreamSynchronize(x.stream));
    }
  }

 private:
  std::string op_;
  Counts counts_;
  std::vector<Rank> ranks_;
};

}  // namespace

TimingStats bench_collective(const std::string& op, int ranks, Bytes bytes, const BenchConfig& cfg) {
  if (cfg.repeats < 1 || cfg.warmup < 0) throw std::invalid_argument("bench_collective: bad repeat counts");
  Communicator c(op, ranks, bytes);
  for (int i = 0; i < cfg.warmup; ++i) c.issue();
  c.synchronize();
  std::vector<double> t;
  for (int i = 0; i < cfg.repeats; ++i) {
    for (auto& x : c.ranks()) {
      CUDA_CHECK(cudaSetDevice(x.device));
      CUDA_CHECK(cudaEventRecord(x.start, x.stream));
    }
    c.issue();
    double slowest = 0;
    for (auto& x : c.ranks()) {
      CUDA_CHECK(cudaSetDevice(x.device));
      CUDA_CHECK(cudaEventRecord(x.stop, x.stream));
    }
    for (auto& x : c.ranks()) {
      CUDA_CHECK(cudaSetDevice(x.device));
      CUDA_CHECK(cudaEventSynchronize(x.stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, x.start, x.stop));
      slowest = std::max(slowest, ms * 1e-3);
    }
    t.push_back(slowest);
  }
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  return {n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t.front(), t.back(), cfg.repeats};
}

CheckResult check_collective(const std::string& op, int ranks) {
  // 64 floats per rank chunk; rank r's send element i holds r·1000 + i (exact in fp32).
  const Bytes bytes = 64.0 * ranks * sizeof(float);
  Communicator c(op, ranks, bytes);
  const auto& cnt = c.counts();
  for (auto& x : c.ranks()) {
    std::vector<float> h(cnt.send);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(x.device * 1000 + static_cast<int>(i));
    CUDA_CHECK(cudaSetDevice(x.device));
    CUDA_CHECK(cudaMemcpy(x.send, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(x.recv, 0, cnt.recv * sizeof(float)));
  }
  c.issue();
  c.synchronize();
  CheckResult r;
  const auto n = static_cast<std::size_t>(ranks);
  for (auto& x : c.ranks()) {
    if (op == "send-recv" && x.device != 1) continue;
    std::vector<float> h(cnt.recv);
    CUDA_CHECK(cudaSetDevice(x.device));
    CUDA_CHECK(cudaMemcpy(h.data(), x.recv, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < h.size(); ++i) {
      double want = 0;
      auto sent = [](std::size_t rank, std::size_t idx) { return double(rank * 1000 + idx); };
      if (op == "all-reduce")
        for (std::size_t p = 0; p < n; ++p) want += sent(p, i);
      else if (op == "all-gather")
        want = sent(i / cnt.send, i % cnt.send);
      else if (op == "reduce-scatter")
        for (std::size_t p = 0; p < n; ++p) want += sent(p, x.device * cnt.recv + i);
      else if (op == "all-to-all") {
        const std::size_t chunk = cnt.send / n;  // chunk p of the receive buffer came from rank p
        want = sent(i / chunk, static_cast<std::size_t>(x.device) * chunk + i % chunk);
      } else
        want = sent(0, i);
      const double e = std::abs(h[i] - want);
      r.max_abs_error = std::max(r.max_abs_error, e);
      r.max_violation = std::max(r.max_violation, e);  // integer-valued floats: must be exact
    }
  }
  r.detail = str(op, " over ", ranks, " ranks");
  return r;
}

}  // namespace ptsim::kernels::cuda
