//===- CompileCache.cpp - built step.so files reused by content ----------===//

#include "stepc/Compiler/CompileCache.h"
#include "runtime/cache_dir.h"

#include "llvm/ADT/STLExtras.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"

#include <algorithm>
#include <ctime>
#include <cstdlib>
#include <fcntl.h>
#include <sys/stat.h>
#include <vector>

using namespace stepc;

std::optional<CompileCache> CompileCache::fromEnvironment() {
  if (const char *off = std::getenv("STEPC_COMPILE_CACHE"))
    if (llvm::is_contained({"0", "off", "false", "no"}, llvm::StringRef(off).lower()))
      return std::nullopt;
  // stepc's cache directory, shared with stepc-run's probe cache.
  std::string base = CacheDirectory();
  if (base.empty())
    return std::nullopt;
  llvm::SmallString<256> dir(base);
  llvm::sys::path::append(dir, "steps");
  if (llvm::sys::fs::create_directories(dir) || !llvm::sys::fs::is_directory(dir))
    return std::nullopt;
  return CompileCache(dir.str().str());
}

/// A file's identity without reading it: its path, size and modification
/// time (what make trusts; a rebuilt library or an upgraded compiler
/// changes them). "missing" for a file that is not there.
static std::string identity(const std::string &path) {
  struct stat s;
  if (::stat(path.c_str(), &s) != 0)
    return path + " missing";
  return path + " " + std::to_string(s.st_size) + " " + std::to_string(s.st_mtim.tv_sec) + "." +
         std::to_string(s.st_mtim.tv_nsec);
}

std::string CompileCache::key(llvm::ArrayRef<std::string> command,
                              llvm::ArrayRef<std::string> preprocessed,
                              llvm::ArrayRef<std::string> files) {
  llvm::SHA256 hash;
  // Each part with its length before it: no two lists hash alike.
  auto add = [&](llvm::StringRef part) {
    hash.update(std::to_string(part.size()) + ":");
    hash.update(part);
  };
  add("stepc compile cache 1");
  for (const std::string &arg : command)
    add(arg);
  add("sources");
  for (const std::string &text : preprocessed)
    add(text);
  add("files");
  if (!command.empty())
    add(identity(command.front()));
  for (const std::string &file : files)
    add(identity(file));
  std::array<uint8_t, 32> digest = hash.final();
  return llvm::toHex(digest, /*LowerCase=*/true);
}

std::string CompileCache::entryPath(llvm::StringRef key) const {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, key + ".so");
  return path.str().str();
}

bool CompileCache::fetch(llvm::StringRef key, const std::string &output) const {
  std::string entry = entryPath(key);
  if (!llvm::sys::fs::exists(entry))
    return false;
  std::string partial = output + ".partial";
  if (llvm::sys::fs::copy_file(entry, partial) || llvm::sys::fs::rename(partial, output)) {
    llvm::sys::fs::remove(partial);
    return false;
  }
  // Used now: the last to be evicted.
  ::utimensat(AT_FDCWD, entry.c_str(), nullptr, 0);
  return true;
}

void CompileCache::store(llvm::StringRef key, const std::string &built) const {
  std::string entry = entryPath(key);
  // Written aside and renamed: a concurrent stepc never reads half an entry.
  std::string partial = entry + ".partial" + std::to_string(llvm::sys::Process::getProcessId());
  if (llvm::sys::fs::copy_file(built, partial) || llvm::sys::fs::rename(partial, entry)) {
    llvm::sys::fs::remove(partial);
    return;
  }
  evict();
}

void CompileCache::evict() const {
  // A size that is not a whole number of MB ("1G") keeps the default: an
  // eviction of everything is not what it meant.
  int64_t limitMB = 1024, given = 0;
  if (const char *text = std::getenv("STEPC_CACHE_MAX_MB");
      text && !llvm::StringRef(text).getAsInteger(10, given) && given >= 0)
    limitMB = given;
  struct Entry {
    std::string path;
    int64_t bytes;
    struct timespec used;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  std::error_code ec;
  const time_t now = ::time(nullptr);
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    struct stat s;
    if (::stat(it->path().c_str(), &s) != 0)
      continue;
    // A copy a killed stepc left half written: never an entry.
    if (llvm::StringRef(it->path()).contains(".so.partial")) {
      if (now - s.st_mtim.tv_sec > 3600)
        llvm::sys::fs::remove(it->path());
      continue;
    }
    if (llvm::sys::path::extension(it->path()) != ".so")
      continue;
    entries.push_back({it->path(), int64_t(s.st_size), s.st_mtim});
    total += s.st_size;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec
                                          : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const Entry &e : entries) {
    if (total <= limitMB * 1024 * 1024)
      break;
    if (!llvm::sys::fs::remove(e.path))
      total -= e.bytes;
  }
}
