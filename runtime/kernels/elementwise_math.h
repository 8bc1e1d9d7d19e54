/* elementwise_math.h - the scalar math of every elementwise op, written once.
 *
 * Each op with the ScalarMathOpInterface names its helper here in ODS
 * (StepOps.td: `stepc_<op>`), and every consumer calls that helper:
 *   - the reference interpreter, in double (ScalarMathOpInterface::evalScalar);
 *   - the CPU back end's generated loops, in float;
 *   - the CUDA back end's generated kernels and GEMM epilogues, in float
 *     (__host__ __device__).
 * So the interpreter and both back ends cannot drift apart. Helpers take the
 * op's operands first, then integer flags for attributes (gelu's tanh form).
 * The expression shapes are the ones PyTorch evaluates, in the same order. */
#ifndef STEPC_RUNTIME_KERNELS_ELEMENTWISE_MATH_H_
#define STEPC_RUNTIME_KERNELS_ELEMENTWISE_MATH_H_

#include <math.h>

#include "host_device.h"

/* The libm functions the helpers use, one overloaded name per function so a
 * helper template works for float (expf, ...) and double (exp, ...). */
namespace stepc_libm {
STEPC_HD float exp(float x) { return expf(x); }
STEPC_HD double exp(double x) { return ::exp(x); }
STEPC_HD float log(float x) { return logf(x); }
STEPC_HD double log(double x) { return ::log(x); }
STEPC_HD float log1p(float x) { return log1pf(x); }
STEPC_HD double log1p(double x) { return ::log1p(x); }
STEPC_HD float tanh(float x) { return tanhf(x); }
STEPC_HD double tanh(double x) { return ::tanh(x); }
STEPC_HD float erf(float x) { return erff(x); }
STEPC_HD double erf(double x) { return ::erf(x); }
STEPC_HD float pow(float x, float p) { return powf(x, p); }
STEPC_HD double pow(double x, double p) { return ::pow(x, p); }
STEPC_HD float sqrt(float x) { return sqrtf(x); }
STEPC_HD double sqrt(double x) { return ::sqrt(x); }
STEPC_HD float fmax(float a, float b) { return fmaxf(a, b); }
STEPC_HD double fmax(double a, double b) { return ::fmax(a, b); }
STEPC_HD float fmin(float a, float b) { return fminf(a, b); }
STEPC_HD double fmin(double a, double b) { return ::fmin(a, b); }
} /* namespace stepc_libm */

#define STEPC_SQRT_2_OVER_PI 0.79788456080286535588 /* √(2/π) */
#define STEPC_INV_SQRT_2 0.70710678118654752440     /* 1/√2 */
#define STEPC_INV_SQRT_2PI 0.39894228040143267794   /* 1/√(2π) */

/* ---- Binary arithmetic. */
template <typename T> STEPC_HD T stepc_add(T a, T b) { return a + b; }
template <typename T> STEPC_HD T stepc_sub(T a, T b) { return a - b; }
template <typename T> STEPC_HD T stepc_mul(T a, T b) { return a * b; }
template <typename T> STEPC_HD T stepc_div(T a, T b) { return a / b; }
template <typename T> STEPC_HD T stepc_maximum(T a, T b) { return stepc_libm::fmax(a, b); }
template <typename T> STEPC_HD T stepc_minimum(T a, T b) { return stepc_libm::fmin(a, b); }

/* ---- Comparisons and selection. A mask is 0 or 1 in the operands' type
 * (registers are float); `predicate` is step.compare's (lt, le, gt, ge, eq,
 * ne = 0..5). NaN compares false except under ne, as in C and PyTorch. */
template <typename T> STEPC_HD T stepc_compare(T a, T b, double predicate) {
  const int p = (int)predicate;
  const bool holds = p == 0 ? a < b : p == 1 ? a <= b : p == 2 ? a > b
                   : p == 3 ? a >= b : p == 4 ? a == b : a != b;
  return holds ? T(1) : T(0);
}
template <typename T> STEPC_HD T stepc_select(T mask, T on_true, T on_false) {
  return mask != T(0) ? on_true : on_false;
}

