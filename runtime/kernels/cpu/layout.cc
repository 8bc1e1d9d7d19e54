// Layout kernels: fill, broadcast, transpose, box copies (slice, pad,
// concat) and reductions. Index arithmetic by strides; parallel over the
// output.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <omp.h>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

std::vector<int64_t> Strides(const int64_t* shape, int rank) {
  std::vector<int64_t> s(rank, 1);
  for (int d = rank - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

int64_t Numel(const int64_t* shape, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

}  // namespace

extern "C" void stepc_cpu_fill(float* out, int64_t n, float value) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) out[i] = value;
}

extern "C" void stepc_cpu_broadcast(const float* in, const int64_t* in_shape, int in_rank,
                                    float* out, const int64_t* out_shape, int out_rank) {
  std::vector<int64_t> in_strides = Strides(in_shape, in_rank);
  // Stride of each output dim into the input (0 where broadcast).
  std::vector<int64_t> src(out_rank, 0);
  int offset = out_rank - in_rank;
  for (int d = 0; d < in_rank; ++d)
    src[d + offset] = in_shape[d] == 1 ? 0 : in_strides[d];
  int64_t inner = out_shape[out_rank - 1], rows = Numel(out_shape, out_rank) / inner;
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, pos = 0;
    for (int d = out_rank - 2; d >= 0; --d) {
      pos += (rem % out_shape[d]) * src[d];
      rem /= out_shape[d];
    }
    float* o = out + r * inner;
    int64_t step = src[out_rank - 1];
    for (int64_t j = 0; j < inner; ++j) o[j] = in[pos + j * step];
  }
}

extern "C" void stepc_cpu_transpose(const float* in, const int64_t* in_shape, int rank,
                                    const int64_t* perm, float* out) {
  std::vector<int64_t> in_strides = Strides(in_shape, rank), out_shape(rank), src(rank);
  for (int d = 0; d < rank; ++d) {
    out_shape[d] = in_shape[perm[d]];
    src[d] = in_strides[perm[d]];
  }
  int64_t n = Numel(out_shape.data(), rank);
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, pos = 0;
    for (int d = rank - 1; d >= 0; --d) {
      pos += (rem % out_shape[d]) * src[d];
      rem /= out_shape[d];
    }
    out[i] = in[pos];
  }
}

extern "C" void stepc_cpu_copy_box(const float* src, const int64_t* src_shape,
                                   const int64_t* src_offsets, float* dst,
                                   const int64_t* dst_shape, const int64_t* dst_offsets,
                                   const int64_t* box, int rank) {
  std::vector<int64_t> ss = Strides(src_shape, rank), ds = Strides(dst_shape, rank);
  int64_t inner = box[rank - 1], rows = Numel(box, rank) / inner;
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, s = src_offsets[rank - 1], t = dst_offsets[rank - 1];
    for (int d = rank - 2; d >= 0; --d) {
      int64_t i = rem % box[d];
      rem /= box[d];
      s += (i + src_offsets[d]) * ss[d];
      t += (i + dst_offsets[d]) * ds[d];
    }
    std::memcpy(dst + t, src + s, inner * sizeof(float));
  }
}

namespace {

// Position of input index `i` in the reduced output (kept dims in order).
int64_t ReducedPosition(int64_t i, const int64_t* shape, int rank, const int* mask) {
  int64_t pos = 0, mult = 1;
  for (int d = rank - 1; d >= 0; --d) {
    int64_t idx = i % shape[d];
    i /= shape[d];
    if (!mask[d]) {
      pos += idx * mult;
      mult *= shape[d];
    }
  }
  return pos;
}

int64_t ReducedCount(const int64_t* shape, int rank, const int* mask, bool kept) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d)
    if ((mask[d] == 0) == kept) n *= shape[d];
  return n;
}

}  // namespace

namespace {

float Widened(float x) { return x; }
float Widened(stepc_bf16 x) { return stepc_bf16_to_f32(x); }

// Rows [r0, r1) of columns [j0, j0 + W) summed in double from zero, in row
// order, then added to acc.
template <int64_t W, typename In>
inline void SumBlock(const In* in, int64_t cols, int64_t r0, int64_t r1, int64_t j0,
                     double* acc) {
  double block[W] = {};
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < W; ++j) block[j] += Widened(in[r * cols + j0 + j]);
  for (int64_t j = 0; j < W; ++j) acc[j0 + j] += block[j];
}

