/* cuda_kernels.h - the library kernels a compiled CUDA step.so calls.
 *
 * Compiled once with nvcc for sm_90a into libstepc_kernels_cuda.a and linked
 * into every CUDA step.so; only the schedule and the elementwise kernels are
 * generated per model. Every launcher enqueues on ctx->stream (nothing
 * synchronises, so the whole step can be captured as a CUDA graph) and
 * returns 0, or nonzero with "call failed at file:line: reason" in
 * ctx->error. Data are row-major; floats are f32 unless a `type` argument
 * says bf16; reductions accumulate in f32 (or f64 where noted) in a fixed
 * order, so results do not depend on scheduling, except embedding_grad
 * (atomic adds). Scratch pointers are arena slices the compiler sized with
 * launch_config.h.
 */
#ifndef STEPC_CUDA_KERNELS_H_
#define STEPC_CUDA_KERNELS_H_

#ifdef STEPC_CUDA_EMULATION
#include "runtime/kernels/cuda/emulation.h"
#else
#include <cuda_runtime_api.h>
/* A kernel launch, spelt so that emulation.h can run it on the host; a
 * cooperative kernel's threads meet (__syncthreads, warp shuffles), which the
 * emulation needs to know to give each its own host thread. */
#define STEPC_LAUNCH(grid, block, shared, stream, ...) __VA_ARGS__<<<grid, block, shared, stream>>>
#define STEPC_LAUNCH_COOPERATIVE STEPC_LAUNCH
#define STEPC_DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif
#include <stddef.h>
#include <stdint.h>

/* <cuda_bf16.h>'s element type (the emulation's own), for the entry points
 * that take bf16 values. */
#ifdef __cplusplus
struct __nv_bfloat16;
#else
typedef struct __nv_bfloat16 __nv_bfloat16;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What every launcher needs. `status` is device memory: a failed id check
 * writes [check site, position, id, bound] there (first failure wins) and the
 * runtime reports it after the step. */
typedef struct stepc_cuda_ctx {
  cudaStream_t stream;
  void *gemm_workspace; /* kGemmWorkspaceBytes of device memory */
  int32_t *status;
  char *error;
  size_t error_len;
  /* Nonzero: a call builds what it will need (cuDNN's attention graphs) and
   * launches nothing, reading and writing no buffer (stepc_prepare_v1). */
  int prepare;
} stepc_cuda_ctx;

/* Element types of the operands that may be bf16 (mixed precision); an fp8
 * GEMM's operand may also be packed already (STEPC_CUDA_FP8: fp8 bytes
 * with a scale per block, stepc_cuda_pack_fp8_rows_columns). */
enum stepc_cuda_type { STEPC_CUDA_F32 = 0, STEPC_CUDA_BF16 = 1, STEPC_CUDA_FP8 = 2 };

int stepc_cuda_fill(stepc_cuda_ctx *ctx, float *out, int64_t n, float value);
int stepc_cuda_broadcast(stepc_cuda_ctx *ctx, const float *in, const int64_t *in_shape,
                         int in_rank, float *out, const int64_t *out_shape, int out_rank);
int stepc_cuda_transpose(stepc_cuda_ctx *ctx, const float *in, const int64_t *in_shape, int rank,
                         const int64_t *perm, float *out);
int stepc_cuda_copy_box(stepc_cuda_ctx *ctx, const float *src, const int64_t *src_shape,
                        const int64_t *src_offsets, float *dst, const int64_t *dst_shape,
                        const int64_t *dst_offsets, const int64_t *box, int rank);
/* kind 0 sum, 1 max, 2 mean, 3 sum of squares over the dims with
 * reduce_mask[d] != 0;
 * scratch: ReduceScratchFloats(outputs, reduced). */
int stepc_cuda_reduce(stepc_cuda_ctx *ctx, const float *in, const int64_t *shape, int rank,
                      const int *reduce_mask, int kind, float *scratch, float *out);
/* The same of bf16 values, each widened as it is read (no f32 copy). */
int stepc_cuda_reduce_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *in,
                              const int64_t *shape, int rank, const int *reduce_mask, int kind,
                              float *scratch, float *out);
int stepc_cuda_reduce_max_grad(stepc_cuda_ctx *ctx, const float *dy, const float *x,
                               const int64_t *shape, int rank, const int *reduce_mask,
                               float *dx);

int stepc_cuda_layer_norm(stepc_cuda_ctx *ctx, const float *x, const float *w, const float *b,
                          int64_t rows, int64_t d, double eps, float *y);
/* scratch: PlanNormGrad(rows, d).scratch_floats. */
int stepc_cuda_layer_norm_grad(stepc_cuda_ctx *ctx, const float *dy, const float *x,
                               const float *w, int64_t rows, int64_t d, double eps,
                               float *scratch, float *dx, float *dw, float *db);
int stepc_cuda_rms_norm(stepc_cuda_ctx *ctx, const float *x, const float *w, int64_t rows,
                        int64_t d, double eps, float *y);
/* The two norms written in bf16 (rounded once as stored): a norm whose only
 * reader is its rounding for a GEMM writes no f32 copy. */
int stepc_cuda_layer_norm_bf16(stepc_cuda_ctx *ctx, const float *x, const float *w,
                               const float *b, int64_t rows, int64_t d, double eps,
                               __nv_bfloat16 *y);
int stepc_cuda_rms_norm_bf16(stepc_cuda_ctx *ctx, const float *x, const float *w, int64_t rows,
                             int64_t d, double eps, __nv_bfloat16 *y);
int stepc_cuda_rms_norm_grad(stepc_cuda_ctx *ctx, const float *dy, const float *x,
                             const float *w, int64_t rows, int64_t d, double eps,
                             float *scratch, float *dx, float *dw);
/* The residual add before a norm and the norm in one pass: sum = a + b
 * (b f32, or bf16: `_of_bf16`), y = norm(sum) (f32, or bf16: `_bf16`). */
#define STEPC_CUDA_LAYER_NORM_ADD(name, TB, T)                                            \
  int name(stepc_cuda_ctx *ctx, const float *a, const TB *b, const float *w,              \
           const float *bias, int64_t rows, int64_t d, double eps, float *sum, T *y);
