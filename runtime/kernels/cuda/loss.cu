// Cross-entropy (fused: one block per row, the online max/sum of tile_math.h,
// no probability buffer), embedding forward and backward. Ids are checked on
// the device: the first one out of range is written to ctx->status.

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/tile_math.h"

namespace stepc::cuda {
namespace {

// The log-sum-exp of a row, the same in every thread of the block.
__device__ float BlockRowLse(const float* x, int64_t n) {
  __shared__ float ms[kThreads / 32], ls[kThreads / 32];
  __shared__ float result;
  tile::RowState st = tile::RowStart();
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) tile::RowFold(st, x + j, 1);
  for (int o = 16; o > 0; o >>= 1) {
    tile::RowState other{__shfl_xor_sync(0xffffffffu, st.m, o),
                         __shfl_xor_sync(0xffffffffu, st.l, o)};
    st = tile::RowMerge(st, other);
  }
  if (threadIdx.x % 32 == 0) {
    ms[threadIdx.x / 32] = st.m;
    ls[threadIdx.x / 32] = st.l;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tile::RowState all = tile::RowStart();
    for (int w = 0; w < kThreads / 32; ++w) all = tile::RowMerge(all, tile::RowState{ms[w], ls[w]});
    result = tile::RowLse(all);
  }
  __syncthreads();
  return result;
}

__device__ __forceinline__ bool GoodId(int32_t id, int64_t bound) { return id >= 0 && id < bound; }

__global__ void CrossEntropyRowsKernel(const float* logits, const int32_t* targets,
                                       int64_t classes, float* row_loss, int32_t* status,
                                       int32_t site) {
  const int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  const float lse = BlockRowLse(x, classes);
  if (threadIdx.x == 0) {
    const int32_t t = targets[row];
    if (!GoodId(t, classes)) {
      ReportBadId(status, site, row, t, classes);
      row_loss[row] = 0.0f;
    } else {
      row_loss[row] = lse - x[t];
    }
  }
}

// Σ row_loss in f64, in a fixed order by one block; valid in thread 0.
__device__ double BlockSum(const float* row_loss, int64_t n) {
  __shared__ double part[kThreads];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += row_loss[i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  return part[0];
}

// loss = Σ row_loss / n.
__global__ void MeanKernel(const float* row_loss, int64_t n, float* loss) {
  const double sum = BlockSum(row_loss, n);
  if (threadIdx.x == 0) *loss = static_cast<float>(sum / n);
}

__global__ void CrossEntropyGradKernel(const float* dloss, const float* logits,
                                       const int32_t* targets, int64_t n, int64_t classes,
                                       float* dlogits, int32_t* status, int32_t site) {
  const int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  const float lse = BlockRowLse(x, classes);
  const int32_t t = targets[row];
  if (!GoodId(t, classes)) {
    if (threadIdx.x == 0) ReportBadId(status, site, row, t, classes);
    return;
  }
  const float scale = *dloss / static_cast<float>(n);
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    dlogits[row * classes + j] = scale * (expf(x[j] - lse) - (j == t ? 1.0f : 0.0f));
}

// Σ x[j] over one row, the same in every thread of the block.
__device__ float BlockRowSum(const float* x, int64_t n) {
  __shared__ float part[kThreads / 32];
  __shared__ float result;
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) acc += x[j];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float all = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) all += part[w];
    result = all;
  }
  __syncthreads();
  return result;
}

// The options of step.cross_entropy (see stepc_cpu_cross_entropy_masked).
struct MaskedLoss {
  int64_t ignore;
  float smoothing, z;
};

