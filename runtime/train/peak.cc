#include "runtime/train/peak.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/cache_dir.h"
#include "runtime/formats/atomic_file.h"
#include "runtime/device/cpu_threads.h"

namespace stepc {
namespace {

using json = nlohmann::json;

// NVIDIA's dense (no sparsity) peaks, TFLOP/s, from the H100/H200 and A100
// datasheets (SXM parts): bf16 tensor cores, and fp32 without TF32 (stepc's
// fp32 GEMMs do not use TF32).
// NVIDIA's datasheets (SXM parts): dense TFLOP/s (bf16 tensor cores; fp32
// without TF32) and HBM TB/s.
struct GpuPeak {
  const char* name;
  double bf16, fp32, hbm_tbps;
};
constexpr GpuPeak kGpuPeaks[] = {
    {"H200", 989.4, 66.9, 4.8}, {"H100", 989.4, 66.9, 3.35}, {"A100", 312.0, 19.5, 2.039}};

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown CPU";
}

std::filesystem::path CacheFile() {
  const std::string dir = CacheDirectory();
  return dir.empty() ? std::filesystem::path() : std::filesystem::path(dir) / "peak.json";
}

// The cache's format: version 2 caches only probes of a quiet machine (an
// older file's rates may be a busy machine's share); version 3 keeps the
// slowest rank's rates for the prediction (an older file may hold the
// fastest's). Older files are probed again.
constexpr int kCacheVersion = 3;

json EmptyCache() { return json{{"version", kCacheVersion}}; }

json ReadCache(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return EmptyCache();
  json cache = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!cache.is_object() || !cache.contains("version") || cache["version"] != kCacheVersion)
    return EmptyCache();
  return cache;
}

// Threads runnable on the machine now (procs_running of /proc/stat, this
// one included); 0 if unknown.
long RunnableThreads() {
  std::ifstream stat("/proc/stat");
  std::string line;
  while (std::getline(stat, line))
    if (line.rfind("procs_running ", 0) == 0) return std::atol(line.c_str() + 14);
  return 0;
}

LoadWatch* current_watch = nullptr;

using Matmul = void (*)(const void*, const void*, void*, int64_t, int64_t, int64_t, int64_t, int,
                        int, int);
using MatmulBf16 = void (*)(const void*, const void*, void*, int, int64_t, int64_t, int64_t,
                            int64_t, int, int, int, const float*);

// The best of a few 1024³ products of the step's own GEMM kernel (found in
// the libraries step.so links), GFLOP/s; 0 if the kernel is not there.
double ProbeGemm(const Module& module, bool bf16) {
  constexpr int64_t n = 1024;
  std::vector<uint16_t> a16(n * n, 0x3f00), b16(n * n, 0x3e80);  // 0.5, 0.25
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  auto matmul = reinterpret_cast<Matmul>(module.Symbol("stepc_cpu_matmul"));
  auto matmul_bf16 = reinterpret_cast<MatmulBf16>(module.Symbol("stepc_cpu_matmul_bf16"));
  if (bf16 ? !matmul_bf16 : !matmul) return 0;
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    const auto start = std::chrono::steady_clock::now();
    if (bf16)
      matmul_bf16(a16.data(), b16.data(), c.data(), 1, 1, n, n, n, 0, 0, 0, nullptr);
    else
      matmul(a.data(), b.data(), c.data(), 1, n, n, n, 0, 0, 0);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r >= 2) best = std::min(best, s);  // two warm-ups
    if (LoadWatch* watch = CurrentLoadWatch()) watch->Sample();
  }
  return 2.0 * n * n * n / best / 1e9;
}

// The GEMM libraries a step's kernels run on, for probe labels and cache
// keys: ", oneDNN + OpenBLAS <core>" (oneDNN's matmul first, OpenBLAS's
// sgemm where oneDNN has no primitive and in the f32 attention's small
// products), ", OpenBLAS <core>" without oneDNN, else "". A rate probed on
// other libraries or kernels (another OPENBLAS_CORETYPE) is another entry.
std::string BlasKernels(const Module& module) {
  using CoreName = char* (*)();
  auto name = reinterpret_cast<CoreName>(module.Symbol("openblas_get_corename"));
  const char* core = name ? name() : nullptr;
  const bool onednn = module.Symbol("dnnl_version") != nullptr;
  if (!core) return onednn ? ", oneDNN" : "";
  return absl::StrCat(onednn ? ", oneDNN + OpenBLAS " : ", OpenBLAS ", core);
}

}  // namespace