#define STEPC_CUDA_RMS_NORM_ADD(name, TB, T)                                              \
  int name(stepc_cuda_ctx *ctx, const float *a, const TB *b, const float *w, int64_t rows, \
           int64_t d, double eps, float *sum, T *y);
STEPC_CUDA_LAYER_NORM_ADD(stepc_cuda_layer_norm_add, float, float)
STEPC_CUDA_LAYER_NORM_ADD(stepc_cuda_layer_norm_add_bf16, float, __nv_bfloat16)
STEPC_CUDA_LAYER_NORM_ADD(stepc_cuda_layer_norm_add_of_bf16, __nv_bfloat16, float)
STEPC_CUDA_LAYER_NORM_ADD(stepc_cuda_layer_norm_add_of_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
STEPC_CUDA_RMS_NORM_ADD(stepc_cuda_rms_norm_add, float, float)
STEPC_CUDA_RMS_NORM_ADD(stepc_cuda_rms_norm_add_bf16, float, __nv_bfloat16)
STEPC_CUDA_RMS_NORM_ADD(stepc_cuda_rms_norm_add_of_bf16, __nv_bfloat16, float)
STEPC_CUDA_RMS_NORM_ADD(stepc_cuda_rms_norm_add_of_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
#undef STEPC_CUDA_LAYER_NORM_ADD
#undef STEPC_CUDA_RMS_NORM_ADD
/* The same with b a table of `period` rows [period, d] repeated down x's
 * rows (row r adds row r % period: GPT-2's position embeddings, no
 * broadcast written first). */
#define STEPC_CUDA_LAYER_NORM_ADD_OF_REPEATED(name, T)                                     \
  int name(stepc_cuda_ctx *ctx, const float *a, const float *b, const float *w,            \
           const float *bias, int64_t rows, int64_t d, double eps, int64_t period,         \
           float *sum, T *y);
#define STEPC_CUDA_RMS_NORM_ADD_OF_REPEATED(name, T)                                       \
  int name(stepc_cuda_ctx *ctx, const float *a, const float *b, const float *w,            \
           int64_t rows, int64_t d, double eps, int64_t period, float *sum, T *y);
STEPC_CUDA_LAYER_NORM_ADD_OF_REPEATED(stepc_cuda_layer_norm_add_of_repeated, float)
STEPC_CUDA_LAYER_NORM_ADD_OF_REPEATED(stepc_cuda_layer_norm_add_of_repeated_bf16, __nv_bfloat16)
STEPC_CUDA_RMS_NORM_ADD_OF_REPEATED(stepc_cuda_rms_norm_add_of_repeated, float)
STEPC_CUDA_RMS_NORM_ADD_OF_REPEATED(stepc_cuda_rms_norm_add_of_repeated_bf16, __nv_bfloat16)
#undef STEPC_CUDA_LAYER_NORM_ADD_OF_REPEATED
#undef STEPC_CUDA_RMS_NORM_ADD_OF_REPEATED
/* The same with dy in bf16 (the input gradient a bf16 GEMM left). */
int stepc_cuda_layer_norm_grad_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *dy,
                                       const float *x, const float *w, int64_t rows, int64_t d,
                                       double eps, float *scratch, float *dx, float *dw,
                                       float *db);
int stepc_cuda_rms_norm_grad_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *dy,
                                     const float *x, const float *w, int64_t rows, int64_t d,
                                     double eps, float *scratch, float *dx, float *dw);
/* Into the residual stream's gradient: sum = acc + dx (dx as above), and
 * with `_rounded` its bf16 copy `rounded`; dy f32 or bf16 (`_of_bf16`). */
#define STEPC_CUDA_LAYER_NORM_GRAD_ADD(name, TD, ROUNDED)                                 \
  int name(stepc_cuda_ctx *ctx, const TD *dy, const float *x, const float *w,             \
           const float *acc, int64_t rows, int64_t d, double eps, float *scratch,         \
           float *sum, float *dw, float *db ROUNDED);
#define STEPC_CUDA_RMS_NORM_GRAD_ADD(name, TD, ROUNDED)                                   \
  int name(stepc_cuda_ctx *ctx, const TD *dy, const float *x, const float *w,             \
           const float *acc, int64_t rows, int64_t d, double eps, float *scratch,         \
           float *sum, float *dw ROUNDED);
#define STEPC_CUDA_NO_ROUNDED
#define STEPC_CUDA_ROUNDED , __nv_bfloat16 *rounded
STEPC_CUDA_LAYER_NORM_GRAD_ADD(stepc_cuda_layer_norm_grad_add, float, STEPC_CUDA_NO_ROUNDED)
STEPC_CUDA_LAYER_NORM_GRAD_ADD(stepc_cuda_layer_norm_grad_add_of_bf16, __nv_bfloat16,
                               STEPC_CUDA_NO_ROUNDED)
STEPC_CUDA_LAYER_NORM_GRAD_ADD(stepc_cuda_layer_norm_grad_add_rounded, float, STEPC_CUDA_ROUNDED)
STEPC_CUDA_LAYER_NORM_GRAD_ADD(stepc_cuda_layer_norm_grad_add_rounded_of_bf16, __nv_bfloat16,
                               STEPC_CUDA_ROUNDED)
STEPC_CUDA_RMS_NORM_GRAD_ADD(stepc_cuda_rms_norm_grad_add, float, STEPC_CUDA_NO_ROUNDED)
STEPC_CUDA_RMS_NORM_GRAD_ADD(stepc_cuda_rms_norm_grad_add_of_bf16, __nv_bfloat16,
                             STEPC_CUDA_NO_ROUNDED)
STEPC_CUDA_RMS_NORM_GRAD_ADD(stepc_cuda_rms_norm_grad_add_rounded, float, STEPC_CUDA_ROUNDED)
STEPC_CUDA_RMS_NORM_GRAD_ADD(stepc_cuda_rms_norm_grad_add_rounded_of_bf16, __nv_bfloat16,
                             STEPC_CUDA_ROUNDED)
/* dy the f32 sum of two or three bf16 input gradients, (dy0 + dy1) + dy2,
 * as the step adds them (`_of_bf16_sum2`, `_sum3`: Llama's gate and up, or
 * q, k and v, projections' input gradients read as their GEMMs wrote them). */
