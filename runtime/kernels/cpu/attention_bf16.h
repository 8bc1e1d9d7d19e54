// The bf16 attention kernels' shared description of one call, and the AMX
// tile implementation (attention_amx.cc) that attention_bf16.cc runs where
// the CPU has AMX.
#ifndef STEPC_RUNTIME_KERNELS_CPU_ATTENTION_BF16_H_
#define STEPC_RUNTIME_KERNELS_CPU_ATTENTION_BF16_H_

#include <cstdint>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace stepc::cpu {

struct Bf16Attention {
  int64_t batch, tq, tk, heads, kv_heads, hd;
  bool causal;
  float scale;
  // Row strides of Q and dQ, of K, V, dK and dV, and of O and dO: H·Dh and
  // Hkv·Dh, or a packed [B, T, width] source's width for Q, K and V.
  int64_t ldq, ldk, ldo;
  int64_t group() const { return heads / kv_heads; }
};

// True where this CPU has AMX tiles for bf16 and the kernel let this process
// use them (arch_prctl ARCH_REQ_XCOMP_PERM), unless STEPC_ATTENTION=onednn.
bool AmxAttentionUsable();

// The attention on AMX tiles, each (batch entry, KV head) on one thread with
// its operands in that core's cache. Same numerics as the oneDNN path: bf16
// products accumulated in f32, P and dS rounded to bf16 before their
// products. Call only where AmxAttentionUsable().
void AmxAttentionForward(const Bf16Attention& a, const stepc_bf16* q, const stepc_bf16* k,
                         const stepc_bf16* v, stepc_bf16* out);
void AmxAttentionBackward(const Bf16Attention& a, const stepc_bf16* dout, const stepc_bf16* q,
                          const stepc_bf16* k, const stepc_bf16* v, stepc_bf16* dq,
                          stepc_bf16* dk, stepc_bf16* dv);

}  // namespace stepc::cpu

#endif  // STEPC_RUNTIME_KERNELS_CPU_ATTENTION_BF16_H_
