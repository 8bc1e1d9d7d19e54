//===- CompileCache.h - built step.so files reused by content -----*- C++ -*-===//
//
// Compiling the generated source is most of what `stepc` takes (the MLIR
// pipeline of a small model runs in tens of milliseconds, the host compiler
// in a second or more), and the same model is often compiled again with
// nothing changed: a rerun script, a sweep that revisits a configuration, a
// test suite. A built shared object is kept in stepc's cache directory
// (steps/ under $STEPC_CACHE_DIR, else $XDG_CACHE_HOME/stepc, else
// ~/.cache/stepc) under a hash of everything its bytes depend on, and a later
// compile with the same inputs copies it instead of running the compiler.
// STEPC_COMPILE_CACHE=off (or 0, false, no) turns it off.
//
// ccache cannot do this for us: it caches object files, not the link, and it
// keys on the source file's path, which is beside the output (a new path for
// every output). JAX's persistent compilation cache and Inductor's cache
// work the same way as this one.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_COMPILECACHE_H
#define STEPC_COMPILER_COMPILECACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace stepc {

class CompileCache {
public:
  /// The cache (created if missing); nullopt when it is turned off or
  /// cannot be made a directory (then every compile runs the compiler).
  static std::optional<CompileCache> fromEnvironment();

  /// The key of a build: the command (`command`: the program and its flags,
  /// without the paths of the sources and the output, which differ between
  /// outputs), the text each source expands to (`preprocessed`: headers and
  /// macros included), and the identity (path, size, modification time) of
  /// the compiler (command's first word) and of every library in `files`.
  static std::string key(llvm::ArrayRef<std::string> command,
                         llvm::ArrayRef<std::string> preprocessed,
                         llvm::ArrayRef<std::string> files);

  /// Copies the entry `key` to `output` (through a temporary file beside
  /// it, renamed); false when there is none or it cannot be copied.
  bool fetch(llvm::StringRef key, const std::string &output) const;

  /// Keeps a copy of `built` as the entry `key`, then evicts the least
  /// recently used entries while the cache holds more than its limit
  /// ($STEPC_CACHE_MAX_MB, 1024 by default). Failures are ignored: the
  /// cache is an optimisation, never a reason for a compile to fail.
  void store(llvm::StringRef key, const std::string &built) const;

private:
  explicit CompileCache(std::string dir) : dir(std::move(dir)) {}
  std::string entryPath(llvm::StringRef key) const;
  void evict() const;

  std::string dir;
};

} // namespace stepc

#endif // STEPC_COMPILER_COMPILECACHE_H