#define STEPC_CUDA_DY_SUM2 const __nv_bfloat16 *dy0, const __nv_bfloat16 *dy1
#define STEPC_CUDA_DY_SUM3 STEPC_CUDA_DY_SUM2, const __nv_bfloat16 *dy2
#define STEPC_CUDA_LAYER_NORM_GRAD_ADD_SUM(name, TERMS, ROUNDED)                          \
  int name(stepc_cuda_ctx *ctx, TERMS, const float *x, const float *w, const float *acc,  \
           int64_t rows, int64_t d, double eps, float *scratch, float *sum, float *dw,    \
           float *db ROUNDED);
#define STEPC_CUDA_RMS_NORM_GRAD_ADD_SUM(name, TERMS, ROUNDED)                            \
  int name(stepc_cuda_ctx *ctx, TERMS, const float *x, const float *w, const float *acc,  \
           int64_t rows, int64_t d, double eps, float *scratch, float *sum,               \
           float *dw ROUNDED);
STEPC_CUDA_LAYER_NORM_GRAD_ADD_SUM(stepc_cuda_layer_norm_grad_add_of_bf16_sum2,
                                   STEPC_CUDA_DY_SUM2, STEPC_CUDA_NO_ROUNDED)
STEPC_CUDA_LAYER_NORM_GRAD_ADD_SUM(stepc_cuda_layer_norm_grad_add_of_bf16_sum3,
                                   STEPC_CUDA_DY_SUM3, STEPC_CUDA_NO_ROUNDED)
STEPC_CUDA_LAYER_NORM_GRAD_ADD_SUM(stepc_cuda_layer_norm_grad_add_rounded_of_bf16_sum2,
                                   STEPC_CUDA_DY_SUM2, STEPC_CUDA_ROUNDED)
STEPC_CUDA_LAYER_NORM_GRAD_ADD_SUM(stepc_cuda_layer_norm_grad_add_rounded_of_bf16_sum3,
                                   STEPC_CUDA_DY_SUM3, STEPC_CUDA_ROUNDED)
STEPC_CUDA_RMS_NORM_GRAD_ADD_SUM(stepc_cuda_rms_norm_grad_add_of_bf16_sum2, STEPC_CUDA_DY_SUM2,
                                 STEPC_CUDA_NO_ROUNDED)
STEPC_CUDA_RMS_NORM_GRAD_ADD_SUM(stepc_cuda_rms_norm_grad_add_of_bf16_sum3, STEPC_CUDA_DY_SUM3,
                                 STEPC_CUDA_NO_ROUNDED)
STEPC_CUDA_RMS_NORM_GRAD_ADD_SUM(stepc_cuda_rms_norm_grad_add_rounded_of_bf16_sum2,
                                 STEPC_CUDA_DY_SUM2, STEPC_CUDA_ROUNDED)
STEPC_CUDA_RMS_NORM_GRAD_ADD_SUM(stepc_cuda_rms_norm_grad_add_rounded_of_bf16_sum3,
                                 STEPC_CUDA_DY_SUM3, STEPC_CUDA_ROUNDED)
#undef STEPC_CUDA_DY_SUM2
#undef STEPC_CUDA_DY_SUM3
#undef STEPC_CUDA_LAYER_NORM_GRAD_ADD_SUM
#undef STEPC_CUDA_RMS_NORM_GRAD_ADD_SUM
/* Where the residual stream's gradient starts (no add): dx and its bf16
 * copy `rounded`. */
int stepc_cuda_layer_norm_grad_rounded(stepc_cuda_ctx *ctx, const float *dy, const float *x,
                                       const float *w, int64_t rows, int64_t d, double eps,
                                       float *scratch, float *dx, float *dw, float *db,
                                       __nv_bfloat16 *rounded);
int stepc_cuda_layer_norm_grad_rounded_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *dy,
                                               const float *x, const float *w, int64_t rows,
                                               int64_t d, double eps, float *scratch, float *dx,
                                               float *dw, float *db, __nv_bfloat16 *rounded);
int stepc_cuda_rms_norm_grad_rounded(stepc_cuda_ctx *ctx, const float *dy, const float *x,
                                     const float *w, int64_t rows, int64_t d, double eps,
                                     float *scratch, float *dx, float *dw,
                                     __nv_bfloat16 *rounded);
int stepc_cuda_rms_norm_grad_rounded_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *dy,
                                             const float *x, const float *w, int64_t rows,
                                             int64_t d, double eps, float *scratch, float *dx,
                                             float *dw, __nv_bfloat16 *rounded);
#undef STEPC_CUDA_LAYER_NORM_GRAD_ADD
#undef STEPC_CUDA_RMS_NORM_GRAD_ADD
#undef STEPC_CUDA_NO_ROUNDED
#undef STEPC_CUDA_ROUNDED
/* The line ops' kernels (every Step_LineOp)
 * are declared by their ops: generated from the dialect's ODS into the build
 * tree's runtime/kernels/cuda/line_kernels.h. */
/* Rotary position embeddings over [batch, len, width] (heads of head_dim);
 * x and y f32 or bf16 (`_of_bf16` reads bf16, `_bf16` writes it).
 * scratch: RotaryScratchFloats(len, head_dim) (the angles' table). */
#define STEPC_CUDA_ROTARY(name, TI, TO)                                                 \
  int name(stepc_cuda_ctx *ctx, const TI *x, int64_t batch, int64_t len, int64_t width, \
           int64_t head_dim, double theta, int inverse, float *scratch, TO *y);
