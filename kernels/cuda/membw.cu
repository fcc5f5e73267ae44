// Memory-bandwidth kernel: a grid-stride 16-byte copy (STREAM "copy", McCalpin 1995), the
// cost of every memory-bound op (layer norm, GeLU, dropout, residual adds) in the table.
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/fill_random.cuh"
#include "kernels/cuda/timing.cuh"
#include "kernels/cuda_api.h"
#include "kernels/membw_cpu.h"

namespace ptsim::kernels::cuda {
namespace {

// dst[i] = src[i] for n4 float4 elements.
__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n4) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

void launch_copy(const float* src, float* dst, std::size_t n, cudaStream_t stream) {
  if (n % 4 != 0) throw std::invalid_argument(str("membw copy: element count ", n, " is not a multiple of 4"));
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const std::size_t n4 = n / 4;
  // Enough blocks to fill every SM several times, no more: the loop strides over the rest.
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n4 + 255) / 256, std::size_t(sms) * 8));
  copy_kernel<<<std::max(1u, blocks), 256, 0, stream>>>(reinterpret_cast<const float4*>(src),
                                                        reinterpret_cast<float4*>(dst), n4);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

TimingStats bench_membw(Bytes bytes, const BenchConfig& cfg) {
  // Copy moves 2·n·4 bytes; n rounded down to a multiple of 4 floats.
  const auto n = static_cast<std::size_t>(bytes / 8) / 4 * 4;
  if (n == 0) throw std::invalid_argument(str("bench_membw: ", bytes, " bytes is too small"));
  DeviceBuffer<float> src(n), dst(n);
  fill_random(src.get(), n, 7);  // not zeros (fill_random.cuh)
  return time_gpu([&] { launch_copy(src.get(), dst.get(), n, nullptr); }, nullptr, cfg);
}

CheckResult check_membw(std::int64_t elements) {
  const auto n = static_cast<std::size_t>(elements);
  std::vector<float> host(n), ref(n), out(n);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto& x : host) x = dist(gen);
  copy_cpu(host, ref);
  DeviceBuffer<float> src(n), dst(n);
  CUDA_CHECK(cudaMemcpy(src.get(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  launch_copy(src.get(), dst.get(), n, nullptr);
  CUDA_CHECK(cudaMemcpy(out.data(), dst.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  CheckResult r;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = std::abs(double(out[i]) - ref[i]);
    r.max_abs_error = std::max(r.max_abs_error, e);
    r.max_violation = std::max(r.max_violation, e);  // a copy must be exact: atol = rtol = 0
  }
  r.detail = str("copy of ", n, " floats");
  return r;
}

}  // namespace ptsim::kernels::cuda
