// Where the CUDA calibration backend lives: a shared module (libptsim_cuda.so, built only
// with CUDA) that `ptsim calibrate` opens with dlopen. The ptsim executable links no CUDA
// library, so every other command starts in milliseconds and runs where CUDA is absent.
//
// The module exports one C function, ptsim_cuda_backend_create (see cuda_backend.cpp):
//   Backend* ptsim_cuda_backend_create(int abi, const TimingConfig*, char* why, size_t why_size)
// It returns a heap-allocated Backend (nullptr with `why` filled when no device is usable).
// Both sides are built from the same tree by the same compiler; `abi` guards against a stale
// module beside a newer executable.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "calibration/backend.h"

namespace ptsim::calibration {

// Bump when Backend, TimingConfig or the entry point's signature changes.
inline constexpr int kCudaModuleAbi = 1;
inline constexpr const char* kCudaModuleFile = "libptsim_cuda.so";
inline constexpr const char* kCudaModuleEnv = "PTSIM_CUDA_MODULE";

// The module's path: $PTSIM_CUDA_MODULE when set, else libptsim_cuda.so beside the running
// executable (where the build and an install put it).
std::string cuda_module_path();

using CudaBackendCreate = Backend* (*)(int abi, const TimingConfig* timing, char* why, std::size_t why_size);

}  // namespace ptsim::calibration
