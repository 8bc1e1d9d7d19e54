// Flash attention, forward and backward, on [B, T, H·Dh] (step.attention):
// the scalar kernels (f32 math on CUDA cores; every f32 case, and bf16 head
// dims the tensor-core kernels of attention_tc.cu do not take):
// a thread per query (forward, dQ) or key (dK, dV) row, key/query tiles
// staged in shared memory, the online softmax and the backward row terms of
// tile_math.h (the math flash_attention_host.h runs on the host and
// tile_math_test checks against the interpreter). The probability matrix is
// never stored: the forward saves the log-sum-exp, the backward recomputes
// P from it. Causal tiles above the diagonal are skipped. Grouped-query: a
// query head h reads kv head h / (H / KVH). q, k, v may be bf16 (mixed
// precision); the math is f32. The head dim is padded up to a compile-time
// kDh (32, 64, 128, 256) with zeros.

#include <cstdio>

#include "runtime/kernels/cuda/attention.cuh"
#include "runtime/kernels/cuda/cudnn_attention.h"
#include "runtime/kernels/cuda/tile_math.h"

#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace stepc::cuda {
namespace {

constexpr int kQ = kAttentionQueryTile, kK = kAttentionKeyTile;

// Stages rows [r0, r0 + kK) of head h of a [.., rows, ld] tensor (ld its
// row stride) into smem[kK][kDh] as f32, zero outside.
template <typename T, int kDh>
__device__ void StageTile(const T* src, int64_t b, int64_t r0, int64_t rows, int64_t h,
                          int64_t ld, int64_t dh, float* smem) {
  for (int e = threadIdx.x; e < kK * kDh; e += blockDim.x) {
    const int r = e / kDh, c = e % kDh;
    const int64_t row = r0 + r;
    smem[e] = row < rows && c < dh ? Load(src, (b * rows + row) * ld + h * dh + c) : 0.0f;
  }
}

// Output and log-sum-exp of each query row (out: out_type; lse may be null).
template <typename T, int kDh>
__global__ void __launch_bounds__(kQ) ForwardKernel(const T* q, const T* k, const T* v,
                                                    AttentionArgs a, void* out, float* lse) {
  STEPC_DYNAMIC_SHARED(float, smem);
  float* ks = smem;
  float* vs = smem + kK * kDh;
  const int64_t b = blockIdx.y / a.heads, h = blockIdx.y % a.heads;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const int64_t q0 = blockIdx.x * (int64_t)kQ, i = q0 + threadIdx.x;
  const bool active = i < a.tq;
  float qr[kDh], acc[kDh], s[kK];
  for (int c = 0; c < kDh; ++c) {
    qr[c] = active && c < a.dh ? Load(q, a.QRow(b, i, h) + c) * a.scale : 0.0f;
    acc[c] = 0.0f;
  }
  tile::RowState st = tile::RowStart();
  const int64_t q1 = min(a.tq, q0 + kQ);
  const int64_t k_end = a.causal ? min(a.tk, q1) : a.tk;
  for (int64_t k0 = 0; k0 < k_end; k0 += kK) {
    __syncthreads();
    StageTile<T, kDh>(k, b, k0, a.tk, kvh, a.kv_ld, a.dh, ks);
    StageTile<T, kDh>(v, b, k0, a.tk, kvh, a.kv_ld, a.dh, vs);
    __syncthreads();
    if (!active) continue;
    const tile::TileMask mask =
        a.causal ? tile::CausalTile(q0, q1, k0, k0 + kK) : tile::TileMask::kFull;
    for (int j = 0; j < kK; ++j) {
      float dot = 0.0f;
      for (int c = 0; c < kDh; ++c) dot += qr[c] * ks[j * kDh + c];
      const bool visible = k0 + j < a.tk && (mask == tile::TileMask::kFull ||
                                             !a.causal || tile::CausalVisible(i, k0 + j));
      s[j] = visible ? dot + a.Bias(b, h, i, k0 + j) : -INFINITY;
    }
    tile::RowUpdate(st, s, kK, vs, kDh, kDh, acc);
  }
  if (!active) return;
  const float row_lse = tile::RowFinish(st, acc, kDh, acc);
  for (int c = 0; c < a.dh; ++c) StoreAs(out, a.out_type, a.ORow(b, i, h) + c, acc[c]);
  if (lse) lse[a.Stat(b, h, i)] = row_lse;
}

// D = rowsum(dO ∘ O), a thread per (b, h, i).
template <typename T, typename TOut>
__global__ void DeltaKernel(const T* dout, const TOut* out, AttentionArgs a, float* delta) {
  const int64_t rows = a.batch * a.heads * a.tq;
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
       r += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = r % a.tq, h = (r / a.tq) % a.heads, b = r / (a.tq * a.heads);
    float d = 0.0f;
    for (int64_t c = 0; c < a.dh; ++c)
      d += Load(dout, a.ORow(b, i, h) + c) * Load(out, a.ORow(b, i, h) + c);
    delta[r] = d;
  }
}

