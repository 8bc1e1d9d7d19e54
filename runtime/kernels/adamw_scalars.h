// The float constants of an AdamW update, rounded the way torch.optim.AdamW
// rounds them: each computed in double from the double hyperparameters and
// rounded to float once. Shared by the CPU and CUDA kernels so that both
// follow one rounding rule (test/Runtime/adamw-torch.test checks the CPU
// kernel bit for bit against PyTorch).

#ifndef STEPC_RUNTIME_KERNELS_ADAMW_SCALARS_H_
#define STEPC_RUNTIME_KERNELS_ADAMW_SCALARS_H_

#ifdef __cplusplus
struct AdamwScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps;

  static AdamwScalars Of(double beta1, double beta2, double eps) {
    return {static_cast<float>(beta1), static_cast<float>(beta2),
            static_cast<float>(1.0 - beta1), static_cast<float>(1.0 - beta2),
            static_cast<float>(eps)};
  }
};
#endif

#endif  // STEPC_RUNTIME_KERNELS_ADAMW_SCALARS_H_
