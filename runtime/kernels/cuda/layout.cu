// Layout kernels: fill, broadcast, transpose, box copies (slice, pad,
// concat) and reductions; a thread per output element, index arithmetic by
// strides. Also the library's error formatting.

#include <cstdio>

#include "runtime/kernels/cuda/common.cuh"

namespace stepc::cuda {

int Fail(stepc_cuda_ctx* ctx, const char* call, const char* file, int line, const char* why) {
  if (ctx->error && ctx->error_len)
    snprintf(ctx->error, ctx->error_len, "%s failed at %s:%d: %s", call, file, line, why);
  return 1;
}

int Launched(stepc_cuda_ctx* ctx, const char* kernel, const char* file, int line) {
  cudaError_t rc = cudaGetLastError();
  return rc == cudaSuccess ? 0 : Fail(ctx, kernel, file, line, cudaGetErrorString(rc));
}

namespace {

bool MakeDims(const int64_t* shape, int rank, Dims* d) {
  if (rank > kMaxRank) return false;
  d->rank = rank;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    d->size[i] = shape[i];
    d->stride[i] = stride;
    stride *= shape[i];
  }
  return true;
}

int64_t Numel(const int64_t* shape, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

int RankTooHigh(stepc_cuda_ctx* ctx, const char* call, int rank) {
  char why[64];
  snprintf(why, sizeof(why), "rank %d is above %d", rank, kMaxRank);
  return Fail(ctx, call, __FILE__, __LINE__, why);
}

// The offset, in a tensor with strides `to`, of linear index i over `over`.
__device__ __forceinline__ int64_t Offset(int64_t i, const Dims& over, const int64_t* to) {
  // One dimension (the usual case once SplitDims merged contiguous ones):
  // no 64-bit division, which costs more than the load it addresses.
  if (over.rank == 1) return i * to[0];
  int64_t offset = 0;
  for (int d = over.rank - 1; d >= 0; --d) {
    offset += (i % over.size[d]) * to[d];
    i /= over.size[d];
  }
  return offset;
}

__global__ void FillKernel(float* out, int64_t n, float value) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = value;
}

// out[i] = in[Offset(i over out's dims, with `src` strides)].
__global__ void GatherKernel(const float* in, float* out, int64_t n, Dims over, Dims src) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = in[Offset(i, over, src.stride)];
}

// dst[dst_base + Offset(i, box, dst strides)] = src[src_base + Offset(i, box, src strides)].
__global__ void CopyBoxKernel(const float* src, int64_t src_base, Dims src_strides, float* dst,
                              int64_t dst_base, Dims dst_strides, Dims box, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[dst_base + Offset(i, box, dst_strides.stride)] =
        src[src_base + Offset(i, box, src_strides.stride)];
}

// Kinds: 0 sum, 1 max, 2 mean, 3 sum of squares (each value squared as it
// is read: a gradient norm's Σ g², with no g² buffer or kernel).