__global__ void MaskedRowsKernel(const float* logits, const int32_t* targets, int64_t classes,
                                 MaskedLoss o, float* row_loss, int32_t* status, int32_t site) {
  const int64_t row = blockIdx.x;
  const int32_t t = targets[row];
  if (t == o.ignore) {  // the whole block returns together
    if (threadIdx.x == 0) row_loss[row] = 0.0f;
    return;
  }
  const float* x = logits + row * classes;
  const float lse = BlockRowLse(x, classes);
  const float sum = o.smoothing != 0.0f ? BlockRowSum(x, classes) : 0.0f;
  if (threadIdx.x == 0) {
    if (!GoodId(t, classes)) {
      ReportBadId(status, site, row, t, classes);
      row_loss[row] = 0.0f;
    } else {
      row_loss[row] = lse - (1.0f - o.smoothing) * x[t] - o.smoothing / classes * sum +
                      o.z * lse * lse;
    }
  }
}

// loss = Σ row_loss / *count (0 for a zero count).
__global__ void OverCountKernel(const float* row_loss, int64_t n, const float* count,
                                float* loss) {
  const double sum = BlockSum(row_loss, n);
  if (threadIdx.x == 0) *loss = *count != 0.0f ? static_cast<float>(sum / *count) : 0.0f;
}

__global__ void MaskedGradKernel(const float* dloss, const float* logits, const int32_t* targets,
                                 const float* count, int64_t classes, MaskedLoss o,
                                 float* dlogits, int32_t* status, int32_t site) {
  const int64_t row = blockIdx.x;
  const int32_t t = targets[row];
  float* out = dlogits + row * classes;
  const float scale = *count != 0.0f ? static_cast<float>(static_cast<double>(*dloss) / *count)
                                     : 0.0f;
  if (t == o.ignore || scale == 0.0f) {
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) out[j] = 0.0f;
    return;
  }
  const float* x = logits + row * classes;
  const float lse = BlockRowLse(x, classes);
  if (!GoodId(t, classes)) {
    if (threadIdx.x == 0) ReportBadId(status, site, row, t, classes);
    return;
  }
  const float a = scale * (1.0f + 2.0f * o.z * lse), b = scale * o.smoothing / classes;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    out[j] = a * expf(x[j] - lse) - b - (j == t ? scale * (1.0f - o.smoothing) : 0.0f);
}

// ---- The loss and its gradient in one kernel (step-fuse-cuda-kernels'
// cross_entropy_fused): one read of each row from HBM, logits and gradient
// in f32 or bf16. A row that fits (CrossEntropyRowInShared) is kept in
// shared memory as the loss's pass reads it and the gradient's pass reads it
// there; a wider one is read again (from L2 if it is still there).
// gpt2-124m's classifier at B=64 is [65536, 50304]: bf16 logits in, bf16
// gradient out.

// Eight logits at a time when the row allows 16-byte loads, else one; with
// `keep`, each value read is also stored there (the row in shared memory:
// the same thread reads it back in the next pass, so no barrier).
template <typename T>
struct RowAccess {
  const T* x;
  int64_t n;
  bool vectors;
  T* keep = nullptr;
  template <typename F>
  __device__ void ForEach(F&& f) const {
    if (vectors) {
      // kAhead 16-byte loads issued before their values are used (a block
      // of 512 threads, two an SM, would otherwise keep one load a warp in
      // flight); the values still reach f in the order of j.
      constexpr int kAhead = 4;
      const int64_t step = blockDim.x * 8;
      int64_t j = threadIdx.x * 8;
      for (; j + (kAhead - 1) * step < n; j += kAhead * step) {
        float v[kAhead][8];
        for (int a = 0; a < kAhead; ++a) LoadEight(x + j + a * step, v[a]);
        for (int a = 0; a < kAhead; ++a) {
          if (keep) StoreEight(keep + j + a * step, v[a]);  // exact: the values are T's
          f(j + a * step, v[a], 8);
        }
      }
      for (; j < n; j += step) {
        float v[8];
        LoadEight(x + j, v);
        if (keep) StoreEight(keep + j, v);
        f(j, v, 8);
      }
    } else {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float v = Load(x, j);
        if (keep) Store(keep, j, v);
        f(j, &v, 1);
      }
    }
  }
};

