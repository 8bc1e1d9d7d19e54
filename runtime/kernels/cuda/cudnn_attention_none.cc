// cudnn_attention_none.cc - the build without the cuDNN frontend's headers
// (scripts/install-deps.sh could not fetch them): cuDNN takes no attention
// and stepc's own kernels run every one.

#include <cstdlib>
#include <cstring>

#include "runtime/kernels/cuda/cudnn_attention.h"

namespace stepc::cuda {
int Fail(stepc_cuda_ctx *ctx, const char *call, const char *file, int line, const char *why);
}  // namespace stepc::cuda

namespace {
int NotTaken(stepc_cuda_ctx *ctx) {
  const char *choice = std::getenv("STEPC_ATTENTION");
  if (choice && std::strcmp(choice, "cudnn") == 0)
    return stepc::cuda::Fail(ctx, "cuDNN attention (STEPC_ATTENTION=cudnn)", __FILE__, __LINE__,
                             "this stepc was built without the cuDNN frontend");
  return STEPC_CUDNN_NOT_TAKEN;
}
}  // namespace

extern "C" int stepc_cudnn_attention(stepc_cuda_ctx *ctx, const void *, const void *,
                                     const void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                     int64_t, int, double, void *, float *, void *, int64_t,
                                     const stepc_attention_rows *) {
  return NotTaken(ctx);
}

extern "C" int stepc_cudnn_attention_grad(stepc_cuda_ctx *ctx, const void *, const void *,
                                          const void *, const void *, const void *,
                                          const float *, int64_t, int64_t, int64_t, int64_t,
                                          int64_t, int64_t, int, double, void *, void *, void *,
                                          void *, int64_t, const stepc_attention_rows *) {
  return NotTaken(ctx);
}

extern "C" const char *stepc_cudnn_attention_engine(void) {
  return "own (built without the cuDNN frontend)";
}