// Stage one of a reduction: block (32 lanes = outputs, 8 rows = partial
// sums), grid (output tiles, chunks).
// Lane x of a block sums output o's rows of its chunk, the block's 8 rows
// of threads taking every 8th; with one output (a whole-tensor sum: the
// gradient norm's) every thread of the block takes every 256th row, where
// 31 lanes of 32 would idle. Then the partial sums in a fixed order.
// T: f32, or bf16 values summed as they are (a bias gradient beside the
// rounding its weight gradient's GEMM reads: no widened copy).
//
// The block of output tile `tile` and chunk `chunk`: one function, not
// inlined, that the multi-tensor squared norms call too, so that a
// gradient's sum of squares has the same bits either way (a pipeline
// stage's clipping sums each gradient alone).
template <typename T>
__device__ STEPC_NOINLINE void ReduceTile(const T* in, Dims kept, Dims reduced, int64_t outputs,
                                          int64_t total, int64_t per_chunk, int kind,
                                          float scale, float* out, int64_t tile, int64_t chunk) {
  __shared__ float part[kReduceRows][kReduceLanes];
  const bool whole = outputs == 1;
  const int64_t o = whole ? 0 : tile * (int64_t)kReduceLanes + threadIdx.x;
  const int64_t begin = chunk * per_chunk, end = min(total, begin + per_chunk);
  const int first = whole ? threadIdx.y * kReduceLanes + threadIdx.x : threadIdx.y;
  const int step = whole ? kReduceRows * kReduceLanes : kReduceRows;
  float acc = kind == 1 ? -INFINITY : 0.0f;
  if (o < outputs) {
    const int64_t base = Offset(o, kept, kept.stride);
    for (int64_t r = begin + first; r < end; r += step) {
      float x = Load(in, base + Offset(r, reduced, reduced.stride));
      if (kind == 3) x *= x;
      acc = kind == 1 ? fmaxf(acc, x) : acc + x;
    }
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (whole && threadIdx.y == 0) {  // each lane its column, then lane 0 the row
    for (int y = 1; y < kReduceRows; ++y)
      acc = kind == 1 ? fmaxf(acc, part[y][threadIdx.x]) : acc + part[y][threadIdx.x];
    part[0][threadIdx.x] = acc;
  }
  if (whole) __syncthreads();
  if (whole && threadIdx.y == 0 && threadIdx.x == 0) {
    for (int x = 1; x < kReduceLanes; ++x)
      acc = kind == 1 ? fmaxf(acc, part[0][x]) : acc + part[0][x];
    out[chunk] = kind == 1 ? acc : acc * scale;
  }
  if (!whole && threadIdx.y == 0 && o < outputs) {
    for (int y = 1; y < kReduceRows; ++y)
      acc = kind == 1 ? fmaxf(acc, part[y][threadIdx.x]) : acc + part[y][threadIdx.x];
    out[chunk * outputs + o] = kind == 1 ? acc : acc * scale;
  }
}

template <typename T>
__global__ void ReduceKernel(const T* in, Dims kept, Dims reduced, int64_t outputs,
                             int64_t total, int64_t per_chunk, int kind, float scale,
                             float* out) {
  ReduceTile<T>(in, kept, reduced, outputs, total, per_chunk, kind, scale, out, blockIdx.x,
                blockIdx.y);
}

// The gradient clipping's squared norms of many tensors: a table of up to
// kSquaredNormTensorsPerLaunch tensors, each with its chunks (PlanReduce's
// for a whole-tensor sum) and where its partials start in the scratch.
struct NormEntry {
  const float* x;
  int64_t n, chunks, per_chunk, first_partial;
};
struct NormTable {
  NormEntry tensor[kSquaredNormTensorsPerLaunch];
};

// Block (c, t): chunk c of tensor t, as stepc_cuda_reduce sums it (kind 3).
__global__ void SquaredNormChunksKernel(NormTable table, int kind, float* partial) {
  const NormEntry t = table.tensor[blockIdx.y];
  if (blockIdx.x >= t.chunks) return;  // a smaller tensor's
  Dims kept, reduced;
  reduced.rank = 1;
  reduced.size[0] = t.n;
  reduced.stride[0] = 1;
  ReduceTile<float>(t.x, kept, reduced, 1, t.n, t.per_chunk, kind, 1.0f,
                    partial + t.first_partial, 0, blockIdx.x);
}

// A thread per tensor adds its partials in order (FinishChunksKernel's sum).
__global__ void SquaredNormSumsKernel(NormTable table, int here, int first, const float* partial,
                                      float* sums) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= here) return;
  const NormEntry e = table.tensor[t];
  float acc = 0.0f;
  for (int64_t c = 0; c < e.chunks; ++c) acc = acc + partial[e.first_partial + c];
  sums[first + t] = acc * 1.0f;
}

// Block row t of the grid copies tensor t, grid-stride, rounding to bf16.
struct CopyTable {
  stepc_bf16_copy copy[kBf16CopiesPerLaunch];
};
__global__ void Bf16CopiesKernel(CopyTable table) {
  const stepc_bf16_copy t = table.copy[blockIdx.y];
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < t.n;
       i += (int64_t)gridDim.x * blockDim.x)
    Store(t.dst, i, t.src[i]);
}

// *out = the tensors' sums added in order.
__global__ void SquaredNormTotalKernel(const float* sums, int count, float* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  float total = sums[0];
  for (int t = 1; t < count; ++t) total += sums[t];
  *out = total;
}

