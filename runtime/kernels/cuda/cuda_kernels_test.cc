// Every CUDA library kernel against the CPU library kernel of the same op
// (runtime/kernels/cpu, itself checked against the interpreter and PyTorch)
// on random data: GEMMs in all transpose and batching forms, f32 and bf16,
// with the bias epilogue; layout ops; chunked reductions; norms; softmax;
// rotary; cross-entropy and embeddings with the device id check; flash
// attention (causal or not, grouped-query, ragged tiles, bf16); the
// multi-tensor AdamW. Built twice: for the GPU (ctest label `gpu`,
// scripts/gpu-check.sh), and with STEPC_CUDA_EMULATION for the host, where
// the same kernels run on host threads (emulation.h) in every CI run —
// the GEMMs there are the emulation's, not cuBLASLt's.

#ifndef STEPC_CUDA_EMULATION
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#endif
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/line_kernels.h"
#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/cudnn_attention.h"
#include "runtime/kernels/cuda/fp8_pack.h"
#include "runtime/kernels/cuda/launch_config.h"
#include "runtime/kernels/cuda/line_kernels.h"
#include "runtime/kernels/moe_routing.h"
#include "runtime/kernels/elementwise_math.h"

namespace {

using Floats = std::vector<float>;

Floats Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Floats v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// Rounds to bf16 (nearest even), as the device conversion does.
float RoundBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1);
  u &= 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// max |a - b| / max(max |b|, 1e-6)
double RelError(const Floats& a, const Floats& b) {
  double err = 0, ref = 1e-6;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(double(a[i]) - b[i]));
    ref = std::max(ref, std::fabs(double(b[i])));
  }
  return err / ref;
}

// Elements of `got` more than one bf16 rounding from the bf16 values
// `want` (two sums in different orders may round a value on either side of
// a boundary: one unit in the last place, 2^-8 to 2^-7 of the value).
int64_t BeyondOneBf16Rounding(const Floats& got, const Floats& want) {
  int64_t beyond = 0;
  for (size_t i = 0; i < got.size(); ++i)
    beyond += !(std::fabs(double(got[i]) - want[i]) <= std::ldexp(std::fabs(double(want[i])), -7));
  return beyond;
}

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    ctx_.stream = stream_;
    ctx_.gemm_workspace = Alloc(stepc::cuda::kGemmWorkspaceBytes);
    ctx_.status = static_cast<int32_t*>(Alloc(16));
    ctx_.error = error_;
    ctx_.error_len = sizeof(error_);
  }
  void TearDown() override {
    for (void* p : owned_) cudaFree(p);
    if (stream_) cudaStreamDestroy(stream_);
  }
  void* Alloc(size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 4)), cudaSuccess);
    cudaMemset(p, 0, std::max<size_t>(bytes, 4));
    owned_.push_back(p);
    return p;
  }
  template <typename T>
  T* Up(const std::vector<T>& host) {
    T* p = static_cast<T*>(Alloc(host.size() * sizeof(T)));
    cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return p;
  }
  // bf16 copy on the device of `host`.
  __nv_bfloat16* UpBf16(const Floats& host) {
    std::vector<__nv_bfloat16> h(host.size());
    for (size_t i = 0; i < host.size(); ++i) h[i] = __float2bfloat16(host[i]);
    return Up(h);
  }
  float* Zeros(size_t n) { return static_cast<float*>(Alloc(n * 4)); }
  Floats DownBf16(const __nv_bfloat16* p, size_t n) {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
    std::vector<__nv_bfloat16> h(n);
    cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost);
    Floats f(n);
    for (size_t i = 0; i < n; ++i) f[i] = __bfloat162float(h[i]);
    return f;
  }
  Floats Down(const float* p, size_t n) {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
    Floats h(n);
    cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost);
    return h;
  }
  // A packed pair (row bytes [rows, cols], column bytes [cols, rows], a
  // scale per 1x128 block) against the CPU's roundings of the same values
  // by rows and by columns, element by element: equal on the emulation; on
  // a GPU, where nvcc may contract a product into the kernel's arithmetic,
  // at most 0.1% apart, each within one fp8 step.
  void ExpectPackedRoundings(const uint8_t* row_bytes, const float* row_scales,
                             const uint8_t* col_bytes, const float* col_scales, int64_t rows,
                             int64_t cols, int format, const Floats& by_rows,
                             const Floats& by_columns) {
    const size_t n = rows * cols;
    std::vector<uint8_t> rb(n), cb(n);
    const Floats rs = Down(row_scales, (cols + 127) / 128 * rows);
    const Floats cs = Down(col_scales, (rows + 127) / 128 * cols);
    cudaMemcpy(rb.data(), row_bytes, n, cudaMemcpyDeviceToHost);
    cudaMemcpy(cb.data(), col_bytes, n, cudaMemcpyDeviceToHost);
    int64_t apart = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float got_row =
            stepc_fp8_value<float>(rb[r * cols + c], format) * rs[(c / 128) * rows + r];
        const float got_column =
            stepc_fp8_value<float>(cb[c * rows + r], format) * cs[(r / 128) * cols + c];
        for (auto [got, want] : {std::make_pair(got_row, by_rows[r * cols + c]),
                                 std::make_pair(got_column, by_columns[r * cols + c])}) {
          if (got == want) continue;
#ifdef STEPC_CUDA_EMULATION
          ADD_FAILURE() << "(" << r << ", " << c << "): " << got << " != " << want;
          return;
#else
          ++apart;
          EXPECT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -1)) << r << " " << c;
#endif
        }
      }
    EXPECT_LE(apart, static_cast<int64_t>(n / 1000));
  }
  std::vector<int32_t> DownInts(const int32_t* p, size_t n) {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
    std::vector<int32_t> h(n);
    cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost);
    return h;
  }
  std::vector<int32_t> Status() {
    cudaStreamSynchronize(stream_);
    std::vector<int32_t> s(4);
    cudaMemcpy(s.data(), ctx_.status, 16, cudaMemcpyDeviceToHost);
    return s;
  }

  cudaStream_t stream_ = nullptr;
  stepc_cuda_ctx ctx_{};
  char error_[512] = {0};
  std::vector<void*> owned_;
};

// (Emulated: the host GEMM behind stepc --cuda-emulation, not cuBLASLt.)
TEST_F(CudaKernels, MatmulEveryFormMatchesTheCpu) {
  const int64_t batch = 3, m = 37, n = 21, k = 45;
  for (int ta : {0, 1})
    for (int tb : {0, 1})
      for (int shared : {0, 1}) {
        Floats a = Random(batch * m * k, 1), b = Random((shared ? 1 : batch) * k * n, 2);
        Floats want(batch * m * n);
        stepc_cpu_matmul(a.data(), b.data(), want.data(), batch, m, n, k, ta, tb, shared);
        float* c = Zeros(want.size());
        ASSERT_EQ(stepc_cuda_matmul(&ctx_, Up(a), Up(b), c, batch, m, n, k, ta, tb, shared,
                                    STEPC_CUDA_F32, STEPC_CUDA_F32, nullptr, STEPC_EPILOGUE_NONE,
                                    nullptr),
                  0)
            << error_;
        EXPECT_LT(RelError(Down(c, want.size()), want), 1e-5)
            << "ta " << ta << " tb " << tb << " shared " << shared;
      }
}

TEST_F(CudaKernels, MatmulBf16WithBiasEpilogue) {
  const int64_t batch = 4, m = 64, n = 96, k = 128;
  Floats a = Random(batch * m * k, 3), b = Random(n * k, 4), bias = Random(n, 5);
  Floats ar(a), br(b);
  for (float& x : ar) x = RoundBf16(x);
  for (float& x : br) x = RoundBf16(x);
  Floats want(batch * m * n);
  stepc_cpu_matmul(ar.data(), br.data(), want.data(), batch, m, n, k, 0, 1, 1);
  for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % n];
  float* c = Zeros(want.size());
  ASSERT_EQ(stepc_cuda_matmul(&ctx_, UpBf16(a), UpBf16(b), c, batch, m, n, k, 0, 1, 1,
                              STEPC_CUDA_BF16, STEPC_CUDA_F32, Up(bias), STEPC_EPILOGUE_NONE,
                              nullptr),
            0)
      << error_;
  // Same rounded inputs, f32 accumulation: only summation order differs.
  EXPECT_LT(RelError(Down(c, want.size()), want), 1e-4);
  // The packed QKV projection's form: the biased sum written in bf16 (one
  // rounding of it; our fallback kernel, where cuBLASLt has no algorithm,
  // is within one more).
  void* c16 = Alloc(want.size() * 2);
  ASSERT_EQ(stepc_cuda_matmul(&ctx_, UpBf16(a), UpBf16(b), c16, batch, m, n, k, 0, 1, 1,
                              STEPC_CUDA_BF16, STEPC_CUDA_BF16, Up(bias), STEPC_EPILOGUE_NONE,
                              nullptr),
            0)
      << error_;
  Floats rounded(want);
  for (float& x : rounded) x = RoundBf16(x);
  EXPECT_LT(RelError(DownBf16(static_cast<const __nv_bfloat16*>(c16), want.size()), rounded),
            8e-3);
}

// Values step.quantize_fp8 leaves, as the step hands them to a GEMM: f32
// noise with outliers a few rows and columns wide (so blocks take different
// scales), rounded by tiles of [tile_rows, tile_cols], then to bf16 (exact).
Floats Fp8Rounded(int64_t matrices, int64_t rows, int64_t cols, int64_t tile_rows,
                  int64_t tile_cols, int format, uint32_t seed) {
  Floats x = Random(matrices * rows * cols, seed);
  for (int64_t e = 0; e < (int64_t)x.size(); ++e)
    if ((e / cols) % 37 == 5 || (e % cols) % 53 == 7) x[e] *= 300.0f;
  Floats q(x.size());
  stepc_cpu_quantize_fp8(x.data(), matrices, rows, cols, tile_rows, tile_cols, format, q.data());
  for (float v : q) EXPECT_EQ(v, RoundBf16(v));
  return q;
}

// step.quantize_fp8's kernels (a warp per tile; panels of [128, 1] column
// tiles) round as the CPU's, bit for bit, in every tiling (rows, blocks,
// whole matrices, ragged edges, the weight gradients' columns), both
// formats, a tile with a NaN, and with the bf16 widening and rounding fused.
TEST_F(CudaKernels, QuantizeFp8EqualsTheCpu) {
  const int64_t matrices = 2, rows = 70, cols = 300, whole = int64_t{1} << 40;
  Floats x = Random(matrices * rows * cols, 95);
  for (int64_t e = 0; e < (int64_t)x.size(); ++e)
    if (e % 97 == 3) x[e] *= 1e4f;
  x[5 * cols + 7] = NAN;
  Floats xb(x);
  for (float& v : xb) v = RoundBf16(v);
  const int64_t tiles[][2] = {{1, 128}, {128, 128}, {whole, whole}, {3, 5}, {128, 1}};
  for (const auto& tile : tiles)
    for (int format : {0, 1}) {
      for (bool of_bf16 : {false, true}) {
        const Floats& in = of_bf16 ? xb : x;
        Floats want(in.size());
        stepc_cpu_quantize_fp8(in.data(), matrices, rows, cols, tile[0], tile[1], format,
                               want.data());
        float* y = Zeros(in.size());
        void* y16 = Alloc(in.size() * 2);
        if (of_bf16) {
          const __nv_bfloat16* in16 = UpBf16(in);
          ASSERT_EQ(stepc_cuda_quantize_fp8_of_bf16(&ctx_, in16, matrices, rows, cols, tile[0],
                                                    tile[1], format, y),
                    0);
          ASSERT_EQ(stepc_cuda_quantize_fp8_of_bf16_bf16(&ctx_, in16, matrices, rows, cols,
                                                         tile[0], tile[1], format,
                                                         static_cast<__nv_bfloat16*>(y16)),
                    0);
        } else {
          const float* in32 = Up(in);
          ASSERT_EQ(stepc_cuda_quantize_fp8(&ctx_, in32, matrices, rows, cols, tile[0], tile[1],
                                            format, y),
                    0);
          ASSERT_EQ(stepc_cuda_quantize_fp8_bf16(&ctx_, in32, matrices, rows, cols, tile[0],
                                                 tile[1], format,
                                                 static_cast<__nv_bfloat16*>(y16)),
                    0);
        }
        const Floats got = Down(y, in.size());
        const Floats got16 = DownBf16(static_cast<const __nv_bfloat16*>(y16), in.size());
        for (size_t e = 0; e < in.size(); ++e) {
          // The fp8 values are bf16 values: the rounding to bf16 is exact.
          const bool same = std::memcmp(&got[e], &want[e], 4) == 0 ||
                            (std::isnan(got[e]) && std::isnan(want[e]));
          const bool same16 = std::memcmp(&got16[e], &want[e], 4) == 0 ||
                              (std::isnan(got16[e]) && std::isnan(want[e]));
          ASSERT_TRUE(same && same16) << "tile " << tile[0] << "x" << tile[1] << " format "
                                      << format << " of_bf16 " << of_bf16 << " element " << e
                                      << ": " << got[e] << " / " << got16[e] << " want "
                                      << want[e];
        }
      }
    }
}

// Both roundings of a linear layer's input in one pass ([1, 128] and
// [128, 1] tiles, written in bf16) equal the CPU's two, bit for bit, on
// ragged panels with a NaN in one tile.
TEST_F(CudaKernels, QuantizeFp8RowsAndColumnsInOnePass) {
  const int64_t rows = 200, cols = 300;
  Floats x = Random(rows * cols, 97);
  for (int64_t e = 0; e < rows * cols; ++e)
    if (e % 89 == 4) x[e] *= 3e3f;
  x[131 * cols + 250] = NAN;
  for (int format : {0, 1}) {
    Floats by_rows(x.size()), by_columns(x.size());
    stepc_cpu_quantize_fp8(x.data(), 1, rows, cols, 1, 128, format, by_rows.data());
    stepc_cpu_quantize_fp8(x.data(), 1, rows, cols, 128, 1, format, by_columns.data());
    auto* r16 = static_cast<__nv_bfloat16*>(Alloc(x.size() * 2));
    auto* c16 = static_cast<__nv_bfloat16*>(Alloc(x.size() * 2));
    ASSERT_EQ(stepc_cuda_quantize_fp8_rows_columns_bf16(&ctx_, Up(x), rows, cols, format, r16,
                                                        c16),
              0)
        << error_;
    const Floats got_rows = DownBf16(r16, x.size()), got_columns = DownBf16(c16, x.size());
    auto same = [](float a, float b) {
      return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b));
    };
    for (size_t e = 0; e < x.size(); ++e) {
      ASSERT_TRUE(same(got_rows[e], by_rows[e]) && same(got_columns[e], by_columns[e]))
          << "format " << format << " element " << e << ": " << got_rows[e] << " / "
          << got_columns[e] << " want " << by_rows[e] << " / " << by_columns[e];
    }
    // bf16 input read as it is: the f32 kernel's bits on the widened values.
    Floats xh = x;
    for (float& v : xh) v = RoundBf16(v);
    ASSERT_EQ(stepc_cuda_quantize_fp8_rows_columns_bf16(&ctx_, Up(xh), rows, cols, format, r16,
                                                        c16),
              0)
        << error_;
    const Floats want_rows = DownBf16(r16, x.size()), want_columns = DownBf16(c16, x.size());
    ASSERT_EQ(stepc_cuda_quantize_fp8_rows_columns_of_bf16_bf16(&ctx_, UpBf16(xh), rows, cols,
                                                                format, r16, c16),
              0)
        << error_;
    const Floats of_rows = DownBf16(r16, x.size()), of_columns = DownBf16(c16, x.size());
    for (size_t e = 0; e < x.size(); ++e)
      ASSERT_TRUE(same(of_rows[e], want_rows[e]) && same(of_columns[e], want_columns[e]))
          << "of_bf16, format " << format << " element " << e;
    // The GELU of x rounded both ways (exact and tanh; f32 and bf16 x): the
    // CPU's roundings of the GELU's values, computed as the elementwise
    // kernels compute them, bit for bit.
    for (int tanh_form : {0, 1})
      for (bool bf16 : {false, true}) {
        const Floats& in = bf16 ? xh : x;
        Floats g(in.size()), g_rows(in.size()), g_columns(in.size());
        for (size_t e = 0; e < in.size(); ++e) g[e] = stepc_gelu<float>(in[e], tanh_form);
        stepc_cpu_quantize_fp8(g.data(), 1, rows, cols, 1, 128, format, g_rows.data());
        stepc_cpu_quantize_fp8(g.data(), 1, rows, cols, 128, 1, format, g_columns.data());
        const int rc = bf16 ? stepc_cuda_quantize_fp8_rows_columns_gelu_of_bf16_bf16(
                                  &ctx_, UpBf16(in), rows, cols, format, tanh_form, r16, c16)
                            : stepc_cuda_quantize_fp8_rows_columns_gelu_bf16(
                                  &ctx_, Up(in), rows, cols, format, tanh_form, r16, c16);
        ASSERT_EQ(rc, 0) << error_;
        const Floats gr = DownBf16(r16, x.size()), gc = DownBf16(c16, x.size());
#ifdef STEPC_CUDA_EMULATION
        for (size_t e = 0; e < x.size(); ++e)
          ASSERT_TRUE(same(gr[e], g_rows[e]) && same(gc[e], g_columns[e]))
              << "gelu " << tanh_form << (bf16 ? " of bf16" : "") << ", format " << format
              << " element " << e << ": " << gr[e] << " / " << gc[e] << " want " << g_rows[e]
              << " / " << g_columns[e];
#else
        // The device's erff/tanhf may differ from the host's by an ulp: a
        // value on a rounding boundary then lands one fp8 step away.
        int64_t apart = 0;
        for (size_t e = 0; e < x.size(); ++e)
          for (auto [got, want] : {std::make_pair(gr[e], g_rows[e]),
                                   std::make_pair(gc[e], g_columns[e])})
            if (!same(got, want)) {
              ++apart;
              EXPECT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -2)) << e;
            }
        EXPECT_LE(apart, static_cast<int64_t>(x.size() / 1000)) << "gelu " << tanh_form;
#endif
      }
    // With the bias gradient: the same roundings, and x's column sums (of
    // the unrounded values; the NaN's column NaN), f32 and bf16 input.
    float* scratch = Zeros(stepc::cuda::Fp8PairColumnSumScratchFloats(rows, cols));
    for (bool bf16 : {false, true}) {
      const Floats& in = bf16 ? xh : x;
      std::vector<double> want_sums(cols, 0.0), magnitude(cols, 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          want_sums[c] += in[r * cols + c];
          magnitude[c] += std::fabs(in[r * cols + c]);
        }
      float* sums = Zeros(cols);
      const int rc =
          bf16 ? stepc_cuda_quantize_fp8_rows_columns_dbias_of_bf16_bf16(
                     &ctx_, UpBf16(in), rows, cols, format, scratch, r16, c16, sums)
               : stepc_cuda_quantize_fp8_rows_columns_dbias_bf16(&ctx_, Up(in), rows, cols,
                                                                 format, scratch, r16, c16, sums);
      ASSERT_EQ(rc, 0) << error_;
      const Floats d_rows = DownBf16(r16, x.size()), d_columns = DownBf16(c16, x.size());
      const Floats& base_rows = bf16 ? want_rows : by_rows;
      const Floats& base_columns = bf16 ? want_columns : by_columns;
      for (size_t e = 0; e < x.size(); ++e)
        ASSERT_TRUE(same(d_rows[e], base_rows[e]) && same(d_columns[e], base_columns[e]))
            << "dbias, format " << format << " element " << e;
      const Floats got_sums = Down(sums, cols);
      for (int64_t c = 0; c < cols; ++c) {
        if (std::isnan(want_sums[c])) {
          EXPECT_TRUE(std::isnan(got_sums[c])) << c;
          continue;
        }
        // f32 sums of up to 3e3-sized terms: error relative to their sizes.
        EXPECT_NEAR(got_sums[c], want_sums[c], 1e-6 * magnitude[c]) << c;
      }
    }
  }
}

