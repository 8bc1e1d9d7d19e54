// mma.cuh - one warp-wide tensor-core product, mma.sync m16n8k16 (bf16
// operands, f32 accumulation), with its operands in registers: unlike WMMA's
// opaque fragments, PTX documents which lane holds which element, so a
// kernel can work on a product's result where it lies (the attention
// kernels' softmax on score fragments) and feed it to the next product.
//
// Lane l, g = l / 4, t = l % 4; each 32-bit register holds two bf16, the
// lower k (or column) in the low half:
//   A (16x16, row-major):  a0 = A[g][2t, 2t+1]   a1 = A[g+8][2t, 2t+1]
//                          a2 = A[g][2t+8, +9]   a3 = A[g+8][2t+8, +9]
//   B (16x8, k by n):      b0 = B[2t, 2t+1][g]   b1 = B[2t+8, 2t+9][g]
//   D (16x8, f32):         d0, d1 = D[g][2t, 2t+1]   d2, d3 = D[g+8][2t, 2t+1]
// On the host emulation the warp's lanes gather their registers and each
// computes its own four results in f32 (the order of a device's sums is its
// own; tests compare with tolerances).

#ifndef STEPC_RUNTIME_KERNELS_CUDA_MMA_CUH_
#define STEPC_RUNTIME_KERNELS_CUDA_MMA_CUH_

#include <cstdint>
#include <cstring>

namespace stepc::cuda::mma {

// The bits of a bf16.
__device__ __forceinline__ uint32_t Bits(__nv_bfloat16 x) {
#ifdef STEPC_CUDA_EMULATION
  uint16_t u;
  memcpy(&u, &x, 2);
  return u;
#else
  return __bfloat16_as_ushort(x);
#endif
}
// Two floats rounded to bf16 in one register, `lo` in the low half.
__device__ __forceinline__ uint32_t Pack(float lo, float hi) {
  return Bits(__float2bfloat16(lo)) | (Bits(__float2bfloat16(hi)) << 16);
}
// The two adjacent bf16 at p (4-byte aligned) as one register.
__device__ __forceinline__ uint32_t LoadPair(const __nv_bfloat16* p) {
#ifdef STEPC_CUDA_EMULATION
  uint32_t u;
  memcpy(&u, p, 4);
  return u;
#else
  return *reinterpret_cast<const uint32_t*>(p);
#endif
}

// The B fragment B[k][n] = tile[k0 + k][n0 + n] of a row-major bf16 tile
// whose rows run along B's k (V's rows for P·V, K's for dS·K): ldmatrix's
// transposing load, lanes 0-15 giving the addresses of rows k0..k0 + 15
// (16-byte aligned: ld and n0 multiples of 8). The emulation reads the
// elements each lane receives.
__device__ __forceinline__ void LoadBRows(const __nv_bfloat16* tile, int ld, int k0, int n0,
                                          uint32_t (&b)[2]) {
  const int lane = threadIdx.x % 32;
#ifdef STEPC_CUDA_EMULATION
  const int g = lane / 4, t = lane % 4;
  for (int j = 0; j < 2; ++j) {
    const __nv_bfloat16* p = tile + (k0 + 8 * j + 2 * t) * ld + n0 + g;
    b[j] = Bits(p[0]) | (Bits(p[ld]) << 16);
  }
#else
  const unsigned row = static_cast<unsigned>(
      __cvta_generic_to_shared(tile + (k0 + lane % 16) * ld + n0));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(row));
#endif
}

// 16 bytes from global to shared memory without passing through registers
// (cp.async.cg, sm_80 on), or 16 zero bytes where !valid (`from` is then
// not read). A thread's copies form groups (CommitCopies); WaitCopies<n>
// waits until at most n of its groups are pending. The emulation copies at
// once.
__device__ __forceinline__ void CopyAsync16(void* to, const void* from, bool valid) {
#ifdef STEPC_CUDA_EMULATION
  if (valid)
    memcpy(to, from, 16);
  else
    memset(to, 0, 16);
#else
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(from),
               "r"(valid ? 16 : 0));
#endif
}
__device__ __forceinline__ void CommitCopies() {
#ifndef STEPC_CUDA_EMULATION
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int kPending>
__device__ __forceinline__ void WaitCopies() {
#ifndef STEPC_CUDA_EMULATION
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// d += A·B for the warp (every lane calls it with its registers).
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4],
                                   const uint32_t (&b)[2]) {
#ifdef STEPC_CUDA_EMULATION
  struct Registers {
    uint32_t a[4], b[2];
  };
  const Registers mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  Registers all[32];
  ::stepc::emu::WarpGather(&mine, sizeof(mine), all);
  auto half = [](uint32_t r, int high) {
    uint16_t u = static_cast<uint16_t>(high ? r >> 16 : r & 0xffffu);
    __nv_bfloat16 x;
    memcpy(&x, &u, 2);
    return __bfloat162float(x);
  };
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int j = 0; j < 2; ++j) {
      A[g][2 * t + j] = half(all[l].a[0], j);
      A[g + 8][2 * t + j] = half(all[l].a[1], j);
      A[g][2 * t + 8 + j] = half(all[l].a[2], j);
      A[g + 8][2 * t + 8 + j] = half(all[l].a[3], j);
      B[2 * t + j][g] = half(all[l].b[0], j);
      B[2 * t + 8 + j][g] = half(all[l].b[1], j);
    }
  }
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int r = 0; r < 4; ++r) {
    const int row = g + 8 * (r / 2), col = 2 * t + r % 2;
    float sum = d[r];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[r] = sum;
  }
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

}  // namespace stepc::cuda::mma

#endif  // STEPC_RUNTIME_KERNELS_CUDA_MMA_CUH_
