// CPU memory-bandwidth kernels (STREAM's copy and triad, McCalpin 1995): the CPU backend's
// memory-bound measurement and the reference for kernels/cuda/membw.cu.
#pragma once

#include <span>

#include "hw/units.h"

namespace ptsim::kernels {

// dst = src. Returns the bytes moved (read + written): 2·n·sizeof(float).
Bytes copy_cpu(std::span<const float> src, std::span<float> dst);
// a = b + s·c. Returns the bytes moved: 3·n·sizeof(float) (STREAM counts no write-allocate).
Bytes triad_cpu(std::span<float> a, std::span<const float> b, std::span<const float> c, float s);

}  // namespace ptsim::kernels