// Folds k scores into the running state with one rescale (their maximum
// first), as RowFold folds them one by one.
__device__ __forceinline__ void FoldMany(tile::RowState& st, const float* v, int k) {
  float m = v[0];
  for (int i = 1; i < k; ++i) m = fmaxf(m, v[i]);
  if (m == -INFINITY) return;
  if (m > st.m) {
    st.l = st.m == -INFINITY ? 0.0f : st.l * expf(st.m - m);
    st.m = m;
  }
  for (int i = 0; i < k; ++i) st.l += expf(v[i] - st.m);
}

// The row's log-sum-exp and (with smoothing) its sum, in every thread.
template <typename T>
__device__ void RowLseAndSum(const RowAccess<T>& row, bool want_sum, float* lse, float* sum) {
  __shared__ float ms[32], ls[32], ss[32];  // a block's warps (at most 32)
  __shared__ float result[2];
  tile::RowState st = tile::RowStart();
  float s = 0.0f;
  row.ForEach([&](int64_t, const float* v, int k) {
    FoldMany(st, v, k);
    if (want_sum)
      for (int i = 0; i < k; ++i) s += v[i];
  });
  for (int o = 16; o > 0; o >>= 1) {
    tile::RowState other{__shfl_xor_sync(0xffffffffu, st.m, o),
                         __shfl_xor_sync(0xffffffffu, st.l, o)};
    st = tile::RowMerge(st, other);
    s += __shfl_xor_sync(0xffffffffu, s, o);
  }
  if (threadIdx.x % 32 == 0) {
    ms[threadIdx.x / 32] = st.m;
    ls[threadIdx.x / 32] = st.l;
    ss[threadIdx.x / 32] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tile::RowState all = tile::RowStart();
    float total = 0.0f;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) {
      all = tile::RowMerge(all, tile::RowState{ms[w], ls[w]});
      total += ss[w];
    }
    result[0] = tile::RowLse(all);
    result[1] = total;
  }
  __syncthreads();
  *lse = result[0];
  *sum = result[1];
}

// Row `blockIdx.x`: its loss into row_loss and its gradient
//   a · exp(x_j - lse) - b - [j == t] · c
// with a = scale (1 + 2 z lse), b = scale · smoothing / V,
// c = scale (1 - smoothing), scale = dloss / n (unmasked) or dloss / count.
// A row whose target is `ignore` (masked) has loss and gradient 0.
template <typename TL, typename TG>
__global__ void __launch_bounds__(kCrossEntropyRowThreads, 2)
    CrossEntropyFusedKernel(const TL* logits, const int32_t* targets,
                                        const float* dloss, const float* count, int64_t n,
                                        int64_t classes, MaskedLoss o, bool vectors,
                                        float* row_loss, TG* dlogits, int32_t* status,
                                        int32_t site, bool keep_row) {
  // The row, with keep_row (bytes: every instantiation declares the one
  // dynamic shared array alike).
  STEPC_DYNAMIC_SHARED(char, shared);
  TL* kept = reinterpret_cast<TL*>(shared);
  const int64_t row = blockIdx.x;
  const int32_t t = targets[row];
  const bool masked = count != nullptr;
  TG* out = dlogits + row * classes;
  float scale = *dloss / static_cast<float>(n);
  if (masked)
    scale = *count != 0.0f ? static_cast<float>(static_cast<double>(*dloss) / *count) : 0.0f;
  if (masked && t == o.ignore) {  // the whole block returns together
    if (threadIdx.x == 0) row_loss[row] = 0.0f;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) Store(out, j, 0.0f);
    return;
  }
  const RowAccess<TL> x{logits + row * classes, classes, vectors, keep_row ? kept : nullptr};
  float lse, sum;
  RowLseAndSum(x, o.smoothing != 0.0f, &lse, &sum);
  // The gradient's pass: the kept row, or the row again.
  const RowAccess<TL> again{keep_row ? kept : x.x, classes, vectors};
  if (!GoodId(t, classes)) {
    if (threadIdx.x == 0) {
      ReportBadId(status, site, row, t, classes);
      row_loss[row] = 0.0f;
    }
    return;
  }
  if (threadIdx.x == 0) {
    const float xt = Load(x.x, t);
    row_loss[row] = lse - (1.0f - o.smoothing) * xt - o.smoothing / classes * sum +
                    o.z * lse * lse;
  }
  const float a = scale * (1.0f + 2.0f * o.z * lse), b = scale * o.smoothing / classes;
  const float c = scale * (1.0f - o.smoothing);
  again.ForEach([&](int64_t j, const float* v, int k) {
    float g[8];
    for (int i = 0; i < k; ++i) g[i] = a * expf(v[i] - lse) - b - (j + i == t ? c : 0.0f);
    if (k == 8)
      StoreEight(out + j, g);
    else
      Store(out, j, g[0]);
  });
}

