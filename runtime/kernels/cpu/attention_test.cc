// The f32 attention kernels (attention.cc) against the definition computed
// in double: the output and all three gradients, for causal and full
// attention, grouped-query heads, head dims that are not a multiple of 16
// and lengths that are not a multiple of the query blocks; the result does
// not depend on the thread count nor on the vector width (the library's
// own against a build with 16-float vectors); the packed entry points equal
// the separate ones.

#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kernels/cpu/cpu_kernels.h"

// attention.cc built with 16-float vectors (CMakeLists.txt: attention_wide).
extern "C" void stepc_wide_attention(const float* q, const float* k, const float* v,
                                     int64_t batch, int64_t tq, int64_t tk, int64_t heads,
                                     int64_t kv_heads, int64_t head_dim, int causal,
                                     double scale, float* out);
extern "C" void stepc_wide_attention_grad(const float* dout, const float* q, const float* k,
                                          const float* v, int64_t batch, int64_t tq, int64_t tk,
                                          int64_t heads, int64_t kv_heads, int64_t head_dim,
                                          int causal, double scale, float* dq, float* dk,
                                          float* dv);

namespace {

struct Case {
  int64_t batch, tq, tk, heads, kv_heads, hd;
  int causal;
};

struct Result {
  std::vector<float> out, dq, dk, dv;
};

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = normal(rng);
  return x;
}

// softmax(scale · q kᵀ + mask) v and its gradients, in double, from the
// definition (layout [B, T, H·Dh]; query head h reads KV head h / group).
struct Reference {
  std::vector<double> out, dq, dk, dv;
};

// An additive mask and its strides per batch entry, head and query row (0
// where it broadcasts).
struct MaskArg {
  const float* data = nullptr;
  int64_t batch = 0, head = 0, row = 0;
};

Reference Attend(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& v, const std::vector<float>& dout, double scale,
                 MaskArg mask = {}) {
  const int64_t group = c.heads / c.kv_heads, cq = c.heads * c.hd, ck = c.kv_heads * c.hd;
  Reference r;
  r.out.assign(q.size(), 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(k.size(), 0);
  r.dv.assign(v.size(), 0);
  std::vector<double> p(c.tk), dp(c.tk);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kvh = h / group;
      for (int64_t t = 0; t < c.tq; ++t) {
        const int64_t n = c.causal ? std::min(t + 1, c.tk) : c.tk;
        const float* qr = &q[(b * c.tq + t) * cq + h * c.hd];
        const float* dor = &dout[(b * c.tq + t) * cq + h * c.hd];
        double max = -INFINITY, sum = 0, dot = 0;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t d = 0; d < c.hd; ++d) s += double{qr[d]} * k[(b * c.tk + j) * ck + kvh * c.hd + d];
          p[j] = s * scale;
          if (mask.data) p[j] += mask.data[b * mask.batch + h * mask.head + t * mask.row + j];
          max = std::max(max, p[j]);
        }
        if (max == -INFINITY) continue;  // every key masked: the row is 0
        for (int64_t j = 0; j < n; ++j) sum += p[j] = std::exp(p[j] - max);
        for (int64_t j = 0; j < n; ++j) {
          p[j] /= sum;
          double s = 0;
          for (int64_t d = 0; d < c.hd; ++d) s += double{dor[d]} * v[(b * c.tk + j) * ck + kvh * c.hd + d];
          dp[j] = s;
          dot += p[j] * dp[j];
        }
        for (int64_t j = 0; j < n; ++j) {
          const double ds = p[j] * (dp[j] - dot) * scale;
          for (int64_t d = 0; d < c.hd; ++d) {
            const int64_t kv = (b * c.tk + j) * ck + kvh * c.hd + d;
            r.out[(b * c.tq + t) * cq + h * c.hd + d] += p[j] * v[kv];
            r.dv[kv] += p[j] * dor[d];
            r.dq[(b * c.tq + t) * cq + h * c.hd + d] += ds * k[kv];
            r.dk[kv] += ds * qr[d];
          }
        }
      }
    }
  return r;
}

double MaxError(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0;
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::abs(got[i] - want[i]));
  return err;
}

Result RunKernels(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
           const std::vector<float>& v, const std::vector<float>& dout, double scale) {
  Result r{std::vector<float>(q.size()), std::vector<float>(q.size(), NAN),
           std::vector<float>(k.size(), NAN), std::vector<float>(v.size(), NAN)};
  stepc_cpu_attention(q.data(), k.data(), v.data(), c.batch, c.tq, c.tk, c.heads, c.kv_heads,
                      c.hd, c.causal, scale, r.out.data());
  stepc_cpu_attention_grad(dout.data(), q.data(), k.data(), v.data(), c.batch, c.tq, c.tk,
                           c.heads, c.kv_heads, c.hd, c.causal, scale, r.dq.data(),
                           r.dk.data(), r.dv.data());
  return r;
}

