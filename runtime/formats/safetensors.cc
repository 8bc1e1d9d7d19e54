#include "runtime/formats/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "runtime/formats/atomic_file.h"

namespace stepc::safetensors {
namespace {

// The most header bytes a file may declare: larger is an error, not an
// allocation (the format's own readers cap it at 100 MB).
constexpr uint64_t kMaxHeader = uint64_t{100} << 20;

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign << 31;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while (!(mantissa & 0x400)) {
        mantissa <<= 1;
        --exponent;
      }
      bits = (sign << 31) | (exponent << 23) | ((mantissa & 0x3FF) << 13);
    }
  } else if (exponent == 31) {
    bits = (sign << 31) | 0x7F800000 | (mantissa << 13);
  } else {
    bits = (sign << 31) | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

bool Read(const std::string& path, std::map<std::string, Tensor>& tensors, std::string& error) {
  // Not a FIFO or device: opening one would block or read without end.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    error = "safetensors file '" + path + "' is missing or not a regular file";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open safetensors file '" + path + "'";
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto fail = [&](const std::string& what) {
    error = "safetensors file '" + path + "': " + what;
    return false;
  };
  if (bytes.size() < 8) return fail("shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  if (n > kMaxHeader || n > bytes.size() - 8) return fail("header length exceeds the file");
  nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + n, nullptr,
                                                false);
  if (!header.is_object()) return fail("the header is not a JSON object");
  const char* data = bytes.data() + 8 + n;
  const uint64_t size = bytes.size() - 8 - n;
  tensors.clear();
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets") || !info["dtype"].is_string() ||
        !info["shape"].is_array() || !info["data_offsets"].is_array() ||
        info["data_offsets"].size() != 2)
      return fail("tensor '" + name + "' lacks dtype, shape or data_offsets");
    Tensor t;
    uint64_t elements = 1;
    for (const auto& d : info["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40))
        return fail("tensor '" + name + "' has a bad shape");
      t.shape.push_back(d.get<int64_t>());
      elements *= d.get<uint64_t>();
      if (elements > (uint64_t{1} << 40)) return fail("tensor '" + name + "' is too large");
    }
    const auto& offsets = info["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      return fail("tensor '" + name + "' has bad data_offsets");
    uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    const std::string dtype = info["dtype"].get<std::string>();
    uint64_t width = dtype == "F32" ? 4 : dtype == "F64" ? 8 : (dtype == "F16" || dtype == "BF16") ? 2 : 0;
    if (width == 0)
      return fail("tensor '" + name + "' has dtype " + dtype + " (expected F32, F64, F16 or BF16)");
    if (end > size && begin <= end && end - begin == elements * width)
      return fail("tensor '" + name + "' ends at byte " + std::to_string(end) + " of the data, which holds " +
                  std::to_string(size) + ": the file is truncated");
    if (begin > end || end > size || end - begin != elements * width)
      return fail("tensor '" + name + "' has data_offsets that do not match its shape");
    t.data.resize(elements);
    const char* p = data + begin;
    for (uint64_t k = 0; k < elements; ++k) {
      if (dtype == "F32") {
        std::memcpy(&t.data[k], p + 4 * k, 4);
      } else if (dtype == "F64") {
        double d;
        std::memcpy(&d, p + 8 * k, 8);
        t.data[k] = static_cast<float>(d);
      } else {
        uint16_t h;
        std::memcpy(&h, p + 2 * k, 2);
        if (dtype == "BF16") {
          uint32_t bits = uint32_t{h} << 16;
          std::memcpy(&t.data[k], &bits, 4);
        } else {
          t.data[k] = HalfToFloat(h);
        }
      }
    }
    tensors.emplace(name, std::move(t));
  }
  return true;
}

bool Write(const std::string& path, const std::map<std::string, Tensor>& tensors,
           std::string& error) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    uint64_t bytes = t.data.size() * 4;
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data 8-byte aligned
  AtomicFile file;
  if (!file.Open(path, error)) return false;
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xFF);
  file.stream().write(length, 8);
  file.stream().write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : tensors)
    file.stream().write(reinterpret_cast<const char*>(t.data.data()),
                        static_cast<std::streamsize>(t.data.size() * 4));
  return file.Commit(error);
}

}  // namespace stepc::safetensors