// The packing pass (stepc_cuda_pack_fp8_rows_columns...) writes what the
// rounding pair would have, as the fp8 GEMMs read it: every row byte times
// its block's scale is the pair's row rounding and every transposed column
// byte times its scale the column rounding, bit for bit, each scale a power
// of two; the bias gradient's sums are the pair's. Shapes with partial
// panels (200 x 300: the transposed bytes' byte-wise edge) and whole ones
// (256 x 256: four bytes a store); f32 and bf16 input, the GELU's variants.
TEST_F(CudaKernels, PackFp8RowsAndColumnsIsThePairsRoundings) {
  auto same = [](float a, float b) {
    return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b));
  };
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{200, 300}, {256, 256}}) {
    Floats x = Random(rows * cols, 98);
    for (int64_t e = 0; e < rows * cols; ++e)
      if (e % 89 == 4) x[e] *= 3e3f;
    x[131 * cols + 250 % cols] = NAN;
    Floats xh = x;
    for (float& v : xh) v = RoundBf16(v);
    const size_t n = x.size();
    const int64_t row_scale_count = (cols + 127) / 128 * rows;
    const int64_t col_scale_count = (rows + 127) / 128 * cols;
    auto* r16 = static_cast<__nv_bfloat16*>(Alloc(n * 2));
    auto* c16 = static_cast<__nv_bfloat16*>(Alloc(n * 2));
    auto* row_bytes = static_cast<uint8_t*>(Alloc(n));
    auto* col_bytes = static_cast<uint8_t*>(Alloc(n));
    float* row_scales = Zeros(row_scale_count);
    float* col_scales = Zeros(col_scale_count);
    float* scratch = Zeros(stepc::cuda::Fp8PairColumnSumScratchFloats(rows, cols));
    float* pair_sums = Zeros(cols);
    float* sums = Zeros(cols);
    for (int format : {0, 1})
      for (int variant = 0; variant < 4; ++variant)  // plain, gelu exact, gelu tanh, dbias
        for (bool bf16 : {false, true}) {
          const Floats& in = bf16 ? xh : x;
          int rc = 0, pair_rc = 0;
          if (variant == 0) {
            pair_rc = bf16 ? stepc_cuda_quantize_fp8_rows_columns_of_bf16_bf16(
                                 &ctx_, UpBf16(in), rows, cols, format, r16, c16)
                           : stepc_cuda_quantize_fp8_rows_columns_bf16(&ctx_, Up(in), rows,
                                                                       cols, format, r16, c16);
            rc = bf16 ? stepc_cuda_pack_fp8_rows_columns_of_bf16(&ctx_, UpBf16(in), rows, cols,
                                                                 format, row_bytes, row_scales,
                                                                 col_bytes, col_scales)
                      : stepc_cuda_pack_fp8_rows_columns(&ctx_, Up(in), rows, cols, format,
                                                         row_bytes, row_scales, col_bytes,
                                                         col_scales);
          } else if (variant < 3) {
            const int tanh_form = variant - 1;
            pair_rc = bf16 ? stepc_cuda_quantize_fp8_rows_columns_gelu_of_bf16_bf16(
                                 &ctx_, UpBf16(in), rows, cols, format, tanh_form, r16, c16)
                           : stepc_cuda_quantize_fp8_rows_columns_gelu_bf16(
                                 &ctx_, Up(in), rows, cols, format, tanh_form, r16, c16);
            rc = bf16 ? stepc_cuda_pack_fp8_rows_columns_gelu_of_bf16(
                            &ctx_, UpBf16(in), rows, cols, format, tanh_form, row_bytes,
                            row_scales, col_bytes, col_scales)
                      : stepc_cuda_pack_fp8_rows_columns_gelu(&ctx_, Up(in), rows, cols, format,
                                                              tanh_form, row_bytes, row_scales,
                                                              col_bytes, col_scales);
          } else {
            pair_rc = bf16 ? stepc_cuda_quantize_fp8_rows_columns_dbias_of_bf16_bf16(
                                 &ctx_, UpBf16(in), rows, cols, format, scratch, r16, c16,
                                 pair_sums)
                           : stepc_cuda_quantize_fp8_rows_columns_dbias_bf16(
                                 &ctx_, Up(in), rows, cols, format, scratch, r16, c16,
                                 pair_sums);
            rc = bf16 ? stepc_cuda_pack_fp8_rows_columns_dbias_of_bf16(
                            &ctx_, UpBf16(in), rows, cols, format, scratch, row_bytes,
                            row_scales, col_bytes, col_scales, sums)
                      : stepc_cuda_pack_fp8_rows_columns_dbias(&ctx_, Up(in), rows, cols,
                                                               format, scratch, row_bytes,
                                                               row_scales, col_bytes,
                                                               col_scales, sums);
          }
          ASSERT_EQ(pair_rc, 0) << error_;
          ASSERT_EQ(rc, 0) << error_;
          ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
          const Floats want_rows = DownBf16(r16, n), want_columns = DownBf16(c16, n);
          std::vector<uint8_t> rb(n), cb(n);
          cudaMemcpy(rb.data(), row_bytes, n, cudaMemcpyDeviceToHost);
          cudaMemcpy(cb.data(), col_bytes, n, cudaMemcpyDeviceToHost);
          const Floats rs = Down(row_scales, row_scale_count);
          const Floats cs = Down(col_scales, col_scale_count);
          for (const Floats* scales : {&rs, &cs})
            for (float f : *scales) {
              int e = 0;
              ASSERT_EQ(std::frexp(f, &e), 0.5f) << "a power of two: " << f;
            }
          const std::string what = "format " + std::to_string(format) + " variant " +
                                   std::to_string(variant) + (bf16 ? " of bf16" : "") + " " +
                                   std::to_string(rows) + "x" + std::to_string(cols);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
              const float by_row =
                  stepc_fp8_value<float>(rb[r * cols + c], format) * rs[(c / 128) * rows + r];
              const float by_column =
                  stepc_fp8_value<float>(cb[c * rows + r], format) * cs[(r / 128) * cols + c];
              ASSERT_TRUE(same(by_row, want_rows[r * cols + c]) &&
                          same(by_column, want_columns[r * cols + c]))
                  << what << " (" << r << ", " << c << "): " << by_row << " / " << by_column
                  << " want " << want_rows[r * cols + c] << " / " << want_columns[r * cols + c];
            }
          if (variant == 3) {
            const Floats got = Down(sums, cols), want = Down(pair_sums, cols);
            for (int64_t c = 0; c < cols; ++c)
              ASSERT_TRUE(same(got[c], want[c])) << what << " sum " << c;
          }
        }
  }
}

// The packing pass of the MLP's output gradient, the GELU's gradient at its
// pre-activation computed as it reads (..._gelu_grad[_dbias][_of_bf16]):
// every byte times its scale is the CPU's rounding of that gradient
// (computed as the elementwise kernels compute it), both ways; the sums
// are its column sums. Bit for bit on the emulation; on a GPU the device's
// erff/tanhf may move a value on a rounding boundary one fp8 step.
TEST_F(CudaKernels, PackFp8RowsAndColumnsOfTheGeluGrad) {
  const int64_t rows = 200, cols = 300;
  const size_t n = rows * cols;
  Floats dy = Random(n, 103), pre = Random(n, 104, 3.0f);
  for (size_t e = 0; e < n; ++e)
    if (e % 83 == 5) dy[e] *= 2e3f;
  auto* row_bytes = static_cast<uint8_t*>(Alloc(n));
  auto* col_bytes = static_cast<uint8_t*>(Alloc(n));
  float* row_scales = Zeros((cols + 127) / 128 * rows);
  float* col_scales = Zeros((rows + 127) / 128 * cols);
  float* scratch = Zeros(stepc::cuda::Fp8PairColumnSumScratchFloats(rows, cols));
  float* sums = Zeros(cols);
  for (int tanh_form : {0, 1})
    for (bool bf16 : {false, true})
      for (bool dbias : {false, true}) {
        SCOPED_TRACE(testing::Message() << "tanh " << tanh_form << (bf16 ? " of bf16" : "")
                                        << (dbias ? " dbias" : ""));
        Floats d = dy, x = pre;
        if (bf16) {
          for (float& v : d) v = RoundBf16(v);
          for (float& v : x) v = RoundBf16(v);
        }
        Floats g(n), by_rows(n), by_columns(n);
        for (size_t e = 0; e < n; ++e) g[e] = stepc_gelu_grad<float>(d[e], x[e], tanh_form);
        stepc_cpu_quantize_fp8(g.data(), 1, rows, cols, 1, 128, 1, by_rows.data());
        stepc_cpu_quantize_fp8(g.data(), 1, rows, cols, 128, 1, 1, by_columns.data());
        int rc;
        if (bf16)
          rc = dbias ? stepc_cuda_pack_fp8_rows_columns_gelu_grad_dbias_of_bf16(
                           &ctx_, UpBf16(d), UpBf16(x), rows, cols, 1, tanh_form, scratch,
                           row_bytes, row_scales, col_bytes, col_scales, sums)
                     : stepc_cuda_pack_fp8_rows_columns_gelu_grad_of_bf16(
                           &ctx_, UpBf16(d), UpBf16(x), rows, cols, 1, tanh_form, row_bytes,
                           row_scales, col_bytes, col_scales);
        else
          rc = dbias ? stepc_cuda_pack_fp8_rows_columns_gelu_grad_dbias(
                           &ctx_, Up(d), Up(x), rows, cols, 1, tanh_form, scratch, row_bytes,
                           row_scales, col_bytes, col_scales, sums)
                     : stepc_cuda_pack_fp8_rows_columns_gelu_grad(&ctx_, Up(d), Up(x), rows,
                                                                   cols, 1, tanh_form, row_bytes,
                                                                   row_scales, col_bytes,
                                                                   col_scales);
        ASSERT_EQ(rc, 0) << error_;
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
        ExpectPackedRoundings(row_bytes, row_scales, col_bytes, col_scales, rows, cols, 1, by_rows,
                              by_columns);
        if (dbias) {
          const Floats got = Down(sums, cols);
          for (int64_t c = 0; c < cols; ++c) {
            double want = 0.0, magnitude = 0.0;
            for (int64_t r = 0; r < rows; ++r) {
              want += g[r * cols + c];
              magnitude += std::fabs(g[r * cols + c]);
            }
            EXPECT_NEAR(got[c], want, 1e-6 * magnitude + 1e-6) << c;
          }
        }
      }
}

// SwiGLU's product silu(gate) * other and the gate's gradient
// silu_grad(dy * up, gate), packed from bf16 values: every byte times its
// scale is the CPU's rounding of the value computed as the elementwise
// kernels compute it (bit for bit on the emulation; on a GPU, where nvcc
// may contract the product into the kernel's arithmetic, within one fp8
// step for at most 0.1% of them).
TEST_F(CudaKernels, PackFp8RowsAndColumnsOfTheSwiglu) {
  const int64_t rows = 200, cols = 300;
  const size_t n = rows * cols;
  Floats gate = Random(n, 105, 4.0f), other = Random(n, 106), third = Random(n, 107);
  for (size_t e = 0; e < n; ++e)
    if (e % 89 == 7) other[e] *= 1e3f;
  for (Floats* v : {&gate, &other, &third})
    for (float& x : *v) x = RoundBf16(x);
  auto* row_bytes = static_cast<uint8_t*>(Alloc(n));
  auto* col_bytes = static_cast<uint8_t*>(Alloc(n));
  float* row_scales = Zeros((cols + 127) / 128 * rows);
  float* col_scales = Zeros((rows + 127) / 128 * cols);
  for (bool gate_grad : {false, true})
    for (int format : {0, 1}) {
      SCOPED_TRACE(testing::Message() << (gate_grad ? "gate grad" : "product") << ", format "
                                      << format);
      Floats v(n), by_rows(n), by_columns(n);
      for (size_t e = 0; e < n; ++e)
        v[e] = gate_grad ? stepc_silu_grad<float>(other[e] * third[e], gate[e])
                         : stepc_silu<float>(gate[e]) * other[e];
      stepc_cpu_quantize_fp8(v.data(), 1, rows, cols, 1, 128, format, by_rows.data());
      stepc_cpu_quantize_fp8(v.data(), 1, rows, cols, 128, 1, format, by_columns.data());
      const int rc =
          gate_grad ? stepc_cuda_pack_fp8_rows_columns_swiglu_gate_grad_of_bf16(
                          &ctx_, UpBf16(gate), UpBf16(other), UpBf16(third), rows, cols, format,
                          row_bytes, row_scales, col_bytes, col_scales)
                    : stepc_cuda_pack_fp8_rows_columns_swiglu_of_bf16(
                          &ctx_, UpBf16(gate), UpBf16(other), rows, cols, format, row_bytes,
                          row_scales, col_bytes, col_scales);
      ASSERT_EQ(rc, 0) << error_;
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
      ExpectPackedRoundings(row_bytes, row_scales, col_bytes, col_scales, rows, cols, format,
                            by_rows, by_columns);
    }
}