STEPC_CUDA_ROTARY(stepc_cuda_rotary, float, float)
STEPC_CUDA_ROTARY(stepc_cuda_rotary_bf16, float, __nv_bfloat16)
STEPC_CUDA_ROTARY(stepc_cuda_rotary_of_bf16, __nv_bfloat16, float)
STEPC_CUDA_ROTARY(stepc_cuda_rotary_of_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
#undef STEPC_CUDA_ROTARY

/* step.quantize_fp8 (fp8.cu), as the CPU's stepc_cpu_quantize_fp8; x and y
 * f32 or bf16 (`_of_bf16` reads bf16, `_bf16` writes it: the step's
 * widening of its input and rounding of its result for the GEMMs). */
#define STEPC_CUDA_QUANTIZE_FP8(name, TI, TO)                                           \
  int name(stepc_cuda_ctx *ctx, const TI *x, int64_t matrices, int64_t rows, int64_t cols, \
           int64_t tile_rows, int64_t tile_cols, int format, TO *y);
STEPC_CUDA_QUANTIZE_FP8(stepc_cuda_quantize_fp8, float, float)
STEPC_CUDA_QUANTIZE_FP8(stepc_cuda_quantize_fp8_bf16, float, __nv_bfloat16)
STEPC_CUDA_QUANTIZE_FP8(stepc_cuda_quantize_fp8_of_bf16, __nv_bfloat16, float)
STEPC_CUDA_QUANTIZE_FP8(stepc_cuda_quantize_fp8_of_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
#undef STEPC_CUDA_QUANTIZE_FP8
/* x [rows, cols] rounded both ways a linear layer's fp8 products take it,
 * in one pass: [1, 128] tiles (by_rows) and [128, 1] tiles (by_columns),
 * each as step.quantize_fp8 then rounded to bf16 (exact). */
int stepc_cuda_quantize_fp8_rows_columns_bf16(stepc_cuda_ctx *ctx, const float *x, int64_t rows,
                                              int64_t cols, int format, __nv_bfloat16 *by_rows,
                                              __nv_bfloat16 *by_columns);
/* The same of bf16 values (a bf16 gradient widened only for its roundings
 * and its bias's sum), read as they are. */
int stepc_cuda_quantize_fp8_rows_columns_of_bf16_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *x,
                                                      int64_t rows, int64_t cols, int format,
                                                      __nv_bfloat16 *by_rows,
                                                      __nv_bfloat16 *by_columns);
/* The GELU of x (`tanh_form` 0: exact, 1: tanh; x the MLP's first
 * product, f32 or bf16) rounded both ways: the activation itself is never
 * stored. */
int stepc_cuda_quantize_fp8_rows_columns_gelu_bf16(stepc_cuda_ctx *ctx, const float *x,
                                                   int64_t rows, int64_t cols, int format,
                                                   int tanh_form, __nv_bfloat16 *by_rows,
                                                   __nv_bfloat16 *by_columns);
int stepc_cuda_quantize_fp8_rows_columns_gelu_of_bf16_bf16(stepc_cuda_ctx *ctx,
                                                           const __nv_bfloat16 *x, int64_t rows,
                                                           int64_t cols, int format,
                                                           int tanh_form,
                                                           __nv_bfloat16 *by_rows,
                                                           __nv_bfloat16 *by_columns);
/* Either, also writing x's column sums (`sums` [cols], f32: the bias
 * gradient of the output gradient x, from its unrounded values), the
 * panels' partial sums in scratch (Fp8PairColumnSumScratchFloats). */
int stepc_cuda_quantize_fp8_rows_columns_dbias_bf16(stepc_cuda_ctx *ctx, const float *x,
                                                    int64_t rows, int64_t cols, int format,
                                                    float *scratch, __nv_bfloat16 *by_rows,
                                                    __nv_bfloat16 *by_columns, float *sums);
int stepc_cuda_quantize_fp8_rows_columns_dbias_of_bf16_bf16(
    stepc_cuda_ctx *ctx, const __nv_bfloat16 *x, int64_t rows, int64_t cols, int format,
    float *scratch, __nv_bfloat16 *by_rows, __nv_bfloat16 *by_columns, float *sums);
/* x [rows, cols] (f32, or bf16: _of_bf16) packed both ways the fp8 GEMMs
 * read it, in one pass, each 1x128 block scaled as step.quantize_fp8 with a
 * tile of that block would scale it: along the rows' cols, `row_bytes`
 * [rows, cols] (fp8 bytes in `format`) with `row_scales` [cols / 128,
 * rows] (each block's 1 / scale); along the cols' rows, `col_bytes` [cols,
 * rows] (x transposed) with `col_scales` [rows / 128, cols]. The GELU of x
 * (_gelu), or x's column sums too (_dbias, as the rounding pair's). */
int stepc_cuda_pack_fp8_rows_columns(stepc_cuda_ctx *ctx, const float *x, int64_t rows,
                                     int64_t cols, int format, uint8_t *row_bytes,
                                     float *row_scales, uint8_t *col_bytes, float *col_scales);
int stepc_cuda_pack_fp8_rows_columns_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *x,
                                             int64_t rows, int64_t cols, int format,
                                             uint8_t *row_bytes, float *row_scales,
                                             uint8_t *col_bytes, float *col_scales);
int stepc_cuda_pack_fp8_rows_columns_gelu(stepc_cuda_ctx *ctx, const float *x, int64_t rows,
                                          int64_t cols, int format, int tanh_form,
                                          uint8_t *row_bytes, float *row_scales,
                                          uint8_t *col_bytes, float *col_scales);
int stepc_cuda_pack_fp8_rows_columns_gelu_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *x,
                                                  int64_t rows, int64_t cols, int format,
                                                  int tanh_form, uint8_t *row_bytes,
                                                  float *row_scales, uint8_t *col_bytes,
                                                  float *col_scales);
int stepc_cuda_pack_fp8_rows_columns_dbias(stepc_cuda_ctx *ctx, const float *x, int64_t rows,
                                           int64_t cols, int format, float *scratch,
                                           uint8_t *row_bytes, float *row_scales,
                                           uint8_t *col_bytes, float *col_scales, float *sums);
int stepc_cuda_pack_fp8_rows_columns_dbias_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *x,
                                                   int64_t rows, int64_t cols, int format,
                                                   float *scratch, uint8_t *row_bytes,
                                                   float *row_scales, uint8_t *col_bytes,
                                                   float *col_scales, float *sums);
/* x [rows, cols] (f32, or bf16: _of_bf16) packed along its cols alone
 * (1x128 blocks: `bytes` [rows, cols], `scales` [cols / 128, rows]): a
 * layer's input in a forward without its backward. */
int stepc_cuda_pack_fp8_rows(stepc_cuda_ctx *ctx, const float *x, int64_t rows, int64_t cols,
                             int format, uint8_t *bytes, float *scales);
int stepc_cuda_pack_fp8_rows_of_bf16(stepc_cuda_ctx *ctx, const __nv_bfloat16 *x, int64_t rows,
                                     int64_t cols, int format, uint8_t *bytes, float *scales);
