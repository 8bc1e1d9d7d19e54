// The float exact GELU of the CPU loops (elementwise_math.h: one expf and
// two fitted polynomials) against the double formulas the interpreter
// evaluates: Φ within 6 ulp over [−6, 6] (relative, so the tail counts),
// gelu within 6 ulp, gelu' within 2e-7 absolute (it crosses zero near
// −0.75, where no relative bound holds), and the ends exact.

#include <cmath>
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

}  // namespace
