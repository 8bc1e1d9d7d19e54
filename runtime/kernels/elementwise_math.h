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
#include <stdint.h>
#include <string.h>

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
STEPC_HD float frexp(float x, int *e) { return frexpf(x, e); }
STEPC_HD double frexp(double x, int *e) { return ::frexp(x, e); }
STEPC_HD float ldexp(float x, int e) { return ldexpf(x, e); }
STEPC_HD double ldexp(double x, int e) { return ::ldexp(x, e); }
STEPC_HD float rint(float x) { return rintf(x); }  /* to nearest even */
STEPC_HD double rint(double x) { return ::rint(x); }
} /* namespace stepc_libm */

#define STEPC_SQRT_2_OVER_PI 0.79788456080286535588 /* √(2/π) */
#define STEPC_INV_SQRT_2 0.70710678118654752440     /* 1/√2 */
#define STEPC_INV_SQRT_2PI 0.39894228040143267794   /* 1/√(2π) */

/* The exact GELU's pieces, Φ(x) and φ(x) of the standard normal law. In
 * double (the interpreter) and on CUDA devices (where erff is fast) they
 * are the formulas as written in stepc_gelu and stepc_gelu_grad. In float
 * on the host (the CPU loops) libmvec's erff is an out-of-line call that
 * costs twice expf, and 0.5·(1 + erff(x/√2)) loses every digit below
 * x ≈ −4: there, one expf and two short polynomials fitted for this file
 * (least squares on Chebyshev nodes, checked in float against double
 * erfc): erf(z) = z·P(z²) for z = |x|/√2 < 0.5, else
 * erfc(z) = e^{−z²}·S(1/(1 + z)), e^{−z²} from x² split exactly into two
 * floats. Φ stays within 6 ulp over [−6, 6] (the libm formula: within a
 * few ulp above −3, no digit left at −6), and the loop vectorizes. */
