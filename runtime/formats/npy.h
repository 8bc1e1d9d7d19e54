// NumPy .npy files (format 1.0/2.0, little-endian, C order), read into and
// written from doubles. Shared by the runtime (stepc-run --init-npy/--save-npy)
// and the reference interpreter. Hand-written: Debian ships no C++ npy
// library, and the format is a short header.

#ifndef STEPC_RUNTIME_NPY_H_
#define STEPC_RUNTIME_NPY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stepc::npy {

struct Array {
  std::vector<int64_t> shape;
  std::vector<double> data;
  // The element type read: "f4", "f8", "i4", "i8", "u2" or "u4".
  std::string dtype;
};

// The most elements a file may declare (2^40): a larger shape is an error,
// not an allocation.
constexpr int64_t kMaxElements = int64_t{1} << 40;

// Element type to write.
enum class Dtype { kF4, kF8, kI4, kI8 };

// Reads f4/f8/i4/i8/u2/u4 arrays; false with a message naming the file for
// anything else: not a regular file, a malformed header or shape, a data
// size that differs from what the shape needs (checked before allocating).
bool Read(const std::string& path, Array& out, std::string& error);
// The same from the bytes of a file (`path` names it in errors).
bool ReadBytes(std::string_view bytes, const std::string& path, Array& out, std::string& error);
// Writes atomically: a temporary file beside `path`, renamed over it on
// success; on failure `path` is untouched.
bool Write(const std::string& path, const std::vector<int64_t>& shape, const double* data,
           size_t count, Dtype dtype, std::string& error);

}  // namespace stepc::npy

#endif  // STEPC_RUNTIME_NPY_H_
