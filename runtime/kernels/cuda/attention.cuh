// attention.cuh - what the two attention implementations share: the shape
// arguments, and the tensor-core kernels' entry points (attention_tc.cu),
// which attention.cu calls for bf16 inputs with a head dim of 32, 64 or 128.

#ifndef STEPC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH_
#define STEPC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH_

#include "runtime/kernels/cuda/common.cuh"

namespace stepc::cuda {

// [B, T, ·] operands: the offsets of head h's row i in q, the output (and
// its gradient), dq, k and v, and dk and dv (row strides as in
// stepc_attention_rows: separate tensors unless WithRows says otherwise),
// and the index of a query row's statistic (lse, D) in [B, H, Tq].
struct AttentionArgs {
  int64_t batch, tq, tk, heads, kv_heads, dh;
  int causal;
  float scale;
  int out_type;
  // step.attention's additive mask ([Bm, Hm, Tqm, Tk] f32, a broadcast
  // dim's stride 0), or null.
  const float* mask = nullptr;
  int64_t mask_batch = 0, mask_head = 0, mask_row = 0;
  // Row strides; 0 until WithRows (then separate tensors' unless given).
  int64_t q_ld = 0, kv_ld = 0, dq_ld = 0, dkv_ld = 0;
  AttentionArgs& WithRows(const stepc_attention_rows* rows) {
    q_ld = rows ? rows->q : heads * dh;
    kv_ld = rows ? rows->kv : kv_heads * dh;
    dq_ld = rows ? rows->dq : heads * dh;
    dkv_ld = rows ? rows->dkv : kv_heads * dh;
    return *this;
  }
  __host__ __device__ float Bias(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return mask ? mask[b * mask_batch + h * mask_head + i * mask_row + j] : 0.0f;
  }
  __host__ __device__ int64_t QRow(int64_t b, int64_t i, int64_t h) const {
    return (b * tq + i) * q_ld + h * dh;
  }
  __host__ __device__ int64_t ORow(int64_t b, int64_t i, int64_t h) const {
    return ((b * tq + i) * heads + h) * dh;
  }
  __host__ __device__ int64_t DQRow(int64_t b, int64_t i, int64_t h) const {
    return (b * tq + i) * dq_ld + h * dh;
  }
  __host__ __device__ int64_t KRow(int64_t b, int64_t j, int64_t h) const {
    return (b * tk + j) * kv_ld + h * dh;
  }
  __host__ __device__ int64_t DKRow(int64_t b, int64_t j, int64_t h) const {
    return (b * tk + j) * dkv_ld + h * dh;
  }
  __host__ __device__ int64_t Stat(int64_t b, int64_t h, int64_t i) const {
    return (b * heads + h) * tq + i;
  }
};

// Tensor cores (mma.sync, bf16 in, f32 accumulation): the forward writes out
// (of a.out_type) and lse (may be null); the backward dQ, and dK and dV,
// from the saved lse and D = rowsum(dO ∘ O).
template <int kDh>
int TensorCoreForward(stepc_cuda_ctx* ctx, const __nv_bfloat16* q, const __nv_bfloat16* k,
                      const __nv_bfloat16* v, const AttentionArgs& a, void* out, float* lse);
template <int kDh>
int TensorCoreBackward(stepc_cuda_ctx* ctx, const __nv_bfloat16* dout, const __nv_bfloat16* q,
                       const __nv_bfloat16* k, const __nv_bfloat16* v, const AttentionArgs& a,
                       const float* lse, const float* delta, void* dq, void* dk, void* dv);

}  // namespace stepc::cuda

#endif  // STEPC_RUNTIME_KERNELS_CUDA_ATTENTION_CUH_