class AttentionF32 : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionF32, MatchesTheDefinition) {
  const Case c = GetParam();
  std::mt19937 rng(7);
  const int64_t nq = c.batch * c.tq * c.heads * c.hd, nk = c.batch * c.tk * c.kv_heads * c.hd;
  std::vector<float> q = Random(nq, rng), k = Random(nk, rng), v = Random(nk, rng),
                     dout = Random(nq, rng);
  const double scale = 1.0 / std::sqrt(double(c.hd));
  Result got = RunKernels(c, q, k, v, dout, scale);
  Reference want = Attend(c, q, k, v, dout, scale);
  // Sums of up to a few hundred products of unit-normal values, in f32.
  EXPECT_LT(MaxError(got.out, want.out), 1e-4);
  EXPECT_LT(MaxError(got.dq, want.dq), 2e-4);
  EXPECT_LT(MaxError(got.dk, want.dk), 2e-4);
  EXPECT_LT(MaxError(got.dv, want.dv), 2e-4);
  // The same sums on one thread as on several: bit for bit.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Result one = RunKernels(c, q, k, v, dout, scale);
  omp_set_num_threads(threads);
  EXPECT_EQ(one.out, got.out);
  EXPECT_EQ(one.dq, got.dq);
  EXPECT_EQ(one.dk, got.dk);
  EXPECT_EQ(one.dv, got.dv);
  // And at the other vector width: an AVX2 step and an AVX-512 one agree.
  Result wide{std::vector<float>(nq), std::vector<float>(nq), std::vector<float>(nk),
              std::vector<float>(nk)};
  stepc_wide_attention(q.data(), k.data(), v.data(), c.batch, c.tq, c.tk, c.heads, c.kv_heads,
                       c.hd, c.causal, scale, wide.out.data());
  stepc_wide_attention_grad(dout.data(), q.data(), k.data(), v.data(), c.batch, c.tq, c.tk,
                            c.heads, c.kv_heads, c.hd, c.causal, scale, wide.dq.data(),
                            wide.dk.data(), wide.dv.data());
  EXPECT_EQ(wide.out, got.out);
  EXPECT_EQ(wide.dq, got.dq);
  EXPECT_EQ(wide.dk, got.dk);
  EXPECT_EQ(wide.dv, got.dv);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionF32,
    ::testing::Values(Case{2, 128, 128, 4, 4, 32, 1},  // gpt-capstone's head
                      Case{2, 37, 37, 4, 2, 9, 1},     // GQA, odd head dim and length
                      Case{1, 70, 70, 2, 1, 64, 1},    // a block and a partial one
                      Case{2, 20, 33, 3, 3, 16, 0},    // full attention, tq != tk
                      Case{1, 5, 5, 1, 1, 40, 1}));    // fewer rows than a block

TEST(AttentionF32Packed, EqualsSeparateOperands) {
  const int64_t batch = 2, len = 45, heads = 4, hd = 24, c = heads * hd, width = 3 * c;
  std::mt19937 rng(3);
  std::vector<float> qkv = Random(batch * len * width, rng), dout = Random(batch * len * c, rng);
  std::vector<float> q(batch * len * c), k(q.size()), v(q.size());
  for (int64_t r = 0; r < batch * len; ++r)
    for (int64_t j = 0; j < c; ++j) {
      q[r * c + j] = qkv[r * width + j];
      k[r * c + j] = qkv[r * width + c + j];
      v[r * c + j] = qkv[r * width + 2 * c + j];
    }
  const Case cs{batch, len, len, heads, heads, hd, 1};
  Result separate = RunKernels(cs, q, k, v, dout, 0.2);
  std::vector<float> out(batch * len * c), dqkv(batch * len * width, NAN);
  stepc_cpu_attention_packed(qkv.data(), batch, len, heads, heads, hd, 1, 0.2, width, 0, c,
                             2 * c, out.data());
  stepc_cpu_attention_grad_packed(dout.data(), qkv.data(), batch, len, heads, heads, hd, 1, 0.2,
                                  width, 0, c, 2 * c, dqkv.data());
  EXPECT_EQ(out, separate.out);
  for (int64_t r = 0; r < batch * len; ++r)
    for (int64_t j = 0; j < c; ++j) {
      ASSERT_EQ(dqkv[r * width + j], separate.dq[r * c + j]) << "dq row " << r;
      ASSERT_EQ(dqkv[r * width + c + j], separate.dk[r * c + j]) << "dk row " << r;
      ASSERT_EQ(dqkv[r * width + 2 * c + j], separate.dv[r * c + j]) << "dv row " << r;
    }
}

