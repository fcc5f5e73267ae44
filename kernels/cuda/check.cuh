// One path per kind of error (STYLE.md item 12): every CUDA, cuBLAS(Lt) and NCCL call is
// checked, and a failure throws std::runtime_error naming the call, file and line.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace ptsim::kernels::cuda {

// fmt's compile-time format checks do not survive nvcc's C++20 front end, so .cu files
// build messages with this instead: str("bad head_dim ", d, "!").
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] inline void throw_error(const char* what, const std::string& detail, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " + detail);
}

}  // namespace ptsim::kernels::cuda

#define CUDA_CHECK(call)                                                                              \
  do {                                                                                                \
    const cudaError_t ptsim_err_ = (call);                                                            \
    if (ptsim_err_ != cudaSuccess)                                                                    \
      ::ptsim::kernels::cuda::throw_error(#call, cudaGetErrorString(ptsim_err_), __FILE__, __LINE__); \
  } while (0)

// After a <<<...>>> launch: configuration errors now, execution errors at the next sync.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                              \
  do {                                                                                                  \
    const cublasStatus_t ptsim_st_ = (call);                                                            \
    if (ptsim_st_ != CUBLAS_STATUS_SUCCESS)                                                             \
      ::ptsim::kernels::cuda::throw_error(#call, cublasGetStatusString(ptsim_st_), __FILE__, __LINE__); \
  } while (0)

#define NCCL_CHECK(call)                                                                             \
  do {                                                                                               \
    const ncclResult_t ptsim_nr_ = (call);                                                           \
    if (ptsim_nr_ != ncclSuccess)                                                                    \
      ::ptsim::kernels::cuda::throw_error(#call, ncclGetErrorString(ptsim_nr_), __FILE__, __LINE__); \
  } while (0)
