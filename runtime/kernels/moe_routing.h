/* moe_routing.h - the routing of step.moe_dispatch / moe_combine, shared by
 * the CPU and CUDA kernels: a stable counting sort of the (token, k) pairs
 * by expert. The E experts fall in G equal groups (one per expert-parallel
 * rank; G = 1 without), and the rows in G blocks of `block_rows`, group g's
 * experts' rows in block g. Each pair's row ("slot") is its expert's first
 * row plus the number of earlier pairs with that expert; an expert outside
 * [0, E) takes no row (slot -1). Rows past a block's valid pairs are the
 * dispatch's zeros. */
#ifndef STEPC_RUNTIME_KERNELS_MOE_ROUTING_H_
#define STEPC_RUNTIME_KERNELS_MOE_ROUTING_H_

#include <stdint.h>

#include "host_device.h"

/* counts[e] = pairs routed to e; slots[p] = pair p's row (-1: none);
 * taken[g] (when not null) = rows block g holds. `next` is scratch of E
 * entries. Serial: O(pairs + E). */
STEPC_HD void stepc_moe_route(const int32_t *experts, int64_t pairs, int64_t num_experts,
                              int64_t groups, int64_t block_rows, int32_t *counts,
                              int32_t *next, int32_t *slots, int32_t *taken) {
  const int64_t per_group = num_experts / groups;
  for (int64_t e = 0; e < num_experts; ++e) counts[e] = 0;
  for (int64_t p = 0; p < pairs; ++p)
    if (experts[p] >= 0 && experts[p] < num_experts) ++counts[experts[p]];
  for (int64_t g = 0; g < groups; ++g) {
    int32_t start = 0;
    for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
      next[e] = (int32_t)(g * block_rows) + start;
      start += counts[e];
    }
    if (taken) taken[g] = start;
  }
  for (int64_t p = 0; p < pairs; ++p)
    slots[p] = experts[p] >= 0 && experts[p] < num_experts ? next[experts[p]]++ : -1;
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
