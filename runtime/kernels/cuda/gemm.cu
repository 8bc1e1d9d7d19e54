// GEMMs through cuBLASLt. Row-major C = op(A)·op(B) is column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ, so B goes in cuBLASLt's first slot. Each shape gets
// one plan (descriptors and the heuristic's first algorithm), made on its
// first call (the first step, before any graph capture) and reused; a bias
// rides in the BIAS epilogue (cuBLASLt adds it per row of the column-major
// result: per output feature), a GELU in GELU_AUX(_BIAS) (the
// pre-activation kept in aux for the backward), a GELU gradient in DGELU,
// a weight gradient's bias gradient in BGRADB (the output gradient is
// cuBLASLt's B; its sums over K land in aux).
// An epilogue cuBLASLt offers no algorithm for falls back to the plain GEMM
// and our kernel. f32 data use f32 compute (no TF32: the fp32 target is
// checked against the CPU at 1e-4); bf16 operands accumulate in f32.
// fp8 operands (DeepSeek-V3's block scaling, cuBLAS >= 12.9 on sm_90) take
// cuBLASLt's one fp8 layout, both operands K-major ("TN"), packed by
// fp8.cu with a scale per 1x128 block of A and 128x128 block of B; where
// cuBLASLt offers no fp8 algorithm the bf16 GEMM of the same values runs.

#include <cublasLt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/fp8_pack.h"
#include "runtime/kernels/cuda/gemm_layout.h"
#include "runtime/kernels/elementwise_math.h"