// A weight packed in 128x128 blocks (stepc_cuda_pack_fp8_blocks...): every
// byte times its block's scale is step.quantize_fp8's [128, 128] rounding,
// bit for bit, as stored and transposed, each scale a power of two at
// [block row][block column] of a table padded to 4 columns; the one-layout
// entries write the same as the two-layout one.
TEST_F(CudaKernels, PackFp8BlocksIsTheWeightsRounding) {
  const int64_t rows = 200, cols = 300;
  Floats w = Random(rows * cols, 102);
  for (int64_t e = 0; e < rows * cols; ++e)
    if (e % 97 == 3) w[e] *= 5e3f;
  const int64_t ld_cols = stepc::cuda::AlignUp((cols + 127) / 128, 4);
  const int64_t ld_rows = stepc::cuda::AlignUp((rows + 127) / 128, 4);
  for (int format : {0, 1}) {
    Floats want(w.size());
    stepc_cpu_quantize_fp8(w.data(), 1, rows, cols, 128, 128, format, want.data());
    auto* bytes = static_cast<uint8_t*>(Alloc(w.size()));
    auto* t_bytes = static_cast<uint8_t*>(Alloc(w.size()));
    auto* one_bytes = static_cast<uint8_t*>(Alloc(w.size()));
    float* scales = Zeros((rows + 127) / 128 * ld_cols);
    float* t_scales = Zeros((cols + 127) / 128 * ld_rows);
    float* one_scales = Zeros((cols + 127) / 128 * ld_rows);
    const float* wd = Up(w);
    ASSERT_EQ(stepc_cuda_pack_fp8_blocks_both(&ctx_, wd, rows, cols, format, bytes, scales,
                                              t_bytes, t_scales),
              0)
        << error_;
    ASSERT_EQ(stepc_cuda_pack_fp8_blocks_transposed(&ctx_, wd, rows, cols, format, one_bytes,
                                                    one_scales),
              0)
        << error_;
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
    std::vector<uint8_t> b(w.size()), tb(w.size()), ob(w.size());
    cudaMemcpy(b.data(), bytes, w.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(tb.data(), t_bytes, w.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(ob.data(), one_bytes, w.size(), cudaMemcpyDeviceToHost);
    const Floats s = Down(scales, (rows + 127) / 128 * ld_cols);
    const Floats ts = Down(t_scales, (cols + 127) / 128 * ld_rows);
    EXPECT_EQ(Down(one_scales, ts.size()), ts);
    EXPECT_EQ(ob, tb);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float scale = s[(r / 128) * ld_cols + c / 128];
        const float t_scale = ts[(c / 128) * ld_rows + r / 128];
        int e = 0;
        ASSERT_EQ(std::frexp(scale, &e), 0.5f) << "a power of two";
        ASSERT_EQ(scale, t_scale);
        ASSERT_EQ(stepc_fp8_value<float>(b[r * cols + c], format) * scale, want[r * cols + c])
            << "format " << format << " (" << r << ", " << c << ")";
        ASSERT_EQ(stepc_fp8_value<float>(tb[c * rows + r], format) * t_scale, want[r * cols + c])
            << "transposed, format " << format << " (" << r << ", " << c << ")";
      }
  }
}

// The fp8 GEMM of operands the packing pass wrote is the fp8 GEMM of the
// pair's bf16 roundings: the forward (A packed along K, the weight packed
// by the GEMM), the weight gradient (both packed, transposed: K the
// tokens) and, where the fp8 GEMM does not run (K = 300, not a multiple of
// 16), the bf16 GEMM of their unpacked values. Bit for bit on the
// emulation; on a GPU the same fp8 product of the same values.
TEST_F(CudaKernels, MatmulFp8OfPackedOperands) {
  for (int64_t k : {256, 300}) {
    const int64_t tokens = 256, n = 64;
    Floats x = Random(tokens * k, 99), w = Fp8Rounded(1, n, k, 128, 128, 0, 100);
    auto* r16 = static_cast<__nv_bfloat16*>(Alloc(x.size() * 2));
    auto* c16 = static_cast<__nv_bfloat16*>(Alloc(x.size() * 2));
    auto* row_bytes = static_cast<uint8_t*>(Alloc(x.size()));
    auto* col_bytes = static_cast<uint8_t*>(Alloc(x.size()));
    float* row_scales = Zeros((k + 127) / 128 * tokens);
    float* col_scales = Zeros((tokens + 127) / 128 * k);
    const float* xd = Up(x);
    ASSERT_EQ(stepc_cuda_quantize_fp8_rows_columns_bf16(&ctx_, xd, tokens, k, 0, r16, c16), 0)
        << error_;
    ASSERT_EQ(stepc_cuda_pack_fp8_rows_columns(&ctx_, xd, tokens, k, 0, row_bytes, row_scales,
                                               col_bytes, col_scales),
              0)
        << error_;
    // A second value along the same tokens (a weight gradient's other side).
    Floats g = Random(tokens * n, 101);
    auto* g16 = static_cast<__nv_bfloat16*>(Alloc(g.size() * 2));
    auto* g16r = static_cast<__nv_bfloat16*>(Alloc(g.size() * 2));
    auto* g_row_bytes = static_cast<uint8_t*>(Alloc(g.size()));
    auto* g_col_bytes = static_cast<uint8_t*>(Alloc(g.size()));
    float* g_row_scales = Zeros((n + 127) / 128 * tokens);
    float* g_col_scales = Zeros((tokens + 127) / 128 * n);
    const float* gd = Up(g);
    ASSERT_EQ(stepc_cuda_quantize_fp8_rows_columns_bf16(&ctx_, gd, tokens, n, 1, g16r, g16), 0)
        << error_;
    ASSERT_EQ(stepc_cuda_pack_fp8_rows_columns(&ctx_, gd, tokens, n, 1, g_row_bytes,
                                               g_row_scales, g_col_bytes, g_col_scales),
              0)
        << error_;
    struct Product {
      const char* name;
      int64_t m, nn, kk;
      int out_type;
    };
    // The weight packed in 128x128 blocks: as stored ([n, k], the
    // forward's) and transposed ([k, n], the input gradient's).
    auto* w_bytes = static_cast<uint8_t*>(Alloc(w.size()));
    auto* wt_bytes = static_cast<uint8_t*>(Alloc(w.size()));
    float* w_scales = Zeros((n + 127) / 128 * stepc::cuda::AlignUp((k + 127) / 128, 4));
    float* wt_scales = Zeros((k + 127) / 128 * stepc::cuda::AlignUp((n + 127) / 128, 4));
    ASSERT_EQ(stepc_cuda_pack_fp8_blocks_both(&ctx_, Up(w), n, k, 0, w_bytes, w_scales, wt_bytes,
                                              wt_scales),
              0)
        << error_;
    for (int form = 0; form < 4; ++form) {
      // form 0: forward [tokens, k] x w [n, k]^T; form 1: weight gradient
      // g^T [n, tokens] x x [tokens, k] (K the tokens); form 2: the
      // forward with the weight packed too; form 3: the input gradient
      // g [tokens, n] x w [n, k], both packed.
      const int64_t m = form == 1 ? n : tokens, nn = form == 1 ? k : form == 3 ? k : n;
      const int64_t kk = form == 1 ? tokens : form == 3 ? n : k;
      const int b_vector = form == 1 ? 1 : 0;
      const int a_format = form == 1 || form == 3 ? 1 : 0;
      const int64_t scratch_bytes =
          std::max(stepc::cuda::Fp8GemmScratchBytes(1, m, nn, kk, 0, 1, a_format, 0, b_vector, 1,
                                                    form != 0),
                   stepc::cuda::Fp8GemmScratchBytes(1, m, nn, kk, form == 1, 1, a_format, 0,
                                                    b_vector));
      void* scratch = Alloc(scratch_bytes);
      float* want = Zeros(m * nn);
      float* got = Zeros(m * nn);
      if (form == 0) {
        ASSERT_EQ(stepc_cuda_matmul_fp8(&ctx_, r16, UpBf16(w), want, 1, m, nn, kk, 0, 1, 1,
                                        STEPC_CUDA_BF16, STEPC_CUDA_BF16, STEPC_CUDA_F32,
                                        nullptr, STEPC_EPILOGUE_NONE, nullptr, 0, 0, 0,
                                        scratch),
                  0)
            << error_;
        ASSERT_EQ(stepc_cuda_matmul_fp8_packed(&ctx_, row_bytes, row_scales, UpBf16(w),
                                               nullptr, got, 1, m, nn, kk, 0, 1, 1,
                                               STEPC_CUDA_FP8, STEPC_CUDA_BF16, STEPC_CUDA_F32,
                                               nullptr, STEPC_EPILOGUE_NONE, nullptr, 0, 0, 0,
                                               scratch),
                  0)
            << error_;
      } else if (form == 2) {
        ASSERT_EQ(stepc_cuda_matmul_fp8(&ctx_, r16, UpBf16(w), want, 1, m, nn, kk, 0, 1, 1,
                                        STEPC_CUDA_BF16, STEPC_CUDA_BF16, STEPC_CUDA_F32,
                                        nullptr, STEPC_EPILOGUE_NONE, nullptr, 0, 0, 0,
                                        scratch),
                  0)
            << error_;
        ASSERT_EQ(stepc_cuda_matmul_fp8_packed(&ctx_, row_bytes, row_scales, w_bytes, w_scales,
                                               got, 1, m, nn, kk, 0, 1, 1, STEPC_CUDA_FP8,
                                               STEPC_CUDA_FP8, STEPC_CUDA_F32, nullptr,
                                               STEPC_EPILOGUE_NONE, nullptr, 0, 0, 0, scratch),
                  0)
            << error_;
      } else if (form == 3) {
        ASSERT_EQ(stepc_cuda_matmul_fp8(&ctx_, g16r, UpBf16(w), want, 1, m, nn, kk, 0, 0, 1,
                                        STEPC_CUDA_BF16, STEPC_CUDA_BF16, STEPC_CUDA_F32,
                                        nullptr, STEPC_EPILOGUE_NONE, nullptr, 1, 0, 0,
                                        scratch),
                  0)
            << error_;
        ASSERT_EQ(stepc_cuda_matmul_fp8_packed(&ctx_, g_row_bytes, g_row_scales, wt_bytes,
                                               wt_scales, got, 1, m, nn, kk, 0, 1, 1,
                                               STEPC_CUDA_FP8, STEPC_CUDA_FP8, STEPC_CUDA_F32,
                                               nullptr, STEPC_EPILOGUE_NONE, nullptr, 1, 0, 0,
                                               scratch),
                  0)
            << error_;
      } else {
        ASSERT_EQ(stepc_cuda_matmul_fp8(&ctx_, g16, c16, want, 1, m, nn, kk, 1, 0, 1,
                                        STEPC_CUDA_BF16, STEPC_CUDA_BF16, STEPC_CUDA_F32,
                                        nullptr, STEPC_EPILOGUE_NONE, nullptr, 1, 0, 1,
                                        scratch),
                  0)
            << error_;
        ASSERT_EQ(stepc_cuda_matmul_fp8_packed(&ctx_, g_col_bytes, g_col_scales, col_bytes,
                                               col_scales, got, 1, m, nn, kk, 0, 1, 1,
                                               STEPC_CUDA_FP8, STEPC_CUDA_FP8, STEPC_CUDA_F32,
                                               nullptr, STEPC_EPILOGUE_NONE, nullptr, 1, 0, 1,
                                               scratch),
                  0)
            << error_;
      }
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
      const Floats a = Down(want, m * nn), b = Down(got, m * nn);
#ifdef STEPC_CUDA_EMULATION
      for (int64_t e = 0; e < m * nn; ++e)
        ASSERT_EQ(a[e], b[e]) << "form " << form << " k " << k << " element " << e;
#else
      EXPECT_LT(RelError(b, a), 1e-5) << "form " << form << " k " << k;
#endif
    }
  }
  // What a packed operand must be: its scales, A untransposed, B [n, k].
  void* any = Alloc(64);
  EXPECT_NE(stepc_cuda_matmul_fp8_packed(&ctx_, any, nullptr, any, nullptr, any, 1, 64, 64, 128,
                                         0, 1, 1, STEPC_CUDA_FP8, STEPC_CUDA_BF16,
                                         STEPC_CUDA_F32, nullptr, STEPC_EPILOGUE_NONE, nullptr,
                                         0, 0, 0, any),
            0);
  EXPECT_NE(stepc_cuda_matmul_fp8_packed(&ctx_, any, static_cast<float*>(any), any, nullptr,
                                         any, 1, 64, 64, 128, 1, 1, 1, STEPC_CUDA_FP8,
                                         STEPC_CUDA_BF16, STEPC_CUDA_F32, nullptr,
                                         STEPC_EPILOGUE_NONE, nullptr, 0, 0, 0, any),
            0);
  EXPECT_NE(stepc_cuda_matmul_fp8_packed(&ctx_, any, nullptr, any, static_cast<float*>(any),
                                         any, 1, 64, 64, 128, 0, 0, 1, STEPC_CUDA_BF16,
                                         STEPC_CUDA_FP8, STEPC_CUDA_F32, nullptr,
                                         STEPC_EPILOGUE_NONE, nullptr, 0, 0, 1, any),
            0);
  EXPECT_NE(stepc_cuda_matmul_fp8_packed(&ctx_, any, static_cast<float*>(any), any, nullptr,
                                         any, 1, 64, 64, 128, 0, 1, 1, STEPC_CUDA_FP8,
                                         STEPC_CUDA_F32, STEPC_CUDA_F32, nullptr,
                                         STEPC_EPILOGUE_NONE, nullptr, 0, 0, 0, any),
            0);
}

// The packing's layout, as cuBLASLt's block scaling reads it: every byte
// times its block's scale is the value packed, exactly, and every scale is
// a power of two (rows [1, 128] along K at [kb][row]; blocks [128, 128] at
// [nb][kb], the K-blocks padded to 4).
TEST_F(CudaKernels, Fp8PackingIsExactInCublasLtLayout) {
  const int64_t rows = 136, k = 320, n = 200;
  const Floats a = Fp8Rounded(1, rows, k, 1, 128, 1, 90);
  const Floats b = Fp8Rounded(1, k, n, 128, 128, 0, 91);  // stored [k, n]: a dgrad's weight
  const stepc::cuda::Fp8GemmLayout layout = stepc::cuda::PlanFp8Gemm(rows, n, k, false);
  ASSERT_EQ(layout.b_scale_ld, 4);
  char* scratch = static_cast<char*>(Alloc(layout.total));
  ASSERT_EQ(stepc::cuda::PackFp8Rows(&ctx_, UpBf16(a), STEPC_CUDA_BF16, rows, k,
                                     /*stored_kr=*/false, 1,
                                     reinterpret_cast<uint8_t*>(scratch + layout.a_bytes),
                                     reinterpret_cast<float*>(scratch + layout.a_scales)),
            0)
      << error_;
  ASSERT_EQ(stepc::cuda::PackFp8Blocks(&ctx_, Up(b), STEPC_CUDA_F32, n, k, /*stored_nk=*/false, 0,
                                       reinterpret_cast<uint8_t*>(scratch + layout.b_bytes),
                                       reinterpret_cast<float*>(scratch + layout.b_scales),
                                       layout.b_scale_ld),
            0)
      << error_;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
  std::vector<uint8_t> bytes(layout.total);
  cudaMemcpy(bytes.data(), scratch, layout.total, cudaMemcpyDeviceToHost);
  auto scale = [&](int64_t offset, int64_t i) {
    float f;
    std::memcpy(&f, &bytes[offset + 4 * i], 4);
    int e = 0;
    EXPECT_EQ(std::frexp(f, &e), 0.5f) << "a power of two";
    return f;
  };
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c)
      ASSERT_EQ(stepc_fp8_value<float>(bytes[layout.a_bytes + r * k + c], 1) *
                    scale(layout.a_scales, (c / 128) * rows + r),
                a[r * k + c])
          << "row " << r << " col " << c;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < k; ++c)
      ASSERT_EQ(stepc_fp8_value<float>(bytes[layout.b_bytes + j * k + c], 0) *
                    scale(layout.b_scales, (j / 128) * layout.b_scale_ld + c / 128),
                b[c * n + j])
          << "n " << j << " k " << c;
  // A weight gradient's operand: stored [k, rows] (tokens first), rounded in
  // [128, 1] tiles, packed K-major through shared memory.
  const Floats t = Fp8Rounded(1, k, rows, 128, 1, 0, 96);
  ASSERT_EQ(stepc::cuda::PackFp8Rows(&ctx_, UpBf16(t), STEPC_CUDA_BF16, rows, k,
                                     /*stored_kr=*/true, 0,
                                     reinterpret_cast<uint8_t*>(scratch + layout.a_bytes),
                                     reinterpret_cast<float*>(scratch + layout.a_scales)),
            0)
      << error_;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << error_;
  cudaMemcpy(bytes.data(), scratch, layout.total, cudaMemcpyDeviceToHost);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c)
      ASSERT_EQ(stepc_fp8_value<float>(bytes[layout.a_bytes + r * k + c], 0) *
                    scale(layout.a_scales, (c / 128) * rows + r),
                t[c * rows + r])
          << "transposed: row " << r << " col " << c;
}

// The fp8 GEMM of fp8-rounded operands is the bf16 GEMM of the same values
// (bit for bit on the emulation, which sums in the same order; within
// summation order on a GPU): the linear layers' forward (A [1, 128] e4m3
// tiles, B [n, k] in [128, 128] blocks, a bias), their input gradient (A
// e5m2, B stored [k, n]), their weight gradient (A and B stored [k, *] in
// [128, 1] tiles, B scaled per 1x128), one scale per matrix, a GELU
// epilogue, and forms that run in bf16 (M not a multiple of 4, two e5m2).
TEST_F(CudaKernels, MatmulFp8EqualsTheBf16GemmOfTheSameValues) {
  struct Case {
    const char* name;
    int64_t batch, m, n, k;
    int ta, tb, a_format, b_format, b_vector, out_type, epilogue;
    int64_t a_tile, b_tile;  // along K (the other extent: 1, or the block's 128)
    bool bias;
  };
  const int64_t whole = int64_t{1} << 40;
  const Case cases[] = {
      {"forward", 2, 64, 192, 320, 0, 1, 0, 0, 0, STEPC_CUDA_BF16, STEPC_EPILOGUE_NONE, 128, 128, true},
      {"forward, 128-aligned", 2, 128, 256, 384, 0, 1, 0, 0, 0, STEPC_CUDA_BF16, STEPC_EPILOGUE_NONE, 128, 128, false},
      {"input grad", 1, 96, 144, 256, 0, 0, 1, 0, 0, STEPC_CUDA_F32, STEPC_EPILOGUE_NONE, 128, 128, false},
      {"weight grad", 1, 144, 96, 384, 1, 0, 1, 0, 1, STEPC_CUDA_F32, STEPC_EPILOGUE_NONE, 128, 128, false},
      {"matrix scales", 2, 32, 64, 64, 0, 1, 0, 0, 0, STEPC_CUDA_F32, STEPC_EPILOGUE_NONE, whole, whole, false},
      {"gelu", 1, 64, 128, 128, 0, 1, 0, 0, 0, STEPC_CUDA_F32, STEPC_EPILOGUE_GELU, 128, 128, true},
      {"in bf16: odd rows", 1, 37, 64, 128, 0, 1, 0, 0, 0, STEPC_CUDA_F32, STEPC_EPILOGUE_NONE, 128, 128, false},
      {"in bf16: two e5m2", 1, 64, 64, 128, 0, 1, 1, 1, 0, STEPC_CUDA_F32, STEPC_EPILOGUE_NONE, whole, whole, false},
  };
  for (const Case& t : cases) {
    const int64_t rows = t.batch * t.m;
    // A's tiles lie along K: [1, tile] on [rows, K], [tile, 1] on [K, rows]
    // (transposed), or a whole matrix.
    auto tiles = [&](bool k_first, int64_t along_k, int64_t across) -> std::pair<int64_t, int64_t> {
      if (along_k == whole) return {whole, whole};
      return k_first ? std::make_pair(along_k, across) : std::make_pair(across, along_k);
    };
    const int64_t a_rows = t.ta ? t.k : rows, a_cols = t.ta ? rows : t.k;
    const auto at = tiles(t.ta, t.a_tile, 1);
    const Floats a = Fp8Rounded(1, a_rows, a_cols, at.first, at.second, t.a_format, 92);
    // B: 128x128 blocks, or [tile, 1] along K of the [K, N] weight gradient.
    const int64_t b_rows = t.tb ? t.n : t.k, b_cols = t.tb ? t.k : t.n;
    const auto bt = tiles(!t.tb, t.b_tile, t.b_vector ? 1 : t.b_tile);
    const Floats b = Fp8Rounded(1, b_rows, b_cols, bt.first, bt.second, t.b_format, 93);
    const Floats bias = Random(t.n, 94);
    const int64_t out_bytes = rows * t.n * (t.out_type == STEPC_CUDA_BF16 ? 2 : 4);
    void* want = Alloc(out_bytes);
    void* got = Alloc(out_bytes);
    float* want_aux = t.epilogue ? Zeros(rows * t.n) : nullptr;
    float* got_aux = t.epilogue ? Zeros(rows * t.n) : nullptr;
    const float* bias_d = t.bias ? Up(bias) : nullptr;
    __nv_bfloat16 *a_d = UpBf16(a), *b_d = UpBf16(b);
    const int64_t scratch_bytes = stepc::cuda::Fp8GemmScratchBytes(
        t.batch, t.m, t.n, t.k, t.ta, 1, t.a_format, t.b_format, t.b_vector);
    EXPECT_EQ(scratch_bytes == 0, std::string(t.name).rfind("in bf16", 0) == 0) << t.name;
    ASSERT_EQ(stepc_cuda_matmul(&ctx_, a_d, b_d, want, t.batch, t.m, t.n, t.k, t.ta, t.tb, 1,
                                STEPC_CUDA_BF16, t.out_type, bias_d, t.epilogue, want_aux),
              0)
        << error_;
    const int64_t fp8_before = stepc::cuda::Fp8GemmsRun();
    ASSERT_EQ(stepc_cuda_matmul_fp8(&ctx_, a_d, b_d, got, t.batch, t.m, t.n, t.k, t.ta, t.tb, 1,
                                    STEPC_CUDA_BF16, STEPC_CUDA_BF16, t.out_type, bias_d,
                                    t.epilogue, got_aux, t.a_format, t.b_format, t.b_vector,
                                    scratch_bytes ? Alloc(scratch_bytes) : nullptr),
              0)
        << t.name << ": " << error_;
    // A form cuBLASLt takes no fp8 algorithm for would pass below through
    // the bf16 fallback. The emulation runs every eligible form in fp8; on
    // a GPU the shapes aligned to 128 everywhere must (gpt2-124m's are),
    // the others are said when cuBLASLt refuses them (stderr says why).
    const bool ran_fp8 = stepc::cuda::Fp8GemmsRun() - fp8_before == 1;
    const bool aligned = rows % 128 == 0 && t.n % 128 == 0 && t.k % 128 == 0;
#ifdef STEPC_CUDA_EMULATION
    const bool must = scratch_bytes != 0;
#else
    const bool must = scratch_bytes != 0 && aligned;
    if (scratch_bytes && !aligned && !ran_fp8)
      std::printf("note: cuBLASLt ran the fp8 GEMM '%s' in bf16\n", t.name);
#endif
    if (must) EXPECT_TRUE(ran_fp8) << t.name << ": ran in bf16, not fp8";
    if (!scratch_bytes) EXPECT_FALSE(ran_fp8) << t.name << ": ran in fp8";
    const size_t count = rows * t.n;
    const Floats w = t.out_type == STEPC_CUDA_BF16
                         ? DownBf16(static_cast<__nv_bfloat16*>(want), count)
                         : Down(static_cast<float*>(want), count);
    const Floats g = t.out_type == STEPC_CUDA_BF16
                         ? DownBf16(static_cast<__nv_bfloat16*>(got), count)
                         : Down(static_cast<float*>(got), count);
#ifdef STEPC_CUDA_EMULATION
    EXPECT_EQ(std::memcmp(w.data(), g.data(), count * 4), 0) << t.name;
#else
    EXPECT_LT(RelError(g, w), 1e-2) << t.name;
#endif
    if (t.epilogue)
      EXPECT_LT(RelError(Down(got_aux, count), Down(want_aux, count)), 1e-5) << t.name;
  }
}

// GELU (tanh) with the pre-activation kept, and its gradient: cuBLASLt's
// GELU_AUX_BIAS and DGELU epilogues, or our fallback kernel, against the
// CPU's arithmetic.
TEST_F(CudaKernels, MatmulGeluEpilogues) {
  const int64_t m = 48, n = 64, k = 40;
  Floats a = Random(m * k, 80), b = Random(n * k, 81), bias = Random(n, 82);
  Floats pre(m * n), want(m * n);
  stepc_cpu_matmul(a.data(), b.data(), pre.data(), 1, m, n, k, 0, 1, 1);
  for (int64_t e = 0; e < m * n; ++e) {
    pre[e] += bias[e % n];
    want[e] = stepc_gelu(pre[e], 1);
  }
  float *c = Zeros(m * n), *aux = Zeros(m * n);
  ASSERT_EQ(stepc_cuda_matmul(&ctx_, Up(a), Up(b), c, 1, m, n, k, 0, 1, 1, STEPC_CUDA_F32,
                              STEPC_CUDA_F32, Up(bias), STEPC_EPILOGUE_GELU, aux),
            0)
      << error_;
  EXPECT_LT(RelError(Down(aux, m * n), pre), 1e-5);
  EXPECT_LT(RelError(Down(c, m * n), want), 1e-4);  // cuBLASLt's tanh may differ in ulps

  Floats dy = Random(m * k, 83), w = Random(k * n, 84), grad(m * n);
  stepc_cpu_matmul(dy.data(), w.data(), grad.data(), 1, m, n, k, 0, 0, 1);
  for (int64_t e = 0; e < m * n; ++e) grad[e] = stepc_gelu_grad(grad[e], pre[e], 1);
  float* dx = Zeros(m * n);
  ASSERT_EQ(stepc_cuda_matmul(&ctx_, Up(dy), Up(w), dx, 1, m, n, k, 0, 0, 1, STEPC_CUDA_F32,
                              STEPC_CUDA_F32, nullptr, STEPC_EPILOGUE_DGELU, Up(pre)),
            0)
      << error_;
  EXPECT_LT(RelError(Down(dx, m * n), grad), 1e-4);
  // N not divisible by 8: refused, with the reason.
  EXPECT_NE(stepc_cuda_matmul(&ctx_, Up(a), Up(b), c, 1, m, 6, k, 0, 1, 1, STEPC_CUDA_F32,
                              STEPC_CUDA_F32, nullptr, STEPC_EPILOGUE_GELU, aux),
            0);
  EXPECT_NE(std::string(error_).find("N divisible by 8"), std::string::npos) << error_;
}

