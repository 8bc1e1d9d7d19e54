/* elementwise_math.h - the scalar math of generated elementwise code, one
 * definition for both targets: the CPU loops (C++) and the CUDA kernels
 * (__host__ __device__), so the two back ends cannot drift apart. */
#ifndef STEPC_RUNTIME_KERNELS_ELEMENTWISE_MATH_H_
#define STEPC_RUNTIME_KERNELS_ELEMENTWISE_MATH_H_

#include <math.h>

#include "host_device.h"

STEPC_HD float stepc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
STEPC_HD float stepc_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
STEPC_HD float stepc_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286535f * (x + 0.044715f * x * x * x)));
}
STEPC_HD float stepc_gelu_grad(float dy, float x) {
  return dy * (0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
               x * 0.39894228040143268f * expf(-0.5f * x * x));
}
STEPC_HD float stepc_gelu_tanh_grad(float dy, float x) {
  float t = tanhf(0.79788456080286535f * (x + 0.044715f * x * x * x));
  return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.79788456080286535f *
                                       (1.0f + 3.0f * 0.044715f * x * x));
}
STEPC_HD float stepc_silu_grad(float dy, float x) {
  float s = stepc_sigmoid(x);
  return dy * s * (1.0f + x * (1.0f - s));
}

#endif /* STEPC_RUNTIME_KERNELS_ELEMENTWISE_MATH_H_ */
