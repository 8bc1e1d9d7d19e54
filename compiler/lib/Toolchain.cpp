//===- Toolchain.cpp - invoking the host C++ compiler ---------------------===//

#include "stepc/Compiler/Toolchain.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace stepc;

// Where the runtime headers and the kernel library are: compiled in by
// CMake, overridable for an installed tree.
static std::string dirFromEnv(const char *var, const char *fallback) {
  const char *value = std::getenv(var);
  return value && *value ? value : fallback;
}

llvm::Error stepc::compileCpuSharedObject(const std::string &source,
                                          const std::string &output) {
  std::string sourcePath = output + ".cpp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(sourcePath, ec);
    if (ec)
      return llvm::createStringError(ec, "cannot write '%s': %s", sourcePath.c_str(),
                                     ec.message().c_str());
    os << source;
  }
  const char *cxxEnv = std::getenv("CXX");
  std::string cxxName = cxxEnv && *cxxEnv ? cxxEnv : "c++";
  llvm::ErrorOr<std::string> cxx = llvm::sys::findProgramByName(cxxName);
  if (!cxx)
    return llvm::createStringError(cxx.getError(), "no C++ compiler: '%s' is not on PATH",
                                   cxxName.c_str());
  std::string include = dirFromEnv("STEPC_RUNTIME_INCLUDE_DIR", STEPC_RUNTIME_INCLUDE_DIR);
  std::string kernels = dirFromEnv("STEPC_KERNELS_INCLUDE_DIR", STEPC_KERNELS_INCLUDE_DIR);
  std::string libDir = dirFromEnv("STEPC_LIBRARY_DIR", STEPC_LIBRARY_DIR);
  std::vector<std::string> args = {*cxx,      "-std=c++17",  "-O3",        "-march=native",
                                   "-fopenmp", "-fPIC",      "-shared",    "-w",
                                   "-I" + include, "-I" + kernels, sourcePath, "-o",
                                   output,    "-L" + libDir, "-lstepc_kernels_cpu",
                                   "-lmvec",  "-Wl,-rpath," + libDir};
  llvm::SmallString<128> log;
  llvm::sys::fs::createTemporaryFile("stepc-cxx", "log", log);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(*cxx, argv, std::nullopt, redirects, 0, 0, &error);
  auto diagnostics = llvm::MemoryBuffer::getFile(log);
  std::string text = diagnostics ? (*diagnostics)->getBuffer().str() : "";
  llvm::sys::fs::remove(log);
  if (rc != 0) {
    std::string command;
    for (const std::string &a : args)
      command += a + " ";
    return llvm::createStringError(std::errc::io_error,
                                   "the C++ compiler failed (exit %d%s%s): %s\n%s"
                                   "the generated source is kept at %s",
                                   rc, error.empty() ? "" : ", ", error.c_str(),
                                   command.c_str(), text.c_str(), sourcePath.c_str());
  }
  llvm::sys::fs::remove(sourcePath);
  return llvm::Error::success();
}