// dQ_i = scale Σ_j dS_ij K_j, dS = P (dP - D), P = exp(S - lse), dP = dO_i · V_j.
template <typename T, int kDh>
__global__ void __launch_bounds__(kQ) QueryGradKernel(const T* dout, const T* q, const T* k,
                                                      const T* v, AttentionArgs a,
                                                      const float* lse, const float* delta,
                                                      void* dq) {
  STEPC_DYNAMIC_SHARED(float, smem);
  float* ks = smem;
  float* vs = smem + kK * kDh;
  const int64_t b = blockIdx.y / a.heads, h = blockIdx.y % a.heads;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const int64_t q0 = blockIdx.x * (int64_t)kQ, i = q0 + threadIdx.x;
  const bool active = i < a.tq;
  float qr[kDh], dor[kDh], acc[kDh];
  for (int c = 0; c < kDh; ++c) {
    qr[c] = active && c < a.dh ? Load(q, a.QRow(b, i, h) + c) : 0.0f;
    dor[c] = active && c < a.dh ? Load(dout, a.ORow(b, i, h) + c) : 0.0f;
    acc[c] = 0.0f;
  }
  const float row_lse = active ? lse[a.Stat(b, h, i)] : 0.0f;
  const float row_delta = active ? delta[a.Stat(b, h, i)] : 0.0f;
  const int64_t q1 = min(a.tq, q0 + kQ);
  const int64_t k_end = a.causal ? min(a.tk, q1) : a.tk;
  for (int64_t k0 = 0; k0 < k_end; k0 += kK) {
    __syncthreads();
    StageTile<T, kDh>(k, b, k0, a.tk, kvh, a.kv_ld, a.dh, ks);
    StageTile<T, kDh>(v, b, k0, a.tk, kvh, a.kv_ld, a.dh, vs);
    __syncthreads();
    if (!active) continue;
    for (int j = 0; j < kK; ++j) {
      const int64_t key = k0 + j;
      if (key >= a.tk || (a.causal && !tile::CausalVisible(i, key))) continue;
      float dot = 0.0f, dp = 0.0f;
      for (int c = 0; c < kDh; ++c) {
        dot += qr[c] * ks[j * kDh + c];
        dp += dor[c] * vs[j * kDh + c];
      }
      const float p = tile::ProbFromLse(a.scale * dot + a.Bias(b, h, i, key), row_lse);
      const float ds = tile::ScoreGrad(p, dp, row_delta) * a.scale;
      for (int c = 0; c < kDh; ++c) acc[c] += ds * ks[j * kDh + c];
    }
  }
  if (!active) return;
  for (int c = 0; c < a.dh; ++c) StoreAs(dq, a.out_type, a.DQRow(b, i, h) + c, acc[c]);
}

