// The host emulation's stand-in for cuDNN's attention (cudnn_attention.h).
// No cuDNN runs on the host; with STEPC_ATTENTION=cudnn the bf16 calls go
// through the same glue as on a GPU (the scratch carved as planned, the
// forward recomputed when none was saved, bf16 gradients widened where the
// step wants f32) with stepc's own kernels writing bf16 as cuDNN does, so
// the glue is tested here. Otherwise it takes nothing. Its "graphs" are the
// shapes it saw: those a prepare named (ctx->prepare) and those a step met
// first, counted as cuDNN counts the graphs it builds.

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "runtime/kernels/cuda/cudnn_attention.h"

namespace {
bool Forced() {
  const char *choice = std::getenv("STEPC_ATTENTION");
  return choice && std::strcmp(choice, "cudnn") == 0;
}

// What keys a graph on the GPU: the dims, mask, scale, whether the forward
// writes its log-sum-exp, the direction and the row strides.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, double, bool,
                       bool, int64_t, int64_t, int64_t, int64_t>;
struct Graphs {
  std::mutex mutex;
  std::set<Key> seen;
  int before_steps = 0, in_steps = 0;
};
Graphs &TheGraphs() {
  static Graphs *graphs = new Graphs();
  return *graphs;
}
void See(const stepc_cuda_ctx *ctx, const Key &key) {
  Graphs &g = TheGraphs();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (g.seen.insert(key).second) ++(ctx->prepare ? g.before_steps : g.in_steps);
}
}  // namespace

extern "C" int stepc_cudnn_attention(stepc_cuda_ctx *ctx, const void *q, const void *k,
                                     const void *v, int64_t batch, int64_t tq, int64_t tk,
                                     int64_t heads, int64_t kv_heads, int64_t head_dim,
                                     int causal, double scale, void *out, float *lse, void *,
                                     int64_t, const stepc_attention_rows *rows) {
  if (!Forced()) return STEPC_CUDNN_NOT_TAKEN;
  const stepc_attention_rows r = stepc::cuda::RowsOrDense(rows, heads, kv_heads, head_dim);
  See(ctx, Key{batch, tq, tk, heads, kv_heads, head_dim, causal, scale, lse != nullptr, false,
               r.q, r.kv, r.dq, r.dkv});
  if (ctx->prepare) return STEPC_CUDNN_RAN;
  return stepc_cuda_attention_own(ctx, q, k, v, STEPC_CUDA_BF16, batch, tq, tk, heads, kv_heads,
                                  head_dim, causal, scale, out, STEPC_CUDA_BF16, lse, rows)
             ? STEPC_CUDNN_FAILED
             : STEPC_CUDNN_RAN;
}

// Our backward's row terms (its scratch) live in the workspace planned for
// cuDNN, which is larger.
extern "C" int stepc_cudnn_attention_grad(stepc_cuda_ctx *ctx, const void *dout, const void *q,
                                          const void *k, const void *v, const void *out,
                                          const float *lse, int64_t batch, int64_t tq,
                                          int64_t tk, int64_t heads, int64_t kv_heads,
                                          int64_t head_dim, int causal, double scale, void *dq,
                                          void *dk, void *dv, void *workspace, int64_t,
                                          const stepc_attention_rows *rows) {
  if (!Forced()) return STEPC_CUDNN_NOT_TAKEN;
  const stepc_attention_rows r = stepc::cuda::RowsOrDense(rows, heads, kv_heads, head_dim);
  See(ctx, Key{batch, tq, tk, heads, kv_heads, head_dim, causal, scale, true, true, r.q, r.kv,
               r.dq, r.dkv});
  if (ctx->prepare) return STEPC_CUDNN_RAN;
  return stepc_cuda_attention_grad_own(ctx, dout, q, k, v, STEPC_CUDA_BF16, batch, tq, tk,
                                       heads, kv_heads, head_dim, causal, scale,
                                       static_cast<char *>(workspace), out, STEPC_CUDA_BF16, lse,
                                       dq, dk, dv, STEPC_CUDA_BF16, rows)
             ? STEPC_CUDNN_FAILED
             : STEPC_CUDNN_RAN;
}

extern "C" const char *stepc_cudnn_attention_engine(void) {
  if (!Forced()) return "own (emulation)";
  static thread_local std::string engine;
  Graphs &g = TheGraphs();
  std::lock_guard<std::mutex> lock(g.mutex);
  engine = "cudnn (emulated: stepc's kernels through the cuDNN glue); " +
           std::to_string(g.before_steps) + " graphs built before the first step";
  if (g.in_steps) engine += ", " + std::to_string(g.in_steps) + " in a step";
  return engine.c_str();
}