__global__ void TokenCountKernel(const int32_t* targets, int64_t n, int64_t ignore,
                                 float* count) {
  __shared__ long long part[kThreads];
  long long acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += targets[i] != ignore;
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *count = static_cast<float>(part[0]);
}

__global__ void TargetMaskKernel(const int32_t* targets, int64_t n, int64_t ignore, int32_t* ids,
                                 float* mask) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const bool counted = targets[i] != ignore;
    ids[i] = counted ? targets[i] : 0;
    mask[i] = counted ? 1.0f : 0.0f;
  }
}

// The table row of element e of an [n, d] embedding, or -1 for an id out of
// range (reported once per position, by its first column).
__device__ __forceinline__ int64_t TableRow(const int32_t* ids, int64_t e, int64_t d,
                                            int64_t rows, int32_t* status, int32_t site) {
  const int64_t i = e / d;
  const int32_t id = ids[i];
  if (GoodId(id, rows)) return id;
  if (e % d == 0) ReportBadId(status, site, i, id, rows);
  return -1;
}

__global__ void EmbeddingKernel(const float* table, const int32_t* ids, int64_t n, int64_t rows,
                                int64_t d, float* out, int32_t* status, int32_t site) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n * d;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = TableRow(ids, e, d, rows, status, site);
    out[e] = row < 0 ? 0.0f : table[row * d + e % d];
  }
}

__global__ void EmbeddingGradKernel(const float* dy, const int32_t* ids, int64_t n, int64_t rows,
                                    int64_t d, float* dtable, int32_t* status, int32_t site) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n * d;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = TableRow(ids, e, d, rows, status, site);
    if (row >= 0) atomicAdd(dtable + row * d + e % d, dy[e]);
  }
}

// Vocabulary-parallel: the shard's row of element e, or -1 when the id is
// another shard's (or out of [0, num_ids), reported).
__device__ __forceinline__ int64_t ShardRow(const int32_t* ids, const int32_t* first_row,
                                            int64_t e, int64_t d, int64_t rows,
                                            int64_t num_ids, int32_t* status, int32_t site) {
  const int64_t i = e / d;
  const int32_t id = ids[i];
  if (!GoodId(id, num_ids)) {
    if (e % d == 0) ReportBadId(status, site, i, id, num_ids);
    return -1;
  }
  const int64_t row = static_cast<int64_t>(id) - *first_row;
  return row >= 0 && row < rows ? row : -1;
}

__global__ void EmbeddingShardKernel(const float* table, const int32_t* ids,
                                     const int32_t* first_row, int64_t n, int64_t rows,
                                     int64_t num_ids, int64_t d, float* out, int32_t* status,
                                     int32_t site) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n * d;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = ShardRow(ids, first_row, e, d, rows, num_ids, status, site);
    out[e] = row < 0 ? 0.0f : table[row * d + e % d];
  }
}