// The masked kernels against the definition: a per-(batch, head) mask of
// biases and -inf (rows 0 and 5 of batch entry 1 masked whole: output and
// gradients 0, not NaN), a key-padding mask broadcast over heads and query
// rows, each causal or not, GQA; and a mask of zeros equals no mask.
TEST(AttentionF32Masked, MatchesTheDefinition) {
  for (int causal : {0, 1})
    for (bool broadcast : {false, true}) {
      const Case c{2, 23, 23, 4, 2, 12, causal};
      std::mt19937 rng(11);
      const int64_t nq = c.batch * c.tq * c.heads * c.hd, nk = c.batch * c.tk * c.kv_heads * c.hd;
      std::vector<float> q = Random(nq, rng), k = Random(nk, rng), v = Random(nk, rng),
                         dout = Random(nq, rng);
      std::vector<float> mask;
      MaskArg m;
      if (broadcast) {  // [B, 1, 1, Tk]: keys 4 and 9 of entry 0 padded
        mask.assign(c.batch * c.tk, 0.0f);
        mask[4] = mask[9] = -INFINITY;
        m = {nullptr, c.tk, 0, 0};
      } else {  // [B, H, Tq, Tk]: biases, some -inf, two rows of entry 1 whole
        mask = Random(c.batch * c.heads * c.tq * c.tk, rng);
        for (size_t i = 0; i < mask.size(); i += 7) mask[i] = -INFINITY;
        for (int64_t h = 0; h < c.heads; ++h)
          for (int64_t t : {0, 5})
            for (int64_t j = 0; j < c.tk; ++j)
              mask[((c.heads + h) * c.tq + t) * c.tk + j] = -INFINITY;
        m = {nullptr, c.heads * c.tq * c.tk, c.tq * c.tk, c.tk};
      }
      m.data = mask.data();
      Result got{std::vector<float>(nq), std::vector<float>(nq, NAN),
                 std::vector<float>(nk, NAN), std::vector<float>(nk, NAN)};
      stepc_cpu_attention_masked(q.data(), k.data(), v.data(), m.data, c.batch, c.tq, c.tk,
                                 c.heads, c.kv_heads, c.hd, c.causal, 0.3, m.batch, m.head,
                                 m.row, got.out.data());
      stepc_cpu_attention_grad_masked(dout.data(), q.data(), k.data(), v.data(), m.data,
                                      c.batch, c.tq, c.tk, c.heads, c.kv_heads, c.hd, c.causal,
                                      0.3, m.batch, m.head, m.row, got.dq.data(),
                                      got.dk.data(), got.dv.data());
      Reference want = Attend(c, q, k, v, dout, 0.3, m);
      SCOPED_TRACE(testing::Message() << "causal " << causal << " broadcast " << broadcast);
      EXPECT_LT(MaxError(got.out, want.out), 1e-4);
      EXPECT_LT(MaxError(got.dq, want.dq), 2e-4);
      EXPECT_LT(MaxError(got.dk, want.dk), 2e-4);
      EXPECT_LT(MaxError(got.dv, want.dv), 2e-4);
      if (!broadcast)
        for (int64_t c0 = 0; c0 < c.heads * c.hd; ++c0) {
          EXPECT_EQ(got.out[(1 * c.tq + 5) * c.heads * c.hd + c0], 0.0f);
          EXPECT_EQ(got.dq[(1 * c.tq + 0) * c.heads * c.hd + c0], 0.0f);
        }
      std::vector<float> zeros(c.batch * c.tk, 0.0f);
      Result plain = RunKernels(c, q, k, v, dout, 0.3);
      std::vector<float> out(nq);
      stepc_cpu_attention_masked(q.data(), k.data(), v.data(), zeros.data(), c.batch, c.tq,
                                 c.tk, c.heads, c.kv_heads, c.hd, c.causal, 0.3, c.tk, 0, 0,
                                 out.data());
      EXPECT_EQ(out, plain.out);
    }
}

// A NaN among the scores (a diverged step) reaches the output of its row,
// as the definition's exp would carry it; the other rows are unaffected.
TEST(AttentionF32, CarriesANaNScore) {
  const Case c{1, 20, 20, 1, 1, 16, 1};
  std::mt19937 rng(5);
  std::vector<float> q = Random(20 * 16, rng), k = Random(20 * 16, rng), v = Random(20 * 16, rng),
                     dout = Random(20 * 16, rng);
  k[3 * 16 + 5] = NAN;  // key 3: rows 3.. see it
  Result r = RunKernels(c, q, k, v, dout, 0.25);
  for (int64_t t = 0; t < 20; ++t)
    EXPECT_EQ(std::isnan(r.out[t * 16]), t >= 3) << "row " << t;
}

}  // namespace
