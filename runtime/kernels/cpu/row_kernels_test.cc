// Row kernels against their definitions: the fused cross-entropy's bf16
// gradient is the f32 kernel's rounded bit for bit, its f32 gradient the
// double softmax's within rounding, its loss the loss-only kernel's;
// embedding gradients are a scatter in token order (bit for bit, with
// repeated and out-of-shard ids); the bf16 lookup tables of fused loops
// give each helper's own floats, and the gradients are dy times the
// table's entry, bit for bit; layer_norm_grad against a double
// computation; column sums of f32 and bf16 against double sums (16-row
// blocks, remainders, thread parts).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <omp.h>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/elementwise_math.h"

namespace {

std::vector<float> Normal(int64_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(n);
  for (float& e : x) e = normal(rng);
  return x;
}

TEST(RowKernels, CrossEntropyBf16IsTheF32GradientRounded) {
  std::mt19937 rng(1);
  for (int64_t classes : {16, 37, 512}) {
    const int64_t n = 67;
    std::vector<float> logits = Normal(n * classes, 3.0f, rng);
    std::vector<int32_t> targets(n);
    for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 7919) % classes);
    const float dloss = 1.0f;
    float loss32 = 0, loss16 = 0;
    std::vector<float> grad32(n * classes);
    std::vector<stepc_bf16> grad16(n * classes);
    ASSERT_EQ(stepc_cpu_cross_entropy_fused(logits.data(), targets.data(), &dloss, n, classes,
                                            &loss32, grad32.data()),
              0);
    ASSERT_EQ(stepc_cpu_cross_entropy_fused_bf16(logits.data(), targets.data(), &dloss, n,
                                                 classes, &loss16, grad16.data()),
              0);
    EXPECT_EQ(loss32, loss16);
    for (int64_t e = 0; e < n * classes; ++e)
      ASSERT_EQ(grad16[e], stepc_f32_to_bf16(grad32[e])) << "classes " << classes << " at " << e;
    // The loss-only kernel (evaluation) takes the same log-sum-exps; the
    // gradient (softmax from one exp per logit) is the definition's within
    // float rounding.
    float loss_only = 0;
    ASSERT_EQ(stepc_cpu_cross_entropy(logits.data(), targets.data(), n, classes, &loss_only), 0);
    EXPECT_EQ(loss_only, loss32);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits.data() + i * classes;
      double max = row[0], sum = 0;
      for (int64_t j = 0; j < classes; ++j) max = std::max<double>(max, row[j]);
      for (int64_t j = 0; j < classes; ++j) sum += std::exp(row[j] - max);
      for (int64_t j = 0; j < classes; ++j) {
        const double want = (std::exp(row[j] - max) / sum - (j == targets[i])) * dloss / n;
        ASSERT_NEAR(grad32[i * classes + j], want, 1e-6 * (std::abs(want) + dloss / n))
            << "classes " << classes << " row " << i << " column " << j;
      }
    }
    targets[3] = static_cast<int32_t>(classes);  // out of range: its 1-based position
    EXPECT_EQ(stepc_cpu_cross_entropy_fused_bf16(logits.data(), targets.data(), &dloss, n,
                                                 classes, &loss16, grad16.data()),
              4);
  }
}

