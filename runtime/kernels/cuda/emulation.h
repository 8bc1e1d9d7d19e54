// emulation.h - just enough of CUDA to run the library's kernels on the
// host, so that CI (which has no GPU) executes the kernel code itself —
// index arithmetic, tiling, shared-memory staging, warp shuffles, barriers,
// atomics — against the CPU kernels (cuda_kernels_emulated_test). Every
// CUDA thread of a block is a host thread; __syncthreads and warp shuffles
// are barriers among them; blocks run one after another. Not a simulator of
// performance or of the memory model; GEMMs (cuBLASLt) are replaced by a
// host GEMM; streams run work at once or record it for CUDA graphs.
// Compiled only with STEPC_CUDA_EMULATION defined (never into step.so).

#ifndef STEPC_RUNTIME_KERNELS_CUDA_EMULATION_H_
#define STEPC_RUNTIME_KERNELS_CUDA_EMULATION_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <vector>

// ---- Qualifiers.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Block-shared arrays: one copy, blocks run one at a time.
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

typedef void* cudaStream_t;

namespace stepc::emu {
// A stream: work runs at once, or, while the stream is being captured, is
// recorded (kernel arguments copied, as a CUDA graph does) for replay.
struct Stream {
  bool capturing = false;
  std::vector<std::function<void()>> recorded;
};
struct Graph {
  std::vector<std::function<void()>> work;
};
inline void Enqueue(cudaStream_t stream, std::function<void()> work) {
  auto* s = static_cast<Stream*>(stream);
  if (s && s->capturing)
    s->recorded.push_back(std::move(work));
  else
    work();
}

struct ThreadState {
  dim3 thread, block, block_dim, grid_dim;
};
// The emulated thread that runs, set before its code runs or resumes. A
// GNU __thread pointer, not a C++ thread_local object: it needs no
// initialization call, so each kernel looks its address up once, not at
// every threadIdx (that lookup was a sixth of an emulated step).
extern __thread const ThreadState* current_thread;
inline const ThreadState& Self() { return *current_thread; }
void SyncThreads();
void SyncWarp();
float ShuffleXor(float value, int lane_mask);
// Every lane of the warp gives `bytes` (at most 64) and receives all 32
// lanes' in lane order: a warp-collective register exchange (mma.cuh's
// tensor-core product).
void WarpGather(const void* mine, int bytes, void* all);
void* DynamicShared();
float AtomicAdd(float* address, float value);
int AtomicCas(int* address, int compare, int value);
// Runs `body` as every thread of every block of the grid: on host threads
// that meet at barriers if `cooperative`, else one after another on this one.
void Run(dim3 grid, dim3 block, size_t shared_bytes, bool cooperative,
         const std::function<void()>& body);

template <typename... Params>
struct Launcher {
  dim3 grid, block;
  size_t shared;
  bool cooperative;
  cudaStream_t stream;
  void (*kernel)(Params...);
  template <typename... Args>
  void operator()(Args&&... args) const {
    // The arguments are copied at launch, as a captured graph keeps them.
    std::tuple<std::decay_t<Params>...> copied(static_cast<Params>(args)...);
    const Launcher self = *this;
    Enqueue(stream, [self, copied]() mutable {
      std::function<void()> body = [&] {
        std::apply([&](auto&... p) { self.kernel(p...); }, copied);
      };
      Run(self.grid, self.block, self.shared, self.cooperative, body);
    });
  }
};
template <typename... Params>
Launcher<Params...> Launch(dim3 grid, dim3 block, size_t shared, bool cooperative,
                           cudaStream_t stream, void (*kernel)(Params...)) {
  return Launcher<Params...>{grid, block, shared, cooperative, stream, kernel};
}
}  // namespace stepc::emu

#define threadIdx (::stepc::emu::Self().thread)
#define blockIdx (::stepc::emu::Self().block)
#define blockDim (::stepc::emu::Self().block_dim)
#define gridDim (::stepc::emu::Self().grid_dim)

inline void __syncthreads() { ::stepc::emu::SyncThreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::stepc::emu::SyncWarp(); }
inline float __shfl_xor_sync(unsigned, float value, int lane_mask) {
  return ::stepc::emu::ShuffleXor(value, lane_mask);
}
inline float atomicAdd(float* address, float value) {
  return ::stepc::emu::AtomicAdd(address, value);
}
inline int atomicCAS(int* address, int compare, int value) {
  return ::stepc::emu::AtomicCas(address, compare, value);
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) { return a < b ? a : b; }
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