namespace stepc::cuda {
namespace {

struct GemmKey {
  int64_t batch, m, n, k;
  int transpose_a, transpose_b, shared_rhs, in_type, out_type, bias, epilogue;
  int fp8_a, fp8_b;  // 1 + the fp8 format of A and B (0: not an fp8 GEMM)
  int fp8_b_vector;  // B scaled per 1x128 block along K as A (else 128x128)
  bool operator==(const GemmKey& o) const { return std::memcmp(this, &o, sizeof(o)) == 0; }
};

struct GemmPlan {
  GemmKey key;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  bool supported = true;  // false: no algorithm with this epilogue
};

struct GemmState {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
  std::vector<GemmPlan> plans;
};

GemmState& State() {
  static GemmState* state = new GemmState();
  return *state;
}

int LtFail(stepc_cuda_ctx* ctx, const char* call, int line, cublasStatus_t rc) {
  return Fail(ctx, call, __FILE__, line, cublasLtGetStatusString(rc));
}

#define STEPC_LT_TRY(ctx, call)                                      \
  do {                                                               \
    cublasStatus_t stepc_lt_rc_ = (call);                            \
    if (stepc_lt_rc_ != CUBLAS_STATUS_SUCCESS)                       \
      return LtFail(ctx, #call, __LINE__, stepc_lt_rc_);             \
  } while (0)

cudaDataType_t DataType(int type) { return type == STEPC_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F; }
cudaDataType_t Fp8Type(int format) { return format == 0 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

// A column-major operand, `batch` of them.
int Layout(stepc_cuda_ctx* ctx, cublasLtMatrixLayout_t* out, int type, const ColumnMajor& m,
           int64_t batch) {
  STEPC_LT_TRY(ctx, cublasLtMatrixLayoutCreate(out, DataType(type), m.rows, m.cols, m.ld));
  const int64_t stride = m.batch_stride;
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    STEPC_LT_TRY(ctx, cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                       &count, sizeof(count)));
    STEPC_LT_TRY(ctx, cublasLtMatrixLayoutSetAttribute(
                          *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                          sizeof(stride)));
  }
  return 0;
}

int MakePlan(stepc_cuda_ctx* ctx, GemmState& s, const GemmKey& key, GemmPlan* plan) {
  plan->key = key;
  STEPC_LT_TRY(ctx, cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const ColumnMajorGemm problem = ToColumnMajor(GemmShape{
      key.batch, key.m, key.n, key.k, key.transpose_a != 0, key.transpose_b != 0,
      key.shared_rhs != 0});
  const bool fp8 = key.fp8_a != 0;
  // fp8: cuBLASLt's A is our packed B as [N, K], its B our packed A as [M, K].
  cublasOperation_t first = fp8 || problem.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t second = !fp8 && problem.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &first,
                                                   sizeof(first)));
  STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &second,
                                                   sizeof(second)));
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (key.epilogue == STEPC_EPILOGUE_GELU)
    epilogue = key.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  else if (key.epilogue == STEPC_EPILOGUE_DGELU)
    epilogue = CUBLASLT_EPILOGUE_DGELU;
  else if (key.epilogue == STEPC_EPILOGUE_BGRAD)
    epilogue = CUBLASLT_EPILOGUE_BGRADB;
  else if (key.bias)
    epilogue = CUBLASLT_EPILOGUE_BIAS;
  STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                   &epilogue, sizeof(epilogue)));
  if (key.epilogue == STEPC_EPILOGUE_GELU || key.epilogue == STEPC_EPILOGUE_DGELU) {
    // aux is [M, N] row-major: column-major N x M, leading dimension N.
    int64_t ld = key.n, stride = key.m * key.n;
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                     &ld, sizeof(ld)));
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(
                          plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride,
                          sizeof(stride)));
  }
  if (key.bias || key.epilogue == STEPC_EPILOGUE_BGRAD) {
    cudaDataType_t bias_type = CUDA_R_32F;
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op,
                                                     CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                     &bias_type, sizeof(bias_type)));
  }
  const int64_t m = key.m, n = key.n, k = key.k;
  if (fp8) {
    int32_t vector = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    int32_t block = key.fp8_b_vector ? vector : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                     &block, sizeof(block)));
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                     &vector, sizeof(vector)));
    // The heuristic refuses a block scaling mode without its scale pointers;
    // any device address stands in until each call sets the real ones.
    const void* stand_in = ctx->gemm_workspace;
    for (auto attribute : {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER})
      STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, attribute, &stand_in,
                                                       sizeof(stand_in)));
    STEPC_LT_TRY(ctx, cublasLtMatrixLayoutCreate(&plan->a, Fp8Type(key.fp8_b - 1), k, n, k));
    STEPC_LT_TRY(ctx, cublasLtMatrixLayoutCreate(&plan->b, Fp8Type(key.fp8_a - 1), k, m, k));
    STEPC_LT_TRY(ctx, cublasLtMatrixLayoutCreate(&plan->c, DataType(key.out_type), n, m, n));
  } else {
    if (int rc = Layout(ctx, &plan->a, key.in_type, problem.first, problem.batch)) return rc;
    if (int rc = Layout(ctx, &plan->b, key.in_type, problem.second, problem.batch)) return rc;
    if (int rc = Layout(ctx, &plan->c, key.out_type, problem.result, problem.batch)) return rc;
  }
  cublasLtMatmulPreference_t pref;
  STEPC_LT_TRY(ctx, cublasLtMatmulPreferenceCreate(&pref));
  uint64_t workspace = kGemmWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                       sizeof(workspace));
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(s.handle, plan->op, plan->a, plan->b,
                                                     plan->c, plan->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  const bool fancy = key.bias || key.epilogue != STEPC_EPILOGUE_NONE;
  if (fp8 && (rc != CUBLAS_STATUS_SUCCESS || found == 0)) {
    // Said once a shape: the GPU run's log shows which GEMMs stay in bf16.
    fprintf(stderr,
            "stepc: cuBLASLt has no fp8 algorithm for %lldx%lldx%lld (formats %d, %d, B scaled "
            "%s, bias %d, epilogue %d): %s\n",
            (long long)m, (long long)n, (long long)k, key.fp8_a - 1, key.fp8_b - 1,
            key.fp8_b_vector ? "1x128" : "128x128", key.bias, key.epilogue,
            rc == CUBLAS_STATUS_SUCCESS ? "none found" : cublasLtGetStatusString(rc));
    plan->supported = false;
    return 0;
  }
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED && fancy) found = 0;
  else if (rc != CUBLAS_STATUS_SUCCESS)
    return LtFail(ctx, "cublasLtMatmulAlgoGetHeuristic", __LINE__, rc);
  if (found == 0 && fancy) {
    plan->supported = false;  // the caller falls back to the plain GEMM
    return 0;
  }
  if (found == 0) {
    char why[160];
    snprintf(why, sizeof(why), "no algorithm for batch %lld of %lldx%lldx%lld (types %d->%d)",
             (long long)key.batch, (long long)m, (long long)n, (long long)k, key.in_type,
             key.out_type);
    return Fail(ctx, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__, why);
  }
  plan->algo = result.algo;
  return 0;
}

GemmKey MakeKey(int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a, int transpose_b,
                int shared_rhs, int in_type, int out_type, bool bias, int epilogue) {
  GemmKey key;
  std::memset(&key, 0, sizeof(key));  // the padding too: keys compare by bytes
  key.batch = batch;
  key.m = m;
  key.n = n;
  key.k = k;
  key.transpose_a = transpose_a;
  key.transpose_b = transpose_b;
  key.shared_rhs = shared_rhs;
  key.in_type = in_type;
  key.out_type = out_type;
  key.bias = bias ? 1 : 0;
  key.epilogue = epilogue;
  return key;
}

