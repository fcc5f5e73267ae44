// CPU backend: the same sweep as on a GPU, measured with Eigen, the CPU FlashAttention-2
// algorithm and STREAM copy, so CI exercises calibration end to end. Its tables describe
// this CPU, never a GPU.
#include <fmt/format.h>

#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "calibration/backend.h"
#include "kernels/attention_cpu.h"
#include "kernels/gemm_cpu.h"
#include "kernels/membw_cpu.h"
#include "kernels/timing.h"

namespace ptsim::calibration {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

std::vector<float> filled(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(TimingConfig timing) : timing_(timing) {}

  std::string name() const override { return "cpu"; }
  hw::DeviceInfo device() const override {
    hw::DeviceInfo d;
    d.name = cpu_model_name();
    d.sm_count = static_cast<int>(std::thread::hardware_concurrency());
    return d;
  }
  std::vector<std::string> gemm_dtypes() const override { return {"fp32"}; }
  std::vector<std::string> attention_dtypes() const override { return {"fp32"}; }
  std::vector<std::string> attention_impls() const override { return {"flash", "naive"}; }
  // Eigen is built here without OpenMP: one thread, so no wave quantisation (one "SM").
  int gemm_tile() const override { return 64; }
  int parallel_units() const override { return 1; }

  Seconds gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype) override {
    if (dtype != "fp32") throw std::invalid_argument(fmt::format("cpu backend: unsupported GEMM dtype '{}'", dtype));
    const auto a = filled(m * k, 1), b = filled(k * n, 2);
    std::vector<float> c(m * n);
    return kernels::time_cpu([&] { kernels::gemm_cpu(m, n, k, a, b, c); }, timing_.warmup, timing_.repeats).median_s;
  }

  std::optional<AttentionTiming> attention(const hw::AttentionShape& s, const std::string& dtype,
                                           const std::string& impl) override {
    if (dtype != "fp32")
      throw std::invalid_argument(fmt::format("cpu backend: unsupported attention dtype '{}'", dtype));
    const kernels::AttentionDims d{s.batch_heads, s.seq_q, s.seq_kv, s.head_dim, s.causal, 0};
    const auto q = filled(d.q_elements(), 3), k = filled(d.kv_elements(), 4), v = filled(d.kv_elements(), 5),
               d_o = filled(d.q_elements(), 6);
    std::vector<float> o(d.q_elements()), lse(d.batch_heads * d.seq_q), dq(o.size()), dk(k.size()), dv(v.size());
    const bool flash = impl == "flash";
    if (!flash && impl != "naive")
      throw std::invalid_argument(fmt::format("cpu backend: unknown attention impl '{}'", impl));
    AttentionTiming t;
    t.fwd_seconds = kernels::time_cpu(
                        [&] {
                          if (flash)
                            kernels::flash_attention_forward_cpu(d, q, k, v, o, lse);
                          else
                            kernels::naive_attention_forward(d, q, k, v, o, lse);
                        },
                        timing_.warmup, timing_.repeats)
                        .median_s;
    t.bwd_seconds = kernels::time_cpu(
                        [&] {
                          if (flash)
                            kernels::flash_attention_backward_cpu(d, q, k, v, o, lse, d_o, dq, dk, dv);
                          else
                            kernels::naive_attention_backward(d, q, k, v, o, d_o, dq, dk, dv);
                        },
                        timing_.warmup, timing_.repeats)
                        .median_s;
    return t;
  }

  Seconds membw(Bytes bytes) override {
    // Copy moves 2·n·4 bytes.
    const auto n = static_cast<std::size_t>(bytes / (2 * sizeof(float)));
    if (n == 0) throw std::invalid_argument(fmt::format("cpu backend: membw size {} too small", bytes));
    const auto src = filled(n, 7);
    std::vector<float> dst(n);
    return kernels::time_cpu([&] { kernels::copy_cpu(src, dst); }, timing_.warmup, timing_.repeats).median_s;
  }

  int collective_ranks() const override { return 1; }
  std::vector<std::string> collective_ops() const override { return {}; }
  Seconds collective(const std::string& op, int, Bytes) override {
    throw std::invalid_argument(fmt::format("cpu backend: no collectives ('{}')", op));
  }
  FlopsPerSecond peak_flops(const std::string&) const override { return 0; }
  BytesPerSecond peak_bandwidth() const override { return 0; }

 private:
  TimingConfig timing_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(TimingConfig timing) { return std::make_unique<CpuBackend>(timing); }

}  // namespace ptsim::calibration
