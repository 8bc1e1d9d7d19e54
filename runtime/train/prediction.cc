#include "runtime/train/prediction.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace stepc {
namespace {

// The best of a few copies of 64 MiB (well past any cache) split among
// `threads` threads, in GB/s of traffic (bytes read + bytes written).
double ProbeCopyRate(int threads) {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<char> src(kBytes, 1), dst(kBytes, 0);
  threads = std::max(1, threads);
  double best = 1e30;
  for (int round = 0; round < 6; ++round) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    const size_t part = kBytes / threads;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        const size_t from = t * part, size = t + 1 == threads ? kBytes - from : part;
        std::memcpy(dst.data() + from, src.data() + from, size);
      });
    for (std::thread& w : workers) w.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (round > 0) best = std::min(best, s);  // the first touches the pages
    if (LoadWatch* watch = CurrentLoadWatch()) watch->Sample();
  }
  return 2.0 * kBytes / best / 1e9;
}

// The fixed cost of one call of a memory-bound kernel on the step's threads:
// the kernel library's fill (one parallel region, as most of them open) on
// 64 floats, the median of batches of calls, in seconds per call.
double ProbeKernelCall(const Module& module) {
  using Fill = void (*)(float*, int64_t, float);
  auto fill = reinterpret_cast<Fill>(module.Symbol("stepc_cpu_fill"));
  if (!fill) return 0;
  float buffer[64];
  for (int call = 0; call < 200; ++call) fill(buffer, 64, 1.0f);  // threads up
  constexpr int kCalls = 500;
  std::vector<double> per_call;
  for (int batch = 0; batch < 9; ++batch) {
    const auto start = std::chrono::steady_clock::now();
    for (int call = 0; call < kCalls; ++call) fill(buffer, 64, float(call));
    per_call.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kCalls);
    if (LoadWatch* watch = CurrentLoadWatch()) watch->Sample();
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

// The fastest of `calls` calls of `call` after the first (which warms up),
// in seconds; the load watch samples after each.
double BestOfCalls(int calls, const std::function<void()>& call) {
  double best = 1e30;
  for (int r = 0; r < calls; ++r) {
    const auto start = std::chrono::steady_clock::now();
    call();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) best = std::min(best, s);
    if (LoadWatch* watch = CurrentLoadWatch()) watch->Sample();
  }
  return best;
}

// `n` floats of `value`; for a bf16 kernel, each float holds two bf16 of
// it (what the kernel reads as 2n bf16, the same value throughout).
std::vector<float> Filled(int64_t n, float value, bool bf16) {
  if (!bf16) return std::vector<float>(n, value);
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t pair = (bits & 0xffff0000u) | (bits >> 16);
  float both;
  std::memcpy(&both, &pair, sizeof both);
  return std::vector<float>(n, both);
}

// The step's own GEMM kernel at one call's shape (fp32, or bf16 operands
// writing f32 when `matmul_bf16` is given): the best of a few calls, in
// seconds.
double ProbeGemmCall(CpuMatmul matmul, CpuMatmulBf16 matmul_bf16, const std::string& key) {
  const std::optional<GemmShape> shape = ParseGemmShape(key);
  if (!shape) return 0;
  const bool bf16 = matmul_bf16 != nullptr;
  std::vector<float> a = Filled(shape->a_floats(), 0.5f, bf16),
                     b = Filled(shape->b_floats(), 0.25f, bf16), c(shape->c_floats());
  return BestOfCalls(5, [&] {
    if (bf16)
      shape->Run(matmul_bf16, reinterpret_cast<const uint16_t*>(a.data()),
                 reinterpret_cast<const uint16_t*>(b.data()), c.data());
    else
      shape->Run(matmul, a.data(), b.data(), c.data());
  });
}

using Attention = void (*)(const float*, const float*, const float*, int64_t, int64_t, int64_t,
                          int64_t, int64_t, int64_t, int, double, float*);
