// The optimizer updates on the CPU, rounded as PyTorch rounds them
// (single-tensor paths, float32): AdamW and Adam bit-identical to
// torch.optim (test/Runtime/adamw-torch.test, optimizers-torch.test), SGD
// likewise, Lion as its reference implementation. This file
// is compiled with -ffp-contract=off: PyTorch's separate tensor ops round
// each product (param·decay, m·β1, v·β2) before the next op reads it, and
// fuses only where its kernels do (add with alpha, addcmul), written here
// as explicit fma.

#include <cmath>
#include <cstdint>

#include "runtime/kernels/adamw_scalars.h"
#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

// Below this many elements an update runs on the calling thread: waking
// the pool cost more than the update (a bias of 128: 1.3 us against 0.5).
constexpr int64_t kSerialElements = 8192;

// torch.optim.AdamW (decoupled) or Adam (L2) on grad · grad_scale. The
// choice a template argument: as a run-time flag its selects kept GCC from
// vectorising the loop.
template <bool decoupled>
void Adam(float* param, const float* grad, float* m, float* v, int64_t n, const float* lr_ptr,
          const float* step_ptr, const float* scale_ptr, double beta1, double beta2, double eps,
          double weight_decay) {
  const float lr = *lr_ptr, scale = *scale_ptr;
  const double t = *step_ptr;
  const float decay = decoupled ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
  const float l2 = decoupled ? 0.0f : static_cast<float>(weight_decay);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  // The constants as plain locals of the vectorised loop.
  const AdamwScalars k = AdamwScalars::Of(beta1, beta2, eps);
  const float b1 = k.beta1, b2 = k.beta2, one_minus_b1 = k.one_minus_beta1,
              one_minus_b2 = k.one_minus_beta2, epsilon = k.eps;
#pragma omp parallel for simd if (n > kSerialElements)
  for (int64_t i = 0; i < n; ++i) {
    // Adam: grad.add(param, alpha=weight_decay)
    const float scaled = grad[i] * scale, p = param[i];
    const float g = decoupled ? scaled : std::fma(l2, p, scaled);
    // exp_avg.mul_(β1).add_(g, alpha=1-β1); exp_avg_sq.mul_(β2).addcmul_(g, g, value=1-β2)
    const float mi = std::fma(one_minus_b1, g, m[i] * b1);
    const float vi = std::fma(one_minus_b2 * g, g, v[i] * b2);
    m[i] = mi;
    v[i] = vi;
    // (AdamW: param.mul_(decay)) param.addcdiv_(m, sqrt(v) / bc2_sqrt + eps, value=-step_size)
    const float decayed = decoupled ? p * decay : p;
    param[i] = decayed + (-step_size * mi) / (std::sqrt(vi) / bc2_sqrt + epsilon);
  }
}

}  // namespace

// torch.optim.AdamW on grad · grad_scale.
extern "C" void stepc_cpu_adamw(float* param, const float* grad, float* m, float* v, int64_t n,
                                const float* lr_ptr, const float* step_ptr,
                                const float* scale_ptr, double beta1, double beta2, double eps,
                                double weight_decay) {
  Adam</*decoupled=*/true>(param, grad, m, v, n, lr_ptr, step_ptr, scale_ptr, beta1, beta2,
                           eps, weight_decay);
}

// torch.optim.Adam on grad · grad_scale.
extern "C" void stepc_cpu_adam(float* param, const float* grad, float* m, float* v, int64_t n,
                               const float* lr_ptr, const float* step_ptr, const float* scale_ptr,
                               double beta1, double beta2, double eps, double weight_decay) {
  Adam</*decoupled=*/false>(param, grad, m, v, n, lr_ptr, step_ptr, scale_ptr, beta1, beta2,
                            eps, weight_decay);
}

// torch.optim.SGD (dampening 0) on grad · grad_scale. The buffer starts at
// zero, so the first step's momentum·0 + d_p is torch's clone(d_p).
extern "C" void stepc_cpu_sgd(float* param, const float* grad, float* buf, int64_t n,
                              const float* lr_ptr, const float* scale_ptr, double momentum,
                              int nesterov, double weight_decay) {
  const float lr = *lr_ptr, scale = *scale_ptr;
  const float mu = static_cast<float>(momentum), wd = static_cast<float>(weight_decay);
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    // d_p.add(param, alpha=wd); buf.mul_(μ).add_(d_p); d_p.add(buf, alpha=μ)
    const float d = std::fma(wd, param[i], grad[i] * scale);
    const float b = buf[i] * mu + d;
    buf[i] = b;
    const float step = nesterov ? std::fma(mu, b, d) : b;
    // param.add_(d_p, alpha=-lr)
    param[i] = std::fma(-lr, step, param[i]);
  }
}

// Lion on grad · grad_scale, as the reference implementation rounds it.
extern "C" void stepc_cpu_lion(float* param, const float* grad, float* m, int64_t n,
                               const float* lr_ptr, const float* scale_ptr, double beta1,
                               double beta2, double weight_decay) {
  const float lr = *lr_ptr, scale = *scale_ptr;
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float b1 = static_cast<float>(beta1), one_minus_b1 = static_cast<float>(1.0 - beta1);
  const float b2 = static_cast<float>(beta2), one_minus_b2 = static_cast<float>(1.0 - beta2);
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * scale;
    // p.mul_(1 - lr·wd); c = m.mul(β1).add(g, alpha=1-β1); p.add_(sign(c), alpha=-lr)
    const float c = std::fma(one_minus_b1, g, m[i] * b1);
    const float sign = c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : 0.0f;
    param[i] = std::fma(-lr, sign, param[i] * decay);
    // m.mul_(β2).add_(g, alpha=1-β2)
    m[i] = std::fma(one_minus_b2, g, m[i] * b2);
  }
}
