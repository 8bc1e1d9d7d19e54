// The bf16 attention kernels (per head on AMX tiles or AVX512-BF16 dot
// products where the CPU has them, else oneDNN batched matmuls; P and dS
// rounded to bf16) against the f32 kernels on the same bf16 values: relative
// RMS error at the level of bf16 rounding, for causal and full attention,
// grouped-query heads, and lengths that are not a multiple of the query
// blocks; every path this CPU has (STEPC_ATTENTION=onednn forces oneDNN's,
// =avx512 the dot products on an AMX CPU); the packed entry points equal
// the separate ones.

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kernels/cpu/attention_bf16.h"
#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

struct Case {
  int64_t batch, tq, tk, heads, kv_heads, hd;
  int causal;
  const char* path;  // STEPC_ATTENTION: "" (the CPU's best), "avx512" or "onednn"
};

// Sets STEPC_ATTENTION for one test.
class AttentionPath {
 public:
  explicit AttentionPath(const char* path) { setenv("STEPC_ATTENTION", path, 1); }
  ~AttentionPath() { unsetenv("STEPC_ATTENTION"); }
  // Whether the path asked for runs on this CPU (a CPU without AVX512-BF16
  // runs oneDNN's for "avx512", which the "onednn" cases test already).
  static bool Available(const char* path) {
    return std::strcmp(path, "avx512") != 0 ||
           stepc::cpu::HeadAttentionEngine() == stepc::cpu::HeadEngine::kAvx512Bf16;
  }
};

std::vector<stepc_bf16> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<stepc_bf16> x(n);
  for (stepc_bf16& e : x) e = stepc_f32_to_bf16(normal(rng));
  return x;
}

std::vector<float> Widened(const std::vector<stepc_bf16>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = stepc_bf16_to_f32(x[i]);
  return y;
}

double RelativeRms(const std::vector<stepc_bf16>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double d = stepc_bf16_to_f32(got[i]) - want[i];
    err += d * d;
    norm += double{want[i]} * want[i];
  }
  return std::sqrt(err / norm);
}

class AttentionBf16 : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionBf16, MatchesF32OnTheSameValues) {
  const Case c = GetParam();
  AttentionPath path(c.path);
  if (!AttentionPath::Available(c.path)) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.hd));
  std::mt19937 rng(7);
  const int64_t nq = c.batch * c.tq * c.heads * c.hd, nk = c.batch * c.tk * c.kv_heads * c.hd;
  auto q = Random(nq, rng), k = Random(nk, rng), v = Random(nk, rng), dout = Random(nq, rng);
  std::vector<float> out(nq), dq(nq), dk(nk), dv(nk);
  stepc_cpu_attention(Widened(q).data(), Widened(k).data(), Widened(v).data(), c.batch, c.tq,
                      c.tk, c.heads, c.kv_heads, c.hd, c.causal, scale, out.data());
  stepc_cpu_attention_grad(Widened(dout).data(), Widened(q).data(), Widened(k).data(),
                           Widened(v).data(), c.batch, c.tq, c.tk, c.heads, c.kv_heads, c.hd,
                           c.causal, scale, dq.data(), dk.data(), dv.data());
  std::vector<stepc_bf16> out16(nq), dq16(nq), dk16(nk), dv16(nk);
  stepc_cpu_attention_bf16(q.data(), k.data(), v.data(), c.batch, c.tq, c.tk, c.heads,
                           c.kv_heads, c.hd, c.causal, scale, out16.data());
  stepc_cpu_attention_grad_bf16(dout.data(), q.data(), k.data(), v.data(), c.batch, c.tq, c.tk,
                                c.heads, c.kv_heads, c.hd, c.causal, scale, dq16.data(),
                                dk16.data(), dv16.data());
  // One bf16 rounding of the result is 2^-9 relative at most (~1.6e-3 RMS);
  // the rounded P and dS add about as much again.
  EXPECT_LT(RelativeRms(out16, out), 5e-3);
  EXPECT_LT(RelativeRms(dq16, dq), 5e-3);
  EXPECT_LT(RelativeRms(dk16, dk), 5e-3);
  EXPECT_LT(RelativeRms(dv16, dv), 5e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionBf16,
    ::testing::Values(Case{4, 128, 128, 4, 4, 32, 1, ""},        // gpt-capstone's
                      Case{2, 256, 256, 6, 2, 64, 1, ""},        // grouped queries
                      Case{1, 300, 300, 2, 1, 16, 1, ""},        // 3 and 5 query blocks
                      Case{3, 100, 70, 6, 2, 16, 0, ""},         // cross, full
                      Case{2, 72, 72, 3, 3, 96, 1, ""},          // head dim 96
                      Case{2, 40, 40, 3, 1, 9, 1, ""},           // an odd head dim
                      Case{4, 128, 128, 4, 4, 32, 1, "avx512"},  // the dot products
                      Case{2, 256, 256, 6, 2, 64, 1, "avx512"},
                      Case{1, 300, 300, 2, 1, 16, 1, "avx512"},
                      Case{3, 100, 70, 6, 2, 16, 0, "avx512"},
                      Case{2, 72, 72, 3, 3, 96, 1, "avx512"},
                      Case{2, 40, 40, 3, 1, 9, 1, "avx512"},
                      Case{4, 128, 128, 4, 4, 32, 1, "onednn"},  // and the same on oneDNN
                      Case{2, 256, 256, 6, 2, 64, 1, "onednn"},
                      Case{1, 300, 300, 2, 1, 16, 1, "onednn"},
                      Case{3, 100, 70, 6, 2, 16, 0, "onednn"},
                      Case{2, 40, 40, 3, 1, 9, 1, "onednn"}));