// dV_j = Σ_i P_ij dO_i and dK_j = scale Σ_i dS_ij Q_i over the query heads
// of kv head (blockIdx.y % KVH): a thread per key row, query tiles staged.
template <typename T, int kDh>
__global__ void __launch_bounds__(kQ) KeyValueGradKernel(const T* dout, const T* q, const T* k,
                                                         const T* v, AttentionArgs a,
                                                         const float* lse, const float* delta,
                                                         void* dk, void* dv) {
  STEPC_DYNAMIC_SHARED(float, smem);
  float* qs = smem;
  float* dos = smem + kK * kDh;
  float* lses = smem + 2 * kK * kDh;
  float* deltas = lses + kK;
  const int64_t b = blockIdx.y / a.kv_heads, kvh = blockIdx.y % a.kv_heads;
  const int64_t group = a.heads / a.kv_heads;
  const int64_t j0 = blockIdx.x * (int64_t)kQ, j = j0 + threadIdx.x;
  const bool active = j < a.tk;
  float kr[kDh], vr[kDh], dkr[kDh], dvr[kDh];
  for (int c = 0; c < kDh; ++c) {
    kr[c] = active && c < a.dh ? Load(k, a.KRow(b, j, kvh) + c) : 0.0f;
    vr[c] = active && c < a.dh ? Load(v, a.KRow(b, j, kvh) + c) : 0.0f;
    dkr[c] = dvr[c] = 0.0f;
  }
  // Query tiles before the block's first key see none of its keys.
  const int64_t q_begin = a.causal ? j0 / kK * kK : 0;
  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = kvh * group + g;
    for (int64_t i0 = q_begin; i0 < a.tq; i0 += kK) {
      __syncthreads();
      StageTile<T, kDh>(q, b, i0, a.tq, h, a.q_ld, a.dh, qs);
      StageTile<T, kDh>(dout, b, i0, a.tq, h, a.heads * a.dh, a.dh, dos);
      for (int r = threadIdx.x; r < kK; r += blockDim.x) {
        lses[r] = i0 + r < a.tq ? lse[a.Stat(b, h, i0 + r)] : 0.0f;
        deltas[r] = i0 + r < a.tq ? delta[a.Stat(b, h, i0 + r)] : 0.0f;
      }
      __syncthreads();
      if (!active) continue;
      for (int r = 0; r < kK; ++r) {
        const int64_t i = i0 + r;
        if (i >= a.tq || (a.causal && !tile::CausalVisible(i, j))) continue;
        float dot = 0.0f, dp = 0.0f;
        for (int c = 0; c < kDh; ++c) {
          dot += qs[r * kDh + c] * kr[c];
          dp += dos[r * kDh + c] * vr[c];
        }
        const float p = tile::ProbFromLse(a.scale * dot + a.Bias(b, h, i, j), lses[r]);
        const float ds = tile::ScoreGrad(p, dp, deltas[r]) * a.scale;
        for (int c = 0; c < kDh; ++c) {
          dvr[c] += p * dos[r * kDh + c];
          dkr[c] += ds * qs[r * kDh + c];
        }
      }
    }
  }
  if (!active) return;
  for (int c = 0; c < a.dh; ++c) {
    StoreAs(dk, a.out_type, a.DKRow(b, j, kvh) + c, dkr[c]);
    StoreAs(dv, a.out_type, a.DKRow(b, j, kvh) + c, dvr[c]);
  }
}

// bf16 inputs with a head dim (padded) of 32, 64 or 128 run on tensor cores
// (with or without a mask), unless STEPC_ATTENTION=scalar asks for the
// scalar kernels.
template <typename T, int kDh>
constexpr bool kTensorCores = std::is_same_v<T, __nv_bfloat16> && TensorCoreHeadDim(kDh);
bool ScalarForced() {
  const char* choice = std::getenv("STEPC_ATTENTION");
  return choice && std::strcmp(choice, "scalar") == 0;
}

template <typename T, int kDh>
int Forward(stepc_cuda_ctx* ctx, const void* q, const void* k, const void* v,
            const AttentionArgs& a, void* out, float* lse) {
  if constexpr (kTensorCores<T, kDh>)
    if (!ScalarForced())
      return TensorCoreForward<kDh>(ctx, static_cast<const __nv_bfloat16*>(q),
                                    static_cast<const __nv_bfloat16*>(k),
                                    static_cast<const __nv_bfloat16*>(v), a, out, lse);
  const Grid2 grid = AttentionForwardGrid(a.batch, a.tq, a.heads);
  const int64_t shared = AttentionSharedBytes(kDh, sizeof(float));
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(ForwardKernel<T, kDh>, shared));
  STEPC_LAUNCH_COOPERATIVE(dim3(grid.x, grid.y), kQ, shared, ctx->stream, ForwardKernel<T, kDh>)(
      static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), a, out, lse);
  return STEPC_LAUNCHED(ctx, "ForwardKernel(attention)");
}