namespace stepc_libm {
struct normal_pieces {
  float cdf, pdf;
};
STEPC_HD normal_pieces normal_f32(float x) {
  const float z = fabsf(x) * (float)STEPC_INV_SQRT_2;
  /* e^{−z²} from |x| clamped to 13 (z > 9: e^{−z²} < 1e-35, taken as 0),
   * so x² stays finite; the clamp and the zero are arithmetic, not
   * branches: GCC vectorizes no loop with a branch beside a libm call. */
  const float a = fabsf(x) < 13.0f ? fabsf(x) : 13.0f, a2 = a * a;
  const float hi = 0.5f * a2, lo = 0.5f * fmaf(a, a, -a2); /* z² = hi + lo */
  /* e^{−hi} inline (Cephes' polynomial on r = −hi − n·ln2, times 2ⁿ built
   * from its bits; n ≥ −122, so 2ⁿ is a normal float): no call in the loop. */
  const float n2 = rintf(-hi * 1.44269504088896341f);
  const float r = fmaf(n2, 2.12194440e-4f, fmaf(n2, -0.693359375f, -hi));
  float ex = 1.9875691500e-4f;
  ex = fmaf(ex, r, 1.3981999507e-3f);
  ex = fmaf(ex, r, 8.3334519073e-3f);
  ex = fmaf(ex, r, 4.1665795894e-2f);
  ex = fmaf(ex, r, 1.6666665459e-1f);
  ex = fmaf(ex, r, 5.0000001201e-1f);
  ex = fmaf(ex, r * r, r + 1.0f);
  const int32_t bits = ((int32_t)n2 + 127) << 23;
  float two_n;
  memcpy(&two_n, &bits, sizeof two_n);
  const float e = ex * two_n * (1.0f - lo) * (z > 9.0f ? 0.0f : 1.0f);
  float p = 4.717567626e-03f;
  p = fmaf(p, hi, -2.675697351e-02f);
  p = fmaf(p, hi, 1.128281953e-01f);
  p = fmaf(p, hi, -3.761260841e-01f);
  p = fmaf(p, hi, 1.128379166e+00f);
  const float u = 1.0f / (1.0f + z);
  float q = 7.835495850e-01f;
  q = fmaf(q, u, -2.807747409e+00f);
  q = fmaf(q, u, 3.990442415e+00f);
  q = fmaf(q, u, -2.470389552e+00f);
  q = fmaf(q, u, 1.590183521e-01f);
  q = fmaf(q, u, 2.148182197e-01f);
  q = fmaf(q, u, 5.702318299e-01f);
  q = fmaf(q, u, 5.639073228e-01f);
  q = fmaf(q, u, 4.811847076e-06f);
  /* Φ(−|x|): ½(1 − erf z), or ½erfc z. */
  const float lower = z < 0.5f ? 0.5f - 0.5f * (z * p) : 0.5f * e * q;
  normal_pieces n;
  n.cdf = x < 0.0f ? lower : 1.0f - lower;
  n.pdf = e * (float)STEPC_INV_SQRT_2PI;
  return n;
}

STEPC_HD float gelu_exact(float x) {
#if defined(__CUDA_ARCH__)
  return 0.5f * x * (1.0f + erff(x * (float)STEPC_INV_SQRT_2));
#else
  return x * normal_f32(x).cdf;
#endif
}
STEPC_HD double gelu_exact(double x) { return 0.5 * x * (1.0 + ::erf(x * STEPC_INV_SQRT_2)); }
STEPC_HD float gelu_exact_grad(float dy, float x) {
#if defined(__CUDA_ARCH__)
  return dy * (0.5f * (1.0f + erff(x * (float)STEPC_INV_SQRT_2)) +
               x * (float)STEPC_INV_SQRT_2PI * expf(-0.5f * x * x));
#else
  const normal_pieces n = normal_f32(x);
  return dy * (n.cdf + x * n.pdf);
#endif
}
STEPC_HD double gelu_exact_grad(double dy, double x) {
  return dy * (0.5 * (1.0 + ::erf(x * STEPC_INV_SQRT_2)) +
               x * STEPC_INV_SQRT_2PI * ::exp(-0.5 * x * x));
}
} /* namespace stepc_libm */


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

/* x rounded to the nearest value of an 8-bit float format (format 0: E4M3FN,
 * 1: E5M2), ties to the even mantissa, saturating beyond the largest finite
 * value (±inf too), NaN kept: cvt.rn.satfinite's rounding. Scaling by the
 * format's quantum (a power of two) is exact, so the one rounding is
 * rint's (round to nearest even). */
template <typename T> STEPC_HD T stepc_round_fp8(T x, int format) {
  if (x != x) return x;  // NaN
  const int mantissa = format == 0 ? 3 : 2;
  const int min_exponent = format == 0 ? -6 : -14;  // of the smallest normal
  const T largest = format == 0 ? T(448) : T(57344);
  const T a = x < T(0) ? -x : x;
  if (a >= largest) return x < T(0) ? -largest : largest;  // ±inf too
  int exponent = 0;
  stepc_libm::frexp(a, &exponent);  // a = f · 2^exponent, f in [0.5, 1)
  exponent -= 1;                    // a in [2^exponent, 2^(exponent + 1))
  if (exponent < min_exponent) exponent = min_exponent;  // subnormals: one quantum
  const T quantum = stepc_libm::ldexp(T(1), exponent - mantissa);
  T r = stepc_libm::rint(a / quantum) * quantum;
  if (r > largest) r = largest;
  return x < T(0) ? -r : (x == T(0) ? x : r);
}

/* The scale of a tile whose largest magnitude is amax (step.quantize_fp8):
 * the largest power of two s with s·amax <= the format's largest value, so
 * that scaling is exact; 1 for a tile of zeros or with a non-finite value. */