using AttentionGrad = void (*)(const float*, const float*, const float*, const float*, int64_t,
                               int64_t, int64_t, int64_t, int64_t, int64_t, int, double, float*,
                               float*, float*);
using AttentionPacked = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int,
                                 double, int64_t, int64_t, int64_t, int64_t, float*);
using AttentionGradPacked = void (*)(const float*, const float*, int64_t, int64_t, int64_t,
                                     int64_t, int64_t, int, double, int64_t, int64_t, int64_t,
                                     int64_t, float*);
using AttentionPackedBf16 = void (*)(const uint16_t*, int64_t, int64_t, int64_t, int64_t,
                                     int64_t, int, double, int64_t, int64_t, int64_t, int64_t,
                                     uint16_t*);
using AttentionGradPackedBf16 = void (*)(const uint16_t*, const uint16_t*, int64_t, int64_t,
                                         int64_t, int64_t, int64_t, int, double, int64_t,
                                         int64_t, int64_t, int64_t, uint16_t*);

// The step's own attention kernel (`callee`, as step.so calls it) at one
// call's shape ("callee batch tq tk heads kv_heads head_dim causal", the
// report's key): the best of a few calls, in seconds; 0 if the kernel is
// not there or the shape is past the probe's bounds.
double ProbeAttentionCall(const Module& module, const std::string& shape) {
  char callee[64];
  int64_t b, tq, tk, h, hkv, d;
  int causal;
  if (std::sscanf(shape.c_str(), "%63s %ld %ld %ld %ld %ld %ld %d", callee, &b, &tq, &tk, &h, &hkv,
                  &d, &causal) != 8 ||
      b < 1 || tq < 1 || tk < 1 || h < 1 || hkv < 1 || d < 1)
    return 0;
  constexpr int64_t kMaxFloats = int64_t{1} << 26;
  const int64_t width = (h + 2 * hkv) * d;
  if (b > kMaxFloats / std::max(tq, tk) || width > kMaxFloats / (b * std::max(tq, tk)))
    return 0;
  // A bf16 step's kernels ("..._bf16") read and write bf16 (the buffers
  // below then hold two per float).
  std::string name = callee;
  const bool bf16 = name.size() > 5 && name.compare(name.size() - 5, 5, "_bf16") == 0;
  if (bf16) name.resize(name.size() - 5);
  const double scale = 1.0 / std::sqrt(double(d));
  // Only what the kernel reads and writes: separate q, k, v (and their
  // gradients), or one packed [batch, len, width] tensor (and its gradient).
  const bool packed = name.find("packed") != std::string::npos;
  const bool grad = name.find("grad") != std::string::npos;
  auto buffer = [bf16](bool needed, int64_t n, float fill) {
    return Filled(needed ? n : 0, fill, bf16);
  };
  std::vector<float> q = buffer(!packed, b * tq * h * d, 0.01f),
                     k = buffer(!packed, b * tk * hkv * d, 0.02f),
                     v = buffer(!packed, b * tk * hkv * d, 0.03f),
                     out = buffer(!grad || !packed, b * tq * h * d, 0),  // dq when unpacked
                     dout = buffer(grad, b * tq * h * d, 0.01f),
                     dk = buffer(grad && !packed, b * tk * hkv * d, 0),
                     dv = buffer(grad && !packed, b * tk * hkv * d, 0),
                     qkv = buffer(packed, b * tq * width, 0.01f),
                     dqkv = buffer(packed && grad, b * tq * width, 0);
  std::function<void()> call;
  void* symbol = module.Symbol(("stepc_cpu_" + std::string(callee)).c_str());
  if (!symbol) return 0;
  auto half = [](std::vector<float>& v) { return reinterpret_cast<uint16_t*>(v.data()); };
  if (bf16 && name == "attention_packed" && tq == tk)
    call = [&] {
      reinterpret_cast<AttentionPackedBf16>(symbol)(half(qkv), b, tq, h, hkv, d, causal, scale,
                                                    width, 0, h * d, (h + hkv) * d, half(out));
    };
  else if (bf16 && name == "attention_grad_packed" && tq == tk)
    call = [&] {
      reinterpret_cast<AttentionGradPackedBf16>(symbol)(half(dout), half(qkv), b, tq, h, hkv, d,
                                                        causal, scale, width, 0, h * d,
                                                        (h + hkv) * d, half(dqkv));
    };
  else if (bf16)
    return 0;
  else if (name == "attention")
    call = [&] {
      reinterpret_cast<Attention>(symbol)(q.data(), k.data(), v.data(), b, tq, tk, h, hkv, d, causal,
                                          scale, out.data());
    };
  else if (name == "attention_grad")
    call = [&] {
      reinterpret_cast<AttentionGrad>(symbol)(dout.data(), q.data(), k.data(), v.data(), b, tq, tk,
                                              h, hkv, d, causal, scale, out.data(), dk.data(),
                                              dv.data());
    };
  else if (name == "attention_packed" && tq == tk)
    call = [&] {
      reinterpret_cast<AttentionPacked>(symbol)(qkv.data(), b, tq, h, hkv, d, causal, scale, width,
                                                0, h * d, (h + hkv) * d, out.data());
    };
  else if (name == "attention_grad_packed" && tq == tk)
    call = [&] {
      reinterpret_cast<AttentionGradPacked>(symbol)(dout.data(), qkv.data(), b, tq, h, hkv, d,
                                                    causal, scale, width, 0, h * d,
                                                    (h + hkv) * d, dqkv.data());
    };
  else
    return 0;
  return BestOfCalls(4, call);
}