// The forward's output and log-sum-exp: saved by the forward, or recomputed.
struct SavedForward {
  const void* out;
  int out_type;
  const float* lse;
};

template <typename T, int kDh>
int Backward(stepc_cuda_ctx* ctx, const void* dout, const void* q, const void* k, const void* v,
             AttentionArgs a, char* scratch, SavedForward saved, void* dq, void* dk, void* dv) {
  const AttentionGradPlan plan = PlanAttentionGrad(a.batch, a.tq, a.heads, a.dh);
  float* delta = reinterpret_cast<float*>(scratch);
  const int out_type = a.out_type;
  if (!saved.out || !saved.lse) {
    float* out = reinterpret_cast<float*>(scratch + AlignUp(plan.delta_floats * 4, kScratchAlignment));
    float* lse = reinterpret_cast<float*>(reinterpret_cast<char*>(out) +
                                          AlignUp(plan.out_floats * 4, kScratchAlignment));
    a.out_type = STEPC_CUDA_F32;
    if (int rc = Forward<T, kDh>(ctx, q, k, v, a, out, lse)) return rc;
    saved = SavedForward{out, STEPC_CUDA_F32, lse};
  }
  const float* lse = saved.lse;
  if (saved.out_type == STEPC_CUDA_BF16)
    STEPC_LAUNCH(ElementwiseBlocks(plan.delta_floats), kThreads, 0, ctx->stream,
                 DeltaKernel<T, __nv_bfloat16>)(static_cast<const T*>(dout),
                                                static_cast<const __nv_bfloat16*>(saved.out), a,
                                                delta);
  else
    STEPC_LAUNCH(ElementwiseBlocks(plan.delta_floats), kThreads, 0, ctx->stream,
                 DeltaKernel<T, float>)(static_cast<const T*>(dout),
                                        static_cast<const float*>(saved.out), a, delta);
  if (int rc = STEPC_LAUNCHED(ctx, "DeltaKernel(attention)")) return rc;
  a.out_type = out_type;
  if constexpr (kTensorCores<T, kDh>)
    if (!ScalarForced())
      return TensorCoreBackward<kDh>(ctx, static_cast<const __nv_bfloat16*>(dout),
                                     static_cast<const __nv_bfloat16*>(q),
                                     static_cast<const __nv_bfloat16*>(k),
                                     static_cast<const __nv_bfloat16*>(v), a, lse, delta, dq, dk,
                                     dv);
  const T* dO = static_cast<const T*>(dout);
  const T *Q = static_cast<const T*>(q), *K = static_cast<const T*>(k),
          *V = static_cast<const T*>(v);
  const Grid2 qgrid = AttentionForwardGrid(a.batch, a.tq, a.heads);
  const int64_t shared = AttentionSharedBytes(kDh, sizeof(float));
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(QueryGradKernel<T, kDh>, shared));
  STEPC_LAUNCH_COOPERATIVE(dim3(qgrid.x, qgrid.y), kQ, shared, ctx->stream, QueryGradKernel<T, kDh>)(dO, Q, K, V, a,
                                                                               lse, delta, dq);
  if (int rc = STEPC_LAUNCHED(ctx, "QueryGradKernel(attention)")) return rc;
  const Grid2 kgrid = AttentionKeyGrid(a.batch, a.tk, a.kv_heads);
  const int64_t kv_shared = shared + 2 * kK * sizeof(float);
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(KeyValueGradKernel<T, kDh>, kv_shared));
  STEPC_LAUNCH_COOPERATIVE(dim3(kgrid.x, kgrid.y), kQ, kv_shared, ctx->stream, KeyValueGradKernel<T, kDh>)(
      dO, Q, K, V, a, lse, delta, dk, dv);
  return STEPC_LAUNCHED(ctx, "KeyValueGradKernel(attention)");
}

