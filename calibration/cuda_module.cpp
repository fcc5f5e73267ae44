// Loads the CUDA backend from libptsim_cuda.so on demand (see cuda_module.h for why).
#include "calibration/cuda_module.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace ptsim::calibration {

std::string cuda_module_path() {
  if (const char* env = std::getenv(kCudaModuleEnv); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return kCudaModuleFile;  // dlopen's own search path then
  return (exe.parent_path() / kCudaModuleFile).string();
}

std::unique_ptr<Backend> make_cuda_backend(TimingConfig timing, std::string& why) {
  const std::string path = cuda_module_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    why = fmt::format(
        "the CUDA calibration module {} is not there (this ptsim was built without CUDA, or the module was not "
        "installed beside the executable; {} names another path)",
        path, kCudaModuleEnv);
    return nullptr;
  }
  // The handle is kept for the life of the process: the backend's code lives in it.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    // dlerror names the library that is missing, e.g. "libnccl.so.2: cannot open shared object file".
    const char* err = dlerror();
    why = fmt::format("cannot load the CUDA calibration module {}: {}", path, err != nullptr ? err : "unknown error");
    return nullptr;
  }
  auto create = reinterpret_cast<CudaBackendCreate>(dlsym(handle, "ptsim_cuda_backend_create"));
  if (create == nullptr) {
    why = fmt::format("{} has no ptsim_cuda_backend_create: not a ptsim CUDA module", path);
    return nullptr;
  }
  std::array<char, 512> message{};
  std::unique_ptr<Backend> backend(create(kCudaModuleAbi, &timing, message.data(), message.size()));
  if (!backend) why = message.data();
  return backend;
}

}  // namespace ptsim::calibration
