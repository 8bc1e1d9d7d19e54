// Compile-only check (CI, nvcc, sm_90a): tile_math.h builds for the device.
// One thread per query row folds key tiles with the online softmax, the
// same calls flash_attention_host.h makes on the host; the tiled kernels of
// the CUDA back end reuse these functions.

#include "runtime/kernels/cuda/tile_math.h"

namespace stepc::tile {

__global__ void RowAttentionCheck(const float* scores, const float* v, int t, int dh, int tile,
                                  float* out, float* lse) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= t) return;
  float acc[64];
  for (int c = 0; c < dh; ++c) acc[c] = 0.0f;
  RowState st = RowStart();
  for (int k0 = 0; k0 < t; k0 += tile) {
    const int k1 = min(t, k0 + tile);
    if (CausalTile(row, row + 1, k0, k1) == TileMask::kSkip) break;
    RowUpdate(st, scores + row * t + k0, k1 - k0, v + k0 * dh, dh, dh, acc);
  }
  lse[row] = RowFinish(st, acc, dh, out + row * dh);
}

}  // namespace stepc::tile