__global__ void EmbeddingShardGradKernel(const float* dy, const int32_t* ids,
                                         const int32_t* first_row, int64_t n, int64_t rows,
                                         int64_t num_ids, int64_t d, float* dtable,
                                         int32_t* status, int32_t site) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n * d;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = ShardRow(ids, first_row, e, d, rows, num_ids, status, site);
    if (row >= 0) atomicAdd(dtable + row * d + e % d, dy[e]);
  }
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_cross_entropy(stepc_cuda_ctx* ctx, const float* logits,
                                        const int32_t* targets, int64_t n, int64_t classes,
                                        float* scratch, float* loss, int32_t site) {
  STEPC_LAUNCH_COOPERATIVE(n, kThreads, 0, ctx->stream, CrossEntropyRowsKernel)(logits, targets, classes, scratch,
                                                          ctx->status, site);
  if (int rc = STEPC_LAUNCHED(ctx, "CrossEntropyRowsKernel")) return rc;
  STEPC_LAUNCH_COOPERATIVE(1, kThreads, 0, ctx->stream, MeanKernel)(scratch, n, loss);
  return STEPC_LAUNCHED(ctx, "MeanKernel");
}

extern "C" int stepc_cuda_cross_entropy_grad(stepc_cuda_ctx* ctx, const float* dloss,
                                             const float* logits, const int32_t* targets,
                                             int64_t n, int64_t classes, float* dlogits,
                                             int32_t site) {
  STEPC_LAUNCH_COOPERATIVE(n, kThreads, 0, ctx->stream, CrossEntropyGradKernel)(dloss, logits, targets, n, classes,
                                                          dlogits, ctx->status, site);
  return STEPC_LAUNCHED(ctx, "CrossEntropyGradKernel");
}

extern "C" int stepc_cuda_cross_entropy_masked(stepc_cuda_ctx* ctx, const float* logits,
                                               const int32_t* targets, const float* count,
                                               int64_t n, int64_t classes, int64_t ignore,
                                               double smoothing, double z_loss, float* scratch,
                                               float* loss, int32_t site) {
  const MaskedLoss o{ignore, static_cast<float>(smoothing), static_cast<float>(z_loss)};
  STEPC_LAUNCH_COOPERATIVE(n, kThreads, 0, ctx->stream, MaskedRowsKernel)(
      logits, targets, classes, o, scratch, ctx->status, site);
  if (int rc = STEPC_LAUNCHED(ctx, "MaskedRowsKernel")) return rc;
  STEPC_LAUNCH_COOPERATIVE(1, kThreads, 0, ctx->stream, OverCountKernel)(scratch, n, count, loss);
  return STEPC_LAUNCHED(ctx, "OverCountKernel");
}

extern "C" int stepc_cuda_cross_entropy_masked_grad(stepc_cuda_ctx* ctx, const float* dloss,
                                                    const float* logits, const int32_t* targets,
                                                    const float* count, int64_t n,
                                                    int64_t classes, int64_t ignore,
                                                    double smoothing, double z_loss,
                                                    float* dlogits, int32_t site) {
  const MaskedLoss o{ignore, static_cast<float>(smoothing), static_cast<float>(z_loss)};
  STEPC_LAUNCH_COOPERATIVE(n, kThreads, 0, ctx->stream, MaskedGradKernel)(
      dloss, logits, targets, count, classes, o, dlogits, ctx->status, site);
  return STEPC_LAUNCHED(ctx, "MaskedGradKernel");
}