// Stage one of a sum (max, mean) over the leading rows of a row-major
// [rows, cols] tensor (PlanColumnSum): lane x of a 32 x 8 block takes 8
// adjacent columns, loaded 16 bytes at a time, its row y every 8th row of the
// chunk; then row 0 adds the 8 partials in a fixed order. Several rows in
// flight per thread: a bias gradient is read at HBM speed.
template <typename T>
__global__ void ColumnSumKernel(const T* in, int64_t rows, int64_t cols, int64_t per_chunk,
                                int kind, float scale, float* out) {
  __shared__ float part[kReduceRows][kReduceLanes * kColumnsPerLane];
  const int64_t col = (blockIdx.x * (int64_t)kReduceLanes + threadIdx.x) * kColumnsPerLane;
  const int64_t begin = blockIdx.y * per_chunk, end = min(rows, begin + per_chunk);
  const float start = kind == 1 ? -INFINITY : 0.0f;
  float acc[kColumnsPerLane];
  for (int i = 0; i < kColumnsPerLane; ++i) acc[i] = start;
  if (col < cols) {
#pragma unroll 4
    for (int64_t r = begin + threadIdx.y; r < end; r += kReduceRows) {
      float x[kColumnsPerLane];
      LoadEight(in + r * cols + col, x);
      for (int i = 0; i < kColumnsPerLane; ++i) {
        if (kind == 3) x[i] *= x[i];
        acc[i] = kind == 1 ? fmaxf(acc[i], x[i]) : acc[i] + x[i];
      }
    }
  }
  for (int i = 0; i < kColumnsPerLane; ++i)
    part[threadIdx.y][threadIdx.x * kColumnsPerLane + i] = acc[i];
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
  for (int i = 0; i < kColumnsPerLane; ++i) {
    float a = acc[i];
    for (int y = 1; y < kReduceRows; ++y) {
      const float p = part[y][threadIdx.x * kColumnsPerLane + i];
      a = kind == 1 ? fmaxf(a, p) : a + p;
    }
    out[blockIdx.y * cols + col + i] = kind == 1 ? a : a * scale;
  }
}

__global__ void FinishChunksKernel(const float* partial, int64_t chunks, int64_t outputs,
                                   int kind, float scale, float* out) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < outputs;
       o += (int64_t)gridDim.x * blockDim.x) {
    float acc = kind == 1 ? -INFINITY : 0.0f;
#pragma unroll 8  // loads in flight; the sum keeps its order
    for (int64_t c = 0; c < chunks; ++c) {
      float x = partial[c * outputs + o];
      acc = kind == 1 ? fmaxf(acc, x) : acc + x;
    }
    out[o] = kind == 1 ? acc : acc * scale;
  }
}

// A thread per output: max, ties, then the split gradient (as the CPU kernel).
__global__ void ReduceMaxGradKernel(const float* dy, const float* x, Dims kept, Dims reduced,
                                    int64_t outputs, int64_t total, float* dx) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < outputs;
       o += (int64_t)gridDim.x * blockDim.x) {
    const int64_t base = Offset(o, kept, kept.stride);
    float max = -INFINITY;
    for (int64_t r = 0; r < total; ++r)
      max = fmaxf(max, x[base + Offset(r, reduced, reduced.stride)]);
    int64_t ties = 0;
    for (int64_t r = 0; r < total; ++r) ties += x[base + Offset(r, reduced, reduced.stride)] == max;
    for (int64_t r = 0; r < total; ++r) {
      int64_t at = base + Offset(r, reduced, reduced.stride);
      dx[at] = x[at] == max ? dy[o] / ties : 0.0f;
    }
  }
}

// Splits a shape into the kept and the reduced dimensions (sizes, and their
// strides in the input), each in order, adjacent ones merged where
// contiguous ([B, T, C] summed over B and T: one reduced dimension of B·T
// rows, stride C), so Offset mostly multiplies.
void SplitDims(const int64_t* shape, int rank, const int* mask, Dims* kept, Dims* reduced) {
  Dims all;
  MakeDims(shape, rank, &all);
  for (int d = 0; d < rank; ++d) {
    Dims* to = mask[d] ? reduced : kept;
    const int last = to->rank - 1;
    if (last >= 0 && to->stride[last] == shape[d] * all.stride[d]) {
      to->size[last] *= shape[d];
      to->stride[last] = all.stride[d];
      continue;
    }
    to->size[to->rank] = shape[d];
    to->stride[to->rank] = all.stride[d];
    ++to->rank;
  }
}

int64_t Count(const Dims& d) {
  int64_t n = 1;
  for (int i = 0; i < d.rank; ++i) n *= d.size[i];
  return n;
}

}  // namespace

