// bf16 GEMMs on AMX tiles for the shapes a step's layers make (see
// gemm_amx.cc); oneDNN (gemm_bf16.cc) takes every other shape.
#ifndef STEPC_RUNTIME_KERNELS_CPU_GEMM_AMX_H_
#define STEPC_RUNTIME_KERNELS_CPU_GEMM_AMX_H_

#include <cstdint>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace stepc::cpu {

// C[m, n] = op(A) op(B) (+ bias[n]) in f32 (c_f32) or rounded to bf16 as
// stepc_f32_to_bf16 rounds, op(A) [m, k] (A stored [k, m] if transpose_a),
// op(B) [k, n] (B stored [n, k] if transpose_b), products of bf16 pairs
// accumulated in f32. False, with C untouched, where it does not take the
// shape: no AMX here, STEPC_GEMM=onednn, inside a parallel region, or B too
// large to pack into a core's cache.
bool AmxGemm(const stepc_bf16* a, const stepc_bf16* b, void* c, bool c_f32, int64_t m, int64_t n,
             int64_t k, bool transpose_a, bool transpose_b, const float* bias);

}  // namespace stepc::cpu

#endif  // STEPC_RUNTIME_KERNELS_CPU_GEMM_AMX_H_
