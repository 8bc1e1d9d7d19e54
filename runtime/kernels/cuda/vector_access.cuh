// vector_access.cuh - eight consecutive f32 or bf16 elements moved with
// 16-byte accesses (one for bf16, two for f32), widened to floats: a
// memory-bound kernel needs many bytes in flight per thread to reach HBM
// bandwidth. Shared by the kernel library and the elementwise kernels the
// CUDA emitter generates; plain enough for the host emulation. Include it
// after cuda_bf16.h (or emulation.h), which define __nv_bfloat16.

#ifndef STEPC_RUNTIME_KERNELS_CUDA_VECTOR_ACCESS_CUH_
#define STEPC_RUNTIME_KERNELS_CUDA_VECTOR_ACCESS_CUH_

#include <cstdint>
#include <cstring>

namespace stepc::cuda {

// p must be 16-byte aligned (Aligned16).
struct alignas(16) Bits128 {
  uint32_t w[4];
};
__host__ __device__ __forceinline__ bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}
__device__ __forceinline__ float FloatOfBits(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
__device__ __forceinline__ uint32_t BitsOfFloat(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
__device__ __forceinline__ uint32_t BitsOfBf16(float x) {
  const __nv_bfloat16 h = __float2bfloat16(x);
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
__device__ __forceinline__ void LoadEight(const float* p, float* x) {
  const Bits128 a = reinterpret_cast<const Bits128*>(p)[0];
  const Bits128 b = reinterpret_cast<const Bits128*>(p)[1];
  for (int i = 0; i < 4; ++i) {
    x[i] = FloatOfBits(a.w[i]);
    x[4 + i] = FloatOfBits(b.w[i]);
  }
}
__device__ __forceinline__ void LoadEight(const __nv_bfloat16* p, float* x) {
  const Bits128 a = *reinterpret_cast<const Bits128*>(p);
  for (int i = 0; i < 4; ++i) {  // little-endian: element 2i in the low half
    x[2 * i] = FloatOfBits(a.w[i] << 16);
    x[2 * i + 1] = FloatOfBits(a.w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void StoreEight(float* p, const float* x) {
  Bits128 a, b;
  for (int i = 0; i < 4; ++i) {
    a.w[i] = BitsOfFloat(x[i]);
    b.w[i] = BitsOfFloat(x[4 + i]);
  }
  reinterpret_cast<Bits128*>(p)[0] = a;
  reinterpret_cast<Bits128*>(p)[1] = b;
}
__device__ __forceinline__ void StoreEight(__nv_bfloat16* p, const float* x) {
  Bits128 a;
  for (int i = 0; i < 4; ++i) a.w[i] = BitsOfBf16(x[2 * i]) | (BitsOfBf16(x[2 * i + 1]) << 16);
  *reinterpret_cast<Bits128*>(p) = a;
}

}  // namespace stepc::cuda

#endif  // STEPC_RUNTIME_KERNELS_CUDA_VECTOR_ACCESS_CUH_
