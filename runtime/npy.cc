#include "runtime/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

namespace stepc::npy {
namespace {

/// The value of `key` in the header dict, up to the next ',' or '}' (or the
/// closing ')' for the shape tuple).
std::string headerField(const std::string &header, const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return "";
  size_t colon = header.find(':', at);
  if (colon == std::string::npos)
    return "";
  size_t begin = header.find_first_not_of(' ', colon + 1);
  size_t end = header[begin] == '('
                   ? header.find(')', begin) + 1
                   : header.find_first_of(",}", begin);
  return header.substr(begin, end - begin);
}

}  // namespace

bool Read(const std::string &path, Array &t, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "'";
    return false;
  }
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    error = "'" + path + "' is not a .npy file";
    return false;
  }
  uint32_t headerLen = 0;
  unsigned char lenBytes[4] = {0, 0, 0, 0};
  int lenSize = magic[6] == 1 ? 2 : 4;
  if (!in.read(reinterpret_cast<char *>(lenBytes), lenSize)) {
    error = "'" + path + "' has a truncated header";
    return false;
  }
  for (int i = lenSize - 1; i >= 0; --i)
    headerLen = headerLen * 256 + lenBytes[i];
  std::string header(headerLen, ' ');
  if (!in.read(header.data(), headerLen)) {
    error = "'" + path + "' has a truncated header";
    return false;
  }
  std::string descr = headerField(header, "descr");
  std::string order = headerField(header, "fortran_order");
  std::string shapeText = headerField(header, "shape");
  if (order != "False") {
    error = "'" + path + "' is not in C order";
    return false;
  }
  t.shape.clear();
  std::string digits;
  for (char c : shapeText) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
    } else if (!digits.empty()) {
      t.shape.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  int64_t count = 1;
  for (int64_t d : t.shape)
    count *= d;
  size_t width = 0;
  if (descr == "'<f4'" || descr == "'<i4'" || descr == "'<u4'")
    width = 4;
  else if (descr == "'<f8'" || descr == "'<i8'")
    width = 8;
  else if (descr == "'<u2'")
    width = 2;
  else {
    error = "'" + path + "' has unsupported dtype " + descr;
    return false;
  }
  std::vector<char> bytes(count * width);
  if (!in.read(bytes.data(), bytes.size())) {
    error = "'" + path + "' is truncated: expected " + std::to_string(count) +
            " values";
    return false;
  }
  t.data.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    const char *p = bytes.data() + i * width;
    if (descr == "'<f4'") {
      float v;
      std::memcpy(&v, p, 4);
      t.data[i] = v;
    } else if (descr == "'<f8'") {
      std::memcpy(&t.data[i], p, 8);
    } else if (descr == "'<i4'") {
      int32_t v;
      std::memcpy(&v, p, 4);
      t.data[i] = v;
    } else if (descr == "'<u4'") {
      uint32_t v;
      std::memcpy(&v, p, 4);
      t.data[i] = v;
    } else if (descr == "'<i8'") {
      int64_t v;
      std::memcpy(&v, p, 8);
      t.data[i] = static_cast<double>(v);
    } else {
      uint16_t v;
      std::memcpy(&v, p, 2);
      t.data[i] = v;
    }
  }
  return true;
}

bool Write(const std::string &path, const std::vector<int64_t> &shape, const double *data,
           size_t count, Dtype dtype, std::string &error) {
  const char *descr = dtype == Dtype::kF4   ? "<f4"
                      : dtype == Dtype::kF8 ? "<f8"
                      : dtype == Dtype::kI4 ? "<i4"
                                            : "<i8";
  std::ostringstream dims;
  dims << "(";
  for (int64_t d : shape)
    dims << d << ",";
  dims << ")";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + dims.str() + ", }";
  // Pad so that magic + length + header + '\n' is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    error = "cannot write '" + path + "'";
    return false;
  }
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  char lenBytes[2] = {static_cast<char>(len & 0xFF), static_cast<char>(len >> 8)};
  out.write(lenBytes, 2);
  out.write(header.data(), header.size());
  for (size_t i = 0; i < count; ++i) {
    double x = data[i];
    if (dtype == Dtype::kF4) {
      float v = static_cast<float>(x);
      out.write(reinterpret_cast<const char *>(&v), 4);
    } else if (dtype == Dtype::kF8) {
      out.write(reinterpret_cast<const char *>(&x), 8);
    } else if (dtype == Dtype::kI4) {
      int32_t v = static_cast<int32_t>(x);
      out.write(reinterpret_cast<const char *>(&v), 4);
    } else {
      int64_t v = static_cast<int64_t>(x);
      out.write(reinterpret_cast<const char *>(&v), 8);
    }
  }
  if (!out) {
    error = "failed writing '" + path + "'";
    return false;
  }
  return true;
}

}  // namespace stepc::npy