// Whether the report holds `key` as a number >= 0 (a report from another
// stepc, or none at all, predicts nothing).
bool IsCount(const nlohmann::json& report, const char* key) {
  return report.is_object() && report.contains(key) && report[key].is_number() &&
         report[key].get<double>() >= 0;
}

// The step's pace is its slowest rank's: of the rates the ranks of a node
// probe at once, the lowest is kept.
constexpr bool kSlowest = true;

}  // namespace

std::optional<GemmShape> ParseGemmShape(const std::string& key) {
  GemmShape s;
  if (std::sscanf(key.c_str(), "%ld %ld %ld %ld %d %d %d", &s.batch, &s.m, &s.n, &s.k, &s.ta,
                  &s.tb, &s.shared) != 7 ||
      s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1)
    return std::nullopt;
  // Operands past 2^26 floats (256 MiB) are not probed: a probe does not
  // allocate what the step itself may not.
  constexpr int64_t kMaxFloats = int64_t{1} << 26;
  if (s.batch > kMaxFloats || s.m > kMaxFloats / s.batch || s.k > kMaxFloats / (s.batch * s.m) ||
      s.n > kMaxFloats / (s.batch * s.m) || s.n > kMaxFloats / (s.batch * s.k))
    return std::nullopt;
  return s;
}

void GemmShape::Run(CpuMatmul matmul, const float* a, const float* b, float* c) const {
  matmul(a, b, c, batch, m, n, k, ta, tb, shared);
}

void GemmShape::Run(CpuMatmulBf16 matmul, const uint16_t* a, const uint16_t* b, float* c) const {
  matmul(a, b, c, /*c_f32=*/1, batch, m, n, k, ta, tb, shared, /*bias=*/nullptr);
}

StepPrediction PredictFromDatasheet(const char* report_json, const PeakRate& peak,
                                    const std::string& device) {
  StepPrediction p;
  const GpuMemoryRate hbm = FindGpuMemoryRate(device);
  if (peak.gflops <= 0 || hbm.gbps <= 0 || !report_json) return p;
  const nlohmann::json report =
      nlohmann::json::parse(report_json, nullptr, /*allow_exceptions=*/false);
  auto number = [&](const char* key) { return IsCount(report, key); };
  if (!number("executed_flops_per_step") || !number("memory_bound_bytes_per_step")) return p;
  p.gemm_seconds = report["executed_flops_per_step"].get<double>() / (peak.gflops * 1e9);
  p.memory_gbps = hbm.gbps;
  p.memory_source = hbm.source;
  p.memory_seconds = report["memory_bound_bytes_per_step"].get<double>() / (hbm.gbps * 1e9);
  if (number("predicted_exposed_comm_seconds"))
    p.comm_seconds = report["predicted_exposed_comm_seconds"].get<double>();
  p.seconds = p.gemm_seconds + p.memory_seconds + p.comm_seconds;
  p.datasheet = true;
  p.known = true;
  return p;
}