/* ---- Unary math. */
template <typename T> STEPC_HD T stepc_neg(T x) { return -x; }
template <typename T> STEPC_HD T stepc_exp(T x) { return stepc_libm::exp(x); }
template <typename T> STEPC_HD T stepc_log(T x) { return stepc_libm::log(x); }
template <typename T> STEPC_HD T stepc_tanh(T x) { return stepc_libm::tanh(x); }
template <typename T> STEPC_HD T stepc_erf(T x) { return stepc_libm::erf(x); }
template <typename T> STEPC_HD T stepc_sqrt(T x) { return stepc_libm::sqrt(x); }
/* PyTorch squares for an exponent of 2 (x·x, one rounding). */
template <typename T> STEPC_HD T stepc_pow(T x, double p) {
  return p == 2.0 ? x * x : stepc_libm::pow(x, T(p));
}
template <typename T> STEPC_HD T stepc_rsqrt(T x) { return T(1) / stepc_libm::sqrt(x); }
template <typename T> STEPC_HD T stepc_relu(T x) { return x > T(0) ? x : T(0); }
// |x|, +0 for ±0 and NaN for NaN (torch.abs).
template <typename T> STEPC_HD T stepc_abs(T x) { return x < T(0) ? -x : x + T(0); }
/* The forward of stop_gradient: the identity (autodiff sends no gradient back). */
template <typename T> STEPC_HD T stepc_stop_gradient(T x) { return x; }
template <typename T> STEPC_HD T stepc_sigmoid(T x) {
  return T(1) / (T(1) + stepc_libm::exp(-x));
}
template <typename T> STEPC_HD T stepc_silu(T x) { return x * stepc_sigmoid(x); }
/* softplus(x) = log(1 + eˣ), linear above 20 as torch.nn.Softplus
 * (beta 1, threshold 20), where eˣ would lose every digit of the 1. */
template <typename T> STEPC_HD T stepc_softplus(T x) {
  return x > T(20) ? x : stepc_libm::log1p(stepc_libm::exp(x));
}

/* gelu(x) = x/2 · (1 + erf(x/√2)); tanh form (tanh_form != 0):
 * x/2 · (1 + tanh(√(2/π)(x + 0.044715x³))). */
template <typename T> STEPC_HD T stepc_gelu(T x, int tanh_form) {
  if (tanh_form)
    return T(0.5) * x *
           (T(1) + stepc_libm::tanh(T(STEPC_SQRT_2_OVER_PI) * (x + T(0.044715) * x * x * x)));
  return T(0.5) * x * (T(1) + stepc_libm::erf(x * T(STEPC_INV_SQRT_2)));
}

/* ---- Gradients of activations: dx = dy · f'(x). */
/* exact: gelu'(x) = Φ(x) + x·φ(x);
 * tanh:  gelu'(x) = ½(1 + t) + ½x(1 - t²)·√(2/π)(1 + 3·0.044715x²),
 *        t = tanh(√(2/π)(x + 0.044715x³)). */
template <typename T> STEPC_HD T stepc_gelu_grad(T dy, T x, int tanh_form) {
  if (tanh_form) {
    T t = stepc_libm::tanh(T(STEPC_SQRT_2_OVER_PI) * (x + T(0.044715) * x * x * x));
    return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(STEPC_SQRT_2_OVER_PI) *
                                           (T(1) + T(3) * T(0.044715) * x * x));
  }
  return dy * (T(0.5) * (T(1) + stepc_libm::erf(x * T(STEPC_INV_SQRT_2))) +
               x * T(STEPC_INV_SQRT_2PI) * stepc_libm::exp(T(-0.5) * x * x));
}
/* silu'(x) = s·(1 + x·(1 - s)), s = sigmoid(x). */
template <typename T> STEPC_HD T stepc_silu_grad(T dy, T x) {
  T s = stepc_sigmoid(x);
  return dy * s * (T(1) + x * (T(1) - s));
}
/* relu'(x) = [x > 0]. */
template <typename T> STEPC_HD T stepc_relu_grad(T dy, T x) { return x > T(0) ? dy : T(0); }

#endif /* STEPC_RUNTIME_KERNELS_ELEMENTWISE_MATH_H_ */
