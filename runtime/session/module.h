// A compiled training step (step.so), loaded and checked.

#ifndef STEPC_RUNTIME_MODULE_H_
#define STEPC_RUNTIME_MODULE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/stepc_abi.h"

namespace stepc {

class Module {
 public:
  // Loads `path`: NotFound if it does not exist, InvalidArgument if it is not
  // a shared object, FailedPrecondition if it is not a stepc module of this
  // runtime's ABI version.
  static absl::StatusOr<std::unique_ptr<Module>> Load(const std::string& path);
  // A pipeline's step.so (info().pipeline_stages > 1) holds one step per
  // stage: this loads stage `stage`'s (0: the same as Load).
  static absl::StatusOr<std::unique_ptr<Module>> Load(const std::string& path, int stage);
  // The module rank `rank` of a `world`-rank job runs: its pipeline stage's
  // for a pipeline (every stage's ranks consecutive), else `module`.
  static absl::StatusOr<std::shared_ptr<const Module>> ForRank(
      std::shared_ptr<const Module> module, int rank, int world);
  // This module's pipeline stage (0 without a pipeline).
  int stage() const { return stage_; }
  // Every stage's module info, in stage order (this one's alone without a
  // pipeline): what the whole model holds, for checkpoints.
  std::vector<const stepc_module_info*> StageInfos() const;
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const stepc_module_info& info() const { return *info_; }
  const std::string& path() const { return path_; }
  // Index of the argument named `name`, or -1.
  int FindArg(const std::string& name) const;
  // A CUDA step (for a GPU, or built for the host emulation of CUDA).
  bool is_cuda() const;
  bool is_cuda_emulation() const;
  // Runs one step; see stepc_train_step_v12.
  int Run(void* const* args, char* arena, const stepc_collectives* collectives,
          const stepc_device* device, float* loss, float* grad_norm, float* metrics, char* error,
          size_t error_len) const {
    return step_(args, arena, collectives, device, loss, grad_norm, metrics, error, error_len);
  }
  // The loss alone; see stepc_eval_step_v12.
  int RunEval(void* const* args, char* arena, const stepc_collectives* collectives,
              const stepc_device* device, float* loss, float* logits, float* const* outputs,
              char* error, size_t error_len) const {
    return eval_(args, arena, collectives, device, loss, logits, outputs, error, error_len);
  }
  // Whether step.so has a sampling step (stepc_sample_step_v12).
  bool has_sample_step() const { return sample_ != nullptr; }
  // The forward of one row; see stepc_sample_step_v12 (has_sample_step()).
  int RunSample(void* const* args, char* arena, const stepc_collectives* collectives,
                const stepc_device* device, float* loss, float* logits, char* error,
                size_t error_len) const {
    return sample_(args, arena, collectives, device, loss, logits, nullptr, error, error_len);
  }
  // A symbol of step.so or of the libraries it links (the kernels), or null.
  void* Symbol(const char* name) const;
  // The kernel timeline of a `stepc --profile` build (stepc_profile_trace_v2),
  // or null for any other step.so.
  decltype(&stepc_profile_trace_v2) trace() const { return trace_; }
  // Its per-kind table written now (stepc_profile_write_v1; null before it).
  decltype(&stepc_profile_write_v1) write_profile() const { return write_profile_; }
  // What a CUDA step builds before its first step (stepc_prepare_v1), or
  // null (CPU steps, and CUDA ones built before it existed).
  decltype(&stepc_prepare_v1) prepare() const { return prepare_; }
  // Elements of the loss function's output i (stepc_module_info.outputs).
  int64_t output_count(int i) const;
  // Elements of metric i, and of all of them (stepc_module_info.metrics).
  int64_t metric_count(int i) const;
  int64_t metrics_count() const;
  // Elements of the logits the eval step returns (0: none).
  int64_t logits_count() const;

 private:
  Module() = default;
  std::string path_;
  int stage_ = 0;
  void* handle_ = nullptr;
  const stepc_module_info* info_ = nullptr;
  decltype(&stepc_train_step_v12) step_ = nullptr;
  decltype(&stepc_eval_step_v12) eval_ = nullptr;
  decltype(&stepc_sample_step_v12) sample_ = nullptr;
  decltype(&stepc_profile_trace_v2) trace_ = nullptr;
  decltype(&stepc_profile_write_v1) write_profile_ = nullptr;
  decltype(&stepc_prepare_v1) prepare_ = nullptr;
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_MODULE_H_
