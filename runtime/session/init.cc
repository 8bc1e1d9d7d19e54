#include "runtime/session/init.h"

#include <cmath>

namespace stepc {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

// Uniform in (0, 1].
double Unit(uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

}  // namespace

void FillInitial(uint64_t seed, std::string_view name, stepc_init init, double std,
                 absl::Span<float> out, uint64_t offset) {
  if (init != STEPC_INIT_NORMAL) {
    std::fill(out.begin(), out.end(), init == STEPC_INIT_ONES ? 1.0f : 0.0f);
    return;
  }
  const uint64_t key = SplitMix64(seed ^ Fnv1a(name));
  const double two_pi = 6.283185307179586;
  for (size_t i = 0; i < out.size(); ++i) {
    // Box–Muller on the pair (2·⌊k/2⌋, 2·⌊k/2⌋+1): cos for even k, sin for odd.
    const uint64_t k = offset + i;
    uint64_t pair = k / 2;
    double u1 = Unit(SplitMix64(key + 2 * pair)), u2 = Unit(SplitMix64(key + 2 * pair + 1));
    double r = std::sqrt(-2.0 * std::log(u1)), angle = two_pi * u2;
    out[i] = static_cast<float>(std * r * (k % 2 == 0 ? std::cos(angle) : std::sin(angle)));
  }
}

}  // namespace stepc
