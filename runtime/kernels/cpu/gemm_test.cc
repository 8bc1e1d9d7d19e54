// The CPU GEMM entry points against a double-precision product: f32
// (oneDNN first, OpenBLAS where it has no primitive; with and without a
// bias) and bf16 (oneDNN, f32 or bf16 C, with and without a bias), every
// transpose, a shared or a batched B, sizes that fit no vector width.

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <omp.h>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

struct Shape {
  int64_t batch, m, n, k;
  int ta, tb, shared;
};

// C[p][i][j] = Σ_l A[p][i][l] B[p or 0][l][j] (+ bias[j]), operands as the
// kernels store them (A [k, m] when transposed, B [n, k]).
std::vector<double> Reference(const std::vector<float>& a, const std::vector<float>& b,
                              const float* bias, const Shape& s) {
  std::vector<double> c(s.batch * s.m * s.n);
  for (int64_t p = 0; p < s.batch; ++p) {
    const float* ap = a.data() + p * s.m * s.k;
    const float* bp = b.data() + (s.shared ? 0 : p * s.k * s.n);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = bias ? bias[j] : 0.0;
        for (int64_t l = 0; l < s.k; ++l)
          acc += double{s.ta ? ap[l * s.m + i] : ap[i * s.k + l]} *
                 (s.tb ? bp[j * s.k + l] : bp[l * s.n + j]);
        c[(p * s.m + i) * s.n + j] = acc;
      }
  }
  return c;
}

std::vector<float> Random(int64_t n, std::mt19937& rng, bool bf16_exact) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = bf16_exact ? stepc_bf16_to_f32(stepc_f32_to_bf16(normal(rng))) : normal(rng);
  return x;
}

const Shape kShapes[] = {
    {1, 37, 29, 53, 0, 0, 1}, {1, 37, 29, 53, 1, 0, 1}, {1, 37, 29, 53, 0, 1, 1},
    {1, 37, 29, 53, 1, 1, 1}, {3, 17, 24, 40, 0, 1, 1}, {3, 17, 24, 40, 1, 0, 1},
    {3, 17, 24, 40, 0, 0, 0}, {3, 17, 24, 40, 1, 1, 0}, {2, 64, 96, 128, 0, 1, 1}};

void CheckF32(const Shape& s, std::mt19937& rng) {
  std::vector<float> a = Random(s.batch * s.m * s.k, rng, false);
  std::vector<float> b = Random((s.shared ? 1 : s.batch) * s.k * s.n, rng, false);
  std::vector<float> c(s.batch * s.m * s.n, NAN);
  stepc_cpu_matmul(a.data(), b.data(), c.data(), s.batch, s.m, s.n, s.k, s.ta, s.tb, s.shared);
  std::vector<double> want = Reference(a, b, nullptr, s);
  for (size_t e = 0; e < c.size(); ++e)
    ASSERT_NEAR(c[e], want[e], 1e-4 * std::sqrt(double(s.k)))
        << "shape b" << s.batch << " m" << s.m << " n" << s.n << " k" << s.k << " ta" << s.ta
        << " tb" << s.tb << " shared" << s.shared << " element " << e;
}

TEST(Gemm, F32MatchesDoubleProduct) {
  std::mt19937 rng(1);
  for (const Shape& s : kShapes) CheckF32(s, rng);
}