// stepc_cpu_reduce on f32 or on bf16 values (each widened exactly as it is
// read: the same sums as of a widened copy).
template <typename In>
void Reduce(const In* in, const int64_t* shape, int rank, const int* mask, int kind,
            float* out) {
  int64_t n = Numel(shape, rank), outs = ReducedCount(shape, rank, mask, true);
  int64_t count = ReducedCount(shape, rank, mask, false);
  // Fast paths: the reduced dims are a prefix (a bias gradient: column sums
  // over rows) or a suffix (row sums).
  int first_kept = 0, last_kept = rank - 1;
  while (first_kept < rank && mask[first_kept]) ++first_kept;
  while (last_kept >= 0 && mask[last_kept]) --last_kept;
  bool prefix = true, suffix = true;
  for (int d = first_kept; d < rank; ++d) prefix &= !mask[d];
  for (int d = 0; d <= last_kept; ++d) suffix &= !mask[d];
  auto finish = [&](double acc) {
    return static_cast<float>(kind == 2 ? acc / count : acc);
  };
  if (outs == 1 && kind != 1) {
    // A whole tensor to one sum (the clipping norm's terms): one vector
    // reduction in double.
    double acc = 0.0;
#pragma omp parallel for simd reduction(+ : acc)
    for (int64_t i = 0; i < n; ++i) acc += Widened(in[i]);
    out[0] = finish(acc);
    return;
  }
  if (prefix) {
    // Row blocks per thread, each accumulating contiguous rows into its own
    // partial sums (vectorisable), then one combine.
    const int64_t rows = count, cols = outs;
    const double init = kind == 1 ? -INFINITY : 0.0;
    std::vector<double> partial;
#pragma omp parallel
    {
#pragma omp single
      partial.assign(static_cast<size_t>(omp_get_num_threads()) * cols, init);
      double* acc = partial.data() + static_cast<size_t>(omp_get_thread_num()) * cols;
      if (kind == 1) {
#pragma omp for
        for (int64_t r = 0; r < rows; ++r) {
          const In* row = in + r * cols;
          for (int64_t j = 0; j < cols; ++j) acc[j] = std::fmax(acc[j], Widened(row[j]));
        }
      } else {
        // Sums of kRows rows at a time, 16 columns in registers: one load
        // and store of the partial sums per block, not per row (they bounded
        // the loop, not the tensor's bytes). bf16 rows go 32 columns at a
        // time where 32 remain: with 16, GCC widened them in 256-bit halves
        // and the bf16 sums ran at 2/3 of the f32 sums' rate. A column's
        // additions are the same in either width.
        constexpr int64_t kRows = 16, kCols = 16;
        constexpr int64_t kWideCols = sizeof(In) == 2 ? 2 * kCols : kCols;
#pragma omp for
        for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
          const int64_t r1 = std::min(rows, r0 + kRows);
          // The rows two blocks ahead, fetched (they come from memory).
          stepc_prefetch_r(in, (r0 + 2 * kRows) * cols, (r1 + 2 * kRows) * cols, rows * cols,
                           sizeof(In));
          int64_t j0 = 0;
          for (; j0 + kWideCols <= cols; j0 += kWideCols)
            SumBlock<kWideCols>(in, cols, r0, r1, j0, acc);
          for (; j0 + kCols <= cols; j0 += kCols) SumBlock<kCols>(in, cols, r0, r1, j0, acc);
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t j = j0; j < cols; ++j) acc[j] += Widened(in[r * cols + j]);
        }
      }
    }
    const int64_t threads = static_cast<int64_t>(partial.size()) / cols;
    for (int64_t j = 0; j < cols; ++j) {
      double acc = init;
      for (int64_t t = 0; t < threads; ++t)
        acc = kind == 1 ? std::fmax(acc, partial[t * cols + j]) : acc + partial[t * cols + j];
      out[j] = finish(acc);
    }
    return;
  }
  if (suffix) {
    int64_t rows = outs, cols = count;
#pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
      double acc = kind == 1 ? -INFINITY : 0.0;
      for (int64_t j = 0; j < cols; ++j)
        acc = kind == 1 ? std::fmax(acc, Widened(in[r * cols + j]))
                        : acc + Widened(in[r * cols + j]);
      out[r] = finish(acc);
    }
    return;
  }
  std::vector<double> acc(outs, kind == 1 ? -std::numeric_limits<double>::infinity() : 0.0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = ReducedPosition(i, shape, rank, mask);
    acc[p] = kind == 1 ? std::fmax(acc[p], Widened(in[i])) : acc[p] + Widened(in[i]);
  }
  for (int64_t p = 0; p < outs; ++p) out[p] = finish(acc[p]);
}

}  // namespace

extern "C" void stepc_cpu_reduce(const float* in, const int64_t* shape, int rank,
                                 const int* mask, int kind, float* out) {
  Reduce(in, shape, rank, mask, kind, out);
}

extern "C" void stepc_cpu_reduce_of_bf16(const stepc_bf16* in, const int64_t* shape, int rank,
                                         const int* mask, int kind, float* out) {
  Reduce(in, shape, rank, mask, kind, out);
}

extern "C" void stepc_cpu_reduce_max_grad(const float* dy, const float* x,
                                          const int64_t* shape, int rank, const int* mask,
                                          float* dx) {
  int64_t n = Numel(shape, rank), outs = ReducedCount(shape, rank, mask, true);
  std::vector<float> max(outs, -std::numeric_limits<float>::infinity());
  std::vector<int64_t> ties(outs, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = ReducedPosition(i, shape, rank, mask);
    max[p] = std::fmax(max[p], x[i]);
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = ReducedPosition(i, shape, rank, mask);
    ties[p] += x[i] == max[p];
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = ReducedPosition(i, shape, rank, mask);
    dx[i] = x[i] == max[p] ? dy[p] / ties[p] : 0.0f;
  }
}
