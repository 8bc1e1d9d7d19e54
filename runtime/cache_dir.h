// stepc's cache directory, where stepc-run caches its GEMM probe
// (runtime/train/peak.cc) and stepc its built step.so files
// (compiler/lib/CompileCache.cpp): $STEPC_CACHE_DIR, else
// $XDG_CACHE_HOME/stepc, else ~/.cache/stepc; "" when none of them is set.

#ifndef STEPC_RUNTIME_CACHE_DIR_H_
#define STEPC_RUNTIME_CACHE_DIR_H_

#include <cstdlib>
#include <string>

namespace stepc {

inline std::string CacheDirectory() {
  if (const char* dir = std::getenv("STEPC_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/stepc";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/stepc";
  return "";
}

}  // namespace stepc

#endif  // STEPC_RUNTIME_CACHE_DIR_H_
