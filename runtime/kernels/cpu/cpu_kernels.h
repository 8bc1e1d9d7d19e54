/* cpu_kernels.h - the library kernels compiled step.so calls on the CPU.
 *
 * Compiled once with the runtime (libstepc_kernels_cpu.so); only the
 * schedule and the elementwise loops are generated per model. f32 data
 * (bf16 GEMM and attention operands under --precision=bf16), i32 ids, row-major; reductions accumulate in double. OpenMP splits work
 * across cores; GEMMs go to OpenBLAS (its OpenMP build, so the two share one
 * thread pool).
 */
#ifndef STEPC_CPU_KERNELS_H_
#define STEPC_CPU_KERNELS_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C[p] = op_a(A[p]) @ op_b(B[p], or B shared) for `batch` [M,K]x[K,N] products. */
void stepc_cpu_matmul(const float *a, const float *b, float *c, int64_t batch, int64_t m,
                      int64_t n, int64_t k, int transpose_a, int transpose_b, int shared_rhs);
/* The same, the bias (f32 [n]) added to each row of the f32 sum before it is
 * stored: through oneDNN the sum rounded, then the bias added, as a
 * separate add would (a projection's x·Wᵀ + b, one pass over the output
 * instead of two). */
void stepc_cpu_matmul_bias(const float *a, const float *b, float *c, int64_t batch, int64_t m,
                           int64_t n, int64_t k, int transpose_a, int transpose_b,
                           int shared_rhs, const float *bias);

/* bf16 (--precision=bf16): the upper half of an f32, stored as uint16_t. */
typedef uint16_t stepc_bf16;
static inline float stepc_bf16_to_f32(stepc_bf16 h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
/* Round to nearest, ties to even (as the interpreter, CUDA and oneDNN); a NaN
 * stays a (quiet) NaN. A select, not a branch: a loop around it must stay
 * vectorizable (a branch next to a vector libm call stops GCC's). */
static inline stepc_bf16 stepc_f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (bits >> 16) | 0x40u;
  uint32_t is_nan = 0u - (uint32_t)((bits & 0x7fffffffu) > 0x7f800000u);
  return (stepc_bf16)((rounded & ~is_nan) | (quiet_nan & is_nan));
}
/* A float that holds a bf16 value exactly (a fused loop's register, rounded
 * when it was made), stored: its upper half; rounding it again would cost
 * the loop a third of its time. */
static inline stepc_bf16 stepc_bf16_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (stepc_bf16)(bits >> 16);
}
/* f rounded to bf16 and widened back: a fused loop's bf16 value in a register. */
static inline float stepc_bf16_round(float f) { return stepc_bf16_to_f32(stepc_f32_to_bf16(f)); }
/* The cache lines of elements [first, min(last, n)) of an array of n
 * elements of `size` bytes, fetched for reading (_r) or writing (_w): an
 * elementwise loop over a large tensor asks for each array's chunk some
 * chunks ahead of its use, as the hardware prefetcher alone brings operands
 * that come from memory too late (a GELU-gradient loop over 2 M bf16
 * elements from DRAM: 1.17 ms without, 0.59 ms with). */
static inline void stepc_prefetch_r(const void *base, int64_t first, int64_t last, int64_t n,
                                    int64_t size) {
  const char *p = (const char *)base;
  for (int64_t b = first * size, end = (last < n ? last : n) * size; b < end; b += 64)
    __builtin_prefetch(p + b, 0, 3);
}
static inline void stepc_prefetch_w(void *base, int64_t first, int64_t last, int64_t n,
                                    int64_t size) {
  char *p = (char *)base;
  for (int64_t b = first * size, end = (last < n ? last : n) * size; b < end; b += 64)
    __builtin_prefetch(p + b, 1, 3);
}
#ifdef __cplusplus
/* table[b] = f(the bf16 value with bits b) for all 65536, in one vector
 * loop: a fused loop applying an expensive helper to a bf16 value reads it
 * here instead (the emitter's lookup tables), the same inlined code making
 * the same floats. True, for a static initializer. */