int FindPlan(stepc_cuda_ctx* ctx, const GemmKey& key, const GemmPlan** out) {
  GemmState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.handle) STEPC_LT_TRY(ctx, cublasLtCreate(&s.handle));
  for (const GemmPlan& p : s.plans)
    if (p.key == key) {
      *out = &p;
      return 0;
    }
  GemmPlan plan;
  if (int rc = MakePlan(ctx, s, key, &plan)) return rc;
  s.plans.push_back(plan);
  *out = &s.plans.back();
  return 0;
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

namespace stepc::cuda {
namespace {

// The fallbacks of the epilogues, as kernels over the row-major [rows, n]
// result: c += bias; aux = c, c = gelu(c); c *= gelu'(aux). A bf16 result
// (bias only) is the plain GEMM's rounded sum plus the bias, rounded again:
// within one bf16 rounding of cuBLASLt's epilogue.
__global__ void BiasBf16Kernel(__nv_bfloat16* c, const float* bias, int64_t rows, int64_t n) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * n;
       e += (int64_t)gridDim.x * blockDim.x)
    c[e] = __float2bfloat16(__bfloat162float(c[e]) + bias[e % n]);
}

__global__ void EpilogueKernel(float* c, const float* bias, float* aux, int64_t rows, int64_t n,
                               int epilogue) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * n;
       e += (int64_t)gridDim.x * blockDim.x) {
    float x = c[e] + (bias ? bias[e % n] : 0.0f);
    if (epilogue == STEPC_EPILOGUE_GELU) {
      aux[e] = x;
      x = stepc_gelu(x, 1);
    } else if (epilogue == STEPC_EPILOGUE_DGELU) {
      x = stepc_gelu_grad(x, aux[e], 1);
    }
    c[e] = x;
  }
}

// `a_scales` / `b_scales`: an fp8 key's block scales (fp8_pack.h).
int Matmul(stepc_cuda_ctx* ctx, const void* a, const void* b, void* c, GemmKey key,
           const float* bias, void* aux, const float* a_scales = nullptr,
           const float* b_scales = nullptr) {
  const GemmPlan* plan = nullptr;
  if (int rc = FindPlan(ctx, key, &plan)) return rc;
  if (!plan->supported) {
    // cuBLASLt has no algorithm with this epilogue: plain GEMM, then ours.
    GemmKey plain = key;
    plain.bias = 0;
    plain.epilogue = STEPC_EPILOGUE_NONE;
    if (int rc = Matmul(ctx, a, b, c, plain, nullptr, nullptr, a_scales, b_scales)) return rc;
    if (key.epilogue == STEPC_EPILOGUE_BGRAD)
      return BiasGradOf(ctx, a, key.in_type, key.m, key.k, key.transpose_a != 0,
                        static_cast<float*>(aux));
    const int64_t rows = key.batch * key.m;
    if (key.out_type == STEPC_CUDA_BF16) {
      STEPC_LAUNCH(ElementwiseBlocks(rows * key.n), kThreads, 0, ctx->stream, BiasBf16Kernel)(
          static_cast<__nv_bfloat16*>(c), bias, rows, key.n);
      return STEPC_LAUNCHED(ctx, "BiasBf16Kernel");
    }
    STEPC_LAUNCH(ElementwiseBlocks(rows * key.n), kThreads, 0, ctx->stream, EpilogueKernel)(
        static_cast<float*>(c), bias, static_cast<float*>(aux), rows, key.n, key.epilogue);
    return STEPC_LAUNCHED(ctx, "EpilogueKernel");
  }
  // BGRADB writes its sums where a bias would be read.
  const void* bias_pointer = key.epilogue == STEPC_EPILOGUE_BGRAD ? aux : bias;
  if (bias_pointer)
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &bias_pointer, sizeof(bias_pointer)));
  if (aux && key.epilogue != STEPC_EPILOGUE_BGRAD)
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(
                          plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
  if (key.fp8_a) {  // cuBLASLt's A is our B
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                     &b_scales, sizeof(b_scales)));
    STEPC_LT_TRY(ctx, cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                     &a_scales, sizeof(a_scales)));
  }
  const float one = 1.0f, zero = 0.0f;
  STEPC_LT_TRY(ctx, cublasLtMatmul(State().handle, plan->op, &one, b, plan->a, a, plan->b, &zero,
                                   c, plan->c, c, plan->c, &plan->algo, ctx->gemm_workspace,
                                   kGemmWorkspaceBytes, ctx->stream));
  return 0;
}

}  // namespace
}  // namespace stepc::cuda

