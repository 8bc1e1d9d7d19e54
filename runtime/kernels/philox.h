/* philox.h - the random numbers step.dropout draws, written once.
 *
 * Philox-4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
 * as easy as 1, 2, 3", SC 2011), the counter-based generator PyTorch's CUDA
 * generator and JAX use. A draw is a pure function of its key and counter,
 * so every consumer - the reference interpreter, the CPU kernels, the CUDA
 * kernels and their host emulation - computes the same bits for the same
 * element without sharing any state, in any order, on any rank.
 *
 * Dropout keys one draw per element: key (seed, stream), counter (global
 * element index, low and high words; step number; 0). The global index is
 * the element's row-major position in the whole tensor (every rank, every
 * micro-batch), so a mesh or micro-batching changes no mask. */
#ifndef STEPC_RUNTIME_KERNELS_PHILOX_H_
#define STEPC_RUNTIME_KERNELS_PHILOX_H_

#include <stdint.h>

#include "host_device.h"

/* One Philox-4x32-10 block: out = philox(counter, key). */
STEPC_HD void stepc_philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                                  uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u; /* the golden ratio's and √3 - 1's bits: the key schedule */
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* The 24-bit threshold below which dropout zeroes an element: a draw
 * u = (bits >> 8) / 2^24 is dropped when u < rate. Integers, so every
 * consumer compares alike. */
STEPC_HD uint32_t stepc_dropout_threshold(double rate) {
  const double scaled = rate * 16777216.0;
  uint32_t t = (uint32_t)scaled;
  return (double)t < scaled ? t + 1 : t; /* ceil: u < rate <=> (bits >> 8) < t */
}

/* What dropout multiplies a kept element by: 1 / (1 - rate), rounded to
 * float once, as every consumer multiplies. */
STEPC_HD float stepc_dropout_scale(double rate) { return (float)(1.0 / (1.0 - rate)); }

/* Whether dropout keeps element `index` of stream `stream` at step `step`
 * under `seed`. */
STEPC_HD int stepc_dropout_keep(uint32_t seed, uint32_t stream, uint32_t step, uint64_t index,
                                uint32_t threshold) {
  const uint32_t counter[4] = {(uint32_t)index, (uint32_t)(index >> 32), step, 0u};
  const uint32_t key[2] = {seed, stream};
  uint32_t bits[4];
  stepc_philox4x32_10(counter, key, bits);
  return (bits[0] >> 8) >= threshold;
}

#endif /* STEPC_RUNTIME_KERNELS_PHILOX_H_ */
