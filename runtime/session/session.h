// One rank's training state: parameters, AdamW moments, the transient arena
// (with a guard page after it), and the step.

#ifndef STEPC_RUNTIME_SESSION_H_
#define STEPC_RUNTIME_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/session/checkpoint.h"
#include "runtime/comm/communicator.h"
#include "runtime/device/device.h"
#include "runtime/session/module.h"

namespace stepc {

class Session {
 public:
  // A session of rank `communicator->rank()`; the module must have been
  // compiled for the communicator's world size, and every rank must run the
  // same collective sequence (compared before the first step). A CUDA
  // module's buffers live on this rank's GPU (host copies mirror them), and
  // a multi-rank CUDA step replaces `communicator` by NCCL on the GPU's
  // stream.
  static absl::StatusOr<std::unique_ptr<Session>> Create(
      std::shared_ptr<const Module> module,
      std::shared_ptr<Communicator> communicator = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Draws every parameter from its initialiser. Deterministic in (seed,
  // parameter name, element index) alone: the same model on any number of
  // ranks. Zeroes the moments and the step count.
  absl::Status InitParams(uint64_t seed);
  // Copies an integer input (e.g. "tokens", "targets") for the next Step.
  absl::Status SetInput(const std::string& name, absl::Span<const int32_t> values);
  // Copies a float input (features, any rank) for the next Step or Eval;
  // every value must be finite.
  absl::Status SetFloatInput(const std::string& name, absl::Span<const float> values);
  // The targets the loss counts in the inputs set: those of the input that
  // may hold an ignored id (a loss with ignore_index) not equal to it, on
  // this rank; nullopt if no input may hold one.
  std::optional<int64_t> CountedTargets() const;
  // One training step at learning rate `lr`; counts steps from 1.
  absl::StatusOr<StepResult> Step(float lr);

  // The loss of the inputs set (SetInput) under the current parameters, by
  // the forward-only step: no gradient, no update, the step count unchanged.
  // Collective under sharding, like Step. With `logits`, also this rank's
  // logits (Module::info().logits_shape; FailedPrecondition if the module
  // has none).
  absl::StatusOr<float> Eval(std::vector<float>* logits = nullptr);
  // The same, also every output of the loss function besides the loss
  // (Module::info().outputs, in that order; this rank's).
  absl::StatusOr<float> Eval(std::vector<float>* logits,
                             std::vector<std::vector<float>>* outputs);

  // The logits of one row, [seq, vocab] for a language model: those the
  // forward gives a batch of one row whose integer input `input` is `row`
  // (a row of that input; the other inputs zero), what a sampler draws
  // from. By the sampling step where step.so has one (1/batch of the
  // eval step's work), else by the eval step over a batch whose first row
  // it is (replacing the inputs set). Collective under sharding, like
  // Eval; with `logits` null it only takes part (a pipeline stage that
  // has none).
  absl::Status RowLogits(const std::string& input, absl::Span<const int32_t> row,
                         std::vector<float>* logits);

  // A float argument (parameter or moment, e.g. "exp_avg.wte") by name, the
  // whole tensor: a sharded one is gathered from every rank, so under fsdp
  // every rank must call ReadParam for the same names in the same order.
  absl::StatusOr<std::vector<float>> ReadParam(const std::string& name) const;
  // Writes the whole tensor; a sharded rank keeps its rows.
  absl::Status WriteParam(const std::string& name, absl::Span<const float> values);
  // Checkpoints (checkpoint.cc; the layout is in checkpoint.h). Both are
  // collective: every rank calls them with the same directory.
  // SaveCheckpoint writes parameters, moments and the step count, with
  // `trainer_json` (a JSON object: the trainer's schedule, data position,
  // vocabulary) kept verbatim, to `dir` atomically: `dir` is replaced whole
  // or left as it was. Each rank writes only the rows it owns.
  absl::Status SaveCheckpoint(const std::string& dir,
                              const std::string& trainer_json = "{}") const;
  // Loads a checkpoint of the same model written at any world size and
  // sharding; each rank takes its rows. Every piece's checksum is verified;
  // on any error (another model: the tensor is named; a corrupt or missing
  // shard) the session is unchanged. Returns what the checkpoint says of
  // itself, the trainer's state included.
  absl::StatusOr<CheckpointInfo> LoadCheckpoint(const std::string& dir);
  // Hash of the state tensors' names, roles and global shapes: equal for
  // every sharding of one model.
  std::string ModelHash() const;
  // The model's state tensors (parameters and moments): this rank's
  // arguments, or under a pipeline every stage's, each once, grouped by
  // kind in stage order (the order of one rank's arguments), with the
  // pipeline stage that writes it.
  struct StateTensor {
    std::string name;
    int32_t kind;
    std::vector<int64_t> shape;
    int stage;
    int64_t shard_rows;  // rows per shard as written (padding included)
  };
  std::vector<StateTensor> StateTensors() const;
  // Every parameter of the model, whole, on rank 0 (empty elsewhere): under a
  // pipeline every stage's, sent to rank 0 by each stage's first rank, in
  // StateTensors() order. Collective: every rank calls it.
  struct WholeParam {
    StateTensor tensor;
    std::vector<float> values;
  };
  absl::StatusOr<std::vector<WholeParam>> GatherParams() const;
  // Shape of the argument `name` as this rank holds it, and as a whole.
  absl::StatusOr<std::vector<int64_t>> Shape(const std::string& name) const;
  absl::StatusOr<std::vector<int64_t>> GlobalShape(const std::string& name) const;

  const Module& module() const { return *module_; }
  Communicator& communicator() const { return *communicator_; }
  int64_t steps_done() const { return steps_; }
  // The last step's metrics (StepResult::metrics; zeros before the first).
  const std::vector<float>& last_metrics() const { return last_metrics_; }
  // Bytes the session holds: arena, parameters, moments, inputs.
  int64_t planned_bytes() const;
  // "cpu", or the CUDA device, its name and how its steps launch (graph or
  // eager).
  std::string DescribeDevice() const;
  // A CUDA session's device memory in use now above what was in use before
  // it allocated its buffers (its buffers, and what cuBLASLt and NCCL
  // allocated since); nullopt on the CPU and the emulation.
  std::optional<int64_t> DeviceMemoryAboveBaseline() const;

 private:
  explicit Session(std::shared_ptr<const Module> module) : module_(std::move(module)) {}
  absl::Status CheckWorld() const;
  // Whether argument i is a dim-0 shard (fsdp), and its rows in this rank.
  bool Sharded(int i) const;
  int64_t ValidRows(int i) const;
  int ShardIndex() const;
  int ShardAxes() const;
  int ShardCount() const;
  // The mesh (row-major, tp innermost), and its fsdp and tp axes (-1: none).
  std::vector<int> MeshShape() const;
  int FsdpAxis() const;
  int TpAxis() const;
  // Whether argument i is split over the tp ranks; this rank's tp index.
  bool TpSplit(int i) const;
  int TpIndex() const;
  int TpCount() const;
  // A split argument's mesh axis (its own, or the tp axis), this rank's
  // index along it and the parts (1: not split).
  int SplitAxis(int i) const;
  int SplitIndex(int i) const;
  int SplitCount(int i) const;
  // Argument i's shape and element count as a whole (unsharded).
  std::vector<int64_t> GlobalShapeOf(int i) const;
  int64_t GlobalNumel(int i) const;
  // The contiguous runs of argument i as the rank at (fsdp shard index,
  // tp index) holds it: fn(local offset, global offset, length) in
  // elements, padding rows skipped.
  void ForEachRun(int i, int shard, int tp,
                  const std::function<void(int64_t, int64_t, int64_t)>& fn) const;
  absl::StatusOr<int> Arg(const std::string& name) const;
  // The input `name` if it has `dtype` and `count` elements.
  absl::StatusOr<int> Input(const std::string& name, int32_t dtype, size_t count) const;
  // CUDA: copies host values the device lacks, or device values the host lacks.
  absl::Status Upload();
  absl::Status Download(int i) const;
  int64_t ArgBytes(int i) const;

  std::shared_ptr<const Module> module_;
  std::vector<std::vector<float>> floats_;   // per argument (empty if integer)
  std::vector<std::vector<int32_t>> ints_;   // per argument (empty if float)
  std::vector<void*> args_;
  char* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  char* arena_ = nullptr;
  char* eval_arena_ = nullptr;  // the forward-only step's (same mapping)
  char* sample_arena_ = nullptr;  // the sampling step's (same mapping)
  int64_t steps_ = 0;
  std::vector<float> last_metrics_;
  // A step needs initialised parameters and every input set once.
  bool initialized_ = false;
  absl::flat_hash_set<int> inputs_set_;
  std::shared_ptr<Communicator> communicator_;  // the step's collectives
  // Transfers of host memory (checkpoint parts, parameters read whole): the
  // MPI communicator, also on GPUs, where communicator_ is NCCL's.
  std::shared_ptr<Communicator> host_communicator_;
  std::unique_ptr<Device> device_;          // null on the CPU
  std::optional<int64_t> device_memory_before_;  // in use before Allocate
  std::vector<bool> host_newer_;            // per argument, CUDA only
  mutable std::vector<bool> device_newer_;  // per argument, CUDA only
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_SESSION_H_
