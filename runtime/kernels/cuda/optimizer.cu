// Multi-tensor AdamW: one launch updates up to kAdamwTensorsPerLaunch
// tensors (blockIdx.y picks the tensor), as torch's foreach/fused AdamW and
// llm.c do; the same arithmetic as the CPU kernel (torch.optim.AdamW).

#include "runtime/kernels/cuda/common.cuh"

namespace stepc::cuda {
namespace {

struct AdamwTable {
  stepc_adamw_tensor tensor[kAdamwTensorsPerLaunch];
};

__global__ void AdamwKernel(AdamwTable table, const float* lr_ptr, const float* step_ptr,
                            const float* scale_ptr, float beta1, float beta2, float eps,
                            float weight_decay) {
  const stepc_adamw_tensor t = table.tensor[blockIdx.y];
  const float lr = *lr_ptr, scale = *scale_ptr;
  const double step = *step_ptr;
  const float decay = 1.0f - lr * weight_decay;
  const float step_size = static_cast<float>(lr / (1.0 - pow((double)beta1, step)));
  const float bc2_sqrt = static_cast<float>(sqrt(1.0 - pow((double)beta2, step)));
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < t.n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float g = t.grad[i] * scale;
    const float m = t.m[i] * beta1 + (1.0f - beta1) * g;
    const float v = t.v[i] * beta2 + (1.0f - beta2) * g * g;
    t.m[i] = m;
    t.v[i] = v;
    t.param[i] = t.param[i] * decay - step_size * m / (sqrtf(v) / bc2_sqrt + eps);
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
    STEPC_LAUNCH(grid, kThreads, 0, ctx->stream, AdamwKernel)(table, lr, step, grad_scale, (float)beta1,
                                                    (float)beta2, (float)eps,
                                                    (float)weight_decay);
    if (int rc = STEPC_LAUNCHED(ctx, "AdamwKernel")) return rc;
  }
  return 0;
}
