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

// The bits the fp8 GEMMs read: every pattern decodes to the value the
// formats define and encodes back to itself (NaN to the canonical 0x7f), and
// the bits of a rounded float decode to that rounded float.
TEST(Fp8Bits, EveryPatternRoundTrips) {
  for (int format : {0, 1}) {
    for (unsigned bits = 0; bits < 256; ++bits) {
      const float v = stepc_fp8_value<float>(bits, format);
      const unsigned magnitude = bits & 0x7f;
      if (format == 0 && magnitude == 0x7f) {
        EXPECT_TRUE(std::isnan(v)) << bits;
        EXPECT_EQ(stepc_fp8_bits<float>(v, format), 0x7fu);
        continue;
      }
      if (format == 1 && magnitude >= 0x7c) {
        if (magnitude == 0x7c)
          EXPECT_EQ(v, (bits & 0x80) ? -INFINITY : INFINITY) << bits;
        else
          EXPECT_TRUE(std::isnan(v)) << bits;
        continue;
      }
      EXPECT_EQ(stepc_fp8_bits<float>(v, format), bits) << "format " << format << " value " << v;
      EXPECT_EQ(std::signbit(v), (bits & 0x80) != 0) << bits;
    }
  }
  // The formats' landmarks, from their definitions.
  EXPECT_EQ(stepc_fp8_value<float>(0x7e, 0), 448.0f);
  EXPECT_EQ(stepc_fp8_value<float>(0x08, 0), std::ldexp(1.0f, -6));
  EXPECT_EQ(stepc_fp8_value<float>(0x01, 0), std::ldexp(1.0f, -9));
  EXPECT_EQ(stepc_fp8_value<float>(0x38, 0), 1.0f);
  EXPECT_EQ(stepc_fp8_value<float>(0x7b, 1), 57344.0f);
  EXPECT_EQ(stepc_fp8_value<float>(0x01, 1), std::ldexp(1.0f, -16));
  EXPECT_EQ(stepc_fp8_value<float>(0x3c, 1), 1.0f);
  EXPECT_EQ(stepc_fp8_bits<float>(INFINITY, 1), 0x7bu);  // saturated
  EXPECT_EQ(stepc_fp8_bits<float>(-1000.0f, 0), 0xfeu);
  for (int format : {0, 1})
    for (uint32_t bits = 0x30800000u; bits <= 0x47800000u; bits += 9973) {
      float x;
      std::memcpy(&x, &bits, 4);
      for (float v : {x, -x}) {
        const float want = stepc_round_fp8<float>(v, format);
        const float got = stepc_fp8_value<float>(stepc_fp8_bits<float>(v, format), format);
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "format " << format << " x " << v;
      }
    }
}

}  // namespace