/* 1, which the compiler cannot fold (a gradient's table entry g(x) is
 * made as dy · g(x) at dy = 1, contracted as the loop contracts it). */
static inline float stepc_opaque_one(void) {
  volatile float one = 1.0f;
  return one;
}
extern "C++" {
template <typename F> bool stepc_fill_bf16_table(float *table, F f) {
#pragma omp simd
  for (int b = 0; b < 65536; ++b) table[b] = f(stepc_bf16_to_f32((stepc_bf16)b));
  return true;
}
}
#endif

/* The bf16 GEMM (oneDNN, on AMX or AVX512-BF16 where the CPU has them): bf16
 * operands, f32 accumulation, C in bf16 (c_f32 = 0) or f32 (c_f32 = 1).
 * Operands as stepc_cpu_matmul's. A non-null bias (f32 [n]) is added to
 * each row of the f32 sum before it is stored. */
void stepc_cpu_matmul_bf16(const stepc_bf16 *a, const stepc_bf16 *b, void *c, int c_f32,
                           int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                           int transpose_b, int shared_rhs, const float *bias);

void stepc_cpu_fill(float *out, int64_t n, float value);
/* NumPy broadcast of in (rank in_rank) to out (rank out_rank), right-aligned. */
void stepc_cpu_broadcast(const float *in, const int64_t *in_shape, int in_rank, float *out,
                         const int64_t *out_shape, int out_rank);
/* out[i0..] = in[permuted index]; out dim d is in dim perm[d]. */
void stepc_cpu_transpose(const float *in, const int64_t *in_shape, int rank,
                         const int64_t *perm, float *out);
/* Copies the box `box` from src (at src_offsets) into dst (at dst_offsets). */
void stepc_cpu_copy_box(const float *src, const int64_t *src_shape, const int64_t *src_offsets,
                        float *dst, const int64_t *dst_shape, const int64_t *dst_offsets,
                        const int64_t *box, int rank);
/* kind 0 sum, 1 max, 2 mean over the dims with reduce_mask[d] != 0. */
void stepc_cpu_reduce(const float *in, const int64_t *shape, int rank, const int *reduce_mask,
                      int kind, float *out);
/* The same over bf16 values, each widened as it is read. */
void stepc_cpu_reduce_of_bf16(const stepc_bf16 *in, const int64_t *shape, int rank,
                              const int *reduce_mask, int kind, float *out);
void stepc_cpu_reduce_max_grad(const float *dy, const float *x, const int64_t *shape, int rank,
                               const int *reduce_mask, float *dx);

void stepc_cpu_layer_norm(const float *x, const float *w, const float *b, int64_t rows,
                          int64_t d, double eps, float *y);
void stepc_cpu_layer_norm_grad(const float *dy, const float *x, const float *w, int64_t rows,
                               int64_t d, double eps, float *dx, float *dw, float *db);
void stepc_cpu_rms_norm(const float *x, const float *w, int64_t rows, int64_t d, double eps,
                        float *y);
/* The same, the result rounded to bf16: the norm whose only reader is a bf16
 * GEMM under --precision=bf16. */
void stepc_cpu_layer_norm_bf16(const float *x, const float *w, const float *b, int64_t rows,
                               int64_t d, double eps, stepc_bf16 *y);
void stepc_cpu_rms_norm_bf16(const float *x, const float *w, int64_t rows, int64_t d,
                             double eps, stepc_bf16 *y);
void stepc_cpu_rms_norm_grad(const float *dy, const float *x, const float *w, int64_t rows,
                             int64_t d, double eps, float *dx, float *dw);
