//===- InputFile.h - Refusing model inputs that would block ---*- C++ -*-===//
//
// A model named by a path that is a FIFO or socket would block the tool
// until some process writes it (forever, when none does): the tools refuse
// it and point at stdin ("-"), which a pipe feeds without a name; an
// inherited descriptor (/dev/fd/N, process substitution) is read.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_INPUTFILE_H
#define STEPC_COMPILER_INPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <optional>
#include <string>

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

} // namespace stepc

#endif // STEPC_COMPILER_INPUTFILE_H