int FinishChunks(stepc_cuda_ctx* ctx, const float* partial, int64_t chunks, int64_t outputs,
                 int kind, float scale, float* out) {
  STEPC_LAUNCH(ElementwiseBlocks(outputs), kThreads, 0, ctx->stream, FinishChunksKernel)(
      partial, chunks, outputs, kind, scale, out);
  return STEPC_LAUNCHED(ctx, "FinishChunksKernel");
}

}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_fill(stepc_cuda_ctx* ctx, float* out, int64_t n, float value) {
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, FillKernel)(out, n, value);
  return STEPC_LAUNCHED(ctx, "FillKernel");
}

extern "C" int stepc_cuda_broadcast(stepc_cuda_ctx* ctx, const float* in,
                                    const int64_t* in_shape, int in_rank, float* out,
                                    const int64_t* out_shape, int out_rank) {
  Dims over, in_dims, src;
  if (!MakeDims(out_shape, out_rank, &over) || !MakeDims(in_shape, in_rank, &in_dims))
    return RankTooHigh(ctx, "stepc_cuda_broadcast", out_rank);
  src.rank = out_rank;
  const int shift = out_rank - in_rank;
  for (int d = 0; d < in_rank; ++d)
    src.stride[d + shift] = in_shape[d] == 1 ? 0 : in_dims.stride[d];
  const int64_t n = Numel(out_shape, out_rank);
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, GatherKernel)(in, out, n, over, src);
  return STEPC_LAUNCHED(ctx, "GatherKernel(broadcast)");
}

extern "C" int stepc_cuda_transpose(stepc_cuda_ctx* ctx, const float* in,
                                    const int64_t* in_shape, int rank, const int64_t* perm,
                                    float* out) {
  Dims in_dims, over, src;
  if (!MakeDims(in_shape, rank, &in_dims)) return RankTooHigh(ctx, "stepc_cuda_transpose", rank);
  int64_t out_shape[kMaxRank];
  for (int d = 0; d < rank; ++d) out_shape[d] = in_shape[perm[d]];
  MakeDims(out_shape, rank, &over);
  src.rank = rank;
  for (int d = 0; d < rank; ++d) src.stride[d] = in_dims.stride[perm[d]];
  const int64_t n = Numel(in_shape, rank);
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, GatherKernel)(in, out, n, over, src);
  return STEPC_LAUNCHED(ctx, "GatherKernel(transpose)");
}

extern "C" int stepc_cuda_copy_box(stepc_cuda_ctx* ctx, const float* src,
                                   const int64_t* src_shape, const int64_t* src_offsets,
                                   float* dst, const int64_t* dst_shape,
                                   const int64_t* dst_offsets, const int64_t* box, int rank) {
  Dims s, d, b;
  if (!MakeDims(src_shape, rank, &s) || !MakeDims(dst_shape, rank, &d) ||
      !MakeDims(box, rank, &b))
    return RankTooHigh(ctx, "stepc_cuda_copy_box", rank);
  int64_t src_base = 0, dst_base = 0;
  for (int i = 0; i < rank; ++i) {
    src_base += src_offsets[i] * s.stride[i];
    dst_base += dst_offsets[i] * d.stride[i];
  }
  const int64_t n = Numel(box, rank);
  if (n == 0) return 0;
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, CopyBoxKernel)(src, src_base, s, dst,
                                                                    dst_base, d, b, n);
  return STEPC_LAUNCHED(ctx, "CopyBoxKernel");
}