// A weight gradient dW = dyᵀ·x with its bias gradient db = the sum of dy's
// rows (cuBLASLt's BGRADB, or the plain GEMM and our column sums): bf16 and
// f32 operands at gpt2's shape ratios, against the CPU in double; in fp8
// (the sums of A's own values); and the forms it refuses, with the reason.
TEST_F(CudaKernels, MatmulBiasGradEpilogue) {
  const int64_t k = 256, m = 96, n = 40;  // dy [K, M], x [K, N]
  for (int type : {STEPC_CUDA_BF16, STEPC_CUDA_F32}) {
    Floats dy = Random(k * m, 85), x = Random(k * n, 86);
    if (type == STEPC_CUDA_BF16)
      for (Floats* v : {&dy, &x})
        for (float& e : *v) e = RoundBf16(e);
    Floats dw(m * n), db(m, 0.0f);
    stepc_cpu_matmul(dy.data(), x.data(), dw.data(), 1, m, n, k, 1, 0, 1);
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < m; ++c) db[c] += dy[r * m + c];
    const void* dy_d = type == STEPC_CUDA_BF16 ? static_cast<const void*>(UpBf16(dy)) : Up(dy);
    const void* x_d = type == STEPC_CUDA_BF16 ? static_cast<const void*>(UpBf16(x)) : Up(x);
    float *c = Zeros(m * n), *sums = Zeros(m);
    ASSERT_EQ(stepc_cuda_matmul(&ctx_, dy_d, x_d, c, 1, m, n, k, 1, 0, 1, type, STEPC_CUDA_F32,
                                nullptr, STEPC_EPILOGUE_BGRAD, sums),
              0)
        << error_;
    EXPECT_LT(RelError(Down(c, m * n), dw), 1e-5) << type;
    EXPECT_LT(RelError(Down(sums, m), db), 1e-5) << type;
  }
  // fp8 values (e5m2 gradients in [128, 1] tiles, as step-fp8 rounds a
  // weight gradient's operands): the same sums, the same product.
  const int64_t k8 = 384, m8 = 128, n8 = 128;
  const Floats dy8 = Fp8Rounded(1, k8, m8, 128, 1, 1, 87);
  const Floats x8 = Fp8Rounded(1, k8, n8, 128, 1, 0, 88);
  Floats db8(m8, 0.0f);
  for (int64_t r = 0; r < k8; ++r)
    for (int64_t c = 0; c < m8; ++c) db8[c] += dy8[r * m8 + c];
  __nv_bfloat16 *dy8_d = UpBf16(dy8), *x8_d = UpBf16(x8);
  float *want = Zeros(m8 * n8), *got = Zeros(m8 * n8), *sums8 = Zeros(m8);
  ASSERT_EQ(stepc_cuda_matmul(&ctx_, dy8_d, x8_d, want, 1, m8, n8, k8, 1, 0, 1, STEPC_CUDA_BF16,
                              STEPC_CUDA_F32, nullptr, STEPC_EPILOGUE_NONE, nullptr),
            0)
      << error_;
  const int64_t scratch = stepc::cuda::Fp8GemmScratchBytes(1, m8, n8, k8, 1, 1, 1, 0, 1);
  ASSERT_EQ(stepc_cuda_matmul_fp8(&ctx_, dy8_d, x8_d, got, 1, m8, n8, k8, 1, 0, 1,
                                  STEPC_CUDA_BF16, STEPC_CUDA_BF16, STEPC_CUDA_F32, nullptr,
                                  STEPC_EPILOGUE_BGRAD, sums8, 1, 0, 1,
                                  scratch ? Alloc(scratch) : nullptr),
            0)
      << error_;
  EXPECT_LT(RelError(Down(got, m8 * n8), Down(want, m8 * n8)), 1e-2);
  EXPECT_LT(RelError(Down(sums8, m8), db8), 1e-5);
  // Batched products and a bias are refused, with the reason.
  float* any = Zeros(2 * m * n);
  EXPECT_NE(stepc_cuda_matmul(&ctx_, dy8_d, x8_d, any, 2, m, n, k, 1, 0, 0, STEPC_CUDA_BF16,
                              STEPC_CUDA_F32, nullptr, STEPC_EPILOGUE_BGRAD, any),
            0);
  EXPECT_NE(std::string(error_).find("BGRAD epilogue needs one product"), std::string::npos)
      << error_;
}

// Operands of two types, unpacked: refused, with the reason.
TEST_F(CudaKernels, MatmulFp8RefusesMixedOperands) {
  float* any = Zeros(64 * 64);
  EXPECT_NE(stepc_cuda_matmul_fp8(&ctx_, any, any, any, 1, 64, 64, 128, 0, 0, 1, STEPC_CUDA_F32,
                                  STEPC_CUDA_BF16, STEPC_CUDA_F32, nullptr, STEPC_EPILOGUE_NONE,
                                  nullptr, 1, 0, 0, any),
            0);
  EXPECT_NE(std::string(error_).find("operands must have one type"), std::string::npos) << error_;
}

TEST_F(CudaKernels, LayoutOps) {
  const int64_t in_shape[] = {3, 1, 5}, out_shape[] = {2, 3, 4, 5};
  Floats x = Random(15, 6), want(120), got;
  stepc_cpu_broadcast(x.data(), in_shape, 3, want.data(), out_shape, 4);
  float* y = Zeros(120);
  ASSERT_EQ(stepc_cuda_broadcast(&ctx_, Up(x), in_shape, 3, y, out_shape, 4), 0) << error_;
  EXPECT_EQ(Down(y, 120), want);

  const int64_t shape[] = {2, 3, 4, 5}, perm[] = {2, 0, 3, 1};
  Floats t = Random(120, 7), tw(120);
  stepc_cpu_transpose(t.data(), shape, 4, perm, tw.data());
  float* ty = Zeros(120);
  ASSERT_EQ(stepc_cuda_transpose(&ctx_, Up(t), shape, 4, perm, ty), 0) << error_;
  EXPECT_EQ(Down(ty, 120), tw);

  const int64_t dst_shape[] = {4, 6, 7}, src_shape[] = {3, 5, 6}, box[] = {2, 3, 4};
  const int64_t src_off[] = {1, 2, 1}, dst_off[] = {2, 0, 3};
  Floats s = Random(90, 8), d = Random(168, 9), dw = d;
  stepc_cpu_copy_box(s.data(), src_shape, src_off, dw.data(), dst_shape, dst_off, box, 3);
  float* dd = Up(d);
  ASSERT_EQ(stepc_cuda_copy_box(&ctx_, Up(s), src_shape, src_off, dd, dst_shape, dst_off, box, 3),
            0)
      << error_;
  EXPECT_EQ(Down(dd, 168), dw);
}

TEST_F(CudaKernels, ReductionsIncludingChunkedOnes) {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int> mask;
  };
  const Case cases[] = {
      {{8192, 96}, {1, 0}},          // bias gradient: chunks over rows
      {{1 << 20}, {1}},              // full reduction: many chunks
      {{7, 300, 5}, {0, 1, 0}},      // middle dim
      {{64, 33}, {0, 1}},            // rows
      {{4, 6, 8}, {1, 0, 1}},        // two dims
      {{1000}, {1}},                 // full reduction in one chunk (whole-block lanes)
      {{3, 5, 7}, {1, 1, 1}},        // full reduction over dims merged into one
      {{16, 12, 40}, {1, 1, 0}},     // leading dims merged, kept dim contiguous
      {{5, 4, 3, 2}, {0, 1, 1, 0}},  // inner dims merged, kept dims apart
      {{2, 150, 264}, {1, 1, 0}},    // column sums, 16-byte loads: a partial tile
      {{40, 24}, {1, 0}},            // column sums in one chunk
      {{100, 36}, {1, 0}},           // columns not a multiple of 8: the strided kernel
  };
  // Kind 3 (the sum of squares) against the CPU's sum of the squared values.
  auto cpu_reduce = [](Floats x, const Case& c, int kind, float* out) {
    if (kind == 3)
      for (float& v : x) v *= v;
    stepc_cpu_reduce(x.data(), c.shape.data(), c.shape.size(), c.mask.data(), kind % 3, out);
  };
  for (const Case& c : cases)
    for (int kind : {0, 1, 2, 3}) {
      const int rank = c.shape.size();
      int64_t n = 1, outs = 1;
      for (int d = 0; d < rank; ++d) {
        n *= c.shape[d];
        if (!c.mask[d]) outs *= c.shape[d];
      }
      Floats x = Random(n, 10 + kind), want(outs);
      cpu_reduce(x, c, kind, want.data());
      float* out = Zeros(outs);
      float* scratch = Zeros(std::max<int64_t>(1, stepc::cuda::ReduceScratchFloats(outs, n / outs)));
      ASSERT_EQ(stepc_cuda_reduce(&ctx_, Up(x), c.shape.data(), rank, c.mask.data(), kind,
                                  scratch, out),
                0)
          << error_;
      EXPECT_LT(RelError(Down(out, outs), want), 2e-5) << "kind " << kind << " n " << n;
      // bf16 values read as they are: the sums of the rounded values.
      Floats rounded(x);
      for (float& v : rounded) v = RoundBf16(v);
      cpu_reduce(rounded, c, kind, want.data());
      ASSERT_EQ(stepc_cuda_reduce_of_bf16(&ctx_, UpBf16(x), c.shape.data(), rank, c.mask.data(),
                                          kind, scratch, out),
                0)
          << error_;
      EXPECT_LT(RelError(Down(out, outs), want), 2e-5) << "bf16, kind " << kind << " n " << n;
    }
  const int64_t shape[] = {6, 10};
  const int mask[] = {0, 1};
  Floats x = Random(60, 20), dy = Random(6, 21), want(60);
  x[13] = x[12] = 9.0f;  // a tie splits the gradient
  stepc_cpu_reduce_max_grad(dy.data(), x.data(), shape, 2, mask, want.data());
  float* dx = Zeros(60);
  ASSERT_EQ(stepc_cuda_reduce_max_grad(&ctx_, Up(dy), Up(x), shape, 2, mask, dx), 0) << error_;
  EXPECT_LT(RelError(Down(dx, 60), want), 1e-6);
}

