#include "kernels/cuda_api.h"

namespace ptsim::kernels::cuda {

FlopsPerSecond DeviceProperties::peak_dense(const std::string& dtype) const {
  // Dense 16-bit tensor-core FLOP per clock per SM, from NVIDIA's whitepapers:
  // A100 (sm_80): 312 TFLOP/s = 108 SMs × 1.41 GHz × 2048; H100 SXM (sm_90): 989.4 TFLOP/s =
  // 132 SMs × 1.83 GHz × 4096. Other architectures: unknown (0, no roofline printed).
  double per_clock = 0;
  if (cc_major == 8 && cc_minor == 0) per_clock = 2048;
  if (cc_major == 9 && cc_minor == 0) per_clock = 4096;
  double factor = 0;
  if (dtype == "bf16" || dtype == "fp16") factor = 1;
  if (dtype == "fp32") factor = 0.5;                   // TF32 runs at half the 16-bit rate (same sources)
  if (dtype == "fp8") factor = cc_major >= 9 ? 2 : 0;  // Hopper doubles it for FP8; none on A100
  // sm_clock_mhz is the maximum clock the driver reports: the roofline is an upper bound.
  return per_clock * factor * sm_count * sm_clock_mhz * 1e6;
}

}  // namespace ptsim::kernels::cuda