/* A weight w [rows, cols] (f32) in 128x128 blocks as the fp8 GEMMs read it,
 * each block scaled as step.quantize_fp8 with [128, 128] tiles scales it:
 * as stored (`bytes` [rows, cols], `scales` [rows / 128, L(cols)]) for the
 * forward product, transposed (`t_bytes` [cols, rows], `t_scales` [cols /
 * 128, L(rows)]) for the input gradient's, or both; L(d) the blocks along d
 * padded to a multiple of 4. */
int stepc_cuda_pack_fp8_blocks(stepc_cuda_ctx *ctx, const float *w, int64_t rows, int64_t cols,
                               int format, uint8_t *bytes, float *scales);
int stepc_cuda_pack_fp8_blocks_transposed(stepc_cuda_ctx *ctx, const float *w, int64_t rows,
                                          int64_t cols, int format, uint8_t *t_bytes,
                                          float *t_scales);
int stepc_cuda_pack_fp8_blocks_both(stepc_cuda_ctx *ctx, const float *w, int64_t rows,
                                    int64_t cols, int format, uint8_t *bytes, float *scales,
                                    uint8_t *t_bytes, float *t_scales);
/* The same of the GELU's gradient at `pre` of dy (`tanh_form` 0 exact, 1
 * tanh; dy and pre f32, or bf16: _of_bf16), the gradient never stored; with
 * its column sums (_dbias: the bias gradient). */
int stepc_cuda_pack_fp8_rows_columns_gelu_grad(stepc_cuda_ctx *ctx, const float *dy,
                                               const float *pre, int64_t rows, int64_t cols,
                                               int format, int tanh_form, uint8_t *row_bytes,
                                               float *row_scales, uint8_t *col_bytes,
                                               float *col_scales);
int stepc_cuda_pack_fp8_rows_columns_gelu_grad_of_bf16(
    stepc_cuda_ctx *ctx, const __nv_bfloat16 *dy, const __nv_bfloat16 *pre, int64_t rows,
    int64_t cols, int format, int tanh_form, uint8_t *row_bytes, float *row_scales,
    uint8_t *col_bytes, float *col_scales);
int stepc_cuda_pack_fp8_rows_columns_gelu_grad_dbias(stepc_cuda_ctx *ctx, const float *dy,
                                                     const float *pre, int64_t rows,
                                                     int64_t cols, int format, int tanh_form,
                                                     float *scratch, uint8_t *row_bytes,
                                                     float *row_scales, uint8_t *col_bytes,
                                                     float *col_scales, float *sums);
int stepc_cuda_pack_fp8_rows_columns_gelu_grad_dbias_of_bf16(
    stepc_cuda_ctx *ctx, const __nv_bfloat16 *dy, const __nv_bfloat16 *pre, int64_t rows,
    int64_t cols, int format, int tanh_form, float *scratch, uint8_t *row_bytes,
    float *row_scales, uint8_t *col_bytes, float *col_scales, float *sums);
/* The same of SwiGLU's product silu(gate) * other (Llama's activation, or
 * the up projection's output gradient, other the input gradient), and of
 * the gate's output gradient silu_grad(dy * up, gate), from bf16 values,
 * neither stored. */
int stepc_cuda_pack_fp8_rows_columns_swiglu_of_bf16(stepc_cuda_ctx *ctx,
                                                    const __nv_bfloat16 *gate,
                                                    const __nv_bfloat16 *other, int64_t rows,
                                                    int64_t cols, int format,
                                                    uint8_t *row_bytes, float *row_scales,
                                                    uint8_t *col_bytes, float *col_scales);
int stepc_cuda_pack_fp8_rows_columns_swiglu_gate_grad_of_bf16(
    stepc_cuda_ctx *ctx, const __nv_bfloat16 *gate, const __nv_bfloat16 *dy,
    const __nv_bfloat16 *up, int64_t rows, int64_t cols, int format, uint8_t *row_bytes,
    float *row_scales, uint8_t *col_bytes, float *col_scales);
/* Mixture of experts (moe.cu), as the CPU kernels of kernels/cpu/moe.cc;
 * dispatch, combine and its gradient route into scratch of
 * 4·(3·experts + tokens·k + groups) bytes. */
int stepc_cuda_top_k(stepc_cuda_ctx *ctx, const float *x, int64_t rows, int64_t n, int64_t k,
                     float *values, int32_t *indices);
int stepc_cuda_moe_dispatch(stepc_cuda_ctx *ctx, const float *x, const int32_t *experts,
                            int64_t tokens, int64_t k, int64_t width, int64_t num_experts,
                            int64_t groups, int64_t capacity, int64_t segment, float *scratch,
                            float *rows, int32_t *counts);
int stepc_cuda_moe_combine(stepc_cuda_ctx *ctx, const float *rows, const float *gates,
                           const int32_t *experts, int64_t tokens, int64_t k, int64_t width,
                           int64_t num_experts, int64_t groups, int64_t capacity,
                           int64_t segment, float *scratch, float *out);
int stepc_cuda_moe_combine_grad(stepc_cuda_ctx *ctx, const float *dy, const float *rows,
                                const float *gates, const int32_t *experts, int64_t tokens,
                                int64_t k, int64_t width, int64_t num_experts, int64_t groups,
                                int64_t capacity, int64_t segment, float *scratch, float *drows,
                                float *dgates);
int stepc_cuda_grouped_matmul(stepc_cuda_ctx *ctx, const float *lhs, const float *rhs,
                              const int32_t *counts, int64_t m, int64_t k, int64_t n,
                              int64_t num_experts, int64_t blocks, int transpose_b, float *out);
int stepc_cuda_grouped_matmul_weight_grad(stepc_cuda_ctx *ctx, const float *lhs,
                                          const float *dy, const int32_t *counts, int64_t m,
                                          int64_t k, int64_t n, int64_t num_experts,
                                          int64_t blocks, int transpose_b, float *dw);

/* Flash attention on [B, T, H·Dh] (step.attention): q, k, v of `in_type`,
 * the output of `out_type`; the log-sum-exp of each row ([B, H, T]) to `lse`
 * unless null (saved for the backward). head_dim <= kAttentionMaxHeadDim. */