namespace stepc::cuda {
namespace {

// The [rows, cols] view of a reduction over leading dims into trailing
// ones whose rows ColumnSumKernel can load 16 bytes at a time; cols 0 if none.
template <typename T>
void ColumnView(const T* in, const int64_t* shape, int rank, const int* reduce_mask,
                int64_t* rows, int64_t* cols) {
  *rows = 1;
  *cols = 0;
  int k = 0;
  while (k < rank && reduce_mask[k]) *rows *= shape[k++];
  if (k == 0 || k == rank) return;
  int64_t c = 1;
  for (int i = k; i < rank; ++i) {
    if (reduce_mask[i]) return;
    c *= shape[i];
  }
  const bool vectors = c % kColumnsPerLane == 0 &&
                       (reinterpret_cast<uintptr_t>(in) & 15) == 0 &&
                       (c * sizeof(T)) % 16 == 0;
  if (vectors) *cols = c;
}

template <typename T>
int ColumnSum(stepc_cuda_ctx* ctx, const T* in, int64_t rows, int64_t cols, int kind,
              float* scratch, float* out) {
  const ReducePlan plan = PlanColumnSum(cols, rows);
  const float scale = kind == 2 ? 1.0f / static_cast<float>(rows) : 1.0f;
  const int64_t per_chunk = CeilDiv(rows, plan.chunks);
  dim3 grid(plan.output_tiles, plan.chunks), block(kReduceLanes, kReduceRows);
  STEPC_LAUNCH_COOPERATIVE(grid, block, 0, ctx->stream, ColumnSumKernel<T>)(
      in, rows, cols, per_chunk, kind, plan.chunks == 1 ? scale : 1.0f,
      plan.chunks == 1 ? out : scratch);
  if (int rc = STEPC_LAUNCHED(ctx, "ColumnSumKernel")) return rc;
  if (plan.chunks == 1) return 0;
  return FinishChunks(ctx, scratch, plan.chunks, cols, kind, scale, out);
}

template <typename T>
int Reduce(stepc_cuda_ctx* ctx, const T* in, const int64_t* shape, int rank,
           const int* reduce_mask, int kind, float* scratch, float* out) {
  if (rank > kMaxRank) return RankTooHigh(ctx, "stepc_cuda_reduce", rank);
  int64_t rows = 0, cols = 0;
  ColumnView(in, shape, rank, reduce_mask, &rows, &cols);
  if (cols > 0 && rows > 0) return ColumnSum(ctx, in, rows, cols, kind, scratch, out);
  Dims kept, reduced;
  SplitDims(shape, rank, reduce_mask, &kept, &reduced);
  const int64_t outputs = Count(kept), total = Count(reduced);
  const ReducePlan plan = PlanReduce(outputs, total);
  const float scale = kind == 2 ? 1.0f / static_cast<float>(total) : 1.0f;
  const int64_t per_chunk = CeilDiv(total, plan.chunks);
  dim3 grid(plan.output_tiles, plan.chunks), block(kReduceLanes, kReduceRows);
  if (plan.chunks == 1) {
    STEPC_LAUNCH_COOPERATIVE(grid, block, 0, ctx->stream, ReduceKernel<T>)(
        in, kept, reduced, outputs, total, per_chunk, kind, scale, out);
    return STEPC_LAUNCHED(ctx, "ReduceKernel");
  }
  STEPC_LAUNCH_COOPERATIVE(grid, block, 0, ctx->stream, ReduceKernel<T>)(
      in, kept, reduced, outputs, total, per_chunk, kind, 1.0f, scratch);
  if (int rc = STEPC_LAUNCHED(ctx, "ReduceKernel")) return rc;
  return FinishChunks(ctx, scratch, plan.chunks, outputs, kind, scale, out);
}

}  // namespace

int SumRows(stepc_cuda_ctx* ctx, const float* in, int64_t rows, int64_t cols, float* scratch,
            float* out) {
  const int64_t shape[] = {rows, cols};
  const int mask[] = {1, 0};
  return Reduce(ctx, in, shape, 2, mask, /*kind=*/0, scratch, out);
}

// (Its partials in the GEMM workspace: free again once the GEMM before it on
// the stream is done.)
int BiasGradOf(stepc_cuda_ctx* ctx, const void* a, int in_type, int64_t m, int64_t k,
               bool transpose_a, float* out) {
  const int64_t shape[2] = {transpose_a ? k : m, transpose_a ? m : k};
  const int mask[2] = {transpose_a ? 1 : 0, transpose_a ? 0 : 1};
  if (ReduceScratchFloats(m, k) * static_cast<int64_t>(sizeof(float)) > kGemmWorkspaceBytes)
    return Fail(ctx, "stepc_cuda_matmul", __FILE__, __LINE__,
                "the bias gradient's partial sums exceed the GEMM workspace");
  float* scratch = static_cast<float*>(ctx->gemm_workspace);
  if (in_type == STEPC_CUDA_BF16)
    return Reduce(ctx, static_cast<const __nv_bfloat16*>(a), shape, 2, mask, /*kind=*/0,
                  scratch, out);
  return Reduce(ctx, static_cast<const float*>(a), shape, 2, mask, /*kind=*/0, scratch, out);
}

}  // namespace stepc::cuda