StepPrediction PredictCudaStep(const Module& module, const PeakRate& peak,
                               const std::string& device) {
  if (!module.is_cuda()) return {};
  return PredictFromDatasheet(module.info().report_json, peak, device);
}

namespace {

// A pace rate by its cache key: this machine's cached or probed one, the
// slowest of the ranks' (every rank asks for the same keys in the same
// order).
using Pace = std::function<CachedRate(const std::string&, const std::function<double()>&)>;

// Each GEMM shape of the report at its own measured rate (cached per
// shape; a bf16 step's GEMMs are its bf16 kernel's: bf16 operands, f32
// sums): their time into `p`, their FLOPs off `rest`.
void PredictGemms(const Module& module, const nlohmann::json& report, int threads,
                  const Pace& pace, StepPrediction& p, double& rest) {
  const bool fp32 = std::strcmp(module.info().precision, "fp32") == 0;
  const bool bf16 = std::strcmp(module.info().precision, "bf16") == 0;
  auto matmul = reinterpret_cast<CpuMatmul>(module.Symbol("stepc_cpu_matmul"));
  auto matmul_bf16 = bf16 ? reinterpret_cast<CpuMatmulBf16>(module.Symbol("stepc_cpu_matmul_bf16"))
                          : nullptr;
  if (((fp32 && matmul) || matmul_bf16) && report.contains("gemm_calls_by_shape"))
    for (const auto& item : report["gemm_calls_by_shape"].items()) {
      // (Named copies: a lambda cannot capture a structured binding in C++17.)
      const std::string shape = item.key();
      const nlohmann::json calls = item.value();
      int64_t batch = 0, m = 0, n = 0, k = 0;
      if (!calls.is_number() ||
          std::sscanf(shape.c_str(), "%ld %ld %ld %ld", &batch, &m, &n, &k) != 4)
        continue;
      const double flops = 2.0 * batch * m * n * k;
      const CachedRate gflops = pace(
          CpuCacheKey(std::to_string(threads),
                      (bf16 ? "bf16 GEMM GFLOP/s " : "sgemm GFLOP/s ") + shape +
                          BlasKernelsOf(module)),
          [&] {
            const double s = ProbeGemmCall(matmul, matmul_bf16, shape);
            return s > 0 ? flops / s / 1e9 : 0.0;
          });
      if (gflops.value <= 0) continue;
      p.busy |= gflops.busy;
      p.best_gemm_gflops = std::max(p.best_gemm_gflops, gflops.value);
      p.gemm_seconds += calls.get<double>() * flops / (gflops.value * 1e9);
      rest -= calls.get<double>() * flops;
      ++p.gemm_shapes;
    }
}

// Each attention shape at its own kernel's measured rate (its FLOPs from
// the report): their time into `p`, their FLOPs off `rest`.
void PredictAttention(const Module& module, const nlohmann::json& report, int threads,
                      const Pace& pace, StepPrediction& p, double& rest) {
  const bool fp32 = std::strcmp(module.info().precision, "fp32") == 0;
  const bool bf16 = std::strcmp(module.info().precision, "bf16") == 0;
  if ((fp32 || bf16) && report.contains("attention_calls_by_shape") &&
      report.contains("attention_flops_by_shape"))
    for (const auto& item : report["attention_calls_by_shape"].items()) {
      const std::string shape = item.key();
      const nlohmann::json calls = item.value();
      const nlohmann::json& flops_of = report["attention_flops_by_shape"];
      if (!calls.is_number() || !flops_of.contains(shape) || !flops_of[shape].is_number())
        continue;
      const double flops = flops_of[shape].get<double>();
      if (flops <= 0) continue;
      // The key names the kernel: a rate cached for an earlier one (the
      // OpenBLAS-based attention; its own products in 16-float vectors,
      // which AVX2 CPUs ran 40x slower) is probed again.
      const CachedRate gflops = pace(
          CpuCacheKey(std::to_string(threads), "attention GFLOP/s, native vectors, " + shape),
          [&] {
            const double s = ProbeAttentionCall(module, shape);
            return s > 0 ? flops / s / 1e9 : 0.0;
          });
      if (gflops.value <= 0) continue;
      p.busy |= gflops.busy;
      p.attention_seconds += calls.get<double>() * flops / (gflops.value * 1e9);
      rest -= calls.get<double>() * flops;
      ++p.attention_shapes;
    }
}

// Each memory-bound kernel's fixed cost besides its bytes, into `p`.
void PredictKernelCalls(const Module& module, const nlohmann::json& report, int threads,
                        const Pace& pace, StepPrediction& p) {
  if (IsCount(report, "memory_bound_kernels_per_step")) {
    const CachedRate calls =
        pace(CpuCacheKey(std::to_string(threads), "kernel calls per second"), [&] {
          const double s = ProbeKernelCall(module);
          return s > 0 ? 1 / s : 0.0;
        });
    if (calls.value > 0) {
      p.busy |= calls.busy;
      p.kernel_call_seconds = 1 / calls.value;
      p.memory_bound_calls = report["memory_bound_kernels_per_step"].get<int64_t>();
      p.memory_seconds += p.memory_bound_calls * p.kernel_call_seconds;
    }
  }
}

}  // namespace

