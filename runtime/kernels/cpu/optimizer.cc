// AdamW on the CPU, rounded as torch.optim.AdamW rounds (single-tensor path,
// float32): bit-identical to it (test/Runtime/adamw-torch.test). This file
// is compiled with -ffp-contract=off: PyTorch's separate tensor ops round
// each product (param·decay, m·β1, v·β2) before the next op reads it, and
// fuses only where its kernels do (add with alpha, addcmul), written here
// as explicit fma.

#include <cmath>
#include <cstdint>

#include "runtime/kernels/adamw_scalars.h"
#include "runtime/kernels/cpu/cpu_kernels.h"

// torch.optim.AdamW on grad · grad_scale.
extern "C" void stepc_cpu_adamw(float* param, const float* grad, float* m, float* v, int64_t n,
                                const float* lr_ptr, const float* step_ptr,
                                const float* scale_ptr, double beta1, double beta2, double eps,
                                double weight_decay) {
  const float lr = *lr_ptr, scale = *scale_ptr;
  const double t = *step_ptr;
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  const AdamwScalars k = AdamwScalars::Of(beta1, beta2, eps);
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * scale;
    // exp_avg.mul_(β1).add_(g, alpha=1-β1); exp_avg_sq.mul_(β2).addcmul_(g, g, value=1-β2)
    const float mi = std::fma(k.one_minus_beta1, g, m[i] * k.beta1);
    const float vi = std::fma(k.one_minus_beta2 * g, g, v[i] * k.beta2);
    m[i] = mi;
    v[i] = vi;
    // param.mul_(decay).addcdiv_(m, sqrt(v) / bc2_sqrt + eps, value=-step_size)
    const float decayed = param[i] * decay;
    param[i] = decayed + (-step_size * mi) / (std::sqrt(vi) / bc2_sqrt + k.eps);
  }
}
