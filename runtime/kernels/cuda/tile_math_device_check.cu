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

__global__ void CrossEntropyRowCheck(const float* logits, const int* targets, int v,
                                     float scale, float* dlogits, float* losses) {
  const int row = blockIdx.x;
  RowState st = RowStart();
  RowFold(st, logits + row * v, v);
  const float lse = RowLse(st);
  losses[row] = lse - logits[row * v + targets[row]];
  CrossEntropyRowGrad(logits + row * v, v, targets[row], lse, scale, dlogits + row * v);
}

__global__ void LayerNormRowCheck(const float* x, const float* w, const float* b, int d,
                                  float* y) {
  const int row = blockIdx.x;
  Welford stats = WelfordStart();
  for (int i = 0; i < d; ++i) WelfordAdd(stats, x[row * d + i]);
  LayerNormRow(x + row * d, w, b, d, 1e-5f, WelfordMerge(stats, WelfordStart()), y + row * d);
}

}  // namespace stepc::tile
