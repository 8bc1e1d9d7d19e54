#include "runtime/formats/npy.h"

#include "runtime/formats/atomic_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace stepc::npy {
namespace {

/// The value of `key` in the header dict, up to the next ',' or '}' (or the
/// closing ')' for the shape tuple); empty if absent or malformed.
std::string headerField(const std::string &header, const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return "";
  size_t colon = header.find(':', at);
  if (colon == std::string::npos)
    return "";
  size_t begin = header.find_first_not_of(' ', colon + 1);
  if (begin == std::string::npos)
    return "";
  size_t end = header[begin] == '(' ? header.find(')', begin) : header.find_first_of(",}", begin);
  if (end == std::string::npos)
    return "";
  return header.substr(begin, end - begin + (header[begin] == '('));
}

/// Parses "(d0, d1, ...)" (or "(d0,)", "()"): every d a decimal integer
/// >= 0 and the product at most kMaxElements; false otherwise.
bool parseShape(const std::string &text, std::vector<int64_t> &shape, int64_t &count) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    return false;
  shape.clear();
  count = 1;
  std::string inner = text.substr(1, text.size() - 2);
  std::stringstream items(inner);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    if (b == std::string::npos) {
      if (items.eof())
        break; // the trailing comma of "(3,)"
      return false;
    }
    item = item.substr(b, e - b + 1);
    if (item.size() > 13 || item.find_first_not_of("0123456789") != std::string::npos)
      return false;
    int64_t d = std::stoll(item);
    if (d > kMaxElements || (d > 0 && count > kMaxElements / d))
      return false;
    count *= d;
    shape.push_back(d);
  }
  return true;
}

}  // namespace

bool Read(const std::string &path, Array &t, std::string &error) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    error = std::filesystem::exists(path, ec) ? "'" + path + "' is not a regular file"
                                              : "cannot open '" + path + "'";
    return false;
  }
  const uintmax_t fileBytes = std::filesystem::file_size(path, ec);
  if (ec || fileBytes > static_cast<uintmax_t>(kMaxElements) * 8 + (1 << 20)) {
    error = "'" + path + "' is larger than any array this reads";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(fileBytes, '\0');
  if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(fileBytes))) {
    error = "cannot read '" + path + "'";
    return false;
  }
  return ReadBytes(bytes, path, t, error);
}

bool ReadBytes(std::string_view bytes, const std::string &path, Array &t, std::string &error) {
  const uintmax_t fileBytes = bytes.size();
  size_t at = 0;
  auto take = [&](char *out, size_t n) {
    if (bytes.size() - at < n)
      return false;
    std::memcpy(out, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[8];
  if (!take(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0 ||
      (magic[6] != 1 && magic[6] != 2 && magic[6] != 3)) {
    error = "'" + path + "' is not a .npy file";
    return false;
  }
  uint32_t headerLen = 0;
  unsigned char lenBytes[4] = {0, 0, 0, 0};
  int lenSize = magic[6] == 1 ? 2 : 4;
  if (!take(reinterpret_cast<char *>(lenBytes), lenSize)) {
    error = "'" + path + "' has a truncated header";
    return false;
  }
  for (int i = lenSize - 1; i >= 0; --i)
    headerLen = headerLen * 256 + lenBytes[i];
  if (headerLen > fileBytes - at) {
    error = "'" + path + "' has a truncated header";
    return false;
  }
  std::string header(headerLen, ' ');
  take(header.data(), headerLen);
  std::string descr = headerField(header, "descr");
  std::string order = headerField(header, "fortran_order");
  std::string shapeText = headerField(header, "shape");
  if (order != "False") {
    error = "'" + path + "' is not in C order (fortran_order " +
            (order.empty() ? "missing" : order) + ")";
    return false;
  }
  int64_t count = 0;
  if (!parseShape(shapeText, t.shape, count)) {
    error = "'" + path + "' has an invalid shape " + (shapeText.empty() ? "(none)" : shapeText) +
            " (dimensions must be integers >= 0, at most 2^40 elements)";
    return false;
  }
  size_t width = 0;
  if (descr == "'<f4'" || descr == "'<i4'" || descr == "'<u4'")
    width = 4;
  else if (descr == "'<f8'" || descr == "'<i8'")
    width = 8;
  else if (descr == "'<u2'")
    width = 2;
  else {
    error = "'" + path + "' has unsupported dtype " + (descr.empty() ? "(none)" : descr) +
            " (expected <f4, <f8, <i4, <i8, <u2 or <u4)";
    return false;
  }
  t.dtype = descr.substr(2, 2);
  const uintmax_t dataBytes = fileBytes - 8 - lenSize - headerLen;
  if (static_cast<uintmax_t>(count) * width != dataBytes) {
    error = "'" + path + "' holds " + std::to_string(dataBytes) + " data bytes; its shape " +
            shapeText + " of " + descr + " needs " + std::to_string(count * width) +
            (static_cast<uintmax_t>(count) * width > dataBytes ? " (truncated)" : "");
    return false;
  }
  const char *data = bytes.data() + at;
  t.data.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    const char *p = data + i * width;
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
  AtomicFile file;
  if (!file.Open(path, error))
    return false;
  std::ostream &out = file.stream();
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
  return file.Commit(error);
}

}  // namespace stepc::npy