namespace stepc::cuda {
namespace {

// Both results of a cross-entropy and its gradient (count null: unmasked).
template <typename TL, typename TG>
int CrossEntropyFused(stepc_cuda_ctx* ctx, const TL* logits, const int32_t* targets,
                      const float* count, const float* dloss, int64_t n, int64_t classes,
                      MaskedLoss o, float* scratch, float* loss, TG* dlogits, int32_t site) {
  const bool vectors = classes % 8 == 0 && (reinterpret_cast<uintptr_t>(logits) & 15) == 0 &&
                       (reinterpret_cast<uintptr_t>(dlogits) & 15) == 0 &&
                       (classes * sizeof(TL)) % 16 == 0;
  const bool keep = CrossEntropyRowInShared(classes, sizeof(TL));
  const int64_t shared = keep ? classes * static_cast<int64_t>(sizeof(TL)) : 0;
  auto* kernel = CrossEntropyFusedKernel<TL, TG>;
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(kernel, shared));
  STEPC_LAUNCH_COOPERATIVE(n, keep ? kCrossEntropyRowThreads : kThreads, shared, ctx->stream,
                           kernel)(logits, targets, dloss, count, n, classes, o, vectors,
                                   scratch, dlogits, ctx->status, site, keep);
  if (int rc = STEPC_LAUNCHED(ctx, "CrossEntropyFusedKernel")) return rc;
  if (count) {
    STEPC_LAUNCH_COOPERATIVE(1, kThreads, 0, ctx->stream, OverCountKernel)(scratch, n, count,
                                                                           loss);
    return STEPC_LAUNCHED(ctx, "OverCountKernel");
  }
  STEPC_LAUNCH_COOPERATIVE(1, kThreads, 0, ctx->stream, MeanKernel)(scratch, n, loss);
  return STEPC_LAUNCHED(ctx, "MeanKernel");
}

constexpr MaskedLoss kPlainLoss{-1, 0.0f, 0.0f};

}  // namespace
}  // namespace stepc::cuda

// The unmasked fused loss: logits f32 or bf16 (`_of_bf16`), the gradient
// f32 or bf16 (`_bf16`).
#define STEPC_CROSS_ENTROPY_FUSED(name, TL, TG)                                                \
  extern "C" int name(stepc_cuda_ctx* ctx, const TL* logits, const int32_t* targets,           \
                      const float* dloss, int64_t n, int64_t classes, float* scratch,          \
                      float* loss, TG* dlogits, int32_t site) {                                \
    return CrossEntropyFused(ctx, logits, targets, nullptr, dloss, n, classes, kPlainLoss,     \
                             scratch, loss, dlogits, site);                                    \
  }
STEPC_CROSS_ENTROPY_FUSED(stepc_cuda_cross_entropy_fused, float, float)
STEPC_CROSS_ENTROPY_FUSED(stepc_cuda_cross_entropy_fused_bf16, float, __nv_bfloat16)
STEPC_CROSS_ENTROPY_FUSED(stepc_cuda_cross_entropy_fused_of_bf16, __nv_bfloat16, float)
STEPC_CROSS_ENTROPY_FUSED(stepc_cuda_cross_entropy_fused_of_bf16_bf16, __nv_bfloat16,
                          __nv_bfloat16)
#undef STEPC_CROSS_ENTROPY_FUSED

// With step.cross_entropy's options (count an operand).
#define STEPC_CROSS_ENTROPY_MASKED_FUSED(name, TL, TG)                                         \
  extern "C" int name(stepc_cuda_ctx* ctx, const TL* logits, const int32_t* targets,           \
                      const float* count, const float* dloss, int64_t n, int64_t classes,      \
                      int64_t ignore, double smoothing, double z_loss, float* scratch,         \
                      float* loss, TG* dlogits, int32_t site) {                                \
    const MaskedLoss o{ignore, static_cast<float>(smoothing), static_cast<float>(z_loss)};     \
    return CrossEntropyFused(ctx, logits, targets, count, dloss, n, classes, o, scratch, loss, \
                             dlogits, site);                                                   \
  }
STEPC_CROSS_ENTROPY_MASKED_FUSED(stepc_cuda_cross_entropy_masked_fused, float, float)
STEPC_CROSS_ENTROPY_MASKED_FUSED(stepc_cuda_cross_entropy_masked_fused_bf16, float,
                                 __nv_bfloat16)
