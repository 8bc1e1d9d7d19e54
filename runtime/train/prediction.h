// The step time predicted before step 1, to set beside the measured one at
// the end of the run: each GEMM shape of the step (the report's
// gemm_calls_by_shape) at the rate the step's own GEMM kernel reaches on it,
// each attention kernel call at its own kernel's rate (both probed once per
// machine and shape, cached), any other product at the GEMM peak; plus the
// bytes of the FLOP-free kernels (elementwise, norms, loss, layout,
// optimizer) at the probed copy rate and their calls at a probed fixed cost
// per call (a parallel region opened and joined); plus the collectives'
// predicted exposed time where the report has one (stepc --link-gbps).
// A roofline sum: it assumes a GEMM runs in the step as fast as alone and
// no memory-bound kernel below the copy rate.

#ifndef STEPC_RUNTIME_TRAIN_PREDICTION_H_
#define STEPC_RUNTIME_TRAIN_PREDICTION_H_

#include <cstdint>
#include <optional>
#include <string>

#include <functional>

#include "runtime/session/module.h"
#include "runtime/train/peak.h"

namespace stepc {

struct StepPrediction {
  bool known = false;  // a CPU step whose report has the counts, and a peak
  double seconds = 0, gemm_seconds = 0, memory_seconds = 0, comm_seconds = 0;
  double memory_gbps = 0;     // the probed copy rate (read + write)
  int64_t memory_bound_calls = 0;  // the report's memory-bound kernels
  double kernel_call_seconds = 0;  // probed: each one's fixed cost
  int gemm_shapes = 0;        // GEMM shapes timed at their own rate
  int attention_shapes = 0;   // attention kernels timed at their own rate
  double attention_seconds = 0;  // their share of gemm_seconds
  std::string memory_source;  // how it was found, for the header line
  double best_gemm_gflops = 0;  // the fastest shape's rate
  bool busy = false;            // a probe ran on a busy machine (not cached)
  bool datasheet = false;       // a GPU's: every product at the peak, bytes at HBM speed
};

// The CPU step's fp32 GEMM kernel (stepc_cpu_matmul in step.so).
using CpuMatmul = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                           int, int, int);
// Its bf16 one (stepc_cpu_matmul_bf16): bf16 operands, f32 or bf16 C, a bias.
using CpuMatmulBf16 = void (*)(const uint16_t*, const uint16_t*, void*, int, int64_t, int64_t,
                               int64_t, int64_t, int, int, int, const float*);

// One GEMM call of the step, as the report keys it ("batch m n k ta tb
// shared"; a shared B is one matrix for the whole batch).
struct GemmShape {
  int64_t batch, m, n, k;
  int ta, tb, shared;
  int64_t a_floats() const { return batch * m * k; }
  int64_t b_floats() const { return (shared ? 1 : batch) * k * n; }
  int64_t c_floats() const { return batch * m * n; }
  void Run(CpuMatmul matmul, const float* a, const float* b, float* c) const;
  // With f32 C and no bias (the path that splits a long K over the threads).
  void Run(CpuMatmulBf16 matmul, const uint16_t* a, const uint16_t* b, float* c) const;
};
// nullopt for a key that is not a shape, or whose operands pass 2^26
// floats (what a probe will not allocate).
std::optional<GemmShape> ParseGemmShape(const std::string& key);

// `threads`: the CPU threads the step uses (the probe copies on as many).
// `slowest_of_ranks` (several ranks): the lowest of the ranks' values of a
// rate, so every rank predicts the same step from the rates it will run at
// (the ranks meet at every collective: the slowest sets the pace), and a
// rerun reading the cache predicts it again. Collective when given: every
// rank calls PredictStep.
using SlowestOfRanks = std::function<double(double)>;
StepPrediction PredictStep(const Module& module, const PeakRate& peak, int threads,
                           const SlowestOfRanks& slowest_of_ranks = nullptr);

// A CUDA step on a GPU of the datasheet table: every product at `peak`
// (the datasheet's dense rate, or --peak-tflops), the memory-bound bytes at
// the datasheet's HBM bandwidth, plus the compiler's exposed communication
// (stepc --link-gbps). A roofline: launches, occupancy and kernels below
// the peak are not counted, and nothing is probed (known = false off the
// table, and on the emulation).
StepPrediction PredictCudaStep(const Module& module, const PeakRate& peak,
                               const std::string& device);
// The same from a report's JSON (what PredictCudaStep reads from step.so).
StepPrediction PredictFromDatasheet(const char* report_json, const PeakRate& peak,
                                    const std::string& device);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_PREDICTION_H_
