// dropout: one Philox draw per element (runtime/kernels/philox.h), elements
// split across threads; the draw depends on the element's global index only,
// so the split changes nothing.

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/philox.h"

namespace {

void Dropout(const float* x, int32_t seed, float step, int64_t first, int64_t n, double rate,
             int64_t stream, float* y) {
  const uint32_t threshold = stepc_dropout_threshold(rate);
  const float scale = stepc_dropout_scale(rate);
  const auto key_seed = static_cast<uint32_t>(seed), key_stream = static_cast<uint32_t>(stream);
  const auto step_number = static_cast<uint32_t>(step);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = stepc_dropout_keep(key_seed, key_stream, step_number,
                              static_cast<uint64_t>(first + i), threshold)
               ? x[i] * scale
               : 0.0f;
}

}  // namespace

extern "C" void stepc_cpu_dropout(const float* x, const int32_t* seed, const float* step,
                                  int64_t n, int64_t /*row_size*/, double rate, int64_t stream,
                                  float* y) {
  Dropout(x, *seed, *step, 0, n, rate, stream, y);
}

extern "C" void stepc_cpu_dropout_rows(const float* x, const int32_t* seed, const float* step,
                                       const int32_t* first_row, int64_t n, int64_t row_size,
                                       double rate, int64_t stream, float* y) {
  Dropout(x, *seed, *step, static_cast<int64_t>(*first_row) * row_size, n, rate, stream, y);
}