// Calls F<T, kDh> for the element type and the smallest padded head dim.
template <template <typename, int> class F, typename... Args>
int Dispatch(stepc_cuda_ctx* ctx, int in_type, int64_t dh, Args... args) {
  if (ctx->prepare) return 0;  // our kernels need nothing built ahead
  if (dh > kAttentionMaxHeadDim) {
    char why[96];
    snprintf(why, sizeof(why), "head dim %lld is above %d", (long long)dh, kAttentionMaxHeadDim);
    return Fail(ctx, "stepc_cuda_attention", __FILE__, __LINE__, why);
  }
  const bool bf16 = in_type == STEPC_CUDA_BF16;
#define STEPC_DH(n)                                                           \
  if (dh <= n)                                                                \
    return bf16 ? F<__nv_bfloat16, n>::Run(ctx, args...) : F<float, n>::Run(ctx, args...);
  STEPC_DH(32)
  STEPC_DH(64)
  STEPC_DH(128)
  STEPC_DH(256)
#undef STEPC_DH
  return 1;
}

template <typename T, int kDh>
struct ForwardOp {
  static int Run(stepc_cuda_ctx* ctx, const void* q, const void* k, const void* v,
                 AttentionArgs a, void* out, float* lse) {
    return Forward<T, kDh>(ctx, q, k, v, a, out, lse);
  }
};
template <typename T, int kDh>
struct BackwardOp {
  static int Run(stepc_cuda_ctx* ctx, const void* dout, const void* q, const void* k,
                 const void* v, AttentionArgs a, char* scratch, SavedForward saved, void* dq,
                 void* dk, void* dv) {
    return Backward<T, kDh>(ctx, dout, q, k, v, a, scratch, saved, dq, dk, dv);
  }
};

}  // namespace

// A bf16 tensor widened to f32 (cuDNN's bf16 gradients, where the step
// wants f32 ones).
__global__ void WidenKernel(const __nv_bfloat16* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

int Widen(stepc_cuda_ctx* ctx, const void* in, void* out, int64_t n) {
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, WidenKernel)(
      static_cast<const __nv_bfloat16*>(in), static_cast<float*>(out), n);
  return STEPC_LAUNCHED(ctx, "WidenKernel(attention)");
}

// The backward through cuDNN (cudnn_attention.h), in the scratch the
// compiler planned (launch_config.h's AttentionGradScratchBytesFor): our
// kernel's slices first (the forward recomputed into them when none was
// saved), then bf16 dQ, dK, dV when the step wants f32 ones, then cuDNN's
// workspace. `rows`: the operands' row strides (null: separate tensors; the
// f32 widening needs separate gradients).
int CudnnBackward(stepc_cuda_ctx* ctx, const void* dout, const void* q, const void* k,
                  const void* v, AttentionArgs a, char* scratch, SavedForward saved, void* dq,
                  void* dk, void* dv, const stepc_attention_rows* rows) {
  const bool f32 = a.out_type == STEPC_CUDA_F32;
  if (f32 && rows) return STEPC_CUDNN_NOT_TAKEN;
  const CudnnAttentionGradPlan plan =
      PlanCudnnAttentionGrad(a.batch, a.tq, a.tk, a.heads, a.kv_heads, a.dh, f32);
  const void* out = saved.out;
  const float* lse = saved.lse;
  if (!lse) {
    const AttentionGradPlan own = PlanAttentionGrad(a.batch, a.tq, a.heads, a.dh);
    char* out_slice = scratch + AlignUp(own.delta_floats * 4, kScratchAlignment);
    float* lse_slice =
        reinterpret_cast<float*>(out_slice + AlignUp(own.out_floats * 4, kScratchAlignment));
    const int rc = stepc_cudnn_attention(ctx, q, k, v, a.batch, a.tq, a.tk, a.heads, a.kv_heads,
                                         a.dh, a.causal, a.scale, out_slice, lse_slice,
                                         ctx->gemm_workspace, kGemmWorkspaceBytes, rows);
    if (rc != STEPC_CUDNN_RAN) return rc;
    out = out_slice;
    lse = lse_slice;
  }
  char* cursor = scratch + AttentionGradScratchBytes(a.batch, a.tq, a.heads, a.dh,
                                                     saved.lse != nullptr);
  void* grads[3] = {dq, dk, dv};
  const int64_t bytes[3] = {plan.dq_bytes, plan.dk_bytes, plan.dv_bytes};
  void* bf16[3];
  for (int i = 0; i < 3; ++i) {
    bf16[i] = f32 ? static_cast<void*>(cursor) : grads[i];
    cursor += bytes[i];
  }
  const int rc = stepc_cudnn_attention_grad(ctx, dout, q, k, v, out, lse, a.batch, a.tq, a.tk,
                                            a.heads, a.kv_heads, a.dh, a.causal, a.scale,
                                            bf16[0], bf16[1], bf16[2], cursor,
                                            plan.workspace_bytes, rows);
  if (rc != STEPC_CUDNN_RAN || !f32 || ctx->prepare) return rc;
  const int64_t q_elems = a.batch * a.tq * a.heads * a.dh;
  const int64_t kv_elems = a.batch * a.tk * a.kv_heads * a.dh;
  const int64_t elems[3] = {q_elems, kv_elems, kv_elems};
  for (int i = 0; i < 3; ++i)
    if (int widen = Widen(ctx, bf16[i], grads[i], elems[i])) return widen;
  return STEPC_CUDNN_RAN;
}

