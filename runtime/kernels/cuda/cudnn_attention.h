/* cudnn_attention.h - cuDNN's fused flash attention behind the library's
 * attention entry points (stepc_cuda_attention, stepc_cuda_attention_grad).
 *
 * bf16 only, on [B, T, H·Dh] rows read and written with strides (no
 * permute; `rows` as in cuda_kernels.h, null for separate tensors); head dims where launch_config.h's CudnnAttentionHeadDim holds.
 * cuDNN is opened at run time (libcudnn.so.9 on the library path); one
 * graph per shape is built before the first step, when the session calls the
 * step's stepc_prepare_v1 (each attention call of its steps made with
 * ctx->prepare set: the graph built, nothing run), and kept; a shape no
 * prepare named is built on its first call (an eager step: never inside a
 * captured one), and the engine's description counts both. Each call
 * returns one of
 * stepc_cudnn_outcome: NOT_TAKEN sends the caller to stepc's own kernel
 * (no cuDNN, a shape it refuses, STEPC_ATTENTION=own, a workspace larger
 * than planned), noted once on stderr.
 *
 * STEPC_ATTENTION=own: never cuDNN; =cudnn: cuDNN or an error.
 * The backward: cuDNN's deterministic one (the same gradients every run, as
 * our kernel's), else its atomic-dQ one with a note; STEPC_CUDNN_DETERMINISTIC
 * =1 requires determinism (our kernel where cuDNN has none), =0 takes the
 * atomic one at once.
 *
 * The frontend (header-only C++) is compiled in this translation unit alone
 * (cudnn_attention.cc), so emitted steps never recompile it; a build without
 * its headers compiles cudnn_attention_none.cc instead, which takes nothing.
 */
#ifndef STEPC_CUDNN_ATTENTION_H_
#define STEPC_CUDNN_ATTENTION_H_

#include <stdint.h>

#include "runtime/kernels/cuda/cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

enum stepc_cudnn_outcome {
  STEPC_CUDNN_RAN = 0,
  STEPC_CUDNN_FAILED = 1,    /* ctx->error says why */
  STEPC_CUDNN_NOT_TAKEN = 2  /* run stepc's own kernel */
};

/* out [B, Tq, H·Dh] bf16; lse [B, H, Tq] f32 (natural log-sum-exp of the
 * scaled scores, our kernel's convention) unless null. workspace: device
 * memory of workspace_bytes. */
int stepc_cudnn_attention(stepc_cuda_ctx *ctx, const void *q, const void *k, const void *v,
                          int64_t batch, int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                          int64_t head_dim, int causal, double scale, void *out, float *lse,
                          void *workspace, int64_t workspace_bytes,
                          const stepc_attention_rows *rows);
/* dq, dk, dv bf16 from the forward's bf16 output and its log-sum-exp. */
int stepc_cudnn_attention_grad(stepc_cuda_ctx *ctx, const void *dout, const void *q,
                               const void *k, const void *v, const void *out, const float *lse,
                               int64_t batch, int64_t tq, int64_t tk, int64_t heads,
                               int64_t kv_heads, int64_t head_dim, int causal, double scale,
                               void *dq, void *dk, void *dv, void *workspace,
                               int64_t workspace_bytes, const stepc_attention_rows *rows);
/* Which attention engine runs bf16 calls, for the device line and the GPU
 * check's record: "cudnn 9.x.y (deterministic ...); N graphs built before
 * the first step", or "own (reason)". */
const char *stepc_cudnn_attention_engine(void);

#ifdef __cplusplus
}

namespace stepc::cuda {
// `rows`, or the row strides of separate [B, T, H·Dh] tensors (null rows):
// part of what keys a cuDNN graph (and the emulation's stand-in for one).
inline stepc_attention_rows RowsOrDense(const stepc_attention_rows *rows, int64_t heads,
                                        int64_t kv_heads, int64_t head_dim) {
  if (rows) return *rows;
  return {heads * head_dim, kv_heads * head_dim, heads * head_dim, kv_heads * head_dim};
}
}  // namespace stepc::cuda
#endif

#endif /* STEPC_CUDNN_ATTENTION_H_ */