template <typename T> STEPC_HD T stepc_fp8_tile_scale(T amax, int format) {
  const T largest = format == 0 ? T(448) : T(57344);
  if (!(amax > T(0)) || amax - amax != T(0)) return T(1);  // zero, NaN or inf
  int exponent = 0;
  stepc_libm::frexp(largest / amax, &exponent);  // largest/amax in [2^(e-1), 2^e)
  return stepc_libm::ldexp(T(1), exponent - 1);
}

/* The bits of stepc_round_fp8(x, format) (E4M3FN: S.EEEE.MMM, bias 7, NaN
 * S.1111.111, no infinities; E5M2: S.EEEEE.MM, bias 15): what the fp8 GEMMs
 * read. One canonical NaN (0x7f) in either format. */
template <typename T> STEPC_HD unsigned stepc_fp8_bits(T x, int format) {
  const int mantissa = format == 0 ? 3 : 2, bias = format == 0 ? 7 : 15;
  const T r = stepc_round_fp8(x, format);
  if (r != r) return 0x7f;
  const bool negative = r < T(0) || (r == T(0) && T(1) / r < T(0));  // -0 too
  const unsigned sign = negative ? 0x80u : 0u;
  const T a = negative ? -r : r;
  if (a == T(0)) return sign;
  int exponent = 0;
  stepc_libm::frexp(a, &exponent);
  exponent -= 1;  // a in [2^exponent, 2^(exponent + 1))
  if (exponent < 1 - bias)  // subnormal: a whole number of the smallest quantum
    return sign | static_cast<unsigned>(a / stepc_libm::ldexp(T(1), 1 - bias - mantissa));
  const T fraction = a / stepc_libm::ldexp(T(1), exponent - mantissa);  // in [2^m, 2^(m+1))
  return sign | (static_cast<unsigned>(exponent + bias) << mantissa) |
         (static_cast<unsigned>(fraction) - (1u << mantissa));
}

/* The value of fp8 bits (the inverse of stepc_fp8_bits). */
template <typename T> STEPC_HD T stepc_fp8_value(unsigned bits, int format) {
  const int mantissa = format == 0 ? 3 : 2, bias = format == 0 ? 7 : 15;
  const unsigned top = format == 0 ? 15u : 31u;
  const unsigned exponent = (bits >> mantissa) & top, m = bits & ((1u << mantissa) - 1u);
  const bool negative = (bits & 0x80u) != 0;
  T v;
  if (format == 0 && exponent == top && m == (1u << mantissa) - 1u)
    v = T(NAN);
  else if (format != 0 && exponent == top)
    v = m ? T(NAN) : T(INFINITY);
  else if (exponent == 0)
    v = stepc_libm::ldexp(T(m), 1 - bias - mantissa);
  else
    v = stepc_libm::ldexp(T(m + (1u << mantissa)), int(exponent) - bias - mantissa);
  return negative ? -v : v;
}

/* gelu(x) = x/2 · (1 + erf(x/√2)); tanh form (tanh_form != 0):
 * x/2 · (1 + tanh(√(2/π)(x + 0.044715x³))). */
template <typename T> STEPC_HD T stepc_gelu(T x, int tanh_form) {
  if (tanh_form)
    return T(0.5) * x *
           (T(1) + stepc_libm::tanh(T(STEPC_SQRT_2_OVER_PI) * (x + T(0.044715) * x * x * x)));
  return stepc_libm::gelu_exact(x);
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
  return stepc_libm::gelu_exact_grad(dy, x);
}
/* silu'(x) = s·(1 + x·(1 - s)), s = sigmoid(x). */
template <typename T> STEPC_HD T stepc_silu_grad(T dy, T x) {
  T s = stepc_sigmoid(x);
  return dy * (s * (T(1) + x * (T(1) - s)));  // dy · g(x), as gelu_grad
}
/* relu'(x) = [x > 0]. */
template <typename T> STEPC_HD T stepc_relu_grad(T dy, T x) { return x > T(0) ? dy : T(0); }

#endif /* STEPC_RUNTIME_KERNELS_ELEMENTWISE_MATH_H_ */
