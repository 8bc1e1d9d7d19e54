//===- Toolchain.h - invoking the host C++ and CUDA compilers -----*- C++ -*-===//

#ifndef STEPC_COMPILER_TOOLCHAIN_H
#define STEPC_COMPILER_TOOLCHAIN_H

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace stepc {

/// The CPU a step.so is built for: the portable baseline (x86-64-v3:
/// AVX2, FMA, BMI2, F16C, MOVBE; any x86-64 CPU since 2015) or this
/// machine's (-march=native, not portable).
struct CpuTarget {
  /// "x86-64-v3" or "native".
  std::string isa;
  /// The CPU features it needs, as Linux's /proc/cpuinfo names them,
  /// comma-separated: the runtime refuses the step.so on a CPU without one.
  std::string features;
  /// Under native, the CPU's model (/proc/cpuinfo's "model name"), which
  /// -march=native also tunes for: part of the compile cache's key.
  std::string model = "";
};
/// `name`: x86-64-v3 or native; an error for anything else (or the
/// baseline on a host that is not x86-64).
llvm::Expected<CpuTarget> cpuTarget(const std::string &name);

/// Compiles generated C++ into the shared object `output` for `cpu`, linked
/// against that ISA's CPU kernel library. The compiler is $CXX or `c++`. On
/// failure the error carries the command and the compiler's diagnostics,
/// and the source is kept next to `output` (`<output>.cpp`) for inspection.
///
/// Every compile takes one source per pipeline stage (one without pp), all
/// in one shared object: stage 0's entry points are the plain ones and
/// `stepc_pipeline_stages_v<ABI>()` returns the count; stage r's carry
/// `_stage<r>` after their names.
///
/// A build of the same inputs made before is copied from the compile cache
/// (CompileCache.h) instead; `fromCache`, where given, says whether it was.
llvm::Error compileCpuSharedObject(const std::vector<std::string> &stageSources,
                                   const std::string &output, const CpuTarget &cpu,
                                   bool *fromCache = nullptr);

/// Compiles generated CUDA C++ into `output` with nvcc for `arch` (sm_90a),
/// linked against the CUDA kernel library, cuBLASLt and the CUDA runtime.
/// nvcc is $NVCC, the one stepc was built with, or `nvcc` on PATH. Errors
/// as above (the source is kept as `<output>.cu`).
llvm::Error compileCudaSharedObject(const std::vector<std::string> &stageSources,
                                    const std::string &output, const std::string &arch,
                                    bool *fromCache = nullptr);

/// Compiles generated CUDA C++ with the host C++ compiler for the host
/// emulation of CUDA (runtime/kernels/cuda/emulation.h): every kernel on
/// host threads, slow, for testing the CUDA back end where no GPU is.
llvm::Error compileCudaEmulatedSharedObject(const std::vector<std::string> &stageSources,
                                            const std::string &output, bool *fromCache = nullptr);

} // namespace stepc

#endif // STEPC_COMPILER_TOOLCHAIN_H
