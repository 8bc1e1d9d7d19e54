//===- SpecialFiles.h - FIFOs and devices the tools read and write -*- C++ -*-===//
//
// A FIFO blocks whoever opens it until the other end is opened too: forever,
// when no process ever does. A model named by a FIFO or socket is refused
// (stdin, "-", takes a piped model; an inherited descriptor such as
// /dev/fd/N from process substitution is read); an output that is a FIFO or
// device is opened without waiting, so one no process reads is an error.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_SPECIALFILES_H
#define STEPC_COMPILER_SPECIALFILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <string>
#include <unistd.h>

namespace stepc {

/// An error message when `path` names a FIFO or socket; nothing otherwise
/// (a missing or unreadable file is left to the parser's own message).
inline std::optional<std::string> blockingInputError(llvm::StringRef path) {
  // A descriptor this process inherited (`stepc <(gen.py)`, /dev/stdin) is
  // a pipe with its writer already attached: it ends, so it is read.
  if (path == "-" || path == "/dev/stdin" || path.starts_with("/dev/fd/") ||
      path.starts_with("/proc/self/fd/"))
    return std::nullopt;
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status))
    return std::nullopt;
  const llvm::sys::fs::file_type type = status.type();
  if (type != llvm::sys::fs::file_type::fifo_file &&
      type != llvm::sys::fs::file_type::socket_file)
    return std::nullopt;
  return ("cannot read '" + path +
          "': it is a FIFO or socket (reading would wait for a writer); pipe the model into "
          "stdin with '-' instead")
      .str();
}

/// A descriptor writing `path`, an existing FIFO, socket or device, opened
/// without waiting for a reader and then made blocking; -1 and `error` when
/// no process reads it or it cannot be opened.
inline int openSpecialForWrite(llvm::StringRef path, std::string &error) {
  const int fd = ::open(path.str().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    error = ("cannot write '" + path + "': " +
             (errno == ENXIO ? "no process reads it (a FIFO or socket: writing would block)"
                             : std::string(std::strerror(errno))))
                .str();
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

} // namespace stepc

#endif // STEPC_COMPILER_SPECIALFILES_H