// bf16 calls cuDNN can take go to it first (cudnn_attention.h); the rest, and
// those it does not take, run on our kernels.
int Attention(stepc_cuda_ctx* ctx, const void* q, const void* k, const void* v, int in_type,
              AttentionArgs a, void* out, float* lse, const stepc_attention_rows* rows) {
  if (in_type == STEPC_CUDA_BF16 && a.out_type == STEPC_CUDA_BF16 &&
      CudnnAttentionHeadDim(a.dh)) {
    const int rc = stepc_cudnn_attention(ctx, q, k, v, a.batch, a.tq, a.tk, a.heads, a.kv_heads,
                                         a.dh, a.causal, a.scale, out, lse, ctx->gemm_workspace,
                                         kGemmWorkspaceBytes, rows);
    if (rc != STEPC_CUDNN_NOT_TAKEN) return rc;
  }
  return Dispatch<ForwardOp>(ctx, in_type, a.dh, q, k, v, a.WithRows(rows), out, lse);
}

int AttentionGrad(stepc_cuda_ctx* ctx, const void* dout, const void* q, const void* k,
                  const void* v, int in_type, AttentionArgs a, char* scratch, SavedForward saved,
                  void* dq, void* dk, void* dv, const stepc_attention_rows* rows) {
  if (in_type == STEPC_CUDA_BF16 && CudnnAttentionHeadDim(a.dh) &&
      (!saved.lse || saved.out_type == STEPC_CUDA_BF16)) {
    const int rc = CudnnBackward(ctx, dout, q, k, v, a, scratch, saved, dq, dk, dv, rows);
    if (rc != STEPC_CUDNN_NOT_TAKEN) return rc;
  }
  return Dispatch<BackwardOp>(ctx, in_type, a.dh, dout, q, k, v, a.WithRows(rows), scratch,
                              saved, dq, dk, dv);
}