/* The line ops' kernels (every Step_LineOp:
 * `stepc_cpu_<op>(operands..., outer, n, inner, result)`, the dim of length n
 * with `outer` lines before it and `inner` after) are declared by their ops:
 * generated from the dialect's ODS into the build tree's
 * runtime/kernels/cpu/line_kernels.h. */

/* Inverted dropout of n elements (runtime/kernels/philox.h): y = x / (1 - rate)
 * where kept. `_rows`: x holds rows [*first_row, ...) of rows of row_size
 * elements of the whole tensor, whose global indices key the draws. */
void stepc_cpu_dropout(const float *x, const int32_t *seed, const float *step, int64_t n,
                       int64_t row_size, double rate, int64_t stream, float *y);
void stepc_cpu_dropout_rows(const float *x, const int32_t *seed, const float *step,
                            const int32_t *first_row, int64_t n, int64_t row_size, double rate,
                            int64_t stream, float *y);

void stepc_cpu_attention(const float *q, const float *k, const float *v, int64_t batch,
                         int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                         int64_t head_dim, int causal, double scale, float *out);
void stepc_cpu_attention_grad(const float *dout, const float *q, const float *k,
                              const float *v, int64_t batch, int64_t tq, int64_t tk,
                              int64_t heads, int64_t kv_heads, int64_t head_dim, int causal,
                              double scale, float *dq, float *dk, float *dv);
/* bf16 operands and results (oneDNN's bf16 matmuls: AMX where the CPU has
 * it): f32 scores, softmax and accumulation; the probabilities and their
 * gradient rounded to bf16 where they feed a product, as FlashAttention on a
 * GPU; results rounded to nearest even. Without bf16 matmuls, the f32
 * kernels on widened copies. */
/* The f32 kernels with P and dS rounded to bf16 where they feed a product
 * (the bf16 kernels' numerics): their fallback on widened copies where the
 * CPU has no bf16 matmul. q (and dq), k (dk), v (dv) with row strides ldq,
 * ldk, ldv (a packed projection's width, or their own rows); the output and
 * its gradient [B, Tq, H·Dh]. */
void stepc_cpu_attention_rounded(const float *q, const float *k, const float *v, int64_t batch,
                                 int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                                 int64_t head_dim, int causal, double scale, int64_t ldq,
                                 int64_t ldk, int64_t ldv, float *out);
void stepc_cpu_attention_grad_rounded(const float *dout, const float *q, const float *k,
                                      const float *v, int64_t batch, int64_t tq, int64_t tk,
                                      int64_t heads, int64_t kv_heads, int64_t head_dim,
                                      int causal, double scale, int64_t ldq, int64_t ldk,
                                      int64_t ldv, float *dq, float *dk, float *dv);
void stepc_cpu_attention_bf16(const stepc_bf16 *q, const stepc_bf16 *k, const stepc_bf16 *v,
                              int64_t batch, int64_t tq, int64_t tk, int64_t heads,
                              int64_t kv_heads, int64_t head_dim, int causal, double scale,
                              stepc_bf16 *out);
void stepc_cpu_attention_grad_bf16(const stepc_bf16 *dout, const stepc_bf16 *q,
                                   const stepc_bf16 *k, const stepc_bf16 *v, int64_t batch,
                                   int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                                   int64_t head_dim, int causal, double scale, stepc_bf16 *dq,
                                   stepc_bf16 *dk, stepc_bf16 *dv);
/* With step.attention's additive f32 mask added to the scaled scores:
 * mask[b·mask_batch + h·mask_head + t·mask_row + j] (a broadcast dimension's
 * stride 0); a row masked whole gives 0. The bf16 ones run the f32 kernels
 * on widened copies. */
void stepc_cpu_attention_masked(const float *q, const float *k, const float *v,
                                const float *mask, int64_t batch, int64_t tq, int64_t tk,
                                int64_t heads, int64_t kv_heads, int64_t head_dim, int causal,
                                double scale, int64_t mask_batch, int64_t mask_head,
                                int64_t mask_row, float *out);
