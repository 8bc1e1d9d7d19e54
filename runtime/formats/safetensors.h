// safetensors files (Hugging Face's weight format): an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}} and the
// raw tensors. Read as floats (F32, F64, F16, BF16), written as F32, atomically.
// Hand-written beside npy.h: Debian ships no C++ safetensors library and the
// format is a JSON header (nlohmann-json) and raw bytes.

#ifndef STEPC_RUNTIME_SAFETENSORS_H_
#define STEPC_RUNTIME_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stepc::safetensors {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Reads every tensor of `path`; false with a message naming the file and
// the tensor for a missing, short or malformed file, offsets outside it, a
// shape that does not match its bytes, or an unsupported dtype.
bool Read(const std::string& path, std::map<std::string, Tensor>& tensors, std::string& error);

// Writes `tensors` as F32 (names sorted), through a temporary file renamed
// over `path`; false with a message if any write fails (nothing replaced).
bool Write(const std::string& path, const std::map<std::string, Tensor>& tensors,
           std::string& error);

}  // namespace stepc::safetensors

#endif  // STEPC_RUNTIME_SAFETENSORS_H_
