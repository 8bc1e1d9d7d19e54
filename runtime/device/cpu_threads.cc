#include "runtime/device/cpu_threads.h"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"

namespace stepc {

int LocalRanksFromEnvironment() {
  // SLURM_NTASKS_PER_NODE may read "2(x3)": its leading number counts.
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE",
                          "SLURM_NTASKS_PER_NODE"}) {
    const char* text = std::getenv(var);
    if (!text) continue;
    std::string digits(text, text + std::strspn(text, "0123456789"));
    int ranks = 0;
    if (absl::SimpleAtoi(digits, &ranks) && ranks >= 1) return ranks;
  }
  return 1;
}

int DefaultCpuThreads() {
  const long online = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t mask;
  long usable = online;
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) usable = std::max(1, CPU_COUNT(&mask));
  if (usable < online) return static_cast<int>(usable);  // bound by the launcher
  return static_cast<int>(std::max(1L, usable / LocalRanksFromEnvironment()));
}

void UseCpuThreads(int threads) {
  threads = std::max(1, threads);
  const std::string text = std::to_string(threads);
  setenv("OMP_NUM_THREADS", text.c_str(), /*overwrite=*/1);
  setenv("OPENBLAS_NUM_THREADS", text.c_str(), 1);
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
    set(threads);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set(threads);
}

void ChooseBlasKernels() {
#if defined(__x86_64__)
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  if (!core || !*core) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16"))
      core = "Cooperlake";
    else if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
      core = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      core = "Haswell";
    else
      return;
    setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
  }
  // An OpenBLAS the host loaded first (numpy's, in a Python host) chose its
  // kernels already, and cannot choose again: say so once.
  if (void* loaded = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD)) {
    using CoreName = char* (*)();
    auto name = reinterpret_cast<CoreName>(dlsym(loaded, "openblas_get_corename"));
    const char* now = name ? name() : nullptr;
    static bool warned = false;
    if (now && strcasecmp(now, core) != 0 && !warned) {
      warned = true;
      std::fprintf(stderr,
                   "stepc: OpenBLAS was loaded before the step (by numpy?) with its %s kernels, "
                   "not %s: GEMMs may run several times slower. Import stepc first, or set "
                   "OPENBLAS_CORETYPE=%s before the process starts.\n",
                   now, core, core);
    }
    dlclose(loaded);
  }
#endif
}

}  // namespace stepc