PeakRate FindPeak(const Module& module, double given_tflops, const std::string& threads,
                  const std::string& device) {
  const bool bf16 = std::strcmp(module.info().precision, "bf16") == 0;
  if (given_tflops > 0) return {given_tflops * 1e3, "--peak-tflops"};
  if (module.is_cuda()) {
    for (const GpuPeak& gpu : kGpuPeaks)
      if (device.find(gpu.name) != std::string::npos)
        return {(bf16 ? gpu.bf16 : gpu.fp32) * 1e3,
                absl::StrCat(gpu.name, " datasheet, dense ", bf16 ? "bf16" : "fp32")};
    return {0, "unknown GPU: give --peak-tflops"};
  }
  // The BLAS kernels in the key: a probe of other kernels (another
  // OPENBLAS_CORETYPE) measured another peak.
  const std::string kernels = BlasKernels(module);
  const std::string key = CpuCacheKey(threads, absl::StrCat(bf16 ? "bf16" : "fp32", kernels));
  const CachedRate rate = CachedProbe(key, [&] { return ProbeGemm(module, bf16); });
  if (rate.value <= 0) return {0, "no GEMM kernel to probe"};
  return {rate.value, absl::StrCat(bf16 ? "bf16 GEMM" : "sgemm", " probe", kernels,
                                   ProbeSource(rate, "1024³"))};
}

std::string ProbeSource(const CachedRate& rate, const std::string& probe) {
  if (!rate.cached_in.empty()) return ", cached in " + rate.cached_in;
  return absl::StrCat(", ", probe,
                      rate.busy ? ", on a busy machine: not cached, probed again next run" : "");
}

void LoadWatch::Sample() {
  if (const long n = RunnableThreads(); n > 0) runnable_.push_back(n);
}

bool LoadWatch::busy() const {
  if (runnable_.empty()) return false;
  std::vector<long> sorted = runnable_;
  std::sort(sorted.begin(), sorted.end());
  return sorted[sorted.size() / 2] > std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

LoadWatch* CurrentLoadWatch() { return current_watch; }

CachedRate CachedProbe(const std::string& key, const std::function<double()>& probe,
                       bool slowest) {
  const std::filesystem::path file = CacheFile();
  json cache = file.empty() ? EmptyCache() : ReadCache(file);
  if (auto it = cache.find(key); it != cache.end() && it->is_number() && it->get<double>() > 0)
    return {it->get<double>(), file.string()};
  LoadWatch watch;
  current_watch = &watch;
  const double value = probe();
  watch.Sample();
  current_watch = nullptr;
  // STEPC_PROBE_CACHE=always caches a busy machine's probe too (a test
  // suite running in parallel, which wants the next run to read the cache).
  const char* policy = std::getenv("STEPC_PROBE_CACHE");
  if (watch.busy() && !(policy && std::strcmp(policy, "always") == 0))
    return {value, "", /*busy=*/true};
  if (value <= 0 || file.empty()) return {value, ""};
  // The ranks of a node probe at once and share the file: under a lock,
  // the first rate written wins (or the slowest), and a rank uses the one
  // it leaves there (its own probe would leave its MFU and prediction
  // differing from the next run's, which reads the file).
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  const int lock = ::open((file.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  cache = ReadCache(file);
  double used = value;
  if (auto it = cache.find(key); it != cache.end() && it->is_number() && it->get<double>() > 0 &&
                                 !(slowest && value < it->get<double>())) {
    used = it->get<double>();
  } else {
    cache[key] = value;
    AtomicFile out;
    std::string error;
    if (out.Open(file.string(), error)) {
      out.stream() << cache.dump(1) << "\n";
      out.Commit(error);
    }
  }
  if (lock >= 0) ::close(lock);  // (closing releases the lock)
  return {used, ""};
}

std::string BlasKernelsOf(const Module& module) { return BlasKernels(module); }

GpuMemoryRate FindGpuMemoryRate(const std::string& device) {
  for (const GpuPeak& gpu : kGpuPeaks)
    if (device.find(gpu.name) != std::string::npos)
      return {gpu.hbm_tbps * 1e3, absl::StrCat(gpu.name, " datasheet HBM")};
  return {};
}

std::string CpuCacheKey(const std::string& threads, const std::string& what) {
  const int ranks = LocalRanksFromEnvironment();
  return absl::StrCat(CpuModel(), " | ", threads, " threads",
                      ranks > 1 ? absl::StrCat(" x ", ranks, " ranks") : "", " | ", what);
}

}  // namespace stepc