void stepc_cpu_attention_grad_masked(const float *dout, const float *q, const float *k,
                                     const float *v, const float *mask, int64_t batch,
                                     int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                                     int64_t head_dim, int causal, double scale,
                                     int64_t mask_batch, int64_t mask_head, int64_t mask_row,
                                     float *dq, float *dk, float *dv);
void stepc_cpu_attention_masked_bf16(const stepc_bf16 *q, const stepc_bf16 *k,
                                     const stepc_bf16 *v, const float *mask, int64_t batch,
                                     int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                                     int64_t head_dim, int causal, double scale,
                                     int64_t mask_batch, int64_t mask_head, int64_t mask_row,
                                     stepc_bf16 *out);
void stepc_cpu_attention_grad_masked_bf16(const stepc_bf16 *dout, const stepc_bf16 *q,
                                          const stepc_bf16 *k, const stepc_bf16 *v,
                                          const float *mask, int64_t batch, int64_t tq,
                                          int64_t tk, int64_t heads, int64_t kv_heads,
                                          int64_t head_dim, int causal, double scale,
                                          int64_t mask_batch, int64_t mask_head,
                                          int64_t mask_row, stepc_bf16 *dq, stepc_bf16 *dk,
                                          stepc_bf16 *dv);
/* The same on query, key and value read in place from their columns (offsets)
   of one [batch, len, width] tensor; the gradient's three parts written into
   their columns of one such tensor. */
void stepc_cpu_attention_packed(const float *qkv, int64_t batch, int64_t len, int64_t heads,
                                int64_t kv_heads, int64_t head_dim, int causal, double scale,
                                int64_t width, int64_t q_offset, int64_t k_offset,
                                int64_t v_offset, float *out);
void stepc_cpu_attention_grad_packed(const float *dout, const float *qkv, int64_t batch,
                                     int64_t len, int64_t heads, int64_t kv_heads,
                                     int64_t head_dim, int causal, double scale, int64_t width,
                                     int64_t q_offset, int64_t k_offset, int64_t v_offset,
                                     float *dqkv);
void stepc_cpu_attention_packed_bf16(const stepc_bf16 *qkv, int64_t batch, int64_t len,
                                     int64_t heads, int64_t kv_heads, int64_t head_dim,
                                     int causal, double scale, int64_t width, int64_t q_offset,
                                     int64_t k_offset, int64_t v_offset, stepc_bf16 *out);
void stepc_cpu_attention_grad_packed_bf16(const stepc_bf16 *dout, const stepc_bf16 *qkv,
                                          int64_t batch, int64_t len, int64_t heads,
                                          int64_t kv_heads, int64_t head_dim, int causal,
                                          double scale, int64_t width, int64_t q_offset,
                                          int64_t k_offset, int64_t v_offset,
                                          stepc_bf16 *dqkv);
/* step.quantize_fp8 (fp8.cc): each [tile_rows, tile_cols] tile of each
 * [rows, cols] matrix scaled by its power-of-two scale, rounded to fp8
 * (format 0 E4M3FN, 1 E5M2) and scaled back. */
void stepc_cpu_quantize_fp8(const float *x, int64_t matrices, int64_t rows, int64_t cols,
                            int64_t tile_rows, int64_t tile_cols, int format, float *y);
/* Mixture of experts (moe.cc; the routing of runtime/kernels/moe_routing.h).
 * top_k: per row of n, the k largest (NaN largest, ties to the lower index)
 * and their indices. The experts fall in `groups` equal groups (one per
 * expert-parallel rank; 1 without); with a positive `capacity` each expert
 * keeps at most that many pairs of each `segment` tokens (the rest dropped).
 * dispatch: rows in groups blocks of stepc_moe_block_rows (tokens·k
 * without a capacity), block g group g's pairs sorted by expert (zeros past
 * them), and counts [E] (the pairs kept). combine: out[n] = Σ_j
 * gates[n, j]·rows[slot(n, j)]; its gradient drows, dgates. grouped_matmul:
 * lhs [m, k] in `blocks` equal blocks, block b's expert e rows counted by
 * counts[b·E + e], times rhs[e] ([k, n], or [n, k] with transpose_b); the
 * weight gradient has rhs's shape and sums the blocks. */
