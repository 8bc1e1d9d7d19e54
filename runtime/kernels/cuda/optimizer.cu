// Multi-tensor AdamW: one launch updates up to kAdamwTensorsPerLaunch
// tensors (blockIdx.y picks the tensor), as torch's foreach/fused AdamW and
// llm.c do; the same arithmetic and roundings as the CPU kernel
// (torch.optim.AdamW, kernels/cpu/optimizer.cc).

#include "runtime/kernels/adamw_scalars.h"
#include "runtime/kernels/cuda/common.cuh"

namespace stepc::cuda {
namespace {

// The float constants (rounded as PyTorch does) and the exact betas the
// bias corrections are computed from in double.
struct AdamwConstants {
  AdamwScalars scalars;
  double beta1_exact, beta2_exact;
};

struct AdamwTable {
  stepc_adamw_tensor tensor[kAdamwTensorsPerLaunch];
};

__global__ void AdamwKernel(AdamwTable table, const float* lr_ptr, const float* step_ptr,
                            const float* scale_ptr, AdamwConstants k, double weight_decay,
                            bool decoupled) {
  const stepc_adamw_tensor t = table.tensor[blockIdx.y];
  const float lr = *lr_ptr, scale = *scale_ptr;
  const double step = *step_ptr;
  const float decay = decoupled ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
  const float l2 = decoupled ? 0.0f : static_cast<float>(weight_decay);
  const float step_size = static_cast<float>(lr / (1.0 - pow((double)k.beta1_exact, step)));
  const float bc2_sqrt = static_cast<float>(sqrt(1.0 - pow((double)k.beta2_exact, step)));
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < t.n;
       i += (int64_t)gridDim.x * blockDim.x) {
    // The CPU kernel's (and PyTorch's) roundings: this file is compiled
    // with --fmad=false; the fused steps are explicit.
    // (Adam: grad.add(param, alpha=weight_decay))
    const float g = decoupled ? t.grad[i] * scale : fmaf(l2, t.param[i], t.grad[i] * scale);
    const float m = fmaf(k.scalars.one_minus_beta1, g, t.m[i] * k.scalars.beta1);
    const float v = fmaf(k.scalars.one_minus_beta2 * g, g, t.v[i] * k.scalars.beta2);
    t.m[i] = m;
    t.v[i] = v;
    const float decayed = decoupled ? t.param[i] * decay : t.param[i];
    t.param[i] = decayed + (-step_size * m) / (sqrtf(v) / bc2_sqrt + k.scalars.eps);
  }
}

__global__ void SgdKernel(float* param, const float* grad, float* buf, int64_t n,
                          const float* lr_ptr, const float* scale_ptr, float mu, int nesterov,
                          float wd) {
  const float lr = *lr_ptr, scale = *scale_ptr;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float d = fmaf(wd, param[i], grad[i] * scale);
    const float b = buf[i] * mu + d;
    buf[i] = b;
    param[i] = fmaf(-lr, nesterov ? fmaf(mu, b, d) : b, param[i]);
  }
}

__global__ void LionKernel(float* param, const float* grad, float* m, int64_t n,
                           const float* lr_ptr, const float* scale_ptr, double weight_decay,
                           float b1, float one_minus_b1, float b2, float one_minus_b2) {
  const float lr = *lr_ptr, scale = *scale_ptr;
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float g = grad[i] * scale;
    const float c = fmaf(one_minus_b1, g, m[i] * b1);
    const float sign = c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : 0.0f;
    param[i] = fmaf(-lr, sign, param[i] * decay);
    m[i] = fmaf(one_minus_b2, g, m[i] * b2);
  }
}

int LaunchAdam(stepc_cuda_ctx* ctx, const stepc_adamw_tensor* tensors, int count,
               const float* lr, const float* step, const float* grad_scale, double beta1,
               double beta2, double eps, double weight_decay, bool decoupled) {
  for (int first = 0; first < count; first += kAdamwTensorsPerLaunch) {
    const int here = count - first < kAdamwTensorsPerLaunch ? count - first
                                                            : kAdamwTensorsPerLaunch;
    AdamwTable table = {};
    int64_t largest = 0;
    for (int i = 0; i < here; ++i) {
      table.tensor[i] = tensors[first + i];
      largest = largest > tensors[first + i].n ? largest : tensors[first + i].n;
    }
    dim3 grid(AdamwBlocksPerTensor(largest), here);
    const AdamwConstants k = {AdamwScalars::Of(beta1, beta2, eps), beta1, beta2};
    STEPC_LAUNCH(grid, kThreads, 0, ctx->stream, AdamwKernel)(table, lr, step, grad_scale, k,
                                                              weight_decay, decoupled);
    if (int rc = STEPC_LAUNCHED(ctx, "AdamwKernel")) return rc;
  }
  return 0;
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_adamw(stepc_cuda_ctx* ctx, const stepc_adamw_tensor* tensors,
                                int count, const float* lr, const float* step,
                                const float* grad_scale, double beta1, double beta2, double eps,
                                double weight_decay) {
  return LaunchAdam(ctx, tensors, count, lr, step, grad_scale, beta1, beta2, eps, weight_decay,
                    /*decoupled=*/true);
}

extern "C" int stepc_cuda_adam(stepc_cuda_ctx* ctx, const stepc_adamw_tensor* tensors, int count,
                               const float* lr, const float* step, const float* grad_scale,
                               double beta1, double beta2, double eps, double weight_decay) {
  return LaunchAdam(ctx, tensors, count, lr, step, grad_scale, beta1, beta2, eps, weight_decay,
                    /*decoupled=*/false);
}

extern "C" int stepc_cuda_sgd(stepc_cuda_ctx* ctx, float* param, const float* grad, float* buf,
                              int64_t n, const float* lr, const float* grad_scale,
                              double momentum, int nesterov, double weight_decay) {
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, SgdKernel)(
      param, grad, buf, n, lr, grad_scale, static_cast<float>(momentum), nesterov,
      static_cast<float>(weight_decay));
  return STEPC_LAUNCHED(ctx, "SgdKernel");
}

extern "C" int stepc_cuda_lion(stepc_cuda_ctx* ctx, float* param, const float* grad, float* m,
                               int64_t n, const float* lr, const float* grad_scale, double beta1,
                               double beta2, double weight_decay) {
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, LionKernel)(
      param, grad, m, n, lr, grad_scale, weight_decay, static_cast<float>(beta1),
      static_cast<float>(1.0 - beta1), static_cast<float>(beta2),
      static_cast<float>(1.0 - beta2));
  return STEPC_LAUNCHED(ctx, "LionKernel");
}