bool SameFloat(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

// What a fused loop computes in place of a table lookup, over every bf16
// value (a vector loop, as the loops are).
template <typename F> std::vector<float> Direct(F f) {
  std::vector<float> out(65536);
#pragma omp simd
  for (int b = 0; b < 65536; ++b) out[b] = f(stepc_bf16_to_f32(static_cast<stepc_bf16>(b)));
  return out;
}

TEST(RowKernels, Bf16TablesHoldTheHelpersValues) {
  std::vector<float> table(65536);
  auto check = [&](auto f, const char* what) {
    stepc_fill_bf16_table(table.data(), f);
    std::vector<float> want = Direct(f);
    for (int b = 0; b < 65536; ++b)
      ASSERT_TRUE(SameFloat(table[b], want[b])) << what << " at bits " << b;
  };
  check([](float x) { return stepc_gelu<float>(x, 0); }, "gelu");
  check([](float x) { return stepc_gelu<float>(x, 1); }, "gelu tanh");
  check([](float x) { return stepc_silu<float>(x); }, "silu");
  check([](float x) { return stepc_sigmoid<float>(x); }, "sigmoid");
  check([](float x) { return stepc_tanh<float>(x); }, "tanh");
  check([](float x) { return stepc_erf<float>(x); }, "erf");
  // A gradient is dy · g(x): the loop's dy times the entry at dy = 1 (both
  // sides vector loops: libmvec's expf, which silu's sigmoid calls, rounds
  // unlike the scalar one, and the step's loops are all vector loops).
  auto checkGradient = [&](auto grad, const char* what) {
    stepc_fill_bf16_table(table.data(),
                          [&, one = stepc_opaque_one()](float x) { return grad(one, x); });
    for (float dy : {1.0f, -3e-4f, 7.5f, 1e-30f}) {
      std::vector<float> want = Direct([&](float x) { return grad(dy, x); });
      for (int b = 0; b < 65536; ++b)
        ASSERT_TRUE(SameFloat(dy * table[b], want[b])) << what << " dy " << dy << " bits " << b;
    }
  };
  checkGradient([](float dy, float x) { return stepc_gelu_grad<float>(dy, x, 0); }, "gelu_grad");
  checkGradient([](float dy, float x) { return stepc_gelu_grad<float>(dy, x, 1); },
                "gelu_grad tanh");
  checkGradient([](float dy, float x) { return stepc_silu_grad<float>(dy, x); }, "silu_grad");
}

TEST(RowKernels, EmbeddingGradientsScatterInTokenOrder) {
  std::mt19937 rng(2);
  for (int64_t d : {5, 16, 40, 128}) {
    const int64_t n = 300, rows = 11;
    std::vector<float> dy = Normal(n * d, 1.0f, rng);
    std::vector<int32_t> ids(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * i + 3 * i) % rows);
    std::vector<float> want(rows * d, 0.0f), got(rows * d, NAN);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) want[ids[i] * d + c] += dy[i * d + c];
    ASSERT_EQ(stepc_cpu_embedding_grad(dy.data(), ids.data(), n, rows, d, got.data()), 0);
    for (int64_t e = 0; e < rows * d; ++e) ASSERT_EQ(got[e], want[e]) << "d " << d << " at " << e;
    // A shard of rows [4, 9): ids outside it add nothing.
    const int32_t first = 4;
    const int64_t shard = 5;
    std::vector<float> part(shard * d, NAN);
    ASSERT_EQ(stepc_cpu_embedding_shard_grad(dy.data(), ids.data(), &first, n, shard, rows, d,
                                             part.data()),
              0);
    for (int64_t e = 0; e < shard * d; ++e) ASSERT_EQ(part[e], want[first * d + e]);
  }
}

TEST(RowKernels, LayerNormGradMatchesDouble) {
  std::mt19937 rng(3);
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    const int64_t rows = 77, d = 48;
    std::vector<float> x = Normal(rows * d, 2.0f, rng), dy = Normal(rows * d, 0.01f, rng);
    std::vector<float> w = Normal(d, 1.0f, rng);
    for (float& e : x) e += 0.5f;
    const double eps = 1e-5;
    std::vector<float> dx(rows * d), dw(d), db(d);
    stepc_cpu_layer_norm_grad(dy.data(), x.data(), w.data(), rows, d, eps, dx.data(), dw.data(),
                              db.data());
    std::vector<double> want_dw(d, 0.0), want_db(d, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i) mean += x[r * d + i];
      mean /= d;
      for (int64_t i = 0; i < d; ++i) var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
      const double rstd = 1.0 / std::sqrt(var / d + eps);
      double mg = 0, mgx = 0;
      for (int64_t i = 0; i < d; ++i) {
        const double g = double{dy[r * d + i]} * w[i], xhat = (x[r * d + i] - mean) * rstd;
        mg += g / d;
        mgx += g * xhat / d;
        want_dw[i] += dy[r * d + i] * xhat;
        want_db[i] += dy[r * d + i];
      }
      for (int64_t i = 0; i < d; ++i) {
        const double xhat = (x[r * d + i] - mean) * rstd;
        const double want = rstd * (double{dy[r * d + i]} * w[i] - mg - xhat * mgx);
        ASSERT_NEAR(dx[r * d + i], want, 1e-5 * std::fabs(want) + 1e-7);
      }
    }
    for (int64_t i = 0; i < d; ++i) {
      ASSERT_NEAR(dw[i], want_dw[i], 1e-5 * std::fabs(want_dw[i]) + 1e-6) << i;
      ASSERT_NEAR(db[i], want_db[i], 1e-5 * std::fabs(want_db[i]) + 1e-6) << i;
    }
  }
}