void stepc_cpu_top_k(const float *x, int64_t rows, int64_t n, int64_t k, float *values,
                     int32_t *indices);
void stepc_cpu_moe_dispatch(const float *x, const int32_t *experts, int64_t tokens, int64_t k,
                            int64_t width, int64_t num_experts, int64_t groups,
                            int64_t capacity, int64_t segment, float *rows, int32_t *counts);
void stepc_cpu_moe_combine(const float *rows, const float *gates, const int32_t *experts,
                           int64_t tokens, int64_t k, int64_t width, int64_t num_experts,
                           int64_t groups, int64_t capacity, int64_t segment, float *out);
void stepc_cpu_moe_combine_grad(const float *dy, const float *rows, const float *gates,
                                const int32_t *experts, int64_t tokens, int64_t k, int64_t width,
                                int64_t num_experts, int64_t groups, int64_t capacity,
                                int64_t segment, float *drows, float *dgates);
void stepc_cpu_grouped_matmul(const float *lhs, const float *rhs, const int32_t *counts,
                              int64_t m, int64_t k, int64_t n, int64_t num_experts,
                              int64_t blocks, int transpose_b, float *out);
void stepc_cpu_grouped_matmul_weight_grad(const float *lhs, const float *dy,
                                          const int32_t *counts, int64_t m, int64_t k, int64_t n,
                                          int64_t num_experts, int64_t blocks, int transpose_b,
                                          float *dw);
void stepc_cpu_rotary(const float *x, int64_t batch, int64_t len, int64_t width,
                      int64_t head_dim, double theta, int inverse, float *y);

/* Return 0, or the 1-based position of the first id outside [0, bound). */
int64_t stepc_cpu_cross_entropy(const float *logits, const int32_t *targets, int64_t n,
                                int64_t classes, float *loss);
int64_t stepc_cpu_cross_entropy_grad(const float *dloss, const float *logits,
                                     const int32_t *targets, int64_t n, int64_t classes,
                                     float *dlogits);
/* Both: the loss and dlogits, each row read once. */
int64_t stepc_cpu_cross_entropy_fused(const float *logits, const int32_t *targets,
                                      const float *dloss, int64_t n, int64_t classes,
                                      float *loss, float *dlogits);
/* The same, dlogits rounded to bf16 (--precision=bf16: only the output
 * layer's GEMMs read it). */
int64_t stepc_cpu_cross_entropy_fused_bf16(const float *logits, const int32_t *targets,
                                           const float *dloss, int64_t n, int64_t classes,
                                           float *loss, stepc_bf16 *dlogits);
/* With options (step.cross_entropy's): rows whose target is `ignore` (a
 * value outside the i32 range ignores none) count nothing; label smoothing
 * and z-loss as the op states; the sum is over *count (0: zeros). The
 * fused form takes dloss after count. */
int64_t stepc_cpu_cross_entropy_masked(const float *logits, const int32_t *targets,
                                       const float *count, int64_t n, int64_t classes,
                                       int64_t ignore, double smoothing, double z_loss,
                                       float *loss);
int64_t stepc_cpu_cross_entropy_masked_grad(const float *dloss, const float *logits,
                                            const int32_t *targets, const float *count,
                                            int64_t n, int64_t classes, int64_t ignore,
                                            double smoothing, double z_loss, float *dlogits);
int64_t stepc_cpu_cross_entropy_masked_fused(const float *logits, const int32_t *targets,
                                             const float *count, const float *dloss, int64_t n,
                                             int64_t classes, int64_t ignore, double smoothing,
                                             double z_loss, float *loss, float *dlogits);