// ---- bf16, rounded to nearest even as the device does.
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return __nv_bfloat16{static_cast<uint16_t>(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// ---- The runtime API the library and its test use; device memory is host memory.
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorNotSupported = 801,
  cudaErrorIllegalState = 401
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaMemcpyKind {
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3
};
// The error a call left for the next cudaGetLastError, as CUDA keeps it
// (only the calls below that CUDA refuses in the same state set it).
namespace stepc::emu {
inline cudaError_t& LastError() {
  thread_local cudaError_t last = cudaSuccess;
  return last;
}
}  // namespace stepc::emu
inline cudaError_t cudaGetLastError() {
  const cudaError_t e = ::stepc::emu::LastError();
  ::stepc::emu::LastError() = cudaSuccess;
  return e;
}
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaErrorNotSupported   ? "operation not supported by the host emulation"
         : e == cudaErrorIllegalState ? "the operation cannot be performed in the present state"
                                      : "emulated CUDA error";
}
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s = nullptr) {
  ::stepc::emu::Enqueue(s, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
template <typename Kernel>
inline cudaError_t cudaFuncSetAttribute(Kernel, cudaFuncAttribute, int) {
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes);
  return *p ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                                   cudaStream_t s = nullptr) {
  ::stepc::emu::Enqueue(s, [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
inline cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }
// Graphs: capture records a stream's work (emulation.h's Stream), an
// instantiated graph is that record, a launch replays it.
typedef void* cudaGraph_t;
typedef void* cudaGraphExec_t;
enum cudaStreamCaptureMode { cudaStreamCaptureModeThreadLocal = 1 };
constexpr unsigned cudaStreamNonBlocking = 1;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  auto* stream = static_cast<::stepc::emu::Stream*>(s);
  if (!stream || stream->capturing) return cudaErrorInvalidValue;
  stream->capturing = true;
  stream->recorded.clear();
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  auto* stream = static_cast<::stepc::emu::Stream*>(s);
  if (!stream || !stream->capturing) return cudaErrorInvalidValue;
  stream->capturing = false;
  // A step records work; nothing recorded means the work ran elsewhere (a
  // step.so built against another emulation): refuse, the runtime goes eager.
  if (stream->recorded.empty()) return cudaErrorNotSupported;
  *graph = new ::stepc::emu::Graph{std::move(stream->recorded)};
  stream->recorded.clear();
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                        unsigned long long) {
  *exec = new ::stepc::emu::Graph(*static_cast<::stepc::emu::Graph*>(graph));
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  for (auto& work : static_cast<::stepc::emu::Graph*>(exec)->work) work();
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete static_cast<::stepc::emu::Graph*>(g);
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t g) {
  delete static_cast<::stepc::emu::Graph*>(g);
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new ::stepc::emu::Stream();
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete static_cast<::stepc::emu::Stream*>(s);
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

// ---- Events: the host time the stream reached them (work runs at once, or
// when a captured graph is launched).
namespace stepc::emu {
struct Event {
  double seconds = 0;
  bool recorded = false;  // CUDA refuses the elapsed time of an event never recorded
};
double Now();
}  // namespace stepc::emu
typedef stepc::emu::Event* cudaEvent_t;
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new stepc::emu::Event;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
// As CUDA: under stream capture a plain record only orders streams (no
// node: a graph's launch does not record it); cudaEventRecordExternal makes
// it a node recorded at every launch, and is refused outside a capture.
enum { cudaEventRecordDefault = 0, cudaEventRecordExternal = 1 };
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1 };
inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  auto* stream = static_cast<::stepc::emu::Stream*>(s);
  *status = stream && stream->capturing ? cudaStreamCaptureStatusActive
                                        : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
  cudaStreamCaptureStatus status;
  cudaStreamIsCapturing(s, &status);
  const bool capturing = status == cudaStreamCaptureStatusActive;
  if ((flags & cudaEventRecordExternal) && !capturing)
    return ::stepc::emu::LastError() = cudaErrorIllegalState;
  if (capturing && !(flags & cudaEventRecordExternal)) return cudaSuccess;
  ::stepc::emu::Enqueue(s, [e] {
    e->seconds = ::stepc::emu::Now();
    e->recorded = true;
  });
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr) {
  return cudaEventRecordWithFlags(e, s, cudaEventRecordDefault);
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start->recorded || !end->recorded) return cudaErrorInvalidValue;
  *ms = static_cast<float>(1e3 * (end->seconds - start->seconds));
  return cudaSuccess;
}

#define STEPC_LAUNCH(grid, block, shared, stream, ...) \
  ::stepc::emu::Launch(dim3(grid), dim3(block), shared, false, stream, __VA_ARGS__)
#define STEPC_LAUNCH_COOPERATIVE(grid, block, shared, stream, ...) \
  ::stepc::emu::Launch(dim3(grid), dim3(block), shared, true, stream, __VA_ARGS__)
#define STEPC_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(::stepc::emu::DynamicShared())

#endif  // STEPC_RUNTIME_KERNELS_CUDA_EMULATION_H_
