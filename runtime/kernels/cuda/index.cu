// argmax, gather and gather's gradient (a scatter-add): the index ops, as
// the CPU kernels of kernels/cpu/index.cc. A thread per line (o, j) of the
// [outer, n, inner] view, so the scatter-add needs no atomics and adds in
// index order, the same sums as the CPU.

#include "runtime/kernels/cuda/common.cuh"

namespace stepc::cuda {
namespace {

__global__ void ArgmaxKernel(const float* x, int64_t outer, int64_t n, int64_t inner,
                             int32_t* out) {
  for (int64_t line = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; line < outer * inner;
       line += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = line / inner, j = line % inner;
    const float* p = x + o * n * inner + j;
    int64_t best = 0;
    float top = p[0];  // x != x: NaN, on the device and in the emulation
    for (int64_t k = 1; k < n && top == top; ++k) {
      const float e = p[k * inner];
      if (e > top || e != e) {
        top = e;
        best = k;
      }
    }
    out[line] = static_cast<int32_t>(best);
  }
}

__global__ void GatherKernel(const float* x, const int32_t* index, int64_t outer, int64_t n,
                             int64_t inner, int64_t size, float* out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < outer * n * inner;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = i / (n * inner), j = i % inner, id = index[i];
    out[i] = id >= 0 && id < size ? x[(o * size + id) * inner + j] : 0.0f;
  }
}

__global__ void GatherGradKernel(const float* dy, const int32_t* index, int64_t outer, int64_t n,
                                 int64_t inner, int64_t size, float* dx) {
  for (int64_t line = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; line < outer * inner;
       line += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = line / inner, j = line % inner;
    for (int64_t k = 0; k < size; ++k) dx[(o * size + k) * inner + j] = 0.0f;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = (o * n + k) * inner + j, id = index[i];
      if (id >= 0 && id < size) dx[(o * size + id) * inner + j] += dy[i];
    }
  }
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_argmax(stepc_cuda_ctx* ctx, const float* x, int64_t outer, int64_t n,
                                 int64_t inner, int32_t* out) {
  STEPC_LAUNCH(ElementwiseBlocks(outer * inner), kThreads, 0, ctx->stream, ArgmaxKernel)(
      x, outer, n, inner, out);
  return STEPC_LAUNCHED(ctx, "ArgmaxKernel");
}

extern "C" int stepc_cuda_gather(stepc_cuda_ctx* ctx, const float* x, const int32_t* index,
                                 int64_t outer, int64_t n, int64_t inner, int64_t size,
                                 float* out) {
  STEPC_LAUNCH(ElementwiseBlocks(outer * n * inner), kThreads, 0, ctx->stream, GatherKernel)(
      x, index, outer, n, inner, size, out);
  return STEPC_LAUNCHED(ctx, "GatherKernel");
}

extern "C" int stepc_cuda_gather_grad(stepc_cuda_ctx* ctx, const float* dy, const int32_t* index,
                                      int64_t outer, int64_t n, int64_t inner, int64_t size,
                                      float* dx) {
  STEPC_LAUNCH(ElementwiseBlocks(outer * inner), kThreads, 0, ctx->stream, GatherGradKernel)(
      dy, index, outer, n, inner, size, dx);
  return STEPC_LAUNCHED(ctx, "GatherGradKernel");
}