extern "C" int stepc_cuda_matmul(stepc_cuda_ctx* ctx, const void* a, const void* b, void* c,
                                 int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                                 int transpose_b, int shared_rhs, int in_type, int out_type,
                                 const float* bias, int epilogue, void* aux) {
  if (const char* why = BadEpilogue(batch, n, out_type, bias, epilogue, aux))
    return Fail(ctx, "stepc_cuda_matmul", __FILE__, __LINE__, why);
  // Shared B and untransposed A: the batch is more rows of one product.
  if (shared_rhs && !transpose_a) {
    m *= batch;
    batch = 1;
  }
  return Matmul(ctx, a, b, c,
                MakeKey(batch, m, n, k, transpose_a, transpose_b, shared_rhs, in_type, out_type,
                        bias != nullptr, epilogue),
                bias, aux);
}

extern "C" int stepc_cuda_matmul_fp8_packed(stepc_cuda_ctx* ctx, const void* a,
                                            const float* a_scales, const void* b,
                                            const float* b_scales, void* c, int64_t batch,
                                            int64_t m, int64_t n, int64_t k, int transpose_a,
                                            int transpose_b, int shared_rhs, int a_type,
                                            int b_type, int out_type, const float* bias,
                                            int epilogue, void* aux, int a_format, int b_format,
                                            int b_vector, void* scratch) {
  if (const char* why = BadFp8Operands(a_type, a_scales, b_type, b_scales, transpose_a,
                                       transpose_b, epilogue, scratch))
    return Fail(ctx, "stepc_cuda_matmul_fp8", __FILE__, __LINE__, why);
  if (const char* why = BadEpilogue(batch, n, out_type, bias, epilogue, aux))
    return Fail(ctx, "stepc_cuda_matmul_fp8", __FILE__, __LINE__, why);
  if (epilogue == STEPC_EPILOGUE_BGRAD) {
    // The sums of A's own values, then the fp8 product alone.
    if (int rc = BiasGradOf(ctx, a, a_type, m, k, transpose_a != 0, static_cast<float*>(aux)))
      return rc;
    epilogue = STEPC_EPILOGUE_NONE;
    aux = nullptr;
  }
  auto in_bf16 = [&] {
    return Fp8ValuesInBf16(ctx, a, a_scales, b, b_scales, c, batch, m, n, k, transpose_a,
                           transpose_b, shared_rhs, a_type, b_type, out_type, bias, epilogue,
                           aux, a_format, b_format, b_vector, scratch);
  };
  if (!scratch || Fp8GemmsOff() ||
      !Fp8GemmRunsInFp8(batch, m, n, k, transpose_a, shared_rhs, a_format, b_format))
    return in_bf16();
  const int64_t rows = batch * m;
  // (The packed operands are one [rows, k] by [n, k] product.) The key's
  // input type is the packed-B-free one's: a packed operand is packed alike.
  const int key_type = b_type == STEPC_CUDA_FP8 ? STEPC_CUDA_BF16 : b_type;
  GemmKey key = MakeKey(1, rows, n, k, 0, 0, 0, key_type, out_type, bias != nullptr, epilogue);
  key.fp8_a = a_format + 1;
  key.fp8_b = b_format + 1;
  key.fp8_b_vector = b_vector ? 1 : 0;
  // Whether cuBLASLt multiplies these in fp8, with our epilogue if need be.
  const GemmPlan* plan = nullptr;
  if (int rc = FindPlan(ctx, key, &plan)) return rc;
  if (!plan->supported) {
    GemmKey plain = key;
    plain.bias = 0;
    plain.epilogue = STEPC_EPILOGUE_NONE;
    const GemmPlan* plain_plan = nullptr;
    if (int rc = FindPlan(ctx, plain, &plain_plan)) return rc;
    if (!plain_plan->supported) return in_bf16();
  }
  Fp8Packed packed;
  if (int rc = PackFp8Operands(ctx, a, a_type, b, b_type, rows, n, k, transpose_a != 0,
                               transpose_b != 0, a_format, b_format, b_vector != 0, scratch,
                               &packed))
    return rc;
  if (a_scales) packed.a_scales = const_cast<float*>(a_scales);
  if (b_scales) packed.b_scales = const_cast<float*>(b_scales);
  if (int rc = Matmul(ctx, packed.a, packed.b, c, key, bias, aux, packed.a_scales,
                      packed.b_scales))
    return rc;
  CountFp8GemmRun();
  return 0;
}

extern "C" void stepc_cuda_release(void) {
  GemmState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  for (GemmPlan& p : s.plans) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  s.plans.clear();
  if (s.handle) cublasLtDestroy(s.handle);
  s.handle = nullptr;
}