TEST(RowKernels, ColumnSumsMatchDouble) {
  std::mt19937 rng(4);
  for (int64_t cols : {7, 16, 33, 512}) {
    const int64_t shape[3] = {3, 41, cols};
    const int mask[3] = {1, 1, 0};
    const int64_t n = 3 * 41 * cols;
    std::vector<float> x = Normal(n, 1.0f, rng);
    std::vector<stepc_bf16> x16(n);
    for (int64_t e = 0; e < n; ++e) x16[e] = stepc_f32_to_bf16(x[e]);
    std::vector<float> sum(cols), sum16(cols);
    stepc_cpu_reduce(x.data(), shape, 3, mask, 0, sum.data());
    stepc_cpu_reduce_of_bf16(x16.data(), shape, 3, mask, 0, sum16.data());
    for (int64_t c = 0; c < cols; ++c) {
      double want = 0, want16 = 0;
      for (int64_t r = 0; r < 3 * 41; ++r) {
        want += x[r * cols + c];
        want16 += stepc_bf16_to_f32(x16[r * cols + c]);
      }
      // Double sums of f32 values in another order: equal once rounded,
      // but for a last-bit tie; of bf16 values: exact in any order.
      ASSERT_NEAR(sum[c], want, 1e-6 * std::fabs(want) + 1e-7) << cols << " " << c;
      ASSERT_EQ(sum16[c], static_cast<float>(want16)) << cols << " " << c;
    }
  }
}

// Column sums add in a fixed order, whatever their blocking of columns: on
// one thread, per column, each block of 16 rows summed in double from zero
// and added to the column's total; columns past the last multiple of 16
// added row by row. Values of ±2⁶⁰ among small ones make any other order
// show in the sums (a small value lost or kept beside a large partial sum).
TEST(RowKernels, ColumnSumsKeepTheirOrder) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 9);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  for (int64_t cols : {16, 48, 80, 100, 200, 512}) {
    const int64_t rows = 70, shape[2] = {rows, cols};
    const int mask[2] = {1, 0};
    std::vector<float> x(rows * cols);
    for (float& e : x) {
      const int p = pick(rng);
      e = p == 0 ? 0x1p60f : p == 1 ? -0x1p60f : normal(rng);
    }
    // The same on bf16 values (their sums in double are not exact with
    // ±2⁶⁰ among them either), which the kernel takes 32 columns at a time.
    std::vector<stepc_bf16> x16(rows * cols);
    for (int64_t e = 0; e < rows * cols; ++e) x16[e] = stepc_f32_to_bf16(x[e]);
    std::vector<float> sum(cols), sum16(cols);
    stepc_cpu_reduce(x.data(), shape, 2, mask, 0, sum.data());
    stepc_cpu_reduce_of_bf16(x16.data(), shape, 2, mask, 0, sum16.data());
    const int64_t whole = cols - cols % 16;
    auto in_order = [&](auto value, int64_t c) {
      double total = 0.0;
      for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        double block = 0.0;
        for (int64_t r = r0; r < std::min(rows, r0 + 16); ++r) {
          if (c < whole)
            block += value(r * cols + c);
          else
            total += value(r * cols + c);
        }
        if (c < whole) total += block;
      }
      return static_cast<float>(total);
    };
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(sum[c], in_order([&](int64_t e) { return x[e]; }, c)) << cols << " " << c;
      ASSERT_EQ(sum16[c], in_order([&](int64_t e) { return stepc_bf16_to_f32(x16[e]); }, c))
          << "bf16 " << cols << " " << c;
    }
  }
  omp_set_num_threads(threads);
}

// Rotary embeddings for several lengths, bases and directions in turn
// (each reads its own table of angles, made once and kept): every pair
// rotated by its position's angle, against the angles in double.
TEST(RowKernels, RotaryAnglesPerConfiguration) {
  std::mt19937 rng(6);
  struct Config {
    int64_t len, head_dim;
    double theta;
    int inverse;
  };
  for (int round = 0; round < 2; ++round)
    for (Config c : {Config{7, 8, 10000.0, 0}, Config{7, 8, 500.0, 0}, Config{7, 8, 10000.0, 1},
                     Config{9, 8, 10000.0, 0}, Config{7, 4, 10000.0, 0}}) {
      const int64_t batch = 2, width = 3 * c.head_dim, n = batch * c.len * width;
      std::vector<float> x = Normal(n, 1.0f, rng), y(n, NAN);
      stepc_cpu_rotary(x.data(), batch, c.len, width, c.head_dim, c.theta, c.inverse, y.data());
      for (int64_t e = 0; e < n; e += 2) {
        const int64_t t = e / width % c.len, i = e % c.head_dim / 2;
        const double angle =
            t * std::pow(c.theta, -2.0 * i / c.head_dim) * (c.inverse ? -1.0 : 1.0);
        const double want0 = x[e] * std::cos(angle) - x[e + 1] * std::sin(angle);
        const double want1 = x[e] * std::sin(angle) + x[e + 1] * std::cos(angle);
        ASSERT_NEAR(y[e], want0, 1e-5) << c.len << " " << c.theta << " " << c.inverse << " " << e;
        ASSERT_NEAR(y[e + 1], want1, 1e-5) << c.len << " " << c.theta << " " << c.inverse;
      }
    }
}

}  // namespace