// d = 64, 768, 1000 and 1600 take 16-byte steps (1000: lanes with unequal
// shares), 100 and 3100 one element at a time. The gradients run in one pass
// up to 1000 (a layer norm's) or 1600 (an RMS norm's; 1000 above 48 KiB of
// shared memory), else in two (PlanNormGrad).
TEST_F(CudaKernels, NormsForwardAndBackward) {
  EXPECT_TRUE(stepc::cuda::PlanNormGrad(301, 1000).fused);
  EXPECT_FALSE(stepc::cuda::PlanNormGrad(301, 1600).fused);
  EXPECT_TRUE(stepc::cuda::PlanNormGrad(301, 1600, /*bias=*/false).fused);
  EXPECT_FALSE(stepc::cuda::PlanNormGrad(301, 3100, /*bias=*/false).fused);
  for (int64_t d : {64, 100, 768, 1000, 1600, 3100}) {
    const int64_t rows = 301;
    Floats x = Random(rows * d, 30, 2.0f), w = Random(d, 31), b = Random(d, 32),
           dy = Random(rows * d, 33);
    float *X = Up(x), *W = Up(w), *B = Up(b), *DY = Up(dy);
    // Room for either norm's plan (an RMS norm's may run in one pass where
    // a layer norm's takes two).
    float* scratch = Zeros(std::max(stepc::cuda::PlanNormGrad(rows, d).scratch_floats,
                                    stepc::cuda::PlanNormGrad(rows, d, false).scratch_floats));
    Floats y(rows * d), dx(rows * d), dw(d), db(d);
    stepc_cpu_layer_norm(x.data(), w.data(), b.data(), rows, d, 1e-5, y.data());
    stepc_cpu_layer_norm_grad(dy.data(), x.data(), w.data(), rows, d, 1e-5, dx.data(),
                              dw.data(), db.data());
    float *Y = Zeros(rows * d), *DX = Zeros(rows * d), *DW = Zeros(d), *DB = Zeros(d);
    ASSERT_EQ(stepc_cuda_layer_norm(&ctx_, X, W, B, rows, d, 1e-5, Y), 0) << error_;
    ASSERT_EQ(stepc_cuda_layer_norm_grad(&ctx_, DY, X, W, rows, d, 1e-5, scratch, DX, DW, DB), 0)
        << error_;
    EXPECT_LT(RelError(Down(Y, rows * d), y), 1e-5);
    EXPECT_LT(RelError(Down(DX, rows * d), dx), 1e-4);
    EXPECT_LT(RelError(Down(DW, d), dw), 1e-5);
    EXPECT_LT(RelError(Down(DB, d), db), 1e-5);
    // Written in bf16: the f32 norm's rounding (at most one rounding apart
    // where the two sides' sums straddle a boundary).
    auto expect_rounded = [&](const void* got, const Floats& want, const char* what) {
      Floats rounded(want);
      for (float& v : rounded) v = RoundBf16(v);
      EXPECT_EQ(BeyondOneBf16Rounding(
                    DownBf16(static_cast<const __nv_bfloat16*>(got), rows * d), rounded),
                0)
          << what << ", d " << d;
    };
    // dy in bf16 (the input gradient a bf16 GEMM left): the gradients of
    // its rounded values.
    Floats dy16(dy);
    for (float& v : dy16) v = RoundBf16(v);
    const __nv_bfloat16* DY16 = UpBf16(dy);
    {
      Floats dx16(rows * d), dw16(d), db16(d);
      stepc_cpu_layer_norm_grad(dy16.data(), x.data(), w.data(), rows, d, 1e-5, dx16.data(),
                                dw16.data(), db16.data());
      ASSERT_EQ(stepc_cuda_layer_norm_grad_of_bf16(&ctx_, DY16, X, W, rows, d, 1e-5, scratch, DX,
                                                   DW, DB),
                0)
          << error_;
      EXPECT_LT(RelError(Down(DX, rows * d), dx16), 1e-4);
      EXPECT_LT(RelError(Down(DW, d), dw16), 1e-5);
      EXPECT_LT(RelError(Down(DB, d), db16), 1e-5);
      stepc_cpu_rms_norm_grad(dy16.data(), x.data(), w.data(), rows, d, 1e-6, dx16.data(),
                              dw16.data());
      ASSERT_EQ(stepc_cuda_rms_norm_grad_of_bf16(&ctx_, DY16, X, W, rows, d, 1e-6, scratch, DX,
                                                 DW),
                0)
          << error_;
      EXPECT_LT(RelError(Down(DX, rows * d), dx16), 1e-4);
      EXPECT_LT(RelError(Down(DW, d), dw16), 1e-5);
      // Into the residual stream's gradient: acc + dx, and its bf16 copy.
      Floats acc = Random(rows * d, 34), sum(rows * d);
      float* ACC = Up(acc);
      __nv_bfloat16* R16 = static_cast<__nv_bfloat16*>(Alloc(rows * d * 2));
      // The bf16 copy is the stored f32 sum rounded, bit for bit.
      auto expect_sum = [&](const char* what, bool rounded) {
        for (int64_t i = 0; i < rows * d; ++i) sum[i] = acc[i] + dx16[i];
        Floats got = Down(DX, rows * d);
        EXPECT_LT(RelError(got, sum), 1e-4) << what;
        if (!rounded) return;
        for (float& v : got) v = RoundBf16(v);
        EXPECT_EQ(DownBf16(R16, rows * d), got) << what;
      };
      ASSERT_EQ(stepc_cuda_rms_norm_grad_add_rounded_of_bf16(&ctx_, DY16, X, W, ACC, rows, d,
                                                             1e-6, scratch, DX, DW, R16),
                0)
          << error_;
      expect_sum("rms_norm_grad_add_rounded_of_bf16", true);
      EXPECT_LT(RelError(Down(DW, d), dw16), 1e-5);
      stepc_cpu_layer_norm_grad(dy16.data(), x.data(), w.data(), rows, d, 1e-5, dx16.data(),
                                dw16.data(), db16.data());
      ASSERT_EQ(stepc_cuda_layer_norm_grad_add_of_bf16(&ctx_, DY16, X, W, ACC, rows, d, 1e-5,
                                                       scratch, DX, DW, DB),
                0)
          << error_;
      expect_sum("layer_norm_grad_add_of_bf16", false);
      EXPECT_LT(RelError(Down(DB, d), db16), 1e-5);
      ASSERT_EQ(stepc_cuda_layer_norm_grad_add_rounded_of_bf16(&ctx_, DY16, X, W, ACC, rows, d,
                                                               1e-5, scratch, DX, DW, DB, R16),
                0)
          << error_;
      expect_sum("layer_norm_grad_add_rounded_of_bf16", true);
      stepc_cpu_layer_norm_grad(dy.data(), x.data(), w.data(), rows, d, 1e-5, dx16.data(),
                                dw16.data(), db16.data());
      ASSERT_EQ(stepc_cuda_layer_norm_grad_add_rounded(&ctx_, DY, X, W, ACC, rows, d, 1e-5,
                                                       scratch, DX, DW, DB, R16),
                0)
          << error_;
      expect_sum("layer_norm_grad_add_rounded", true);
      EXPECT_LT(RelError(Down(DW, d), dw16), 1e-5);
      // Where the stream starts: dx and its rounding (acc 0 in the check).
      std::fill(acc.begin(), acc.end(), 0.0f);
      ASSERT_EQ(stepc_cuda_layer_norm_grad_rounded(&ctx_, DY, X, W, rows, d, 1e-5, scratch, DX,
                                                   DW, DB, R16),
                0)
          << error_;
      expect_sum("layer_norm_grad_rounded", true);
      stepc_cpu_rms_norm_grad(dy16.data(), x.data(), w.data(), rows, d, 1e-6, dx16.data(),
                              dw16.data());
      ASSERT_EQ(stepc_cuda_rms_norm_grad_rounded_of_bf16(&ctx_, DY16, X, W, rows, d, 1e-6,
                                                         scratch, DX, DW, R16),
                0)
          << error_;
      expect_sum("rms_norm_grad_rounded_of_bf16", true);
      // dy the f32 sum of two or three bf16 terms (Llama's gate and up, or
      // q, k and v, input gradients), added as it is read: bit for bit the
      // f32 kernel given the host's sums (t0 + t1) + t2.
      Floats t1 = Random(rows * d, 36), t2 = Random(rows * d, 37), s2(rows * d), s3(rows * d);
      for (int64_t i = 0; i < rows * d; ++i) {
        s2[i] = RoundBf16(dy[i]) + RoundBf16(t1[i]);
        s3[i] = s2[i] + RoundBf16(t2[i]);
      }
      const __nv_bfloat16 *T1 = UpBf16(t1), *T2 = UpBf16(t2);
      float *S2 = Up(s2), *S3 = Up(s3), *DX2 = Zeros(rows * d), *DW2 = Zeros(d),
            *DB2 = Zeros(d);
      __nv_bfloat16* R2 = static_cast<__nv_bfloat16*>(Alloc(rows * d * 2));
      auto expect_same = [&](const char* what, bool bias, bool rounded) {
        EXPECT_EQ(Down(DX2, rows * d), Down(DX, rows * d)) << what << ", d " << d;
        EXPECT_EQ(Down(DW2, d), Down(DW, d)) << what << ", d " << d;
        if (bias) EXPECT_EQ(Down(DB2, d), Down(DB, d)) << what << ", d " << d;
        if (rounded) EXPECT_EQ(DownBf16(R2, rows * d), DownBf16(R16, rows * d)) << what;
      };
      for (int terms : {2, 3}) {
        const float* S = terms == 2 ? S2 : S3;
        const __nv_bfloat16* T2s = terms == 2 ? nullptr : T2;
        ASSERT_EQ(stepc_cuda_rms_norm_grad_add_rounded(&ctx_, S, X, W, ACC, rows, d, 1e-6,
                                                       scratch, DX, DW, R16),
                  0)
            << error_;
        ASSERT_EQ(terms == 2 ? stepc_cuda_rms_norm_grad_add_rounded_of_bf16_sum2(
                                   &ctx_, DY16, T1, X, W, ACC, rows, d, 1e-6, scratch, DX2, DW2,
                                   R2)
                             : stepc_cuda_rms_norm_grad_add_rounded_of_bf16_sum3(
                                   &ctx_, DY16, T1, T2s, X, W, ACC, rows, d, 1e-6, scratch, DX2,
                                   DW2, R2),
                  0)
            << error_;
        expect_same("rms_norm_grad_add_rounded_of_bf16_sum", false, true);
        ASSERT_EQ(stepc_cuda_rms_norm_grad_add(&ctx_, S, X, W, ACC, rows, d, 1e-6, scratch, DX,
                                               DW),
                  0)
            << error_;
        ASSERT_EQ(terms == 2 ? stepc_cuda_rms_norm_grad_add_of_bf16_sum2(
                                   &ctx_, DY16, T1, X, W, ACC, rows, d, 1e-6, scratch, DX2, DW2)
                             : stepc_cuda_rms_norm_grad_add_of_bf16_sum3(
                                   &ctx_, DY16, T1, T2s, X, W, ACC, rows, d, 1e-6, scratch, DX2,
                                   DW2),
                  0)
            << error_;
        expect_same("rms_norm_grad_add_of_bf16_sum", false, false);
        ASSERT_EQ(stepc_cuda_layer_norm_grad_add_rounded(&ctx_, S, X, W, ACC, rows, d, 1e-5,
                                                         scratch, DX, DW, DB, R16),
                  0)
            << error_;
        ASSERT_EQ(terms == 2 ? stepc_cuda_layer_norm_grad_add_rounded_of_bf16_sum2(
                                   &ctx_, DY16, T1, X, W, ACC, rows, d, 1e-5, scratch, DX2, DW2,
                                   DB2, R2)
                             : stepc_cuda_layer_norm_grad_add_rounded_of_bf16_sum3(
                                   &ctx_, DY16, T1, T2s, X, W, ACC, rows, d, 1e-5, scratch, DX2,
                                   DW2, DB2, R2),
                  0)
            << error_;
        expect_same("layer_norm_grad_add_rounded_of_bf16_sum", true, true);
        ASSERT_EQ(stepc_cuda_layer_norm_grad_add(&ctx_, S, X, W, ACC, rows, d, 1e-5, scratch, DX,
                                                 DW, DB),
                  0)
            << error_;
        ASSERT_EQ(terms == 2 ? stepc_cuda_layer_norm_grad_add_of_bf16_sum2(
                                   &ctx_, DY16, T1, X, W, ACC, rows, d, 1e-5, scratch, DX2, DW2,
                                   DB2)
                             : stepc_cuda_layer_norm_grad_add_of_bf16_sum3(
                                   &ctx_, DY16, T1, T2s, X, W, ACC, rows, d, 1e-5, scratch, DX2,
                                   DW2, DB2),
                  0)
            << error_;
        expect_same("layer_norm_grad_add_of_bf16_sum", true, false);
      }
    }
    // The residual add before the norm, in its kernel: x = a + b with b a
    // bf16 GEMM result (the CPU given the same sum), the sum written exactly.
    {
      Floats a = Random(rows * d, 35, 2.0f), sum(rows * d), want(rows * d);
      for (int64_t i = 0; i < rows * d; ++i) sum[i] = a[i] + RoundBf16(x[i]);
      float *A = Up(a), *S = Zeros(rows * d), *YN = Zeros(rows * d);
      const __nv_bfloat16* XB = UpBf16(x);
      stepc_cpu_layer_norm(sum.data(), w.data(), b.data(), rows, d, 1e-5, want.data());
      ASSERT_EQ(stepc_cuda_layer_norm_add_of_bf16(&ctx_, A, XB, W, B, rows, d, 1e-5, S, YN), 0)
          << error_;
      EXPECT_EQ(Down(S, rows * d), sum);
      EXPECT_LT(RelError(Down(YN, rows * d), want), 1e-5);
      stepc_cpu_rms_norm(sum.data(), w.data(), rows, d, 1e-6, want.data());
      __nv_bfloat16* YB = static_cast<__nv_bfloat16*>(Alloc(rows * d * 2));
      ASSERT_EQ(stepc_cuda_rms_norm_add_of_bf16_bf16(&ctx_, A, XB, W, rows, d, 1e-6, S, YB), 0)
          << error_;
      EXPECT_EQ(Down(S, rows * d), sum);
      for (float& v : want) v = RoundBf16(v);
      EXPECT_EQ(BeyondOneBf16Rounding(DownBf16(YB, rows * d), want), 0) << "d " << d;
      // f32 both sides.
      for (int64_t i = 0; i < rows * d; ++i) sum[i] = a[i] + x[i];
      stepc_cpu_layer_norm(sum.data(), w.data(), b.data(), rows, d, 1e-5, want.data());
      ASSERT_EQ(stepc_cuda_layer_norm_add(&ctx_, A, X, W, B, rows, d, 1e-5, S, YN), 0) << error_;
      EXPECT_EQ(Down(S, rows * d), sum);
      EXPECT_LT(RelError(Down(YN, rows * d), want), 1e-5);
      // b a table of 7 rows repeated down the 301 (position embeddings):
      // bit for bit the kernel given the table tiled out.
      const int64_t period = 7;
      Floats table = Random(period * d, 36), tiled(rows * d);
      for (int64_t i = 0; i < rows * d; ++i) tiled[i] = table[i % (period * d)];
      float *T = Up(table), *TT = Up(tiled), *S2 = Zeros(rows * d), *YN2 = Zeros(rows * d);
      ASSERT_EQ(stepc_cuda_layer_norm_add(&ctx_, A, TT, W, B, rows, d, 1e-5, S, YN), 0)
          << error_;
      ASSERT_EQ(stepc_cuda_layer_norm_add_of_repeated(&ctx_, A, T, W, B, rows, d, 1e-5, period,
                                                      S2, YN2),
                0)
          << error_;
      EXPECT_EQ(Down(S2, rows * d), Down(S, rows * d)) << "d " << d;
      EXPECT_EQ(Down(YN2, rows * d), Down(YN, rows * d)) << "d " << d;
      __nv_bfloat16* YB2 = static_cast<__nv_bfloat16*>(Alloc(rows * d * 2));
      ASSERT_EQ(stepc_cuda_rms_norm_add_bf16(&ctx_, A, TT, W, rows, d, 1e-6, S, YB), 0)
          << error_;
      ASSERT_EQ(stepc_cuda_rms_norm_add_of_repeated_bf16(&ctx_, A, T, W, rows, d, 1e-6, period,
                                                         S2, YB2),
                0)
          << error_;
      EXPECT_EQ(DownBf16(YB2, rows * d), DownBf16(YB, rows * d)) << "d " << d;
      EXPECT_EQ(Down(S2, rows * d), Down(S, rows * d)) << "d " << d;
    }
    void* Y16 = Alloc(rows * d * 2);
    ASSERT_EQ(stepc_cuda_layer_norm_bf16(&ctx_, X, W, B, rows, d, 1e-5,
                                         static_cast<__nv_bfloat16*>(Y16)),
              0)
        << error_;
    expect_rounded(Y16, y, "layer_norm_bf16");

    stepc_cpu_rms_norm(x.data(), w.data(), rows, d, 1e-6, y.data());
    stepc_cpu_rms_norm_grad(dy.data(), x.data(), w.data(), rows, d, 1e-6, dx.data(), dw.data());
    ASSERT_EQ(stepc_cuda_rms_norm_bf16(&ctx_, X, W, rows, d, 1e-6,
                                       static_cast<__nv_bfloat16*>(Y16)),
              0)
        << error_;
    expect_rounded(Y16, y, "rms_norm_bf16");
    ASSERT_EQ(stepc_cuda_rms_norm(&ctx_, X, W, rows, d, 1e-6, Y), 0) << error_;
    ASSERT_EQ(stepc_cuda_rms_norm_grad(&ctx_, DY, X, W, rows, d, 1e-6, scratch, DX, DW), 0)
        << error_;
    EXPECT_LT(RelError(Down(Y, rows * d), y), 1e-5);
    EXPECT_LT(RelError(Down(DX, rows * d), dx), 1e-4);
    EXPECT_LT(RelError(Down(DW, d), dw), 1e-5);
  }
}

TEST_F(CudaKernels, SoftmaxLogSoftmaxAndRotary) {
  const int64_t outer = 5, n = 33, inner = 7;
  Floats x = Random(outer * n * inner, 40, 3.0f), dy = Random(outer * n * inner, 41);
  Floats y(x.size()), dx(x.size());
  stepc_cpu_softmax(x.data(), outer, n, inner, y.data());
  stepc_cpu_softmax_grad(dy.data(), y.data(), outer, n, inner, dx.data());
  float *Y = Zeros(y.size()), *DX = Zeros(dx.size());
  ASSERT_EQ(stepc_cuda_softmax(&ctx_, Up(x), outer, n, inner, Y), 0) << error_;
  ASSERT_EQ(stepc_cuda_softmax_grad(&ctx_, Up(dy), Up(y), outer, n, inner, DX), 0) << error_;
  EXPECT_LT(RelError(Down(Y, y.size()), y), 1e-5);
  EXPECT_LT(RelError(Down(DX, dx.size()), dx), 1e-5);

  // log_softmax along the same lines, and its gradient from its output.
  stepc_cpu_log_softmax(x.data(), outer, n, inner, y.data());
  stepc_cpu_log_softmax_grad(dy.data(), y.data(), outer, n, inner, dx.data());
  ASSERT_EQ(stepc_cuda_log_softmax(&ctx_, Up(x), outer, n, inner, Y), 0) << error_;
  ASSERT_EQ(stepc_cuda_log_softmax_grad(&ctx_, Up(dy), Up(y), outer, n, inner, DX), 0) << error_;
  EXPECT_LT(RelError(Down(Y, y.size()), y), 1e-5);
  EXPECT_LT(RelError(Down(DX, dx.size()), dx), 1e-5);
  // cumsum and its gradient (the reverse running sum).
  stepc_cpu_cumsum(x.data(), outer, n, inner, y.data());
  stepc_cpu_cumsum_grad(dy.data(), outer, n, inner, dx.data());
  ASSERT_EQ(stepc_cuda_cumsum(&ctx_, Up(x), outer, n, inner, Y), 0) << error_;
  ASSERT_EQ(stepc_cuda_cumsum_grad(&ctx_, Up(dy), outer, n, inner, DX), 0) << error_;
  EXPECT_LT(RelError(Down(Y, y.size()), y), 1e-6);
  EXPECT_LT(RelError(Down(DX, dx.size()), dx), 1e-6);
  // The last of a line's running sums is the line's sum, the gradient's first.
  for (int64_t line = 0; line < outer * inner; ++line) {
    const int64_t base = (line / inner) * n * inner + line % inner;
    double total = 0, grad_total = 0;
    for (int64_t j = 0; j < n; ++j) {
      total += x[base + j * inner];
      grad_total += dy[base + j * inner];
    }
    EXPECT_NEAR(y[base + (n - 1) * inner], total, 1e-4) << "line " << line;
    EXPECT_NEAR(dx[base], grad_total, 1e-4) << "line " << line;
  }
  stepc_cpu_log_softmax(x.data(), outer, n, inner, y.data());

  // Each line of exp(log_softmax) sums to 1.
  for (int64_t line = 0; line < outer * inner; ++line) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += std::exp(y[(line / inner) * n * inner + line % inner + j * inner]);
    EXPECT_NEAR(sum, 1.0, 1e-5) << "line " << line;
  }

  const int64_t batch = 2, len = 9, width = 24, head_dim = 8;
  Floats r = Random(batch * len * width, 42), rw(r.size()), rounded(r), rw16(r.size());
  for (float& v : rounded) v = RoundBf16(v);
  float* table = Zeros(stepc::cuda::RotaryScratchFloats(len, head_dim));
  auto round_all = [](Floats v) {
    for (float& x : v) x = RoundBf16(x);
    return v;
  };
  for (int inverse : {0, 1}) {
    stepc_cpu_rotary(r.data(), batch, len, width, head_dim, 10000.0, inverse, rw.data());
    stepc_cpu_rotary(rounded.data(), batch, len, width, head_dim, 10000.0, inverse, rw16.data());
    float* R = Zeros(r.size());
    ASSERT_EQ(stepc_cuda_rotary(&ctx_, Up(r), batch, len, width, head_dim, 10000.0, inverse,
                                table, R),
              0)
        << error_;
    EXPECT_LT(RelError(Down(R, r.size()), rw), 1e-6);
    // bf16 either side: the rotation of the rounded values; a bf16 result
    // that rotation rounded (one rounding apart where the sums straddle).
    __nv_bfloat16* R16 = static_cast<__nv_bfloat16*>(Alloc(r.size() * 2));
    ASSERT_EQ(stepc_cuda_rotary_of_bf16(&ctx_, UpBf16(r), batch, len, width, head_dim, 10000.0,
                                        inverse, table, R),
              0)
        << error_;
    EXPECT_LT(RelError(Down(R, r.size()), rw16), 1e-6);
    ASSERT_EQ(stepc_cuda_rotary_of_bf16_bf16(&ctx_, UpBf16(r), batch, len, width, head_dim,
                                             10000.0, inverse, table, R16),
              0)
        << error_;
    EXPECT_LT(RelError(DownBf16(R16, r.size()), round_all(rw16)), 1e-3);
    ASSERT_EQ(stepc_cuda_rotary_bf16(&ctx_, Up(r), batch, len, width, head_dim, 10000.0, inverse,
                                     table, R16),
              0)
        << error_;
    EXPECT_LT(RelError(DownBf16(R16, r.size()), round_all(rw)), 1e-3);
  }
}

TEST_F(CudaKernels, DropoutMatchesTheCpuBitForBitAndSlicesDrawTheirRows) {
  const int64_t rows = 6, row_size = 1000, n = rows * row_size;
  const double rate = 0.3;
  Floats x = Random(n, 43), y(n), tail(n / 2);
  const std::vector<int32_t> seed{12345}, first{rows / 2};
  const Floats step{7.0f};
  stepc_cpu_dropout(x.data(), seed.data(), step.data(), n, row_size, rate, 3, y.data());
  // The second half as a slice starting at row rows/2 draws the same mask.
  stepc_cpu_dropout_rows(x.data() + n / 2, seed.data(), step.data(), first.data(), n / 2,
                         row_size, rate, 3, tail.data());
  EXPECT_EQ(0, std::memcmp(tail.data(), y.data() + n / 2, tail.size() * 4));
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    dropped += y[i] == 0.0f;
    if (y[i] != 0.0f) EXPECT_EQ(y[i], x[i] * static_cast<float>(1.0 / (1.0 - rate)));
  }
  // Binomial(n, 0.3): the standard deviation is 35 drops.
  EXPECT_NEAR(static_cast<double>(dropped), rate * n, 6 * std::sqrt(n * rate * (1 - rate)));
  float *Y = Zeros(n), *T = Zeros(n / 2);
  ASSERT_EQ(stepc_cuda_dropout(&ctx_, Up(x), Up(seed), Up(step), n, row_size, rate, 3, Y), 0)
      << error_;
  ASSERT_EQ(stepc_cuda_dropout_rows(&ctx_, Up(Floats(x.begin() + n / 2, x.end())), Up(seed),
                                    Up(step), Up(first), n / 2, row_size, rate, 3, T),
            0)
      << error_;
  EXPECT_EQ(Down(Y, n), y);
  EXPECT_EQ(Down(T, n / 2), tail);
  // Another step, stream or seed draws another mask.
  for (auto [other_seed, other_step, other_stream] :
       {std::tuple{12345, 8.0f, 3}, std::tuple{12345, 7.0f, 4}, std::tuple{12346, 7.0f, 3}}) {
    Floats z(n);
    const std::vector<int32_t> s{other_seed};
    const Floats t{other_step};
    stepc_cpu_dropout(x.data(), s.data(), t.data(), n, row_size, rate, other_stream, z.data());
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i) same += (z[i] == 0.0f) == (y[i] == 0.0f);
    // Independent masks agree on 0.3² + 0.7² = 58% of the elements.
    EXPECT_NEAR(static_cast<double>(same) / n, 0.58, 0.03);
  }
}

// ignore_index, label smoothing and z-loss: the device kernels equal the
// CPU ones (which the PyTorch oracle checks); the count comes from the
// device's token_count; an ignored row's gradient is zero.
TEST_F(CudaKernels, MaskedCrossEntropyEqualsCpu) {
  const int64_t n = 61, classes = 700, ignore = -100;
  const double smoothing = 0.1, z = 1e-3;
  Floats logits = Random(n * classes, 53, 3.0f);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = i % 3 == 0 ? ignore : (i * 41) % classes;
  float count = 0, want = 0;
  stepc_cpu_token_count(targets.data(), n, ignore, &count);
  EXPECT_EQ(count, static_cast<float>(n - (n + 2) / 3));
  ASSERT_EQ(stepc_cpu_cross_entropy_masked(logits.data(), targets.data(), &count, n, classes,
                                           ignore, smoothing, z, &want),
            0);
  float *L = Up(logits), *loss = Zeros(1), *scratch = Zeros(n), *C = Zeros(1);
  int32_t* T = Up(targets);
  ASSERT_EQ(stepc_cuda_token_count(&ctx_, T, n, ignore, C), 0) << error_;
  EXPECT_EQ(Down(C, 1)[0], count);
  ASSERT_EQ(stepc_cuda_cross_entropy_masked(&ctx_, L, T, C, n, classes, ignore, smoothing, z,
                                            scratch, loss, 1),
            0)
      << error_;
  EXPECT_NEAR(Down(loss, 1)[0], want, 1e-5 * std::fabs(want));
  Floats dlogits(n * classes);
  const float dloss = 0.7f;
  ASSERT_EQ(stepc_cpu_cross_entropy_masked_grad(&dloss, logits.data(), targets.data(), &count, n,
                                                classes, ignore, smoothing, z, dlogits.data()),
            0);
  float* DL = Zeros(dlogits.size());
  ASSERT_EQ(stepc_cuda_cross_entropy_masked_grad(&ctx_, Up(Floats{dloss}), L, T, C, n, classes,
                                                 ignore, smoothing, z, DL, 2),
            0);
  Floats got = Down(DL, dlogits.size());
  EXPECT_LT(RelError(got, dlogits), 1e-5);
  for (int64_t j = 0; j < classes; ++j) ASSERT_EQ(got[j], 0.0f);  // row 0 is ignored
  // The fused CPU kernel is the two CPU kernels, bit for bit.
  Floats fused(n * classes);
  float fused_loss = 0;
  ASSERT_EQ(stepc_cpu_cross_entropy_masked_fused(logits.data(), targets.data(), &count, &dloss, n,
                                                 classes, ignore, smoothing, z, &fused_loss,
                                                 fused.data()),
            0);
  EXPECT_EQ(fused_loss, want);
  EXPECT_EQ(fused, dlogits);
  EXPECT_EQ(Status()[0], 0);
  // target_mask: ids with the ignored ones 0, a 0/1 mask; device = host.
  std::vector<int32_t> ids(n), got_ids(n);
  Floats mask(n);
  stepc_cpu_target_mask(targets.data(), n, ignore, ids.data(), mask.data());
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(mask[0], 0.0f);
  EXPECT_EQ(ids[1], targets[1]);
  EXPECT_EQ(mask[1], 1.0f);
  int32_t* I = Up(std::vector<int32_t>(n, -1));
  float* MK = Zeros(n);
  ASSERT_EQ(stepc_cuda_target_mask(&ctx_, T, n, ignore, I, MK), 0) << error_;
  cudaMemcpy(got_ids.data(), I, n * sizeof(int32_t), cudaMemcpyDeviceToHost);
  EXPECT_EQ(got_ids, ids);
  EXPECT_EQ(Down(MK, n), mask);
  // A target neither a class nor ignored: position 5 (1-based 6) on the CPU.
  targets[5] = -7;
  EXPECT_EQ(stepc_cpu_cross_entropy_masked(logits.data(), targets.data(), &count, n, classes,
                                           ignore, smoothing, z, &want),
            6);
}