// The row strides of q, k, v as columns of a [B, T, width] packed
// projection, checked: each head block inside the row and, for the
// gradient, the three blocks tiling it (every element of dqkv written).
bool PackedRows(stepc_cuda_ctx* ctx, int64_t width, int64_t q_offset, int64_t k_offset,
                int64_t v_offset, int64_t heads, int64_t kv_heads, int64_t head_dim,
                bool tiled, stepc_attention_rows* rows) {
  const int64_t qw = heads * head_dim, kvw = kv_heads * head_dim;
  const int64_t begin[3] = {q_offset, k_offset, v_offset}, size[3] = {qw, kvw, kvw};
  bool ok = true;
  for (int i = 0; i < 3; ++i) ok = ok && begin[i] >= 0 && begin[i] + size[i] <= width;
  for (int i = 0; i < 3 && ok; ++i)
    for (int j = 0; j < i; ++j)
      ok = ok && (begin[i] + size[i] <= begin[j] || begin[j] + size[j] <= begin[i]);
  if (ok && tiled) ok = qw + 2 * kvw == width;
  if (!ok) {
    char why[160];
    snprintf(why, sizeof(why), "q, k, v at columns %lld, %lld, %lld (widths %lld, %lld) %s %lld",
             (long long)q_offset, (long long)k_offset, (long long)v_offset, (long long)qw,
             (long long)kvw, tiled ? "do not tile a row of" : "overlap or leave a row of",
             (long long)width);
    Fail(ctx, "stepc_cuda_attention_packed", __FILE__, __LINE__, why);
    return false;
  }
  *rows = {width, width, width, width};
  return true;
}

}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_attention_own(stepc_cuda_ctx* ctx, const void* q, const void* k,
                                        const void* v, int in_type, int64_t batch, int64_t tq,
                                        int64_t tk, int64_t heads, int64_t kv_heads,
                                        int64_t head_dim, int causal, double scale, void* out,
                                        int out_type, float* lse,
                                        const stepc_attention_rows* rows) {
  AttentionArgs a{batch, tq, tk, heads, kv_heads, head_dim, causal, (float)scale, out_type};
  return Dispatch<ForwardOp>(ctx, in_type, head_dim, q, k, v, a.WithRows(rows), out, lse);
}

extern "C" int stepc_cuda_attention_grad_own(stepc_cuda_ctx* ctx, const void* dout,
                                             const void* q, const void* k, const void* v,
                                             int in_type, int64_t batch, int64_t tq, int64_t tk,
                                             int64_t heads, int64_t kv_heads, int64_t head_dim,
                                             int causal, double scale, char* scratch,
                                             const void* saved_out, int saved_out_type,
                                             const float* saved_lse, void* dq, void* dk,
                                             void* dv, int out_type,
                                             const stepc_attention_rows* rows) {
  AttentionArgs a{batch, tq, tk, heads, kv_heads, head_dim, causal, (float)scale, out_type};
  return Dispatch<BackwardOp>(ctx, in_type, head_dim, dout, q, k, v, a.WithRows(rows), scratch,
                              SavedForward{saved_out, saved_out_type, saved_lse}, dq, dk, dv);
}

extern "C" int stepc_cuda_attention(stepc_cuda_ctx* ctx, const void* q, const void* k,
                                    const void* v, int in_type, int64_t batch, int64_t tq,
                                    int64_t tk, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                    int causal, double scale, void* out, int out_type,
                                    float* lse) {
  AttentionArgs a{batch, tq, tk, heads, kv_heads, head_dim, causal, (float)scale, out_type};
  return Attention(ctx, q, k, v, in_type, a, out, lse, nullptr);
}

extern "C" int stepc_cuda_attention_grad(stepc_cuda_ctx* ctx, const void* dout, const void* q,
                                         const void* k, const void* v, int in_type,
                                         int64_t batch, int64_t tq, int64_t tk, int64_t heads,
                                         int64_t kv_heads, int64_t head_dim, int causal,
                                         double scale, char* scratch, const void* saved_out,
                                         int saved_out_type, const float* saved_lse, void* dq,
                                         void* dk, void* dv, int out_type) {
  AttentionArgs a{batch, tq, tk, heads, kv_heads, head_dim, causal, (float)scale, out_type};
  return AttentionGrad(ctx, dout, q, k, v, in_type, a, scratch,
                       SavedForward{saved_out, saved_out_type, saved_lse}, dq, dk, dv, nullptr);
}

