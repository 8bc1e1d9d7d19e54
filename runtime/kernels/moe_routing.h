/* moe_routing.h - the routing of step.moe_dispatch / moe_combine, shared by
 * the CPU and CUDA kernels: a stable counting sort of the (token, k) pairs
 * by expert. The E experts fall in G equal groups (one per expert-parallel
 * rank; G = 1 without), and the rows in G blocks of `block_rows`, group g's
 * experts' rows in block g. Each pair's row ("slot") is its expert's first
 * row plus the number of earlier pairs with that expert; an expert outside
 * [0, E) takes no row (slot -1). Rows past a block's valid pairs are the
 * dispatch's zeros.
 *
 * With a capacity C per segment of S tokens (a positive `capacity`), each
 * expert takes at most C pairs of each run of S tokens, the earliest in
 * (token, k) order; the rest are dropped (slot -1; their combine term is 0)
 * and not counted. Segments are sequences, so data parallelism and
 * micro-batches, which split the batch between sequences, drop what one
 * rank drops. */
#ifndef STEPC_RUNTIME_KERNELS_MOE_ROUTING_H_
#define STEPC_RUNTIME_KERNELS_MOE_ROUTING_H_

#include <stdint.h>

#include "host_device.h"

/* The rows of one group's block: every pair (tokens·k), or, with a
 * capacity, at most C rows for each expert of the group in each segment. */
STEPC_HD int64_t stepc_moe_block_rows(int64_t tokens, int64_t k, int64_t num_experts,
                                      int64_t groups, int64_t capacity, int64_t segment) {
  const int64_t pairs = tokens * k;
  if (capacity <= 0 || segment <= 0) return pairs;
  /* (a capacity past every pair is every pair: no overflow below) */
  const int64_t per_expert = capacity < pairs ? capacity : pairs;
  const int64_t cap = (tokens / segment) * (num_experts / groups) * per_expert;
  return cap < pairs ? cap : pairs;
}

/* counts[e] = pairs routed to e (and kept); slots[p] = pair p's row (-1:
 * none); taken[g] (when not null) = rows block g holds. `next` and `seen`
 * are scratch of E entries each (`seen` unused without a capacity);
 * `segment_pairs` = S·k. Serial: O(pairs + E·segments). */
STEPC_HD void stepc_moe_route(const int32_t *experts, int64_t pairs, int64_t num_experts,
                              int64_t groups, int64_t block_rows, int64_t capacity,
                              int64_t segment_pairs, int32_t *counts, int32_t *next,
                              int32_t *seen, int32_t *slots, int32_t *taken) {
  const int64_t per_group = num_experts / groups;
  const int capped = capacity > 0 && segment_pairs > 0;
  for (int64_t e = 0; e < num_experts; ++e) counts[e] = 0;
  /* pass 0 counts, pass 1 places: the same walk, so they agree */
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t p = 0; p < pairs; ++p) {
      if (capped && p % segment_pairs == 0)
        for (int64_t e = 0; e < num_experts; ++e) seen[e] = 0;
      const int32_t e = experts[p];
      int keep = e >= 0 && e < num_experts;
      if (keep && capped) keep = seen[e]++ < capacity;
      if (pass == 0) {
        if (keep) ++counts[e];
      } else {
        slots[p] = keep ? next[e]++ : -1;
      }
    }
    if (pass == 1) break;
    for (int64_t g = 0; g < groups; ++g) {
      int32_t start = 0;
      for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
        next[e] = (int32_t)(g * block_rows) + start;
        start += counts[e];
      }
      if (taken) taken[g] = start;
    }
  }
}

/* Expert e's rows [*begin, *end) of an M-row grouped operand: the counts
 * laid end to end, clamped to M (negative counts count as 0). */
STEPC_HD void stepc_moe_rows(const int32_t *counts, int64_t e, int64_t m, int64_t *begin,
                             int64_t *end) {
  int64_t b = 0;
  for (int64_t i = 0; i < e; ++i) b += counts[i] > 0 ? counts[i] : 0;
  int64_t n = counts[e] > 0 ? counts[e] : 0;
  *begin = b < m ? b : m;
  *end = b + n < m ? b + n : m;
}

#endif /* STEPC_RUNTIME_KERNELS_MOE_ROUTING_H_ */