// The fused loss and gradient (one kernel) against the CPU's two kernels on
// the same values: f32 or bf16 logits (the CPU given the rounded ones), f32
// or bf16 gradient, plain and masked, rows loaded 8 at a time (V = 512,
// 30000) or one by one (V = 700); a bad target reported under the call's
// site. Rows up to 112 KiB are kept in shared memory between the loss's pass
// and the gradient's; 30,000 f32 logits are read twice.
TEST_F(CudaKernels, FusedCrossEntropyIsTheLossAndItsGradient) {
  const int64_t n = 37, ignore = -100;
  const double smoothing = 0.1, z = 1e-3;
  const float dloss = 0.7f;
  EXPECT_TRUE(stepc::cuda::CrossEntropyRowInShared(30000, 2));
  EXPECT_FALSE(stepc::cuda::CrossEntropyRowInShared(30000, 4));
  EXPECT_TRUE(stepc::cuda::CrossEntropyRowInShared(50304, 2));  // gpt2-124m's
  for (int64_t classes : {512, 700, 30000})
    for (bool masked : {false, true})
      for (bool bf16_logits : {false, true})
        for (bool bf16_grad : {false, true}) {
          SCOPED_TRACE(testing::Message() << "V " << classes << " masked " << masked
                                          << " bf16 logits " << bf16_logits << " bf16 grad "
                                          << bf16_grad);
          Floats logits = Random(n * classes, 71, 3.0f), seen(logits);
          if (bf16_logits)
            for (float& v : seen) v = RoundBf16(v);
          std::vector<int32_t> targets(n);
          for (int64_t i = 0; i < n; ++i)
            targets[i] = masked && i % 4 == 1 ? ignore : (i * 37) % classes;
          float count = 0, want = 0;
          Floats dwant(n * classes);
          if (masked) {
            stepc_cpu_token_count(targets.data(), n, ignore, &count);
            ASSERT_EQ(stepc_cpu_cross_entropy_masked_fused(seen.data(), targets.data(), &count,
                                                           &dloss, n, classes, ignore, smoothing,
                                                           z, &want, dwant.data()),
                      0);
          } else {
            ASSERT_EQ(stepc_cpu_cross_entropy_fused(seen.data(), targets.data(), &dloss, n,
                                                    classes, &want, dwant.data()),
                      0);
          }
          const void* L = bf16_logits ? static_cast<const void*>(UpBf16(logits))
                                      : static_cast<const void*>(Up(logits));
          void* DL = bf16_grad ? Alloc(n * classes * 2) : Alloc(n * classes * 4);
          int32_t* T = Up(targets);
          float *loss = Zeros(1), *scratch = Zeros(n), *C = Up(Floats{count}),
                *D = Up(Floats{dloss});
          using F = float;
          using B = __nv_bfloat16;
          int rc = -1;
          if (!masked && !bf16_logits && !bf16_grad)
            rc = stepc_cuda_cross_entropy_fused(&ctx_, (const F*)L, T, D, n, classes, scratch,
                                                loss, (F*)DL, 3);
          if (!masked && !bf16_logits && bf16_grad)
            rc = stepc_cuda_cross_entropy_fused_bf16(&ctx_, (const F*)L, T, D, n, classes,
                                                     scratch, loss, (B*)DL, 3);
          if (!masked && bf16_logits && !bf16_grad)
            rc = stepc_cuda_cross_entropy_fused_of_bf16(&ctx_, (const B*)L, T, D, n, classes,
                                                        scratch, loss, (F*)DL, 3);
          if (!masked && bf16_logits && bf16_grad)
            rc = stepc_cuda_cross_entropy_fused_of_bf16_bf16(&ctx_, (const B*)L, T, D, n,
                                                             classes, scratch, loss, (B*)DL, 3);
          if (masked && !bf16_logits && !bf16_grad)
            rc = stepc_cuda_cross_entropy_masked_fused(&ctx_, (const F*)L, T, C, D, n, classes,
                                                       ignore, smoothing, z, scratch, loss,
                                                       (F*)DL, 3);
          if (masked && !bf16_logits && bf16_grad)
            rc = stepc_cuda_cross_entropy_masked_fused_bf16(&ctx_, (const F*)L, T, C, D, n,
                                                            classes, ignore, smoothing, z,
                                                            scratch, loss, (B*)DL, 3);
          if (masked && bf16_logits && !bf16_grad)
            rc = stepc_cuda_cross_entropy_masked_fused_of_bf16(&ctx_, (const B*)L, T, C, D, n,
                                                               classes, ignore, smoothing, z,
                                                               scratch, loss, (F*)DL, 3);
          if (masked && bf16_logits && bf16_grad)
            rc = stepc_cuda_cross_entropy_masked_fused_of_bf16_bf16(
                &ctx_, (const B*)L, T, C, D, n, classes, ignore, smoothing, z, scratch, loss,
                (B*)DL, 3);
          ASSERT_EQ(rc, 0) << error_;
          EXPECT_NEAR(Down(loss, 1)[0], want, 1e-5 * std::fabs(want));
          Floats got = bf16_grad ? DownBf16((const B*)DL, n * classes)
                                 : Down((const F*)DL, n * classes);
          Floats dround(dwant);
          if (bf16_grad)
            for (float& v : dround) v = RoundBf16(v);
          EXPECT_LT(RelError(got, dround), bf16_grad ? 8e-3 : 1e-5);
          if (masked)  // row 1 is ignored: exactly 0
            for (int64_t j = 0; j < classes; ++j) ASSERT_EQ(got[classes + j], 0.0f);
          EXPECT_EQ(Status()[0], 0);
        }
  // A target out of range: the site given, its row, the id and the bound.
  const int64_t classes = 512;
  std::vector<int32_t> targets(n, 3);
  targets[9] = static_cast<int32_t>(classes + 5);
  float* DL = Zeros(n * classes);
  ASSERT_EQ(stepc_cuda_cross_entropy_fused(&ctx_, Up(Random(n * classes, 72, 1.0f)),
                                           Up(targets), Up(Floats{1.0f}), n, classes, Zeros(n),
                                           Zeros(1), DL, 9),
            0)
      << error_;
  EXPECT_EQ(Status(), (std::vector<int32_t>{9, 9, static_cast<int32_t>(classes + 5),
                                            static_cast<int32_t>(classes)}));
}

// argmax (ties: the first; NaN: largest), gather and its scatter-add along
// the middle dimension of [3, 7, 5], bit for bit (the sums run in index
// order on both), against a direct evaluation here.
TEST_F(CudaKernels, IndexOpsEqualCpu) {
  const int64_t outer = 3, size = 7, inner = 5, n = 4;
  Floats x = Random(outer * size * inner, 61, 1.0f);
  x[(0 * size + 2) * inner + 1] = x[(0 * size + 5) * inner + 1] = 9.0f;  // a tie: first wins
  x[(2 * size + 3) * inner + 4] = NAN;
  std::vector<int32_t> index(outer * n * inner);
  for (int64_t i = 0; i < static_cast<int64_t>(index.size()); ++i)
    index[i] = static_cast<int32_t>((i * 5) % 9 - 1);  // -1 and 7 out of range
  std::vector<int32_t> want_max(outer * inner);
  stepc_cpu_argmax(x.data(), outer, size, inner, want_max.data());
  EXPECT_EQ(want_max[0 * inner + 1], 2);
  EXPECT_EQ(want_max[2 * inner + 4], 3);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t k = want_max[o * inner + j];
      for (int64_t m = 0; m < size; ++m)
        if (!std::isnan(x[(o * size + k) * inner + j]))
          ASSERT_GE(x[(o * size + k) * inner + j], x[(o * size + m) * inner + j]);
    }
  int32_t* M = Up(std::vector<int32_t>(want_max.size(), -7));
  ASSERT_EQ(stepc_cuda_argmax(&ctx_, Up(x), outer, size, inner, M), 0) << error_;
  EXPECT_EQ(DownInts(M, want_max.size()), want_max);
  x[(2 * size + 3) * inner + 4] = 0.25f;  // gathered values compare by ==
  Floats want(outer * n * inner), want_grad(outer * size * inner, 0.0f), direct(want_grad);
  stepc_cpu_gather(x.data(), index.data(), outer, n, inner, size, want.data());
  Floats dy = Random(want.size(), 62, 1.0f);
  stepc_cpu_gather_grad(dy.data(), index.data(), outer, n, inner, size, want_grad.data());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t i = (o * n + k) * inner + j, id = index[i];
        const bool in = id >= 0 && id < size;
        ASSERT_EQ(want[i], in ? x[(o * size + id) * inner + j] : 0.0f);
        if (in) direct[(o * size + id) * inner + j] += dy[i];
      }
  EXPECT_EQ(want_grad, direct);
  float *X = Up(x), *G = Zeros(want.size()), *D = Zeros(want_grad.size());
  int32_t* I = Up(index);
  ASSERT_EQ(stepc_cuda_gather(&ctx_, X, I, outer, n, inner, size, G), 0) << error_;
  ASSERT_EQ(stepc_cuda_gather_grad(&ctx_, Up(dy), I, outer, n, inner, size, D), 0) << error_;
  EXPECT_EQ(Down(G, want.size()), want);
  EXPECT_EQ(Down(D, want_grad.size()), want_grad);
}

// The mixture-of-experts kernels: top_k's order (ties to the lower index,
// NaN largest) checked by hand on the CPU, then CPU and device equal on
// random data; dispatch's stable order, counts and zero tail with an
// expert id outside [0, E); combine and its gradient; grouped products in
// both layouts with an expert that gets no rows, against per-expert sums.
TEST_F(CudaKernels, MixtureOfExperts) {
  const int64_t rows = 37, n = 9, k = 3;
  Floats x = Random(rows * n, 70, 1.0f);
  const float tied[9] = {1, 3, 3, 2, 3, -1, 0, 3, 2};
  std::copy(tied, tied + 9, x.begin());
  x[n + 4] = NAN;
  Floats values(rows * k);
  std::vector<int32_t> indices(rows * k);
  stepc_cpu_top_k(x.data(), rows, n, k, values.data(), indices.data());
  EXPECT_EQ(std::vector<int32_t>(indices.begin(), indices.begin() + 3),
            (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(indices[3], 4);  // the NaN first
  float* V = Zeros(values.size());
  int32_t* I = Up(std::vector<int32_t>(indices.size(), -7));
  ASSERT_EQ(stepc_cuda_top_k(&ctx_, Up(x), rows, n, k, V, I), 0) << error_;
  EXPECT_EQ(DownInts(I, indices.size()), indices);

  const int64_t tokens = 29, top = 2, width = 12, experts = 4;
  std::vector<int32_t> route(tokens * top);
  std::mt19937 gen(71);
  for (int32_t& e : route) e = static_cast<int32_t>(gen() % experts);
  route[5] = 2;  // expert 3 gets no rows at all, an id outside [0, E) none
  for (int32_t& e : route)
    if (e == 3) e = 1;
  route[7] = 9;
  Floats h = Random(tokens * width, 72, 1.0f);
  Floats dispatched(tokens * top * width, NAN);
  std::vector<int32_t> counts(experts, -1);
  stepc_cpu_moe_dispatch(h.data(), route.data(), tokens, top, width, experts, 1, 0, 0,
                         dispatched.data(), counts.data());
  EXPECT_EQ(counts[3], 0);
  int64_t row = 0;
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t p = 0; p < tokens * top; ++p)
      if (route[p] == e) {
        for (int64_t c = 0; c < width; ++c)
          ASSERT_EQ(dispatched[row * width + c], h[(p / top) * width + c]) << "row " << row;
        ++row;
      }
  EXPECT_EQ(row, tokens * top - 1);
  for (int64_t c = 0; c < width; ++c) EXPECT_EQ(dispatched[row * width + c], 0.0f);
  const int64_t scratch = 3 * experts + tokens * top + 1;
  float* Rows = Zeros(dispatched.size());
  int32_t *Route = Up(route), *Counts = Up(std::vector<int32_t>(experts, -1));
  ASSERT_EQ(stepc_cuda_moe_dispatch(&ctx_, Up(h), Route, tokens, top, width, experts, 1, 0,
                                    0, Zeros(scratch), Rows, Counts),
            0)
      << error_;
  EXPECT_EQ(Down(Rows, dispatched.size()), dispatched);
  EXPECT_EQ(DownInts(Counts, experts), counts);

  Floats gates = Random(tokens * top, 73, 1.0f), out(tokens * width);
  stepc_cpu_moe_combine(dispatched.data(), gates.data(), route.data(), tokens, top, width,
                        experts, 1, 0, 0, out.data());
  Floats dy = Random(out.size(), 74, 1.0f), drows(dispatched.size(), NAN), dgates(gates.size());
  stepc_cpu_moe_combine_grad(dy.data(), dispatched.data(), gates.data(), route.data(), tokens,
                             top, width, experts, 1, 0, 0, drows.data(), dgates.data());
  EXPECT_EQ(dgates[7], 0.0f);
  float *G = Up(gates), *Out = Zeros(out.size()), *DRows = Zeros(drows.size()),
        *DGates = Zeros(dgates.size());
  ASSERT_EQ(stepc_cuda_moe_combine(&ctx_, Rows, G, Route, tokens, top, width, experts, 1, 0,
                                   0, Zeros(scratch), Out),
            0)
      << error_;
  ASSERT_EQ(stepc_cuda_moe_combine_grad(&ctx_, Up(dy), Rows, G, Route, tokens, top, width,
                                        experts, 1, 0, 0, Zeros(scratch), DRows, DGates),
            0)
      << error_;
  EXPECT_LT(RelError(Down(Out, out.size()), out), 1e-6);
  EXPECT_LT(RelError(Down(DRows, drows.size()), drows), 1e-6);
  EXPECT_LT(RelError(Down(DGates, dgates.size()), dgates), 1e-6);

  const int64_t m = tokens * top, kk = width, nn = 10;
  for (int transpose_b : {0, 1}) {
    Floats w = Random(experts * kk * nn, 75 + transpose_b, 1.0f), y(m * nn, NAN),
           want(m * nn, 0.0f), g = Random(m * nn, 77, 1.0f), dw(experts * kk * nn, NAN),
           want_dw(dw.size(), 0.0f);
    stepc_cpu_grouped_matmul(dispatched.data(), w.data(), counts.data(), m, kk, nn, experts,
                             1, transpose_b, y.data());
    stepc_cpu_grouped_matmul_weight_grad(dispatched.data(), g.data(), counts.data(), m, kk, nn,
                                         experts, 1, transpose_b, dw.data());
    int64_t begin = 0;
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t r = begin; r < begin + counts[e]; ++r)
        for (int64_t j = 0; j < nn; ++j)
          for (int64_t c = 0; c < kk; ++c) {
            const int64_t at = transpose_b ? e * nn * kk + j * kk + c : e * kk * nn + c * nn + j;
            want[r * nn + j] += dispatched[r * kk + c] * w[at];
            want_dw[at] += dispatched[r * kk + c] * g[r * nn + j];
          }
      begin += counts[e];
    }
    EXPECT_LT(RelError(y, want), 1e-5) << "transpose_b " << transpose_b;
    EXPECT_LT(RelError(dw, want_dw), 1e-5) << "transpose_b " << transpose_b;
    float *Y = Zeros(y.size()), *DW = Zeros(dw.size());
    ASSERT_EQ(stepc_cuda_grouped_matmul(&ctx_, Rows, Up(w), Counts, m, kk, nn, experts,
                                        1, transpose_b, Y),
              0)
        << error_;
    ASSERT_EQ(stepc_cuda_grouped_matmul_weight_grad(&ctx_, Rows, Up(g), Counts, m, kk, nn,
                                                    experts, 1, transpose_b, DW),
              0)
        << error_;
    EXPECT_LT(RelError(Down(Y, y.size()), y), 1e-5);
    EXPECT_LT(RelError(Down(DW, dw.size()), dw), 1e-5);
  }

  // Two expert groups (expert parallelism): the rows in two blocks, the
  // GPU's as the CPU's; the grouped products over two blocks of counts.
  const int64_t groups = 2, rows2 = groups * tokens * top;
  Floats grouped(rows2 * width, NAN), combined(tokens * width), gd(rows2 * width, NAN),
      gg(gates.size());
  std::vector<int32_t> counts2(experts);
  stepc_cpu_moe_dispatch(h.data(), route.data(), tokens, top, width, experts, groups, 0, 0,
                         grouped.data(), counts2.data());
  EXPECT_EQ(counts2, counts);
  stepc_cpu_moe_combine(grouped.data(), gates.data(), route.data(), tokens, top, width, experts,
                        groups, 0, 0, combined.data());
  EXPECT_LT(RelError(combined, out), 1e-6);  // the same sum, other rows
  stepc_cpu_moe_combine_grad(dy.data(), grouped.data(), gates.data(), route.data(), tokens, top,
                             width, experts, groups, 0, 0, gd.data(), gg.data());
  EXPECT_LT(RelError(gg, dgates), 1e-6);
  const int64_t scratch2 = 3 * experts + tokens * top + groups;
  float *Rows2 = Zeros(grouped.size()), *GD = Zeros(gd.size()), *GG = Zeros(gg.size());
  ASSERT_EQ(stepc_cuda_moe_dispatch(&ctx_, Up(h), Route, tokens, top, width, experts, groups,
                                    0, 0, Zeros(scratch2), Rows2, Counts),
            0)
      << error_;
  EXPECT_EQ(Down(Rows2, grouped.size()), grouped);
  ASSERT_EQ(stepc_cuda_moe_combine_grad(&ctx_, Up(dy), Rows2, G, Route, tokens, top, width,
                                        experts, groups, 0, 0, Zeros(scratch2), GD, GG),
            0)
      << error_;
  EXPECT_LT(RelError(Down(GD, gd.size()), gd), 1e-6);
  // Each block's counts: experts 0-1 in block 0's rows, 2-3 in block 1's.
  std::vector<int32_t> block_counts = {counts[0], counts[1], 0, 0, 0, 0, counts[2], counts[3]};
  Floats w = Random(experts * kk * nn, 79, 1.0f), y2(rows2 * nn), dw2(experts * kk * nn),
         y1(m * nn), g2 = Random(rows2 * nn, 80, 1.0f);
  stepc_cpu_grouped_matmul(grouped.data(), w.data(), block_counts.data(), rows2, kk, nn, experts,
                           groups, 0, y2.data());
  stepc_cpu_grouped_matmul(dispatched.data(), w.data(), counts.data(), m, kk, nn, experts, 1, 0,
                           y1.data());
  stepc_cpu_grouped_matmul_weight_grad(grouped.data(), g2.data(), block_counts.data(), rows2, kk,
                                       nn, experts, groups, 0, dw2.data());
  float *Y2 = Zeros(y2.size()), *DW2 = Zeros(dw2.size());
  int32_t* BlockCounts = Up(block_counts);
  ASSERT_EQ(stepc_cuda_grouped_matmul(&ctx_, Rows2, Up(w), BlockCounts, rows2, kk, nn, experts,
                                      groups, 0, Y2),
            0)
      << error_;
  ASSERT_EQ(stepc_cuda_grouped_matmul_weight_grad(&ctx_, Rows2, Up(g2), BlockCounts, rows2, kk,
                                                  nn, experts, groups, 0, DW2),
            0)
      << error_;
  EXPECT_LT(RelError(Down(Y2, y2.size()), y2), 1e-5);
  EXPECT_LT(RelError(Down(DW2, dw2.size()), dw2), 1e-5);
  // Block 0 holds experts 0-1's rows as the one-block dispatch did.
  const int64_t first = counts[0] + counts[1];
  EXPECT_EQ(Floats(y2.begin(), y2.begin() + first * nn), Floats(y1.begin(), y1.begin() + first * nn));
}

