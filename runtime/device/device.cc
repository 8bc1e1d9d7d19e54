#include "runtime/device/device.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace stepc {

absl::StatusOr<void*> OpenBeside(const void* symbol, const std::string& library) {
  Dl_info self;
  std::string dir = ".";
  if (dladdr(symbol, &self) && self.dli_fname) {
    std::string path = self.dli_fname;
    dir = path.substr(0, path.find_last_of('/'));
  }
  const std::string path = dir + "/" + library;
  // RTLD_NODELETE: CUDA and NCCL keep threads that outlive a dlclose.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) return absl::FailedPreconditionError(dlerror());
  return handle;
}

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(bool emulated) {
  const std::string library =
      emulated ? "libstepc_runtime_cuda_emulated.so" : "libstepc_runtime_cuda.so";
  absl::StatusOr<void*> handle = OpenBeside(reinterpret_cast<void*>(&MakeCudaDevice), library);
  if (!handle.ok())
    return absl::FailedPreconditionError(absl::StrCat(
        "this step.so targets CUDA but the runtime cannot load its CUDA device layer (",
        handle.status().message(),
        "): the runtime was built without the CUDA toolkit, or the CUDA libraries are missing"));
  void* loaded = *handle;
  auto make = reinterpret_cast<decltype(&stepc_make_cuda_device_v1)>(
      dlsym(loaded, "stepc_make_cuda_device_v1"));
  if (!make)
    return absl::FailedPreconditionError(
        absl::StrCat("'", library, "' has no stepc_make_cuda_device_v1"));
  char error[512] = {0};
  Device* device = make(error, sizeof(error));
  if (!device) return absl::FailedPreconditionError(error);
  return std::unique_ptr<Device>(device);
}

}  // namespace stepc