int stepc_cuda_attention(stepc_cuda_ctx *ctx, const void *q, const void *k, const void *v,
                         int in_type, int64_t batch, int64_t tq, int64_t tk, int64_t heads,
                         int64_t kv_heads, int64_t head_dim, int causal, double scale,
                         void *out, int out_type, float *lse);
/* The backward from the forward's output (`saved_out`, of `saved_out_type`)
 * and log-sum-exp (`saved_lse`) when the forward kept them, else recomputed
 * into scratch (AttentionGradScratchBytes(..., saved)); then dQ, and dK and
 * dV summed over the query heads of their group: no atomics. */
int stepc_cuda_attention_grad(stepc_cuda_ctx *ctx, const void *dout, const void *q,
                              const void *k, const void *v, int in_type, int64_t batch,
                              int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                              int64_t head_dim, int causal, double scale, char *scratch,
                              const void *saved_out, int saved_out_type,
                              const float *saved_lse, void *dq, void *dk, void *dv,
                              int out_type);

/* The two with step.attention's additive f32 mask added to the scaled
 * scores: mask[b·mask_batch + h·mask_head + i·mask_row + j] (a broadcast
 * dimension's stride 0); a row masked whole gives 0. Our scalar kernels. */
int stepc_cuda_attention_masked(stepc_cuda_ctx *ctx, const void *q, const void *k,
                                const void *v, int in_type, int64_t batch, int64_t tq,
                                int64_t tk, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                int causal, double scale, const float *mask, int64_t mask_batch,
                                int64_t mask_head, int64_t mask_row, void *out, int out_type,
                                float *lse);
int stepc_cuda_attention_grad_masked(stepc_cuda_ctx *ctx, const void *dout, const void *q,
                                     const void *k, const void *v, int in_type, int64_t batch,
                                     int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                                     int64_t head_dim, int causal, double scale,
                                     const float *mask, int64_t mask_batch, int64_t mask_head,
                                     int64_t mask_row, char *scratch, const void *saved_out,
                                     int saved_out_type, const float *saved_lse, void *dq,
                                     void *dk, void *dv, int out_type);

/* Row strides (elements from one token to the next) of attention's q, k and
 * v, dq, and dk and dv. Separate tensors: H·Dh, Hkv·Dh, H·Dh, Hkv·Dh (what
 * a null `rows` means). Columns of the packed QKV projection [B, T, W]:
 * W for all four. The output and its gradient are always [B, Tq, H·Dh]. */
typedef struct stepc_attention_rows {
  int64_t q, kv, dq, dkv;
} stepc_attention_rows;

/* Attention on the packed projection: q, k and v are the columns
 * [q_offset, +H·Dh), [k_offset, +Hkv·Dh), [v_offset, +Hkv·Dh) of qkv's
 * [B, T, width] rows (no slices copied); the backward writes dQ, dK, dV into
 * the same columns of dqkv, which they must tile exactly (every element
 * written). Otherwise as the two above (tq = tk = t). */
int stepc_cuda_attention_packed(stepc_cuda_ctx *ctx, const void *qkv, int64_t width,
                                int64_t q_offset, int64_t k_offset, int64_t v_offset,
                                int in_type, int64_t batch, int64_t t, int64_t heads,
                                int64_t kv_heads, int64_t head_dim, int causal, double scale,
                                void *out, int out_type, float *lse);
int stepc_cuda_attention_grad_packed(stepc_cuda_ctx *ctx, const void *dout, const void *qkv,
                                     int64_t width, int64_t q_offset, int64_t k_offset,
                                     int64_t v_offset, int in_type, int64_t batch, int64_t t,
                                     int64_t heads, int64_t kv_heads, int64_t head_dim,
                                     int causal, double scale, char *scratch,
                                     const void *saved_out, int saved_out_type,
                                     const float *saved_lse, void *dqkv, int out_type);

/* The same on stepc's own kernels only, never cuDNN (what the entry points
 * above fall back to; tests and the emulation's cuDNN stand-in call them
 * directly), with the row strides of `rows` (null: separate tensors). */
int stepc_cuda_attention_own(stepc_cuda_ctx *ctx, const void *q, const void *k, const void *v,
                             int in_type, int64_t batch, int64_t tq, int64_t tk, int64_t heads,
                             int64_t kv_heads, int64_t head_dim, int causal, double scale,
                             void *out, int out_type, float *lse,
                             const stepc_attention_rows *rows);
int stepc_cuda_attention_grad_own(stepc_cuda_ctx *ctx, const void *dout, const void *q,
                                  const void *k, const void *v, int in_type, int64_t batch,
                                  int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                                  int64_t head_dim, int causal, double scale, char *scratch,
                                  const void *saved_out, int saved_out_type,
                                  const float *saved_lse, void *dq, void *dk, void *dv,
                                  int out_type, const stepc_attention_rows *rows);

/* Mean over n rows of logsumexp(row) - row[target]; `site` names the op in
 * the status of an out-of-range target. scratch: n floats. */
int stepc_cuda_cross_entropy(stepc_cuda_ctx *ctx, const float *logits, const int32_t *targets,
                             int64_t n, int64_t classes, float *scratch, float *loss,
                             int32_t site);
/* dlogits = dloss · (softmax - onehot) / n, recomputed from the row's
 * log-sum-exp: no probability buffer. */
int stepc_cuda_cross_entropy_grad(stepc_cuda_ctx *ctx, const float *dloss, const float *logits,
                                  const int32_t *targets, int64_t n, int64_t classes,
                                  float *dlogits, int32_t site);
/* With step.cross_entropy's options (see stepc_cpu_cross_entropy_masked);
 * scratch: n floats. */
int stepc_cuda_cross_entropy_masked(stepc_cuda_ctx *ctx, const float *logits,
                                    const int32_t *targets, const float *count, int64_t n,
                                    int64_t classes, int64_t ignore, double smoothing,
                                    double z_loss, float *scratch, float *loss, int32_t site);
int stepc_cuda_cross_entropy_masked_grad(stepc_cuda_ctx *ctx, const float *dloss,
                                         const float *logits, const int32_t *targets,
                                         const float *count, int64_t n, int64_t classes,
                                         int64_t ignore, double smoothing, double z_loss,
                                         float *dlogits, int32_t site);