/* Index ops over [outer, n, inner] views (index.cc). argmax: the first
 * largest of each line (NaN largest); gather: out[o,k,j] = x[o,index,j] with
 * x's `size` along the dim (an index outside [0, size) reads 0);
 * gather_grad: the scatter-add of dy into zeros of [outer, size, inner]. */
void stepc_cpu_argmax(const float *x, int64_t outer, int64_t n, int64_t inner, int32_t *out);
void stepc_cpu_gather(const float *x, const int32_t *index, int64_t outer, int64_t n,
                      int64_t inner, int64_t size, float *out);
void stepc_cpu_gather_grad(const float *dy, const int32_t *index, int64_t outer, int64_t n,
                           int64_t inner, int64_t size, float *dx);
/* ids = targets with `ignore` replaced by 0; mask = 1 where counted, else 0. */
void stepc_cpu_target_mask(const int32_t *targets, int64_t n, int64_t ignore, int32_t *ids,
                           float *mask);
/* The number of the n targets other than `ignore`, as a float. */
void stepc_cpu_token_count(const int32_t *targets, int64_t n, int64_t ignore, float *count);
int64_t stepc_cpu_embedding(const float *table, const int32_t *ids, int64_t n, int64_t rows,
                            int64_t d, float *out);
int64_t stepc_cpu_embedding_grad(const float *dy, const int32_t *ids, int64_t n, int64_t rows,
                                 int64_t d, float *dtable);
/* Vocabulary-parallel forms: the table is rows [*first_row, *first_row +
 * rows) of a num_ids-row table; ids are checked against num_ids, and the
 * other ids give zero rows (forward) or add nothing (gradient). */
int64_t stepc_cpu_embedding_shard(const float *table, const int32_t *ids,
                                  const int32_t *first_row, int64_t n, int64_t rows,
                                  int64_t num_ids, int64_t d, float *out);
int64_t stepc_cpu_embedding_shard_grad(const float *dy, const int32_t *ids,
                                       const int32_t *first_row, int64_t n, int64_t rows,
                                       int64_t num_ids, int64_t d, float *dtable);

void stepc_cpu_adamw(float *param, const float *grad, float *m, float *v, int64_t n,
                     const float *lr, const float *step, const float *grad_scale, double beta1,
                     double beta2, double eps, double weight_decay);
/* torch.optim.Adam: weight decay as an L2 term of the gradient. */
void stepc_cpu_adam(float *param, const float *grad, float *m, float *v, int64_t n,
                    const float *lr, const float *step, const float *grad_scale, double beta1,
                    double beta2, double eps, double weight_decay);
/* torch.optim.SGD (dampening 0) on grad · grad_scale; buf is the momentum. */
void stepc_cpu_sgd(float *param, const float *grad, float *buf, int64_t n, const float *lr,
                   const float *grad_scale, double momentum, int nesterov, double weight_decay);
/* Lion (the reference implementation) on grad · grad_scale. */
void stepc_cpu_lion(float *param, const float *grad, float *m, int64_t n, const float *lr,
                    const float *grad_scale, double beta1, double beta2, double weight_decay);

/* Vector variants of the math the generated loops call exist in glibc's
 * libmvec (expf, logf since 2.22; erff, tanhf since 2.35): declaring them
 * `simd` lets GCC vectorise those loops (8x on GELU, same accuracy). step.so
 * links -lmvec. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float logf(float);
__attribute__((simd("notinbranch"))) float erff(float);
__attribute__((simd("notinbranch"))) float tanhf(float);
#endif

#ifdef __cplusplus
}
#endif

/* Elementwise math used by the generated loops (shared with CUDA and the
 * interpreter; C++ templates, so outside the extern "C" block). */
#include "../elementwise_math.h"

#endif /* STEPC_CPU_KERNELS_H_ */
