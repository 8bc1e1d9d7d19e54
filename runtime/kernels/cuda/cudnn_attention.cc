// cudnn_attention.cc - cuDNN's fused flash attention through the cuDNN
// frontend's graph API (cudnn_attention.h says when it runs).
//
// The frontend is header-only C++; with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
// it calls cuDNN through symbols looked up in the library we dlopen, so a
// step.so neither links cuDNN nor fails to load without it: a machine with
// no libcudnn.so.9 runs our own kernels. Q, K and V are read in place from
// the [B, T, H·Dh] rows the QKV projection wrote: cuDNN's [B, H, T, Dh] view
// with strides (T·H·Dh, Dh, H·Dh, 1), or (T·W, Dh, W, 1) for columns of the
// packed [B, T, W] projection; O and the gradients are written the same
// way, so no slice, permute or copy surrounds the call.

#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1

#include "runtime/kernels/cuda/cudnn_attention.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include <cudnn_frontend.h>

namespace cudnn_frontend {
// The frontend's handle on the cuDNN library it calls (dynamic loading).
void *cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace stepc::cuda {
int Fail(stepc_cuda_ctx *ctx, const char *call, const char *file, int line, const char *why);
}  // namespace stepc::cuda

namespace {

namespace fe = cudnn_frontend;

// Tensor ids of the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

struct Shape {
  int64_t batch, tq, tk, heads, kv_heads, head_dim;
  int causal;
  double scale;
  bool stats;  // the forward writes its log-sum-exp
  bool backward;
  bool deterministic;
  stepc_attention_rows rows;  // row strides of q, k/v, dq, dk/dv
  auto Key() const {
    return std::tie(batch, tq, tk, heads, kv_heads, head_dim, causal, scale, stats, backward,
                    deterministic, rows.q, rows.kv, rows.dq, rows.dkv);
  }
  bool operator<(const Shape &o) const { return Key() < o.Key(); }
  std::string Describe() const {
    char text[160];
    std::snprintf(text, sizeof(text), "%s B=%lld Tq=%lld Tk=%lld H=%lld Hkv=%lld Dh=%lld%s",
                  backward ? "attention_grad" : "attention", (long long)batch, (long long)tq,
                  (long long)tk, (long long)heads, (long long)kv_heads, (long long)head_dim,
                  causal ? " causal" : "");
    return text;
  }
};

// A built graph (null when cuDNN declined the shape) and its workspace.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string declined;  // why cuDNN does not take it
};

// [B, H, T, Dh] over [B, T, ld] rows (ld = H·Dh for a tensor of its own,
// the projection's width for a column block of the packed QKV).
std::vector<int64_t> Dims(int64_t b, int64_t h, int64_t t, int64_t d) { return {b, h, t, d}; }
std::vector<int64_t> RowStrides(int64_t ld, int64_t t, int64_t d) { return {t * ld, d, ld, 1}; }

std::shared_ptr<fe::graph::Tensor_attributes> Rows(fe::graph::Graph &g, const char *name,
                                                   int64_t uid, int64_t b, int64_t h, int64_t t,
                                                   int64_t d, int64_t ld) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(Dims(b, h, t, d))
                      .set_stride(RowStrides(ld, t, d)));
}

void SetRows(const std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid, int64_t b,
             int64_t h, int64_t s, int64_t d, int64_t ld) {
  t->set_output(true).set_uid(uid).set_dim(Dims(b, h, s, d)).set_stride(RowStrides(ld, s, d));
}

// The log-sum-exp, [B, H, Tq, 1] f32, contiguous (our kernel's [B, H, Tq]).
std::vector<int64_t> StatsStrides(const Shape &s) { return {s.heads * s.tq, s.tq, 1, 1}; }

