// libFuzzer target: the .npy reader on arbitrary bytes (stepc-run --init-npy
// and --batch-npy, stepc-interp --inputs). It must return an error, never
// crash, read out of bounds or allocate what the bytes merely claim.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/formats/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stepc::npy::Array array;
  std::string error;
  stepc::npy::ReadBytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy",
                        array, error);
  return 0;
}
