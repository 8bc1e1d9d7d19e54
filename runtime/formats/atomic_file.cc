#include "runtime/formats/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
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

bool AtomicFile::Open(const std::string& given, std::string& error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(given, ec)) {
    error = "cannot write '" + given + "': it is a directory";
    return false;
  }
  // A symlink's target is what gets written (the link stays a link).
  std::string path = given;
  if (fs::is_symlink(given, ec)) {
    fs::path target = fs::weakly_canonical(given, ec);
    if (!ec) path = target.string();
  }
  fs::file_status status = fs::status(path, ec);
  if (fs::is_fifo(status) || fs::is_socket(status)) {
    error = "cannot write '" + given + "': it is a FIFO or socket (it would block)";
    return false;
  }
  if (fs::is_character_file(status) || fs::is_block_file(status)) {
    in_place_ = true;
    path_ = path;
    out_.open(path, std::ios::binary | std::ios::trunc);
    if (!out_) {
      error = "cannot write '" + given + "': " + std::strerror(errno);
      return false;
    }
    return true;
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
  // mkstemp makes the file 0600: give it the mode the target has, or a new
  // file's (0666 less the umask), as a plain open would.
  struct stat existing;
  mode_t mode;
  if (stat(path.c_str(), &existing) == 0) {
    mode = existing.st_mode & 07777;
  } else {
    const mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  fchmod(fd, mode);
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
  if (in_place_) {
    if (!ok) {
      error = "failed writing '" + path_ + "': " + std::strerror(errno ? errno : EIO);
      return false;
    }
    committed_ = true;
    return true;
  }
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
