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
                            const float* scale_ptr, AdamwConstants k, double weight_decay) {
  const stepc_adamw_tensor t = table.tensor[blockIdx.y];
  const float lr = *lr_ptr, scale = *scale_ptr;
  const double step = *step_ptr;
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float step_size = static_cast<float>(lr / (1.0 - pow((double)k.beta1_exact, step)));
  const float bc2_sqrt = static_cast<float>(sqrt(1.0 - pow((double)k.beta2_exact, step)));
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < t.n;
       i += (int64_t)gridDim.x * blockDim.x) {
    // The CPU kernel's (and PyTorch's) roundings: this file is compiled
    // with --fmad=false; the fused steps are explicit.
    const float g = t.grad[i] * scale;
    const float m = fmaf(k.scalars.one_minus_beta1, g, t.m[i] * k.scalars.beta1);
    const float v = fmaf(k.scalars.one_minus_beta2 * g, g, t.v[i] * k.scalars.beta2);
    t.m[i] = m;
    t.v[i] = v;
    const float decayed = t.param[i] * decay;
    t.param[i] = decayed + (-step_size * m) / (sqrtf(v) / bc2_sqrt + k.scalars.eps);
  }
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_adamw(stepc_cuda_ctx* ctx, const stepc_adamw_tensor* tensors,
                                int count, const float* lr, const float* step,
                                const float* grad_scale, double beta1, double beta2, double eps,
                                double weight_decay) {
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
                                                              weight_decay);
    if (int rc = STEPC_LAUNCHED(ctx, "AdamwKernel")) return rc;
  }
  return 0;
}