// The packed projection's columns, read (and their gradients written) in
// place: element offsets from one base, one row stride.
extern "C" int stepc_cuda_attention_packed(stepc_cuda_ctx* ctx, const void* qkv, int64_t width,
                                           int64_t q_offset, int64_t k_offset,
                                           int64_t v_offset, int in_type, int64_t batch,
                                           int64_t t, int64_t heads, int64_t kv_heads,
                                           int64_t head_dim, int causal, double scale, void* out,
                                           int out_type, float* lse) {
  stepc_attention_rows rows;
  if (!PackedRows(ctx, width, q_offset, k_offset, v_offset, heads, kv_heads, head_dim,
                  /*tiled=*/false, &rows))
    return 1;
  const int64_t bytes = in_type == STEPC_CUDA_BF16 ? 2 : 4;
  const char* base = static_cast<const char*>(qkv);
  AttentionArgs a{batch, t, t, heads, kv_heads, head_dim, causal, (float)scale, out_type};
  return Attention(ctx, base + q_offset * bytes, base + k_offset * bytes,
                   base + v_offset * bytes, in_type, a, out, lse, &rows);
}

extern "C" int stepc_cuda_attention_grad_packed(
    stepc_cuda_ctx* ctx, const void* dout, const void* qkv, int64_t width, int64_t q_offset,
    int64_t k_offset, int64_t v_offset, int in_type, int64_t batch, int64_t t, int64_t heads,
    int64_t kv_heads, int64_t head_dim, int causal, double scale, char* scratch,
    const void* saved_out, int saved_out_type, const float* saved_lse, void* dqkv,
    int out_type) {
  stepc_attention_rows rows;
  if (!PackedRows(ctx, width, q_offset, k_offset, v_offset, heads, kv_heads, head_dim,
                  /*tiled=*/true, &rows))
    return 1;
  const int64_t in_bytes = in_type == STEPC_CUDA_BF16 ? 2 : 4;
  const int64_t out_bytes = out_type == STEPC_CUDA_BF16 ? 2 : 4;
  const char* base = static_cast<const char*>(qkv);
  char* grad = static_cast<char*>(dqkv);
  AttentionArgs a{batch, t, t, heads, kv_heads, head_dim, causal, (float)scale, out_type};
  return AttentionGrad(ctx, dout, base + q_offset * in_bytes, base + k_offset * in_bytes,
                       base + v_offset * in_bytes, in_type, a, scratch,
                       SavedForward{saved_out, saved_out_type, saved_lse},
                       grad + q_offset * out_bytes, grad + k_offset * out_bytes,
                       grad + v_offset * out_bytes, &rows);
}

// A masked attention runs on our kernels (cuDNN's graph here takes no
// mask): bf16 on tensor cores, which add the mask to the scores where they
// lie in registers.
extern "C" int stepc_cuda_attention_masked(stepc_cuda_ctx* ctx, const void* q, const void* k,
                                           const void* v, int in_type, int64_t batch,
                                           int64_t tq, int64_t tk, int64_t heads,
                                           int64_t kv_heads, int64_t head_dim, int causal,
                                           double scale, const float* mask, int64_t mask_batch,
                                           int64_t mask_head, int64_t mask_row, void* out,
                                           int out_type, float* lse) {
  AttentionArgs a{batch, tq, tk, heads, kv_heads, head_dim, causal, (float)scale, out_type,
                  mask, mask_batch, mask_head, mask_row};
  return Dispatch<ForwardOp>(ctx, in_type, head_dim, q, k, v, a.WithRows(nullptr), out, lse);
}

extern "C" int stepc_cuda_attention_grad_masked(
    stepc_cuda_ctx* ctx, const void* dout, const void* q, const void* k, const void* v,
    int in_type, int64_t batch, int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
    int64_t head_dim, int causal, double scale, const float* mask, int64_t mask_batch,
    int64_t mask_head, int64_t mask_row, char* scratch, const void* saved_out,
    int saved_out_type, const float* saved_lse, void* dq, void* dk, void* dv, int out_type) {
  AttentionArgs a{batch, tq, tk, heads, kv_heads, head_dim, causal, (float)scale, out_type,
                  mask, mask_batch, mask_head, mask_row};
  return Dispatch<BackwardOp>(ctx, in_type, head_dim, dout, q, k, v, a.WithRows(nullptr),
                              scratch, SavedForward{saved_out, saved_out_type, saved_lse}, dq,
                              dk, dv);
}
