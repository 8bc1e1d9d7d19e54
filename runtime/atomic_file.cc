#include "runtime/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace stepc {

AtomicFile::~AtomicFile() {
  if (!temp_.empty() && !committed_) {
    out_.close();
    std::remove(temp_.c_str());
  }
}

bool AtomicFile::Open(const std::string& path, std::string& error) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    error = "cannot write '" + path + "': it is a directory";
    return false;
  }
  path_ = path;
  std::vector<char> name(path.begin(), path.end());
  const char suffix[] = ".tmp-XXXXXX";
  name.insert(name.end(), suffix, suffix + sizeof(suffix));
  int fd = mkstemp(name.data());
  if (fd < 0) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    return false;
  }
  close(fd);
  temp_ = name.data();
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    error = "cannot write '" + path + "'";
    return false;
  }
  return true;
}

bool AtomicFile::Commit(std::string& error) {
  out_.flush();
  bool ok = static_cast<bool>(out_);
  out_.close();
  ok = ok && !out_.fail();
  if (ok) {
    int fd = open(temp_.c_str(), O_RDONLY);
    ok = fd >= 0 && fsync(fd) == 0;
    if (fd >= 0) close(fd);
  }
  if (!ok || std::rename(temp_.c_str(), path_.c_str()) != 0) {
    error = "failed writing '" + path_ + "'" + (ok ? std::string(": ") + std::strerror(errno) : "");
    return false;
  }
  committed_ = true;
  return true;
}

}  // namespace stepc
