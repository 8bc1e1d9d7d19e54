// Deterministic parameter initialisation.

#ifndef STEPC_RUNTIME_INIT_H_
#define STEPC_RUNTIME_INIT_H_

#include <cstdint>
#include <string_view>

#include "absl/types/span.h"
#include "runtime/stepc_abi.h"

namespace stepc {

// Fills `out` from the initialiser: zeros, ones, or N(0, std²). Element k of
// the parameter named `name` depends only on (seed, name, k) — counter-based
// (splitmix64 + Box–Muller), so any rank can draw any shard of any
// parameter and every world size sees the same model.
// `offset` is the index in the whole parameter of out[0], so a rank holding
// a shard draws exactly the elements the whole tensor has there.
void FillInitial(uint64_t seed, std::string_view name, stepc_init init, double std,
                 absl::Span<float> out, uint64_t offset = 0);

}  // namespace stepc

#endif  // STEPC_RUNTIME_INIT_H_
