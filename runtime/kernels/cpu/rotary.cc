// Rotary position embeddings (step.rotary): each head's adjacent pairs
// rotate by their position's angles.
//
// Built with -ffp-contract=off (runtime/CMakeLists.txt): each product is
// rounded before the sum, as the scalar loop this kernel replaced rounded
// it (the vectorised loop would otherwise fuse them: other bits).

#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

// cos(t·θ_i) and sin(t·θ_i) as floats for every position t < len and pair
// i < head_dim / 2 (t-major: [t][i] cos, then [t][i] sin), computed in
// double once per (len, head_dim, theta, inverse) and kept: every layer's
// query and key rotation, forward and backward, reads the same angles, and
// two libm calls per element were most of the kernel's time ([4, 2048, 768]
// on 2 threads: 15.9 ms with them, 1.5 ms with the table).
const std::vector<float>& RotaryTable(int64_t len, int64_t head_dim, double theta, int inverse) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, double, int>, std::vector<float>> tables;
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<float>& table = tables[{len, head_dim, theta, inverse}];
  if (!table.empty()) return table;
  const int64_t pairs = head_dim / 2;
  std::vector<double> freq(pairs);
  for (int64_t i = 0; i < pairs; ++i)
    freq[i] = std::pow(theta, -2.0 * i / head_dim) * (inverse ? -1.0 : 1.0);
  table.resize(2 * len * pairs);
  float* cosines = table.data();
  float* sines = cosines + len * pairs;
#pragma omp parallel for
  for (int64_t t = 0; t < len; ++t)
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle = t * freq[i];
      cosines[t * pairs + i] = static_cast<float>(std::cos(angle));
      sines[t * pairs + i] = static_cast<float>(std::sin(angle));
    }
  return table;
}

}  // namespace

// Adjacent pairs of each head rotate by t·θ_i, θ_i = theta^(-2i/Dh).
extern "C" void stepc_cpu_rotary(const float* x, int64_t batch, int64_t len, int64_t width,
                                 int64_t head_dim, double theta, int inverse, float* y) {
  const int64_t pairs = head_dim / 2;
  const float* cosines = RotaryTable(len, head_dim, theta, inverse).data();
  const float* sines = cosines + len * pairs;
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t base = 0; base < width; base += head_dim)
#pragma omp simd
        for (int64_t i = 0; i < pairs; ++i) {
          const float c = cosines[t * pairs + i], sn = sines[t * pairs + i];
          const int64_t p = (b * len + t) * width + base + 2 * i;
          const float x0 = x[p], x1 = x[p + 1];
          y[p] = x0 * c - x1 * sn;
          y[p + 1] = x0 * sn + x1 * c;
        }
}