STEPC_CROSS_ENTROPY_MASKED_FUSED(stepc_cuda_cross_entropy_masked_fused_of_bf16, __nv_bfloat16,
                                 float)
STEPC_CROSS_ENTROPY_MASKED_FUSED(stepc_cuda_cross_entropy_masked_fused_of_bf16_bf16,
                                 __nv_bfloat16, __nv_bfloat16)
#undef STEPC_CROSS_ENTROPY_MASKED_FUSED

extern "C" int stepc_cuda_token_count(stepc_cuda_ctx* ctx, const int32_t* targets, int64_t n,
                                      int64_t ignore, float* count) {
  STEPC_LAUNCH_COOPERATIVE(1, kThreads, 0, ctx->stream, TokenCountKernel)(targets, n, ignore,
                                                                          count);
  return STEPC_LAUNCHED(ctx, "TokenCountKernel");
}

extern "C" int stepc_cuda_target_mask(stepc_cuda_ctx* ctx, const int32_t* targets, int64_t n,
                                      int64_t ignore, int32_t* ids, float* mask) {
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, TargetMaskKernel)(targets, n, ignore,
                                                                                ids, mask);
  return STEPC_LAUNCHED(ctx, "TargetMaskKernel");
}

extern "C" int stepc_cuda_embedding(stepc_cuda_ctx* ctx, const float* table, const int32_t* ids,
                                    int64_t n, int64_t rows, int64_t d, float* out,
                                    int32_t site) {
  STEPC_LAUNCH(ElementwiseBlocks(n * d), kThreads, 0, ctx->stream, EmbeddingKernel)(table, ids, n, rows, d,
                                                                          out, ctx->status, site);
  return STEPC_LAUNCHED(ctx, "EmbeddingKernel");
}

extern "C" int stepc_cuda_embedding_grad(stepc_cuda_ctx* ctx, const float* dy,
                                         const int32_t* ids, int64_t n, int64_t rows, int64_t d,
                                         float* dtable, int32_t site) {
  STEPC_CUDA_TRY(ctx, cudaMemsetAsync(dtable, 0, rows * d * sizeof(float), ctx->stream));
  STEPC_LAUNCH(ElementwiseBlocks(n * d), kThreads, 0, ctx->stream, EmbeddingGradKernel)(
      dy, ids, n, rows, d, dtable, ctx->status, site);
  return STEPC_LAUNCHED(ctx, "EmbeddingGradKernel");
}

extern "C" int stepc_cuda_embedding_shard(stepc_cuda_ctx* ctx, const float* table,
                                          const int32_t* ids, const int32_t* first_row,
                                          int64_t n, int64_t rows, int64_t num_ids, int64_t d,
                                          float* out, int32_t site) {
  STEPC_LAUNCH(ElementwiseBlocks(n * d), kThreads, 0, ctx->stream, EmbeddingShardKernel)(
      table, ids, first_row, n, rows, num_ids, d, out, ctx->status, site);
  return STEPC_LAUNCHED(ctx, "EmbeddingShardKernel");
}

extern "C" int stepc_cuda_embedding_shard_grad(stepc_cuda_ctx* ctx, const float* dy,
                                               const int32_t* ids, const int32_t* first_row,
                                               int64_t n, int64_t rows, int64_t num_ids,
                                               int64_t d, float* dtable, int32_t site) {
  STEPC_CUDA_TRY(ctx, cudaMemsetAsync(dtable, 0, rows * d * sizeof(float), ctx->stream));
  STEPC_LAUNCH(ElementwiseBlocks(n * d), kThreads, 0, ctx->stream, EmbeddingShardGradKernel)(
      dy, ids, first_row, n, rows, num_ids, d, dtable, ctx->status, site);
  return STEPC_LAUNCHED(ctx, "EmbeddingShardGradKernel");
}