extern "C" int stepc_cuda_reduce(stepc_cuda_ctx* ctx, const float* in, const int64_t* shape,
                                 int rank, const int* reduce_mask, int kind, float* scratch,
                                 float* out) {
  return Reduce(ctx, in, shape, rank, reduce_mask, kind, scratch, out);
}

extern "C" int stepc_cuda_squared_norms(stepc_cuda_ctx* ctx, const stepc_norm_tensor* tensors,
                                        int count, float* scratch, float* out) {
  if (count <= 0)
    return Fail(ctx, "stepc_cuda_squared_norms", __FILE__, __LINE__, "no tensors");
  float *sums = scratch, *partial = scratch + count;
  int64_t next_partial = 0;
  for (int first = 0; first < count; first += kSquaredNormTensorsPerLaunch) {
    const int here = std::min(count - first, kSquaredNormTensorsPerLaunch);
    NormTable table = {};
    int64_t most_chunks = 1;
    for (int i = 0; i < here; ++i) {
      const stepc_norm_tensor& t = tensors[first + i];
      const int64_t chunks = SquaredNormChunks(t.n);
      table.tensor[i] = {t.x, t.n, chunks, CeilDiv(t.n, chunks), next_partial};
      next_partial += chunks;
      most_chunks = std::max(most_chunks, chunks);
    }
    dim3 grid(static_cast<unsigned>(most_chunks), here), block(kReduceLanes, kReduceRows);
    STEPC_LAUNCH_COOPERATIVE(grid, block, 0, ctx->stream, SquaredNormChunksKernel)(
        table, /*kind: sum of squares*/ 3, partial);
    if (int rc = STEPC_LAUNCHED(ctx, "SquaredNormChunksKernel")) return rc;
    STEPC_LAUNCH(1, kSquaredNormTensorsPerLaunch, 0, ctx->stream, SquaredNormSumsKernel)(
        table, here, first, partial, sums);
    if (int rc = STEPC_LAUNCHED(ctx, "SquaredNormSumsKernel")) return rc;
  }
  STEPC_LAUNCH(1, 32, 0, ctx->stream, SquaredNormTotalKernel)(sums, count, out);
  return STEPC_LAUNCHED(ctx, "SquaredNormTotalKernel");
}

extern "C" int stepc_cuda_bf16_copies(stepc_cuda_ctx* ctx, const stepc_bf16_copy* copies,
                                      int count) {
  for (int first = 0; first < count; first += kBf16CopiesPerLaunch) {
    const int here = std::min(count - first, kBf16CopiesPerLaunch);
    CopyTable table = {};
    int64_t largest = 1;
    for (int i = 0; i < here; ++i) {
      table.copy[i] = copies[first + i];
      largest = std::max(largest, copies[first + i].n);
    }
    dim3 grid(static_cast<unsigned>(ElementwiseBlocks(largest)), here);
    STEPC_LAUNCH(grid, kThreads, 0, ctx->stream, Bf16CopiesKernel)(table);
    if (int rc = STEPC_LAUNCHED(ctx, "Bf16CopiesKernel")) return rc;
  }
  return 0;
}

extern "C" int stepc_cuda_reduce_of_bf16(stepc_cuda_ctx* ctx, const __nv_bfloat16* in,
                                         const int64_t* shape, int rank, const int* reduce_mask,
                                         int kind, float* scratch, float* out) {
  return Reduce(ctx, in, shape, rank, reduce_mask, kind, scratch, out);
}

extern "C" int stepc_cuda_reduce_max_grad(stepc_cuda_ctx* ctx, const float* dy, const float* x,
                                          const int64_t* shape, int rank,
                                          const int* reduce_mask, float* dx) {
  if (rank > kMaxRank) return RankTooHigh(ctx, "stepc_cuda_reduce_max_grad", rank);
  Dims kept, reduced;
  SplitDims(shape, rank, reduce_mask, &kept, &reduced);
  const int64_t outputs = Count(kept);
  STEPC_LAUNCH(ElementwiseBlocks(outputs), kThreads, 0, ctx->stream, ReduceMaxGradKernel)(
      dy, x, kept, reduced, outputs, Count(reduced), dx);
  return STEPC_LAUNCHED(ctx, "ReduceMaxGradKernel");
}
