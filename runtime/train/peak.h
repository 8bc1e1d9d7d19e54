// The machine's peak rate, the denominator of MFU (model FLOPs utilisation):
// measured on the CPU by a GEMM probe of the kernel the step itself calls
// (sgemm, or the bf16 GEMM of a --precision=bf16 step), cached per CPU
// model, thread count and precision; for a CUDA step, a table of NVIDIA's
// dense peaks; or given (--peak-tflops).

#ifndef STEPC_RUNTIME_TRAIN_PEAK_H_
#define STEPC_RUNTIME_TRAIN_PEAK_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/session/module.h"

namespace stepc {

struct PeakRate {
  double gflops = 0;   // per rank; 0: unknown (MFU is not reported)
  std::string source;  // how it was found, for the header line
};

// `given_tflops` > 0 wins. `device` describes a CUDA step's GPU
// (Session::DescribeDevice). The CPU cache is $STEPC_CACHE_DIR, else
// $XDG_CACHE_HOME/stepc, else ~/.cache/stepc (peak.json); a missing or
// unreadable cache means probing (about 0.1 s), a cache that cannot be
// written is not an error.
PeakRate FindPeak(const Module& module, double given_tflops, const std::string& threads,
                  const std::string& device);

// A rate measured once per machine: the cached value of `key` in peak.json,
// else `probe()` (stored when positive). `cached_in` names the file it came
// from, empty when just probed.
struct CachedRate {
  double value = 0;
  std::string cached_in;  // the cache it came from; empty: probed now
  bool busy = false;      // probed now on a busy machine: not cached
};
// The rate cached under `key`, else `probe()`'s, cached only if the machine
// ran nothing else meanwhile (a probe sharing the CPUs with other programs
// measures the share, and a cached share would skew every later run's MFU
// and prediction: such a probe is used once and run again next time).
//
// The ranks of a node probe at once and share the file. `slowest`: the
// lowest rate any of them measured is kept (a rate the step's pace depends
// on: ranks that meet at every collective run at the slowest one's);
// otherwise the first rate written wins (a peak). Either way a rank returns
// the value it leaves in the file, which an earlier rank may have returned
// differently: ranks that must agree exchange theirs.
CachedRate CachedProbe(const std::string& key, const std::function<double()>& probe,
                       bool slowest = false);

// A GPU's memory bandwidth from its datasheet (by the device's name), in
// GB/s; 0 for a device not in the table.
struct GpuMemoryRate {
  double gbps = 0;
  std::string source;
};
GpuMemoryRate FindGpuMemoryRate(const std::string& device);

// ", cached in FILE", or ", <probe>" (with a note when the machine was busy).
std::string ProbeSource(const CachedRate& rate, const std::string& probe);

// Watches the machine's load while a probe runs: busy when, in the median
// of its samples, more threads were runnable (the probe's own included)
// than the machine has CPUs. (The median: a quiet machine's own daemons
// make a sample or two one thread higher.)
class LoadWatch {
 public:
  void Sample();
  bool busy() const;

 private:
  std::vector<long> runnable_;
};
// The watch of the probe CachedProbe is running (null outside one): a probe
// samples it between its repetitions.
LoadWatch* CurrentLoadWatch();

// ", OpenBLAS <core>" for a step whose GEMMs OpenBLAS runs, else "".
std::string BlasKernelsOf(const Module& module);

// "<CPU model> | <threads> threads | <what>": a cache key of this CPU.
// "<CPU model> | <threads> threads[ x <ranks> ranks] | <what>": a rate
// probed while this node's other ranks run too (memory bandwidth and
// caches are shared) is another entry than one rank's alone.
std::string CpuCacheKey(const std::string& threads, const std::string& what);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_PEAK_H_