class Library {
 public:
  static Library &Get() {
    static Library *library = new Library();  // leaked: cuDNN may outlive statics
    return *library;
  }
  bool loaded() const { return loaded_; }
  // STEPC_ATTENTION (read each call, so a test can switch it): "cudnn", a
  // call cuDNN does not take is an error; any other value, our kernels.
  static bool forced() {
    const char *choice = std::getenv("STEPC_ATTENTION");
    return choice && std::strcmp(choice, "cudnn") == 0;
  }
  static const char *own_chosen() {
    const char *choice = std::getenv("STEPC_ATTENTION");
    return choice && *choice && std::strcmp(choice, "cudnn") != 0 ? choice : nullptr;
  }
  bool deterministic() const { return deterministic_; }
  // STEPC_CUDNN_DETERMINISTIC=1: never cuDNN's atomic backward.
  bool deterministic_required() const { return deterministic_required_; }
  const std::string &engine() const { return engine_; }
  cudnnHandle_t handle() const { return handle_; }
  std::mutex &mutex() { return mutex_; }

  // The plan of `s`, built on first use: before the first step when the
  // step's stepc_prepare_v1 names it (`preparing`), else in a step (a
  // graph cuDNN declines is noted, not counted).
  Plan &PlanFor(const Shape &s, bool preparing) {
    auto it = plans_.find(s);
    if (it == plans_.end()) {
      it = plans_.emplace(s, Build(s)).first;
      if (it->second.graph) ++(preparing ? built_before_steps_ : built_in_steps_);
    }
    return it->second;
  }
  // "; 4 graphs built before the first step" (and any a step built).
  std::string GraphCounts() const {
    if (!loaded_) return "";
    std::string text = "; " + std::to_string(built_before_steps_) +
                       " graphs built before the first step";
    if (built_in_steps_) text += ", " + std::to_string(built_in_steps_) + " in a step";
    return text;
  }

  // One note on stderr per distinct reason.
  void Note(const std::string &text) {
    if (noted_.insert({text, true}).second)
      std::fprintf(stderr, "stepc: %s\n", text.c_str());
  }

