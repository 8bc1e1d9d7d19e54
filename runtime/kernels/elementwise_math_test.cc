// The float exact GELU of the CPU loops (elementwise_math.h: one expf and
// two fitted polynomials) against the double formulas the interpreter
// evaluates: Φ within 6 ulp over [−6, 6] (relative, so the tail counts),
// gelu within 6 ulp, gelu' within 2e-7 absolute (it crosses zero near
// −0.75, where no relative bound holds), and the ends exact.

#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/kernels/elementwise_math.h"

namespace {

double Ulps(float got, double want) {
  const float w = static_cast<float>(want);
  const double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return std::fabs(got - want) / ulp;
}

TEST(GeluF32, MatchesDoubleFormulas) {
  double cdf_ulps = 0, gelu_ulps = 0, grad_abs = 0;
  for (float x = -6.0f; x <= 6.0f; x += 1.3e-4f) {
    const double xd = x;
    const double cdf = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    cdf_ulps = std::max(cdf_ulps, Ulps(stepc_libm::normal_f32(x).cdf, cdf));
    gelu_ulps = std::max(gelu_ulps, Ulps(stepc_gelu<float>(x, 0), xd * cdf));
    grad_abs = std::max(grad_abs, std::fabs(stepc_gelu_grad<float>(1.0f, x, 0) -
                                            stepc_gelu_grad<double>(1.0, xd, 0)));
  }
  EXPECT_LE(cdf_ulps, 6.0);
  EXPECT_LE(gelu_ulps, 6.0);
  EXPECT_LE(grad_abs, 2e-7);
}

TEST(GeluF32, Ends) {
  EXPECT_EQ(stepc_gelu<float>(0.0f, 0), 0.0f);
  EXPECT_EQ(stepc_gelu<float>(30.0f, 0), 30.0f);
  EXPECT_EQ(stepc_gelu<float>(-30.0f, 0), 0.0f);
  EXPECT_EQ(stepc_gelu<float>(INFINITY, 0), INFINITY);
  EXPECT_EQ(stepc_gelu_grad<float>(2.0f, 30.0f, 0), 2.0f);
  EXPECT_EQ(stepc_gelu_grad<float>(2.0f, -30.0f, 0), 0.0f);
  EXPECT_EQ(stepc_gelu_grad<float>(2.0f, 1e20f, 0), 2.0f);  // x² overflows
  EXPECT_EQ(stepc_gelu<float>(-1e20f, 0), 0.0f);
  EXPECT_TRUE(std::isnan(stepc_gelu<float>(NAN, 0)));
  EXPECT_TRUE(std::isnan(stepc_gelu_grad<float>(1.0f, NAN, 0)));
}

// The float instantiation the back ends run equals the double one the
// interpreter runs (test/Runtime/check_fp8.py checks that one against a
// reference from the formats' definitions) on every float of both signs
// from 2^-30 to past the largest value, stepping through the bit patterns.
TEST(RoundFp8, FloatEqualsDouble) {
  int64_t checked = 0;
  for (int format : {0, 1}) {
    for (uint32_t bits = 0x30800000u; bits <= 0x47800000u; bits += 97) {
      float x;
      std::memcpy(&x, &bits, 4);
      for (float v : {x, -x}) {
        const float got = stepc_round_fp8<float>(v, format);
        const float want = static_cast<float>(stepc_round_fp8<double>(v, format));
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "format " << format << " x " << v;
        ++checked;
      }
    }
    EXPECT_EQ(stepc_round_fp8<float>(INFINITY, format), format == 0 ? 448.0f : 57344.0f);
    EXPECT_TRUE(std::signbit(stepc_round_fp8<float>(-0.0f, format)));
    EXPECT_TRUE(std::isnan(stepc_round_fp8<float>(NAN, format)));
  }
  EXPECT_GT(checked, 1000000);
}

}  // namespace
