#include "runtime/device.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace stepc {

absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice() {
  // Beside this library: the runtime's own directory.
  Dl_info self;
  std::string dir = ".";
  if (dladdr(reinterpret_cast<void*>(&MakeCudaDevice), &self) && self.dli_fname) {
    std::string path = self.dli_fname;
    dir = path.substr(0, path.find_last_of('/'));
  }
  const std::string library = dir + "/libstepc_runtime_cuda.so";
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle)
    return absl::FailedPreconditionError(absl::StrCat(
        "this step.so targets CUDA but the runtime cannot load its CUDA device layer (", dlerror(),
        "): the runtime was built without the CUDA toolkit, or the CUDA libraries are missing"));
  auto make = reinterpret_cast<decltype(&stepc_make_cuda_device_v1)>(
      dlsym(handle, "stepc_make_cuda_device_v1"));
  if (!make)
    return absl::FailedPreconditionError(
        absl::StrCat("'", library, "' has no stepc_make_cuda_device_v1"));
  char error[512] = {0};
  Device* device = make(error, sizeof(error));
  if (!device) return absl::FailedPreconditionError(error);
  return std::unique_ptr<Device>(device);
}

}  // namespace stepc