// A capacity of C pairs per expert in each segment (sequence) of S tokens:
// the first C in (token, k) order keep their rows, the rest are dropped
// (not counted, no combine term), in blocks of stepc_moe_block_rows.
TEST_F(CudaKernels, MixtureOfExpertsWithCapacity) {
  const int64_t tokens = 12, top = 2, width = 5, experts = 4, groups = 2, cap = 2, seg = 4;
  std::vector<int32_t> route(tokens * top);
  std::mt19937 gen(91);
  for (int32_t& e : route) e = static_cast<int32_t>(gen() % 2);  // experts 0 and 1 crowded
  route[3] = 3;
  const int64_t block = stepc_moe_block_rows(tokens, top, experts, groups, cap, seg);
  ASSERT_EQ(block, (tokens / seg) * (experts / groups) * cap);  // 12 < 24 pairs
  // The rows a reference routing keeps: per block its experts in order,
  // each expert's kept pairs in pair order.
  std::vector<int64_t> kept_pair;
  std::vector<int32_t> want_counts(experts, 0);
  std::vector<int64_t> block_of;
  for (int64_t e = 0; e < experts; ++e) {
    std::vector<int64_t> taken(tokens / seg, 0);
    for (int64_t p = 0; p < tokens * top; ++p)
      if (route[p] == e && taken[p / top / seg]++ < cap) {
        kept_pair.push_back(p);
        block_of.push_back(e / (experts / groups));
        ++want_counts[e];
      }
  }
  Floats h = Random(tokens * width, 92, 1.0f), rows(groups * block * width, NAN);
  std::vector<int32_t> counts(experts, -1);
  stepc_cpu_moe_dispatch(h.data(), route.data(), tokens, top, width, experts, groups, cap, seg,
                         rows.data(), counts.data());
  EXPECT_EQ(counts, want_counts);
  std::vector<int64_t> filled(groups, 0);
  for (size_t i = 0; i < kept_pair.size(); ++i) {
    const int64_t row = block_of[i] * block + filled[block_of[i]]++;
    for (int64_t c = 0; c < width; ++c)
      ASSERT_EQ(rows[row * width + c], h[(kept_pair[i] / top) * width + c]) << "row " << row;
  }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = filled[g]; r < block; ++r)
      for (int64_t c = 0; c < width; ++c) ASSERT_EQ(rows[(g * block + r) * width + c], 0.0f);
  // combine: a token's output sums its kept pairs only.
  Floats gates = Random(tokens * top, 93, 1.0f), out(tokens * width), want(tokens * width, 0.0f);
  stepc_cpu_moe_combine(rows.data(), gates.data(), route.data(), tokens, top, width, experts,
                        groups, cap, seg, out.data());
  for (int64_t p : kept_pair)
    for (int64_t c = 0; c < width; ++c)
      want[(p / top) * width + c] += gates[p] * h[(p / top) * width + c];
  EXPECT_LT(RelError(out, want), 1e-6);
  Floats dy = Random(out.size(), 94, 1.0f), drows(rows.size(), NAN), dgates(gates.size(), NAN);
  stepc_cpu_moe_combine_grad(dy.data(), rows.data(), gates.data(), route.data(), tokens, top,
                             width, experts, groups, cap, seg, drows.data(), dgates.data());
  int64_t dropped = 0;
  for (int64_t p = 0; p < tokens * top; ++p)
    if (std::find(kept_pair.begin(), kept_pair.end(), p) == kept_pair.end()) {
      EXPECT_EQ(dgates[p], 0.0f) << "dropped pair " << p;
      ++dropped;
    }
  EXPECT_GT(dropped, 0);
  // The GPU's, as the CPU's.
  const int64_t scratch = 3 * experts + tokens * top + groups;
  float *Rows = Zeros(rows.size()), *G = Up(gates), *Out = Zeros(out.size()),
        *DRows = Zeros(drows.size()), *DGates = Zeros(dgates.size());
  int32_t *Route = Up(route), *Counts = Up(std::vector<int32_t>(experts, -1));
  ASSERT_EQ(stepc_cuda_moe_dispatch(&ctx_, Up(h), Route, tokens, top, width, experts, groups, cap,
                                    seg, Zeros(scratch), Rows, Counts),
            0)
      << error_;
  EXPECT_EQ(Down(Rows, rows.size()), rows);
  EXPECT_EQ(DownInts(Counts, experts), counts);
  ASSERT_EQ(stepc_cuda_moe_combine(&ctx_, Rows, G, Route, tokens, top, width, experts, groups,
                                   cap, seg, Zeros(scratch), Out),
            0)
      << error_;
  ASSERT_EQ(stepc_cuda_moe_combine_grad(&ctx_, Up(dy), Rows, G, Route, tokens, top, width,
                                        experts, groups, cap, seg, Zeros(scratch), DRows, DGates),
            0)
      << error_;
  EXPECT_LT(RelError(Down(Out, out.size()), out), 1e-6);
  EXPECT_LT(RelError(Down(DRows, drows.size()), drows), 1e-6);
  EXPECT_LT(RelError(Down(DGates, dgates.size()), dgates), 1e-6);
}

TEST_F(CudaKernels, CrossEntropyAndEmbeddingWithIdChecks) {
  const int64_t n = 77, classes = 1000, d = 48;
  Floats logits = Random(n * classes, 50, 3.0f);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = (i * 37) % classes;
  float want = 0;
  stepc_cpu_cross_entropy(logits.data(), targets.data(), n, classes, &want);
  float *L = Up(logits), *loss = Zeros(1), *scratch = Zeros(n);
  int32_t* T = Up(targets);
  ASSERT_EQ(stepc_cuda_cross_entropy(&ctx_, L, T, n, classes, scratch, loss, 1), 0) << error_;
  EXPECT_NEAR(Down(loss, 1)[0], want, 1e-5 * std::fabs(want));
  Floats dlogits(n * classes);
  const float dloss = 0.7f;
  stepc_cpu_cross_entropy_grad(&dloss, logits.data(), targets.data(), n, classes, dlogits.data());
  float* DL = Zeros(dlogits.size());
  ASSERT_EQ(stepc_cuda_cross_entropy_grad(&ctx_, Up(Floats{dloss}), L, T, n, classes, DL, 2), 0);
  EXPECT_LT(RelError(Down(DL, dlogits.size()), dlogits), 1e-5);
  EXPECT_EQ(Status()[0], 0);

  const int64_t rows = 50;
  Floats table = Random(rows * d, 51), dy = Random(n * d, 52), out(n * d), dtable(rows * d);
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = (i * 7) % rows;  // repeated ids
  stepc_cpu_embedding(table.data(), ids.data(), n, rows, d, out.data());
  stepc_cpu_embedding_grad(dy.data(), ids.data(), n, rows, d, dtable.data());
  int32_t* I = Up(ids);
  float *O = Zeros(out.size()), *DT = Zeros(dtable.size());
  ASSERT_EQ(stepc_cuda_embedding(&ctx_, Up(table), I, n, rows, d, O, 3), 0) << error_;
  ASSERT_EQ(stepc_cuda_embedding_grad(&ctx_, Up(dy), I, n, rows, d, DT, 4), 0) << error_;
  EXPECT_EQ(Down(O, out.size()), out);
  EXPECT_LT(RelError(Down(DT, dtable.size()), dtable), 1e-6);

  // An id out of range: the first failing site, its position, id and bound.
  ids[5] = rows + 3;
  ASSERT_EQ(stepc_cuda_embedding(&ctx_, Up(table), Up(ids), n, rows, d, O, 9), 0);
  EXPECT_EQ(Status(), (std::vector<int32_t>{9, 5, int32_t(rows + 3), int32_t(rows)}));
}

struct AttentionCase {
  int64_t batch, t, heads, kv_heads, dh;
  int causal;
};

class CudaAttention : public CudaKernels,
                      public ::testing::WithParamInterface<AttentionCase> {
 protected:
  // q, k, v on the host; Q, K, V, D (dO), O and lse their separate device
  // tensors and the forward's results on them.
  void ExpectPackedMatchesSeparate(const AttentionCase& c, double scale, const Floats& q,
                                   const Floats& k, const Floats& v, const void* const (&qkv)[4],
                                   int type, int out_type, const void* O, const float* lse,
                                   char* scratch, const std::string& what);
};

TEST_P(CudaAttention, ForwardAndBackwardMatchTheCpu) {
  const AttentionCase c = GetParam();
  const double scale = 1.0 / std::sqrt(double(c.dh));
  const int64_t qn = c.batch * c.t * c.heads * c.dh, kn = c.batch * c.t * c.kv_heads * c.dh;
  Floats q = Random(qn, 60), k = Random(kn, 61), v = Random(kn, 62), dout = Random(qn, 63);
  // f32; bf16 on the scalar kernels (STEPC_ATTENTION=scalar): the same math
  // on rounded inputs; bf16 on tensor cores, where P and dS are rounded to
  // bf16 for the products too (about 2^-9 relative each).
  // cuDNN (bf16 head dims 64 and 128; STEPC_ATTENTION=cudnn makes a call it
  // does not take an error): its bf16 output, its gradients widened to
  // f32 by our glue (on the host, the emulation's stand-in runs our
  // kernels through the same glue); its deterministic backward gives the
  // same gradients from the saved and the recomputed forward too.
  struct Mode {
    const char* engine;
    bool bf16;
    double out_tol, grad_tol;
  };
  for (Mode mode : {Mode{"own", false, 1e-5, 1e-4}, Mode{"scalar", true, 1e-5, 1e-4},
                    Mode{"own", true, 3e-3, 1e-2}, Mode{"cudnn", true, 5e-3, 1e-2}}) {
    const bool bf16 = mode.bf16;
    const bool cudnn = std::string(mode.engine) == "cudnn";
    if (cudnn && !stepc::cuda::CudnnAttentionHeadDim(c.dh)) continue;
    setenv("STEPC_ATTENTION", mode.engine, 1);
    Floats qr(q), kr(k), vr(v), dr(dout);
    if (bf16)
      for (Floats* f : {&qr, &kr, &vr, &dr})
        for (float& x : *f) x = RoundBf16(x);
    Floats out(qn), dq(qn), dk(kn), dv(kn);
    stepc_cpu_attention(qr.data(), kr.data(), vr.data(), c.batch, c.t, c.t, c.heads, c.kv_heads,
                        c.dh, c.causal, scale, out.data());
    stepc_cpu_attention_grad(dr.data(), qr.data(), kr.data(), vr.data(), c.batch, c.t, c.t,
                             c.heads, c.kv_heads, c.dh, c.causal, scale, dq.data(), dk.data(),
                             dv.data());
    const void *Q = bf16 ? (void*)UpBf16(q) : Up(q), *K = bf16 ? (void*)UpBf16(k) : Up(k),
               *V = bf16 ? (void*)UpBf16(v) : Up(v), *D = bf16 ? (void*)UpBf16(dout) : Up(dout);
    const int type = bf16 ? STEPC_CUDA_BF16 : STEPC_CUDA_F32;
    const int out_type = cudnn ? STEPC_CUDA_BF16 : STEPC_CUDA_F32;
    void* O = Alloc(qn * (cudnn ? 2 : 4));
    float *DQ = Zeros(qn), *DK = Zeros(kn), *DV = Zeros(kn);
    float* lse = Zeros(c.batch * c.heads * c.t);
    char* scratch = static_cast<char*>(Alloc(stepc::cuda::AttentionGradScratchBytesFor(
        c.batch, c.t, c.t, c.heads, c.kv_heads, c.dh, /*saved=*/false, bf16,
        /*f32_grads=*/true)));
    ASSERT_EQ(stepc_cuda_attention(&ctx_, Q, K, V, type, c.batch, c.t, c.t, c.heads, c.kv_heads,
                                   c.dh, c.causal, scale, O, out_type, lse),
              0)
        << error_;
    // The backward recomputing the forward, and from the forward's saved
    // output and log-sum-exp: the same gradients.
    ASSERT_EQ(stepc_cuda_attention_grad(&ctx_, D, Q, K, V, type, c.batch, c.t, c.t, c.heads,
                                        c.kv_heads, c.dh, c.causal, scale, scratch, nullptr, 0,
                                        nullptr, DQ, DK, DV, STEPC_CUDA_F32),
              0)
        << error_;
    float *SQ = Zeros(qn), *SK = Zeros(kn), *SV = Zeros(kn);
    ASSERT_EQ(stepc_cuda_attention_grad(&ctx_, D, Q, K, V, type, c.batch, c.t, c.t, c.heads,
                                        c.kv_heads, c.dh, c.causal, scale, scratch, O,
                                        out_type, lse, SQ, SK, SV, STEPC_CUDA_F32),
              0)
        << error_;
    EXPECT_EQ(Down(SQ, qn), Down(DQ, qn));
    EXPECT_EQ(Down(SK, kn), Down(DK, kn));
    EXPECT_EQ(Down(SV, kn), Down(DV, kn));
    const std::string what = std::string(bf16 ? "bf16 " : "f32 ") + mode.engine;
    if (cudnn) std::printf("attention engine: %s\n", stepc_cudnn_attention_engine());
    const Floats got = cudnn ? DownBf16(static_cast<const __nv_bfloat16*>(O), qn)
                             : Down(static_cast<const float*>(O), qn);
    EXPECT_LT(RelError(got, out), mode.out_tol) << what;
    EXPECT_LT(RelError(Down(DQ, qn), dq), mode.grad_tol) << what;
    EXPECT_LT(RelError(Down(DK, kn), dk), mode.grad_tol) << what;
    EXPECT_LT(RelError(Down(DV, kn), dv), mode.grad_tol) << what;
    ExpectPackedMatchesSeparate(c, scale, q, k, v, {Q, K, V, D}, type, out_type, O, lse, scratch,
                                what);
  }
  unsetenv("STEPC_ATTENTION");
}

// The packed projection: the same q, k, v as columns of one [B, T, W]
// tensor (k first, so the offsets matter), read in place, and dQ, dK, dV
// written into the same columns of one gradient: bit for bit what the
// separate tensors give, forward (output and log-sum-exp) and backward.
// Our kernels only address differently, so they agree exactly everywhere;
// real cuDNN may pick another engine for the strided layout, so on a GPU
// its two layouts agree to its own tolerances.
void CudaAttention::ExpectPackedMatchesSeparate(const AttentionCase& c, double scale,
                                                const Floats& q, const Floats& k,
                                                const Floats& v, const void* const (&dev)[4],
                                                int type, int out_type, const void* O,
                                                const float* lse, char* scratch,
                                                const std::string& what) {
  const bool bf16 = type == STEPC_CUDA_BF16;
#ifdef STEPC_CUDA_EMULATION
  const bool exact = true;
#else
  const bool exact = what.find("cudnn") == std::string::npos;
#endif
  auto expect_same = [&](const Floats& got, const Floats& want, const char* part) {
    if (exact)
      EXPECT_EQ(got, want) << what << " packed " << part;
    else
      EXPECT_LT(RelError(got, want), 1e-2) << what << " packed " << part;
  };
  const int64_t rows = c.batch * c.t, qw = c.heads * c.dh, kvw = c.kv_heads * c.dh;
  const int64_t w = qw + 2 * kvw, koff = 0, qoff = kvw, voff = kvw + qw;
  const int64_t qn = rows * qw, kn = rows * kvw, stats = c.batch * c.heads * c.t;
  Floats qkv(rows * w);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(&q[r * qw], qw, &qkv[r * w + qoff]);
    std::copy_n(&k[r * kvw], kvw, &qkv[r * w + koff]);
    std::copy_n(&v[r * kvw], kvw, &qkv[r * w + voff]);
  }
  const void* QKV = bf16 ? (void*)UpBf16(qkv) : Up(qkv);
  auto grab = [&](const void* p, int64_t n, int t) {
    return t == STEPC_CUDA_BF16 ? DownBf16(static_cast<const __nv_bfloat16*>(p), n)
                                : Down(static_cast<const float*>(p), n);
  };
  void* PO = Alloc(qn * (out_type == STEPC_CUDA_BF16 ? 2 : 4));
  float* PL = Zeros(stats);
  ASSERT_EQ(stepc_cuda_attention_packed(&ctx_, QKV, w, qoff, koff, voff, type, c.batch, c.t,
                                        c.heads, c.kv_heads, c.dh, c.causal, scale, PO, out_type,
                                        PL),
            0)
      << error_;
  expect_same(grab(PO, qn, out_type), grab(O, qn, out_type), "forward");
  expect_same(Down(PL, stats), Down(lse, stats), "log-sum-exp");
  // Gradients in the input's type (cuDNN writes bf16 ones).
  const int gb = bf16 ? 2 : 4;
  void *GQ = Alloc(qn * gb), *GK = Alloc(kn * gb), *GV = Alloc(kn * gb), *PG = Alloc(rows * w * gb);
  const void* D = dev[3];
  ASSERT_EQ(stepc_cuda_attention_grad(&ctx_, D, dev[0], dev[1], dev[2], type, c.batch, c.t, c.t,
                                      c.heads, c.kv_heads, c.dh, c.causal, scale, scratch, O,
                                      out_type, lse, GQ, GK, GV, type),
            0)
      << error_;
  ASSERT_EQ(stepc_cuda_attention_grad_packed(&ctx_, D, QKV, w, qoff, koff, voff, type, c.batch,
                                             c.t, c.heads, c.kv_heads, c.dh, c.causal, scale,
                                             scratch, O, out_type, lse, PG, type),
            0)
      << error_;
  const Floats packed = grab(PG, rows * w, type);
  Floats pq(qn), pk(kn), pv(kn);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(&packed[r * w + qoff], qw, &pq[r * qw]);
    std::copy_n(&packed[r * w + koff], kvw, &pk[r * kvw]);
    std::copy_n(&packed[r * w + voff], kvw, &pv[r * kvw]);
  }
  expect_same(pq, grab(GQ, qn, type), "dQ");
  expect_same(pk, grab(GK, kn, type), "dK");
  expect_same(pv, grab(GV, kn, type), "dV");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention,
                         ::testing::Values(AttentionCase{2, 64, 4, 4, 16, 1},   // gpt-small
                                           AttentionCase{1, 70, 4, 2, 64, 1},   // GQA, ragged
                                           AttentionCase{2, 33, 3, 1, 32, 0},   // MQA, full
                                           AttentionCase{1, 130, 2, 2, 128, 1}, // Llama head
                                           AttentionCase{1, 1, 2, 2, 40, 1},    // T = 1
                                           // head dim 20 (rows staged an element at a time),
                                           // 2 tiles each way
                                           AttentionCase{2, 90, 3, 3, 20, 1},
                                           AttentionCase{1, 40, 2, 1, 256, 1}));  // widest head