 private:
  Library() {
    const char *det = std::getenv("STEPC_CUDNN_DETERMINISTIC");
    deterministic_ = !(det && std::strcmp(det, "0") == 0);
    deterministic_required_ = det && std::strcmp(det, "1") == 0;
    // The frontend's own CUDA calls go to the runtime this library was built
    // against (a PyTorch wheel may put another major on the library path).
    char cudart[32];
    std::snprintf(cudart, sizeof(cudart), "libcudart.so.%d", CUDART_VERSION / 1000);
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart, /*overwrite=*/0);
    void *so = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (!so) {
      const char *why = dlerror();
      engine_ = std::string("own (no libcudnn.so.9: ") + (why ? why : "not found") + ")";
      return;
    }
    fe::cudnn_dlhandle = so;
    try {
      const size_t version = fe::detail::get_backend_version();
      if (version < 90000) {
        engine_ = "own (cuDNN " + std::to_string(version) + " is older than 9)";
        return;
      }
      if (fe::detail::create_handle(&handle_) != CUDNN_STATUS_SUCCESS) {
        engine_ = "own (cudnnCreate failed)";
        return;
      }
      engine_ = "cudnn " + fe::detail::get_backend_version_string() +
                (deterministic_required_ ? " (deterministic backward required)"
                 : deterministic_       ? " (deterministic backward where cuDNN has one)"
                                        : " (atomic dQ)");
      loaded_ = true;
    } catch (const std::exception &e) {
      engine_ = std::string("own (cuDNN: ") + e.what() + ")";
    }
  }

  Plan Build(const Shape &s) {
    Plan plan;
    try {
      auto g = std::make_shared<fe::graph::Graph>();
      g->set_io_data_type(fe::DataType_t::BFLOAT16)
          .set_intermediate_data_type(fe::DataType_t::FLOAT)
          .set_compute_data_type(fe::DataType_t::FLOAT);
      const int64_t o_ld = s.heads * s.head_dim;
      auto q = Rows(*g, "Q", kQ, s.batch, s.heads, s.tq, s.head_dim, s.rows.q);
      auto k = Rows(*g, "K", kK, s.batch, s.kv_heads, s.tk, s.head_dim, s.rows.kv);
      auto v = Rows(*g, "V", kV, s.batch, s.kv_heads, s.tk, s.head_dim, s.rows.kv);
      if (!s.backward) {
        auto options = fe::graph::SDPA_attributes()
                           .set_name("attention")
                           .set_generate_stats(s.stats)
                           .set_attn_scale(static_cast<float>(s.scale));
        if (s.causal) options.set_causal_mask(true);
        auto [o, stats] = g->sdpa(q, k, v, options);
        SetRows(o, kO, s.batch, s.heads, s.tq, s.head_dim, o_ld);
        if (s.stats)
          stats->set_output(true)
              .set_uid(kStats)
              .set_data_type(fe::DataType_t::FLOAT)
              .set_dim({s.batch, s.heads, s.tq, 1})
              .set_stride(StatsStrides(s));
      } else {
        auto o = Rows(*g, "O", kO, s.batch, s.heads, s.tq, s.head_dim, o_ld);
        auto dout = Rows(*g, "dO", kDO, s.batch, s.heads, s.tq, s.head_dim, o_ld);
        auto stats = g->tensor(fe::graph::Tensor_attributes()
                                   .set_name("Stats")
                                   .set_uid(kStats)
                                   .set_dim({s.batch, s.heads, s.tq, 1})
                                   .set_stride(StatsStrides(s))
                                   .set_data_type(fe::DataType_t::FLOAT));
        auto options = fe::graph::SDPA_backward_attributes()
                           .set_name("attention_grad")
                           .set_attn_scale(static_cast<float>(s.scale))
                           .set_deterministic_algorithm(s.deterministic);
        if (s.causal) options.set_causal_mask(true);
        auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, options);
        SetRows(dq, kDQ, s.batch, s.heads, s.tq, s.head_dim, s.rows.dq);
        SetRows(dk, kDK, s.batch, s.kv_heads, s.tk, s.head_dim, s.rows.dkv);
        SetRows(dv, kDV, s.batch, s.kv_heads, s.tk, s.head_dim, s.rows.dkv);
      }
      for (fe::error_t status :
           {g->validate(), g->build_operation_graph(handle_),
            g->create_execution_plans({fe::HeurMode_t::A}), g->check_support(handle_),
            g->build_plans(handle_)}) {
        if (status.is_bad()) {
          plan.declined = status.get_message();
          return plan;
        }
      }
      if (fe::error_t status = g->get_workspace_size(plan.workspace); status.is_bad()) {
        plan.declined = status.get_message();
        return plan;
      }
      plan.graph = std::move(g);
    } catch (const std::exception &e) {
      plan.declined = e.what();
    }
    return plan;
  }

  bool loaded_ = false, deterministic_ = true, deterministic_required_ = false;
  int built_before_steps_ = 0, built_in_steps_ = 0;
  std::string engine_ = "own";
  cudnnHandle_t handle_ = nullptr;
  std::mutex mutex_;
  std::map<Shape, Plan> plans_;
  std::map<std::string, bool> noted_;
};