// With a bias (stepc_cpu_matmul_bias, every shape and transpose): the
// double product plus the bias, and bit for bit the GEMM's sum then the
// bias added in f32 (one rounding of each, as the separate add had).
TEST(Gemm, F32WithBiasIsTheSumPlusTheBias) {
  std::mt19937 rng(4);
  for (const Shape& s : kShapes) {
    std::vector<float> a = Random(s.batch * s.m * s.k, rng, false);
    std::vector<float> b = Random((s.shared ? 1 : s.batch) * s.k * s.n, rng, false);
    std::vector<float> bias = Random(s.n, rng, false);
    std::vector<float> plain(s.batch * s.m * s.n, NAN), biased(plain.size(), NAN);
    stepc_cpu_matmul(a.data(), b.data(), plain.data(), s.batch, s.m, s.n, s.k, s.ta, s.tb,
                     s.shared);
    stepc_cpu_matmul_bias(a.data(), b.data(), biased.data(), s.batch, s.m, s.n, s.k, s.ta, s.tb,
                          s.shared, bias.data());
    std::vector<double> want = Reference(a, b, bias.data(), s);
    for (size_t e = 0; e < biased.size(); ++e) {
      ASSERT_NEAR(biased[e], want[e], 1e-4 * std::sqrt(double(s.k))) << "element " << e;
      ASSERT_EQ(biased[e], plain[e] + bias[e % s.n])
          << "shape b" << s.batch << " m" << s.m << " n" << s.n << " k" << s.k << " ta" << s.ta
          << " tb" << s.tb << " shared" << s.shared << " element " << e;
    }
  }
}

// bf16 operands (exact in f32 here), f32 accumulation: C in f32 equals the
// double product to f32 accuracy; in bf16, to bf16 rounding. A bias is
// added to the f32 sum before the rounding.
void CheckBf16(const Shape& s, bool with_bias, int c_f32, std::mt19937& rng) {
  std::vector<float> a = Random(s.batch * s.m * s.k, rng, true);
  std::vector<float> b = Random((s.shared ? 1 : s.batch) * s.k * s.n, rng, true);
  std::vector<float> bias = Random(s.n, rng, false);
  std::vector<stepc_bf16> a16(a.size()), b16(b.size());
  for (size_t e = 0; e < a.size(); ++e) a16[e] = stepc_f32_to_bf16(a[e]);
  for (size_t e = 0; e < b.size(); ++e) b16[e] = stepc_f32_to_bf16(b[e]);
  const int64_t count = s.batch * s.m * s.n;
  std::vector<float> c32(count, NAN);
  std::vector<stepc_bf16> c16(count, 0xffff);
  stepc_cpu_matmul_bf16(a16.data(), b16.data(), c_f32 ? (void*)c32.data() : c16.data(),
                        c_f32, s.batch, s.m, s.n, s.k, s.ta, s.tb, s.shared,
                        with_bias ? bias.data() : nullptr);
  std::vector<double> want = Reference(a, b, with_bias ? bias.data() : nullptr, s);
  for (int64_t e = 0; e < count; ++e) {
    const double got = c_f32 ? c32[e] : stepc_bf16_to_f32(c16[e]);
    const double tol = c_f32 ? 1e-4 * std::sqrt(double(s.k))
                             : std::fabs(want[e]) * 0.0079 + 1e-4 * std::sqrt(double(s.k));
    ASSERT_NEAR(got, want[e], tol)
        << "shape b" << s.batch << " m" << s.m << " n" << s.n << " k" << s.k << " ta"
        << s.ta << " tb" << s.tb << " shared" << s.shared << " bias " << with_bias
        << " c_f32 " << c_f32 << " element " << e;
  }
}

TEST(Gemm, Bf16WithAndWithoutBias) {
  std::mt19937 rng(2);
  for (const Shape& s : kShapes)
    for (bool with_bias : {false, true})
      for (int c_f32 : {1, 0}) CheckBf16(s, with_bias, c_f32, rng);
}

// Weight-gradient shapes (K far above M and N, f32 C, no bias) are split
// along K, one part per thread, and the parts' sums added: every transpose
// on 2 and 3 threads, K divisible by twice the thread count; f32 and bf16.
TEST(Gemm, SplitAlongK) {
  std::mt19937 rng(3);
  const int threads = omp_get_max_threads();
  for (int t : {2, 3}) {
    omp_set_num_threads(t);
    for (int ta : {0, 1})
      for (int tb : {0, 1})
        for (Shape s : {Shape{1, 9, 13, 144, 0, 0, 1}, Shape{1, 16, 24, 384, 0, 0, 1}}) {
          s.ta = ta;
          s.tb = tb;
          CheckBf16(s, /*with_bias=*/false, /*c_f32=*/1, rng);
          CheckF32(s, rng);
        }
  }
  omp_set_num_threads(threads);
}

}  // namespace