// step.attention's additive mask against the CPU's masked kernels: a key
// padding mask ([B, 1, 1, Tk], -inf on padded keys; the second sequence
// padded whole, so its rows give 0 and their gradients 0) and a finite
// per-head bias on causal scores ([1, H, Tq, Tk], ALiBi's shape), on f32,
// on bf16 through the scalar kernels (STEPC_ATTENTION=scalar) and on bf16
// tensor cores, which add the mask to the scores in registers (their
// tolerances as above); the backward from the saved forward and from a
// recomputed one alike.
TEST_F(CudaKernels, MaskedAttentionMatchesTheCpu) {
  struct Case {
    int64_t t, heads, kv_heads, dh;
    int causal;
    bool padding;  // else the per-head bias
  };
  for (Case c : {Case{70, 4, 2, 64, 0, true}, Case{70, 4, 2, 64, 1, false},
                 Case{33, 2, 1, 32, 1, true}, Case{40, 2, 2, 128, 1, false}}) {
    const int64_t batch = 2, t = c.t;
    const double scale = 1.0 / std::sqrt(double(c.dh));
    const int64_t qn = batch * t * c.heads * c.dh, kn = batch * t * c.kv_heads * c.dh;
    Floats q = Random(qn, 80), k = Random(kn, 81), v = Random(kn, 82), dout = Random(qn, 83);
    Floats mask;
    int64_t mb = 0, mh = 0, mr = 0;
    if (c.padding) {
      mask.assign(batch * t, 0.0f);
      for (int64_t j = t - 5; j < t; ++j) mask[j] = -INFINITY;
      for (int64_t j = 0; j < t; ++j) mask[t + j] = -INFINITY;
      mb = t;
    } else {
      mask.assign(c.heads * t * t, 0.0f);
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t i = 0; i < t; ++i)
          for (int64_t j = 0; j < t; ++j)
            mask[(h * t + i) * t + j] = -std::ldexp(1.0, -int(h + 1)) * float(i - j);
      mh = t * t;
      mr = t;
    }
    const float* M = Up(mask);
    struct Mode {
      const char* engine;
      bool bf16;
      double out_tol, grad_tol;
    };
    for (Mode mode : {Mode{"own", false, 1e-5, 1e-4}, Mode{"scalar", true, 1e-5, 1e-4},
                      Mode{"own", true, 3e-3, 1e-2}}) {
      setenv("STEPC_ATTENTION", mode.engine, 1);
      const bool bf16 = mode.bf16;
      Floats qr(q), kr(k), vr(v), dr(dout);
      if (bf16)
        for (Floats* f : {&qr, &kr, &vr, &dr})
          for (float& x : *f) x = RoundBf16(x);
      Floats out(qn), dq(qn), dk(kn), dv(kn);
      stepc_cpu_attention_masked(qr.data(), kr.data(), vr.data(), mask.data(), batch, t, t,
                                 c.heads, c.kv_heads, c.dh, c.causal, scale, mb, mh, mr,
                                 out.data());
      stepc_cpu_attention_grad_masked(dr.data(), qr.data(), kr.data(), vr.data(), mask.data(),
                                      batch, t, t, c.heads, c.kv_heads, c.dh, c.causal, scale,
                                      mb, mh, mr, dq.data(), dk.data(), dv.data());
      const void *Q = bf16 ? (void*)UpBf16(q) : Up(q), *K = bf16 ? (void*)UpBf16(k) : Up(k),
                 *V = bf16 ? (void*)UpBf16(v) : Up(v),
                 *D = bf16 ? (void*)UpBf16(dout) : Up(dout);
      const int type = bf16 ? STEPC_CUDA_BF16 : STEPC_CUDA_F32;
      float *O = Zeros(qn), *lse = Zeros(batch * c.heads * t);
      char* scratch = static_cast<char*>(Alloc(stepc::cuda::AttentionGradScratchBytesFor(
          batch, t, t, c.heads, c.kv_heads, c.dh, /*saved=*/false, bf16, /*f32_grads=*/true)));
      ASSERT_EQ(stepc_cuda_attention_masked(&ctx_, Q, K, V, type, batch, t, t, c.heads,
                                            c.kv_heads, c.dh, c.causal, scale, M, mb, mh, mr, O,
                                            STEPC_CUDA_F32, lse),
                0)
          << error_;
      float *DQ = Zeros(qn), *DK = Zeros(kn), *DV = Zeros(kn);
      float *SQ = Zeros(qn), *SK = Zeros(kn), *SV = Zeros(kn);
      ASSERT_EQ(stepc_cuda_attention_grad_masked(&ctx_, D, Q, K, V, type, batch, t, t, c.heads,
                                                 c.kv_heads, c.dh, c.causal, scale, M, mb, mh,
                                                 mr, scratch, nullptr, 0, nullptr, DQ, DK, DV,
                                                 STEPC_CUDA_F32),
                0)
          << error_;
      ASSERT_EQ(stepc_cuda_attention_grad_masked(&ctx_, D, Q, K, V, type, batch, t, t, c.heads,
                                                 c.kv_heads, c.dh, c.causal, scale, M, mb, mh,
                                                 mr, scratch, O, STEPC_CUDA_F32, lse, SQ, SK,
                                                 SV, STEPC_CUDA_F32),
                0)
          << error_;
      const std::string what = std::string(bf16 ? "bf16 " : "f32 ") + mode.engine + " dh " +
                               std::to_string(c.dh) + (c.padding ? " padding" : " bias");
      EXPECT_EQ(Down(SQ, qn), Down(DQ, qn)) << what;
      EXPECT_EQ(Down(SK, kn), Down(DK, kn)) << what;
      EXPECT_EQ(Down(SV, kn), Down(DV, kn)) << what;
      const Floats got = Down(O, qn);
      EXPECT_LT(RelError(got, out), mode.out_tol) << what;
      EXPECT_LT(RelError(Down(DQ, qn), dq), mode.grad_tol) << what;
      EXPECT_LT(RelError(Down(DK, kn), dk), mode.grad_tol) << what;
      EXPECT_LT(RelError(Down(DV, kn), dv), mode.grad_tol) << what;
      if (c.padding) {  // the second sequence's rows, padded whole: 0, lse +inf
        const int64_t half = qn / 2;
        EXPECT_EQ(std::count(got.begin() + half, got.end(), 0.0f), half) << what;
        const Floats l = Down(lse, batch * c.heads * t);
        EXPECT_TRUE(std::all_of(l.begin() + l.size() / 2, l.end(),
                                [](float x) { return x == INFINITY; }))
            << what;
      }
    }
  }
  unsetenv("STEPC_ATTENTION");
}

// A call with ctx->prepare set (stepc_prepare_v1, before the first step)
// builds what it needs and launches nothing: on our kernels and through
// cuDNN (on the host, its stand-in), the packed forward and backward of a
// grouped-query bf16 attention with head dim 64 leave every output as it
// was; the same calls without the flag write them.
TEST_F(CudaKernels, PreparedAttentionRunsNothing) {
  const int64_t batch = 2, t = 48, heads = 4, kv_heads = 2, dh = 64;
  const int64_t width = (heads + 2 * kv_heads) * dh, qn = batch * t * heads * dh;
  const double scale = 0.125;
  const __nv_bfloat16* qkv = UpBf16(Random(batch * t * width, 70));
  const __nv_bfloat16* dout = UpBf16(Random(qn, 71));
  char* scratch = static_cast<char*>(Alloc(stepc::cuda::AttentionGradScratchBytesFor(
      batch, t, t, heads, kv_heads, dh, /*saved=*/true, /*bf16=*/true, /*f32_grads=*/false)));
  for (const char* engine : {"own", "cudnn"}) {
    setenv("STEPC_ATTENTION", engine, 1);
    for (int prepare : {1, 0}) {
      auto* out = static_cast<__nv_bfloat16*>(Alloc(qn * 2));
      auto* dqkv = static_cast<__nv_bfloat16*>(Alloc(batch * t * width * 2));
      float* lse = Zeros(batch * heads * t);
      ctx_.prepare = prepare;
      ASSERT_EQ(stepc_cuda_attention_packed(&ctx_, qkv, width, 0, heads * dh,
                                            (heads + kv_heads) * dh, STEPC_CUDA_BF16, batch, t,
                                            heads, kv_heads, dh, 1, scale, out, STEPC_CUDA_BF16,
                                            lse),
                0)
          << engine << ": " << error_;
      ASSERT_EQ(stepc_cuda_attention_grad_packed(
                    &ctx_, dout, qkv, width, 0, heads * dh, (heads + kv_heads) * dh,
                    STEPC_CUDA_BF16, batch, t, heads, kv_heads, dh, 1, scale, scratch, out,
                    STEPC_CUDA_BF16, lse, dqkv, STEPC_CUDA_BF16),
                0)
          << engine << ": " << error_;
      ctx_.prepare = 0;
      auto written = [](const Floats& f) {
        return std::count_if(f.begin(), f.end(), [](float x) { return x != 0.0f; });
      };
      const Floats o = DownBf16(out, qn), l = Down(lse, batch * heads * t),
                   g = DownBf16(dqkv, batch * t * width);
      if (prepare) {
        EXPECT_EQ(written(o) + written(l) + written(g), 0) << engine;
      } else {
        EXPECT_GT(written(o), qn / 2) << engine;
        EXPECT_GT(written(g), batch * t * width / 2) << engine;
      }
    }
  }
  unsetenv("STEPC_ATTENTION");
}

// The parameters' bf16 copies in one launch per 64: 70 tensors of every
// size round to nearest even, bit for bit as the host does.
TEST_F(CudaKernels, Bf16CopiesOfManyParameters) {
  const int count = 70;
  std::vector<stepc_bf16_copy> table;
  std::vector<Floats> sources;
  for (int t = 0; t < count; ++t) {
    const int64_t n = t % 9 == 0 ? 70000 + t : 1 + 31 * t;
    sources.push_back(Random(n, 500 + t, 1.0f + t));
    table.push_back({Up(sources.back()), static_cast<__nv_bfloat16*>(Alloc(n * 2)), n});
  }
  ASSERT_EQ(stepc_cuda_bf16_copies(&ctx_, table.data(), count), 0) << error_;
  for (int t = 0; t < count; ++t) {
    const Floats got = DownBf16(table[t].dst, table[t].n);
    for (int64_t i = 0; i < table[t].n; ++i)
      ASSERT_EQ(got[i], RoundBf16(sources[t][i])) << "tensor " << t << " element " << i;
  }
}

// The gradient clipping's squared norm of many tensors in a few launches:
// 70 tensors (two tables) from 1 element to several chunks, against the sum
// in double; the same bits on a second run (a fixed order).
TEST_F(CudaKernels, MultiTensorSquaredNormsSumInOrder) {
  const int count = 70;
  std::vector<stepc_norm_tensor> table;
  std::vector<int64_t> sizes;
  double want = 0.0;
  for (int t = 0; t < count; ++t) {
    const int64_t n = t % 7 == 0 ? 300000 + t : 1 + 97 * t;
    const Floats x = Random(n, 300 + t, 0.1f * (1 + t % 5));
    for (float v : x) want += double(v) * v;
    table.push_back({Up(x), n});
    sizes.push_back(n);
  }
  const int64_t floats = stepc::cuda::SquaredNormsScratchFloats(sizes.data(), count);
  float *scratch = Zeros(floats), *out = Zeros(2);
  ASSERT_EQ(stepc_cuda_squared_norms(&ctx_, table.data(), count, scratch, out), 0) << error_;
  ASSERT_EQ(stepc_cuda_squared_norms(&ctx_, table.data(), count, scratch, out + 1), 0) << error_;
  const Floats got = Down(out, 2);
  EXPECT_NEAR(got[0], want, 1e-5 * want);
  EXPECT_EQ(got[0], got[1]);
  // Each tensor's sum has the bits stepc_cuda_reduce gives it alone (a
  // pipeline stage sums its gradients one by one): the total of those sums
  // added in order is the same float.
  float chain = 0.0f;
  for (int t = 0; t < count; ++t) {
    const int64_t shape[] = {sizes[t]};
    const int mask[] = {1};
    float* one = Zeros(1);
    ASSERT_EQ(stepc_cuda_reduce(&ctx_, table[t].x, shape, 1, mask, 3, scratch, one), 0) << error_;
    chain = t == 0 ? Down(one, 1)[0] : chain + Down(one, 1)[0];
  }
  EXPECT_EQ(got[0], chain);
  // One tensor: its own sum.
  const Floats one = Random(5, 9);
  const stepc_norm_tensor single{Up(one), 5};
  ASSERT_EQ(stepc_cuda_squared_norms(&ctx_, &single, 1, scratch, out), 0) << error_;
  double single_want = 0.0;
  for (float v : one) single_want += double(v) * v;
  EXPECT_NEAR(Down(out, 1)[0], single_want, 1e-6 * single_want);
}

TEST_F(CudaKernels, MultiTensorAdamwMatchesTheCpuPerTensor) {
  const int count = 40;  // two launches
  std::vector<Floats> p, g, m, v;
  std::vector<stepc_adamw_tensor> tensors;
  std::vector<float*> P, M, V;
  for (int i = 0; i < count; ++i) {
    const int64_t n = 1 + 997 * i;
    p.push_back(Random(n, 70 + i));
    g.push_back(Random(n, 170 + i));
    m.push_back(Random(n, 270 + i, 0.1f));
    v.push_back(Random(n, 370 + i, 0.1f));
    for (float& x : v.back()) x = std::fabs(x);
    P.push_back(Up(p[i]));
    M.push_back(Up(m[i]));
    V.push_back(Up(v[i]));
    tensors.push_back({P[i], Up(g[i]), M[i], V[i], n});
  }
  const float lr = 3e-4f, step = 7.0f, scale = 0.5f;
  ASSERT_EQ(stepc_cuda_adamw(&ctx_, tensors.data(), count, Up(Floats{lr}), Up(Floats{step}),
                             Up(Floats{scale}), 0.9, 0.95, 1e-8, 0.1),
            0)
      << error_;
  for (int i = 0; i < count; ++i) {
    stepc_cpu_adamw(p[i].data(), g[i].data(), m[i].data(), v[i].data(), p[i].size(), &lr, &step,
                    &scale, 0.9, 0.95, 1e-8, 0.1);
#ifdef STEPC_CUDA_EMULATION
    // One rounding rule (kernels/adamw_scalars.h, no contracted
    // multiply-adds): on the host the two kernels agree bit for bit.
    EXPECT_EQ(Down(P[i], p[i].size()), p[i]) << "tensor " << i;
    EXPECT_EQ(Down(M[i], m[i].size()), m[i]) << "tensor " << i;
    EXPECT_EQ(Down(V[i], v[i].size()), v[i]) << "tensor " << i;
#else
    // (The GPU's double pow for the bias corrections may differ in the last bit.)
    EXPECT_LT(RelError(Down(P[i], p[i].size()), p[i]), 1e-6) << "tensor " << i;
    EXPECT_LT(RelError(Down(M[i], m[i].size()), m[i]), 1e-6) << "tensor " << i;
    EXPECT_LT(RelError(Down(V[i], v[i].size()), v[i]), 1e-6) << "tensor " << i;
#endif
  }
}

// Adam (L2 decay), SGD (plain and Nesterov) and Lion: the CUDA kernels
// follow the CPU kernels' roundings (bit for bit on the host).
TEST_F(CudaKernels, OtherOptimizersMatchTheCpu) {
  const int64_t n = 4099;
  const float lr = 3e-4f, step = 3.0f, scale = 0.5f;
  auto expect_same = [&](const float* device, const Floats& host, const char* what) {
#ifdef STEPC_CUDA_EMULATION
    EXPECT_EQ(Down(device, host.size()), host) << what;
#else
    EXPECT_LT(RelError(Down(device, host.size()), host), 1e-6) << what;
#endif
  };
  {
    Floats p = Random(n, 1), g = Random(n, 2), m = Random(n, 3, 0.1f), v = Random(n, 4, 0.1f);
    for (float& x : v) x = std::fabs(x);
    float *P = Up(p), *M = Up(m), *V = Up(v);
    stepc_adamw_tensor t = {P, Up(g), M, V, n};
    ASSERT_EQ(stepc_cuda_adam(&ctx_, &t, 1, Up(Floats{lr}), Up(Floats{step}), Up(Floats{scale}),
                              0.9, 0.95, 1e-8, 0.1),
              0)
        << error_;
    stepc_cpu_adam(p.data(), g.data(), m.data(), v.data(), n, &lr, &step, &scale, 0.9, 0.95,
                   1e-8, 0.1);
    expect_same(P, p, "adam param");
    expect_same(M, m, "adam exp_avg");
    expect_same(V, v, "adam exp_avg_sq");
  }
  for (int nesterov : {0, 1}) {
    Floats p = Random(n, 5), g = Random(n, 6), b = Random(n, 7, 0.1f);
    float *P = Up(p), *B = Up(b);
    ASSERT_EQ(stepc_cuda_sgd(&ctx_, P, Up(g), B, n, Up(Floats{lr}), Up(Floats{scale}), 0.9,
                             nesterov, 0.1),
              0)
        << error_;
    stepc_cpu_sgd(p.data(), g.data(), b.data(), n, &lr, &scale, 0.9, nesterov, 0.1);
    expect_same(P, p, "sgd param");
    expect_same(B, b, "sgd momentum");
  }
  {
    Floats p = Random(n, 8), g = Random(n, 9), m = Random(n, 10, 0.1f);
    float *P = Up(p), *M = Up(m);
    ASSERT_EQ(stepc_cuda_lion(&ctx_, P, Up(g), M, n, Up(Floats{lr}), Up(Floats{scale}), 0.9,
                              0.99, 0.1),
              0)
        << error_;
    stepc_cpu_lion(p.data(), g.data(), m.data(), n, &lr, &scale, 0.9, 0.99, 0.1);
    expect_same(P, p, "lion param");
    expect_same(M, m, "lion moment");
  }
}

TEST_F(CudaKernels, LaunchErrorsAreStatusesNamingTheCall) {
  // A head dim above the kernels' limit: refused before any launch.
  ASSERT_NE(stepc_cuda_attention(&ctx_, nullptr, nullptr, nullptr, STEPC_CUDA_F32, 1, 4, 4, 1, 1,
                                 512, 1, 1.0, nullptr, STEPC_CUDA_F32, nullptr),
            0);
  EXPECT_NE(std::string(error_).find("head dim 512 is above 256"), std::string::npos) << error_;
  // A packed gradient whose q, k, v columns do not tile the row: refused.
  ASSERT_NE(stepc_cuda_attention_grad_packed(&ctx_, nullptr, nullptr, 200, 0, 64, 128, STEPC_CUDA_BF16,
                                             1, 4, 1, 1, 64, 1, 1.0, nullptr, nullptr, 0, nullptr,
                                             nullptr, STEPC_CUDA_BF16),
            0);
  EXPECT_NE(std::string(error_).find("do not tile a row of 200"), std::string::npos) << error_;
  const int64_t deep[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
  ASSERT_NE(stepc_cuda_transpose(&ctx_, nullptr, deep, 9, deep, nullptr), 0);
  EXPECT_NE(std::string(error_).find("rank 9 is above 8"), std::string::npos) << error_;
}

}  // namespace
