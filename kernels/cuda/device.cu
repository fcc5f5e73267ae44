// Device queries: everything the table and the roofline need comes from the driver, never
// a hard-coded table of GPUs (STYLE.md item 10).
#if PTSIM_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "kernels/cuda/check.cuh"
#include "kernels/cuda_api.h"

namespace ptsim::kernels::cuda {

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls are not confused
    return 0;
  }
  return n;
}

DeviceProperties device_properties(int device) {
  DeviceProperties p;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  p.name = prop.name;
  p.sm_count = prop.multiProcessorCount;
  p.cc_major = prop.major;
  p.cc_minor = prop.minor;
  int clock_khz = 0, mem_khz = 0, bus = 0, l2 = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  p.sm_clock_mhz = clock_khz / 1e3;
  p.memory_clock_mhz = mem_khz / 1e3;
  p.memory_bus_bits = bus;
  p.l2_bytes = l2;
  // HBM/GDDR transfer twice per memory clock: bandwidth = 2 · clock · bus width / 8.
  p.peak_bandwidth = 2.0 * mem_khz * 1e3 * bus / 8.0;
  int driver = 0, runtime = 0, nccl = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  NCCL_CHECK(ncclGetVersion(&nccl));
  p.driver_version = str(driver / 1000, ".", (driver % 1000) / 10);
  p.runtime_version = str(runtime / 1000, ".", (runtime % 1000) / 10);
  // NCCL ≥ 2.9 encodes major·10000 + minor·100 + patch.
  p.nccl_version = str(nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100);
#if PTSIM_HAVE_CUDNN
  const std::size_t cudnn = cudnnGetVersion();  // major·10000 + minor·100 + patch (cuDNN 9)
  p.cudnn_version = str(cudnn / 10000, ".", (cudnn % 10000) / 100, ".", cudnn % 100);
#endif  // else empty: built without cuDNN
  return p;
}

}  // namespace ptsim::kernels::cuda