// Q, K and V as columns of one [B, T, 3C] tensor: the same results as
// separate operands, and the gradient fills all of [B, T, 3C].
class AttentionBf16Packed : public ::testing::TestWithParam<const char*> {};

TEST_P(AttentionBf16Packed, EqualsSeparateOperands) {
  AttentionPath path(GetParam());
  if (!AttentionPath::Available(GetParam())) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const int64_t batch = 2, len = 192, heads = 4, hd = 32, c = heads * hd, width = 3 * c;
  std::mt19937 rng(11);
  auto qkv = Random(batch * len * width, rng), dout = Random(batch * len * c, rng);
  std::vector<stepc_bf16> q(batch * len * c), k(q.size()), v(q.size());
  for (int64_t r = 0; r < batch * len; ++r)
    for (int64_t j = 0; j < c; ++j) {
      q[r * c + j] = qkv[r * width + j];
      k[r * c + j] = qkv[r * width + c + j];
      v[r * c + j] = qkv[r * width + 2 * c + j];
    }
  std::vector<stepc_bf16> out(q.size()), dq(q.size()), dk(q.size()), dv(q.size());
  stepc_cpu_attention_bf16(q.data(), k.data(), v.data(), batch, len, len, heads, heads, hd, 1,
                           0.2, out.data());
  stepc_cpu_attention_grad_bf16(dout.data(), q.data(), k.data(), v.data(), batch, len, len,
                                heads, heads, hd, 1, 0.2, dq.data(), dk.data(), dv.data());
  std::vector<stepc_bf16> packed_out(q.size()), dqkv(qkv.size(), 0x7fc0);  // NaN: unwritten
  stepc_cpu_attention_packed_bf16(qkv.data(), batch, len, heads, heads, hd, 1, 0.2, width, 0, c,
                                  2 * c, packed_out.data());
  stepc_cpu_attention_grad_packed_bf16(dout.data(), qkv.data(), batch, len, heads, heads, hd, 1,
                                       0.2, width, 0, c, 2 * c, dqkv.data());
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(packed_out[i], out[i]) << "out element " << i;
  for (int64_t r = 0; r < batch * len; ++r)
    for (int64_t j = 0; j < c; ++j) {
      ASSERT_EQ(dqkv[r * width + j], dq[r * c + j]) << "dq row " << r;
      ASSERT_EQ(dqkv[r * width + c + j], dk[r * c + j]) << "dk row " << r;
      ASSERT_EQ(dqkv[r * width + 2 * c + j], dv[r * c + j]) << "dv row " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(Paths, AttentionBf16Packed, ::testing::Values("", "avx512", "onednn"));

}  // namespace

// The per-head path's vector rounding equals stepc_f32_to_bf16 bit for bit: ties,
// subnormals (which vcvtneps2bf16 alone would flush), infinities, NaNs and
// random bit patterns, at every length's tail.
TEST(RoundToBf16Avx512, EqualsScalarRounding) {
  if (stepc::cpu::HeadAttentionEngine() == stepc::cpu::HeadEngine::kNone)
    GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00408000,
                                0x00018000, 0x3f808000, 0x3f818000, 0x3f80ffff, 0x7f7fffff,
                                0x7f800000, 0xff800000, 0x7fc00001, 0x7f800001, 0xffbfffff};
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) bits.push_back(rng());
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * sizeof(float));
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{17}, static_cast<int64_t>(x.size())}) {
    std::vector<stepc_bf16> got(n + 1, 0xabcd);
    stepc::cpu::RoundToBf16Avx512(x.data(), n, got.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], stepc_f32_to_bf16(x[i])) << "bits 0x" << std::hex << bits[i];
    EXPECT_EQ(got[n], 0xabcd) << "wrote past n = " << n;
  }
}