/* The loss and its gradient in one kernel (both of the above; a row read
 * once from HBM): logits f32 or bf16 (`_of_bf16`), the gradient f32 or
 * bf16 (`_bf16`). scratch: n floats. */
#define STEPC_CUDA_CROSS_ENTROPY_FUSED(name, TL, TG)                                     \
  int name(stepc_cuda_ctx *ctx, const TL *logits, const int32_t *targets,                \
           const float *dloss, int64_t n, int64_t classes, float *scratch, float *loss,   \
           TG *dlogits, int32_t site);
#define STEPC_CUDA_CROSS_ENTROPY_MASKED_FUSED(name, TL, TG)                              \
  int name(stepc_cuda_ctx *ctx, const TL *logits, const int32_t *targets,                \
           const float *count, const float *dloss, int64_t n, int64_t classes,           \
           int64_t ignore, double smoothing, double z_loss, float *scratch, float *loss, \
           TG *dlogits, int32_t site);
STEPC_CUDA_CROSS_ENTROPY_FUSED(stepc_cuda_cross_entropy_fused, float, float)
STEPC_CUDA_CROSS_ENTROPY_FUSED(stepc_cuda_cross_entropy_fused_bf16, float, __nv_bfloat16)
STEPC_CUDA_CROSS_ENTROPY_FUSED(stepc_cuda_cross_entropy_fused_of_bf16, __nv_bfloat16, float)
STEPC_CUDA_CROSS_ENTROPY_FUSED(stepc_cuda_cross_entropy_fused_of_bf16_bf16, __nv_bfloat16,
                               __nv_bfloat16)
STEPC_CUDA_CROSS_ENTROPY_MASKED_FUSED(stepc_cuda_cross_entropy_masked_fused, float, float)
STEPC_CUDA_CROSS_ENTROPY_MASKED_FUSED(stepc_cuda_cross_entropy_masked_fused_bf16, float,
                                      __nv_bfloat16)
STEPC_CUDA_CROSS_ENTROPY_MASKED_FUSED(stepc_cuda_cross_entropy_masked_fused_of_bf16,
                                      __nv_bfloat16, float)
STEPC_CUDA_CROSS_ENTROPY_MASKED_FUSED(stepc_cuda_cross_entropy_masked_fused_of_bf16_bf16,
                                      __nv_bfloat16, __nv_bfloat16)
#undef STEPC_CUDA_CROSS_ENTROPY_FUSED
#undef STEPC_CUDA_CROSS_ENTROPY_MASKED_FUSED
/* Index ops (index.cu), as the CPU's (cpu_kernels.h). */
int stepc_cuda_argmax(stepc_cuda_ctx *ctx, const float *x, int64_t outer, int64_t n,
                      int64_t inner, int32_t *out);
int stepc_cuda_gather(stepc_cuda_ctx *ctx, const float *x, const int32_t *index, int64_t outer,
                      int64_t n, int64_t inner, int64_t size, float *out);
int stepc_cuda_gather_grad(stepc_cuda_ctx *ctx, const float *dy, const int32_t *index,
                           int64_t outer, int64_t n, int64_t inner, int64_t size, float *dx);
int stepc_cuda_token_count(stepc_cuda_ctx *ctx, const int32_t *targets, int64_t n,
                           int64_t ignore, float *count);
int stepc_cuda_target_mask(stepc_cuda_ctx *ctx, const int32_t *targets, int64_t n,
                           int64_t ignore, int32_t *ids, float *mask);
int stepc_cuda_embedding(stepc_cuda_ctx *ctx, const float *table, const int32_t *ids, int64_t n,
                         int64_t rows, int64_t d, float *out, int32_t site);
int stepc_cuda_embedding_grad(stepc_cuda_ctx *ctx, const float *dy, const int32_t *ids,
                              int64_t n, int64_t rows, int64_t d, float *dtable, int32_t site);
/* Inverted dropout (see stepc_cpu_dropout); seed, step and first_row are
 * device pointers. */
int stepc_cuda_dropout(stepc_cuda_ctx *ctx, const float *x, const int32_t *seed, const float *step,
                       int64_t n, int64_t row_size, double rate, int64_t stream, float *y);
int stepc_cuda_dropout_rows(stepc_cuda_ctx *ctx, const float *x, const int32_t *seed,
                            const float *step, const int32_t *first_row, int64_t n,
                            int64_t row_size, double rate, int64_t stream, float *y);

/* Vocabulary-parallel forms (see stepc_cpu_embedding_shard). */
int stepc_cuda_embedding_shard(stepc_cuda_ctx *ctx, const float *table, const int32_t *ids,
                               const int32_t *first_row, int64_t n, int64_t rows,
                               int64_t num_ids, int64_t d, float *out, int32_t site);
int stepc_cuda_embedding_shard_grad(stepc_cuda_ctx *ctx, const float *dy, const int32_t *ids,
                                    const int32_t *first_row, int64_t n, int64_t rows,
                                    int64_t num_ids, int64_t d, float *dtable, int32_t site);

/* One tensor of a multi-tensor AdamW launch. */
typedef struct {
  float *param;
  const float *grad;
  float *m, *v;
  int64_t n;
} stepc_adamw_tensor;
/* torch.optim.AdamW on grad · grad_scale for `count` tensors sharing the
 * hyperparameters, in launches of kAdamwTensorsPerLaunch. lr, step and
 * grad_scale are device scalars. */
int stepc_cuda_adamw(stepc_cuda_ctx *ctx, const stepc_adamw_tensor *tensors, int count,
                     const float *lr, const float *step, const float *grad_scale, double beta1,
                     double beta2, double eps, double weight_decay);
/* torch.optim.Adam likewise (weight decay as an L2 term of the gradient). */
int stepc_cuda_adam(stepc_cuda_ctx *ctx, const stepc_adamw_tensor *tensors, int count,
                    const float *lr, const float *step, const float *grad_scale, double beta1,
                    double beta2, double eps, double weight_decay);
/* One parameter's bf16 copy (round to nearest even, as step.convert). */
typedef struct {
  const float *src;
  __nv_bfloat16 *dst;
  int64_t n;
} stepc_bf16_copy;
/* The forward's bf16 copies of `count` parameters in one launch per
 * kBf16CopiesPerLaunch of them. */