// Runs `s` with the tensors of `pack`, or says why not.
int Run(stepc_cuda_ctx *ctx, const Shape &s, std::unordered_map<int64_t, void *> pack,
        void *workspace, int64_t workspace_bytes) {
  Library &lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mutex());
  auto not_taken = [&](const std::string &why) {
    if (lib.forced())
      return stepc::cuda::Fail(ctx, "cuDNN attention (STEPC_ATTENTION=cudnn)", __FILE__,
                               __LINE__, (s.Describe() + ": " + why).c_str());
    lib.Note(s.Describe() + ": " + why + "; stepc's own kernel runs it");
    return static_cast<int>(STEPC_CUDNN_NOT_TAKEN);
  };
  if (Library::own_chosen()) return STEPC_CUDNN_NOT_TAKEN;
  if (!lib.loaded()) return not_taken(lib.engine());
  Plan *plan = &lib.PlanFor(s, ctx->prepare);
  auto fits = [&](const Plan &p) { return p.graph && p.workspace <= workspace_bytes; };
  // No deterministic backward for this shape (or not in the planned
  // workspace): cuDNN's atomic one, said once, unless determinism is required.
  if (!fits(*plan) && s.backward && s.deterministic && !lib.deterministic_required()) {
    Shape atomic = s;
    atomic.deterministic = false;
    Plan &other = lib.PlanFor(atomic, ctx->prepare);
    if (fits(other)) {
      lib.Note(s.Describe() + ": cuDNN's deterministic backward does not run it (" +
               (plan->graph ? "workspace" : plan->declined) +
               "); its atomic one does (STEPC_CUDNN_DETERMINISTIC=1: stepc's deterministic "
               "kernel instead)");
      plan = &other;
    }
  }
  if (!plan->graph) return not_taken("cuDNN declined it (" + plan->declined + ")");
  if (plan->workspace > workspace_bytes)
    return not_taken("its workspace of " + std::to_string(plan->workspace) +
                     " bytes exceeds the planned " + std::to_string(workspace_bytes));
  if (ctx->prepare) return STEPC_CUDNN_RAN;
  try {
    if (fe::detail::set_stream(lib.handle(), ctx->stream) != CUDNN_STATUS_SUCCESS)
      return stepc::cuda::Fail(ctx, "cudnnSetStream", __FILE__, __LINE__, "failed");
    fe::error_t status = plan->graph->execute(lib.handle(), pack, workspace);
    if (status.is_bad())
      return stepc::cuda::Fail(ctx, "cuDNN attention", __FILE__, __LINE__,
                               (s.Describe() + ": " + status.get_message()).c_str());
  } catch (const std::exception &e) {
    return stepc::cuda::Fail(ctx, "cuDNN attention", __FILE__, __LINE__, e.what());
  }
  return STEPC_CUDNN_RAN;
}

}  // namespace

extern "C" int stepc_cudnn_attention(stepc_cuda_ctx *ctx, const void *q, const void *k,
                                     const void *v, int64_t batch, int64_t tq, int64_t tk,
                                     int64_t heads, int64_t kv_heads, int64_t head_dim,
                                     int causal, double scale, void *out, float *lse,
                                     void *workspace, int64_t workspace_bytes,
                                     const stepc_attention_rows *rows) {
  Shape s{batch, tq, tk, heads, kv_heads, head_dim, causal, scale, lse != nullptr,
          /*backward=*/false, /*deterministic=*/true,
          stepc::cuda::RowsOrDense(rows, heads, kv_heads, head_dim)};
  std::unordered_map<int64_t, void *> pack = {
      {kQ, const_cast<void *>(q)}, {kK, const_cast<void *>(k)}, {kV, const_cast<void *>(v)},
      {kO, out}};
  if (lse) pack[kStats] = lse;
  return Run(ctx, s, std::move(pack), workspace, workspace_bytes);
}

extern "C" int stepc_cudnn_attention_grad(stepc_cuda_ctx *ctx, const void *dout, const void *q,
                                          const void *k, const void *v, const void *out,
                                          const float *lse, int64_t batch, int64_t tq,
                                          int64_t tk, int64_t heads, int64_t kv_heads,
                                          int64_t head_dim, int causal, double scale, void *dq,
                                          void *dk, void *dv, void *workspace,
                                          int64_t workspace_bytes,
                                          const stepc_attention_rows *rows) {
  Shape s{batch, tq, tk, heads, kv_heads, head_dim, causal, scale, /*stats=*/true,
          /*backward=*/true, Library::Get().deterministic(),
          stepc::cuda::RowsOrDense(rows, heads, kv_heads, head_dim)};
  std::unordered_map<int64_t, void *> pack = {
      {kQ, const_cast<void *>(q)},     {kK, const_cast<void *>(k)},
      {kV, const_cast<void *>(v)},     {kO, const_cast<void *>(out)},
      {kDO, const_cast<void *>(dout)}, {kStats, const_cast<float *>(lse)},
      {kDQ, dq},                       {kDK, dk},
      {kDV, dv}};
  return Run(ctx, s, std::move(pack), workspace, workspace_bytes);
}

extern "C" const char *stepc_cudnn_attention_engine(void) {
  static thread_local std::string engine;
  const char *own = Library::own_chosen();
  Library &lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mutex());
  engine = own ? std::string("own (STEPC_ATTENTION=") + own + ")"
               : lib.engine() + lib.GraphCounts();
  return engine.c_str();
}