StepPrediction PredictStep(const Module& module, const PeakRate& peak, int threads,
                           const SlowestOfRanks& slowest_of_ranks) {
  StepPrediction p;
  const Pace pace = [&](const std::string& key, const std::function<double()>& probe) {
    CachedRate rate = CachedProbe(key, probe, kSlowest);
    if (slowest_of_ranks) rate.value = slowest_of_ranks(rate.value);
    return rate;
  };
  if (module.is_cuda() || peak.gflops <= 0 || !module.info().report_json) return p;
  const nlohmann::json report =
      nlohmann::json::parse(module.info().report_json, nullptr, /*allow_exceptions=*/false);
  // A report from another stepc (or not one at all) predicts nothing.
  if (!IsCount(report, "executed_flops_per_step") ||
      !IsCount(report, "memory_bound_bytes_per_step"))
    return p;
  const std::string key = CpuCacheKey(std::to_string(threads), "copy GB/s");
  const CachedRate rate = pace(key, [&] { return ProbeCopyRate(threads); });
  if (rate.value <= 0) return p;
  p.memory_gbps = rate.value;
  p.memory_source = "copy probe" + ProbeSource(rate, "64 MiB");
  p.busy = rate.busy;
  // The products at their shapes' measured rates; the rest (attention
  // without a kernel of its own) at the peak.
  double rest = report["executed_flops_per_step"].get<double>();
  PredictGemms(module, report, threads, pace, p, rest);
  PredictAttention(module, report, threads, pace, p, rest);
  p.gemm_seconds += p.attention_seconds;
  p.gemm_seconds += std::max(0.0, rest) / (peak.gflops * 1e9);
  p.memory_seconds = report["memory_bound_bytes_per_step"].get<double>() / (p.memory_gbps * 1e9);
  PredictKernelCalls(module, report, threads, pace, p);
  if (report.contains("predicted_exposed_comm_seconds") &&
      report["predicted_exposed_comm_seconds"].is_number())
    p.comm_seconds = report["predicted_exposed_comm_seconds"].get<double>();
  p.seconds = p.gemm_seconds + p.memory_seconds + p.comm_seconds;
  p.known = true;
  return p;
}

}  // namespace stepc