int stepc_cuda_bf16_copies(stepc_cuda_ctx *ctx, const stepc_bf16_copy *copies, int count);
/* One tensor of a multi-tensor squared norm. */
typedef struct {
  const float *x;
  int64_t n;
} stepc_norm_tensor;
/* *out = ((Σ t0² + Σ t1²) + Σ t2²) + ...: each tensor's sum of squares in
 * f32, added in table order in f32 (the gradient clipping's chain of
 * reductions and adds), in 2 launches per kSquaredNormTensorsPerLaunch
 * tensors and one more, in a fixed order (deterministic). scratch:
 * SquaredNormsScratchFloats of the counts (launch_config.h). */
int stepc_cuda_squared_norms(stepc_cuda_ctx *ctx, const stepc_norm_tensor *tensors, int count,
                             float *scratch, float *out);
/* torch.optim.SGD (dampening 0) on grad · grad_scale for one tensor; buf is
 * the momentum. The CPU kernel's roundings. */
int stepc_cuda_sgd(stepc_cuda_ctx *ctx, float *param, const float *grad, float *buf, int64_t n,
                   const float *lr, const float *grad_scale, double momentum, int nesterov,
                   double weight_decay);
/* Lion (the reference implementation) on grad · grad_scale for one tensor. */
int stepc_cuda_lion(stepc_cuda_ctx *ctx, float *param, const float *grad, float *m, int64_t n,
                    const float *lr, const float *grad_scale, double beta1, double beta2,
                    double weight_decay);

/* What a GEMM's epilogue does after acc = op_a(A) @ op_b(B) (+ bias). The
 * GELU is the tanh approximation (cuBLASLt's); GELU and DGELU need an f32
 * output and N % 8 == 0. BGRAD (one product, no bias) also writes the bias
 * gradient of a weight-gradient GEMM: the f32 [M] row sums of op_a(A), A's
 * columns when A is [K, M] read transposed (cuBLASLt's BGRADB). */
enum stepc_cuda_epilogue {
  STEPC_EPILOGUE_NONE = 0,
  STEPC_EPILOGUE_GELU = 1,  /* aux = acc (+ bias); C = gelu_tanh(aux) */
  STEPC_EPILOGUE_DGELU = 2, /* C = acc · gelu_tanh'(aux) */
  STEPC_EPILOGUE_BGRAD = 3  /* C = acc; aux[m] = sum over k of op_a(A)[m, k] */
};

/* C[p] = op_a(A[p]) @ op_b(B[p], or B shared) (+ bias[n] per column) for
 * `batch` [M,K]x[K,N] products through cuBLASLt, then `epilogue` (with
 * `aux`, [M,N] like C): A and B of `in_type`, C of `out_type`, f32
 * accumulation. The algorithm is chosen by cuBLASLt's heuristic on the
 * first call of each shape and kept (the first step runs before graph
 * capture); a bias, GELU or BGRAD epilogue cuBLASLt has no algorithm for
 * runs as a plain GEMM and our own kernel, with the same result (for a bias
 * into a bf16 C, within one more rounding). A GELU epilogue needs an f32 C. */
int stepc_cuda_matmul(stepc_cuda_ctx *ctx, const void *a, const void *b, void *c, int64_t batch,
                      int64_t m, int64_t n, int64_t k, int transpose_a, int transpose_b,
                      int shared_rhs, int in_type, int out_type, const float *bias,
                      int epilogue, void *aux);

/* stepc_cuda_matmul of operands that hold only fp8 values (step.quantize_fp8
 * rounded them, in tiles that cuBLASLt's blocks lie within): A's values in
 * `a_format`, B's in `b_format` (0 e4m3, 1 e5m2), A in 1x128 blocks along
 * K, B in 128x128 blocks or (`b_vector`) 1x128 blocks along K. Where
 * Fp8GemmRunsInFp8 (launch_config.h), each operand is packed into `scratch`
 * (fp8 bytes and a power-of-two scale per block, exact) and multiplied on the
 * fp8 tensor cores with f32 accumulation; where it does not, or cuBLASLt has
 * no fp8 algorithm for the problem, the bf16 GEMM of the same values runs
 * (as every one does with STEPC_FP8_GEMMS=0 in the environment). A and B
 * are `a_type` and `b_type` (f32 or bf16, equal). A BGRAD epilogue sums A's
 * own values. */
int stepc_cuda_matmul_fp8(stepc_cuda_ctx *ctx, const void *a, const void *b, void *c,
                          int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                          int transpose_b, int shared_rhs, int a_type, int b_type, int out_type,
                          const float *bias, int epilogue, void *aux, int a_format,
                          int b_format, int b_vector, void *scratch);

/* stepc_cuda_matmul_fp8 where an operand may be packed already
 * (stepc_cuda_pack_fp8_rows_columns): `a_type` STEPC_CUDA_FP8, A is bytes
 * [batch·m, k] (not transposed) with `a_scales` [k / 128, batch·m];
 * `b_type` STEPC_CUDA_FP8, B is bytes [n, k] (`transpose_b`) with
 * `b_scales` [k / 128, n] (`b_vector`) or [n / 128, L] (128x128 blocks, L
 * the K-blocks padded to a multiple of 4). Only the other operand is packed
 * here; a raw operand beside a packed one is bf16; no BGRAD epilogue on a
 * packed A. Where the fp8 GEMM does not run,
 * the packed operands are unpacked into bf16 in `scratch` (exact) for the
 * bf16 GEMM. */
int stepc_cuda_matmul_fp8_packed(stepc_cuda_ctx *ctx, const void *a, const float *a_scales,
                                 const void *b, const float *b_scales, void *c, int64_t batch,
                                 int64_t m, int64_t n, int64_t k, int transpose_a,
                                 int transpose_b, int shared_rhs, int a_type, int b_type,
                                 int out_type, const float *bias, int epilogue, void *aux,
                                 int a_format, int b_format, int b_vector, void *scratch);

/* Frees the cuBLASLt handle and cached plans (the runtime calls it before
 * unloading a module; optional). */
void stepc_cuda_release(void);

#ifdef __cplusplus
}
#endif

#endif /* STEPC_CUDA_KERNELS_H_ */
