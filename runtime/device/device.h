// Where a session's buffers live when they are not host memory: a CUDA GPU.
// The interface keeps the session free of CUDA; the implementation
// (cuda_device.cc) is libstepc_runtime_cuda.so, loaded on demand when a
// session runs a CUDA step.so, so the runtime builds and runs CPU steps on
// machines without the CUDA toolkit.

#ifndef STEPC_RUNTIME_DEVICE_H_
#define STEPC_RUNTIME_DEVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/session/module.h"

namespace stepc {

struct StepResult {
  float loss = 0;
  float grad_norm = 0;
  // The loss function's metrics one after another (stepc_module_info.metrics).
  std::vector<float> metrics;
};

class Device {
 public:
  virtual ~Device() = default;
  // One allocation for every argument (`arg_bytes` each) and the arena.
  virtual absl::Status Allocate(const std::vector<int64_t>& arg_bytes, int64_t arena_bytes) = 0;
  virtual void* arg(int i) const = 0;
  virtual char* arena() const = 0;
  virtual int64_t allocated_bytes() const = 0;
  // Synchronous copies of argument i.
  virtual absl::Status CopyIn(int i, const void* host, int64_t bytes) = 0;
  virtual absl::Status CopyOut(int i, void* host, int64_t bytes) = 0;
  // Once, before `module`'s first step: what its library calls build ahead
  // (stepc_prepare_v1: cuDNN's attention graphs); nothing runs.
  virtual absl::Status Prepare(const Module& module) = 0;
  // One step of `module` (its arguments already copied in).
  virtual absl::StatusOr<StepResult> Run(const Module& module,
                                         const stepc_collectives* collectives) = 0;
  // The forward-only step (stepc_eval_step_v12), launched eagerly; the
  // logits land in `logits` (host memory) unless it is null.
  // The sampling step (stepc_sample_step_v12, Module::has_sample_step) on
  // the arguments with each input i replaced by the host ids rows[i] (one
  // row; empty for other arguments), eagerly; its logits copied to host.
  virtual absl::Status RunSample(const Module& module, const stepc_collectives* collectives,
                                 const std::vector<std::vector<int32_t>>& rows,
                                 float* logits) = 0;
  virtual absl::StatusOr<float> RunEval(const Module& module, const stepc_collectives* collectives,
                                        float* logits, float* const* outputs) = 0;
  // The NCCL communicator of a multi-rank CUDA step (on this device's
  // stream); null: keep the host's (the emulation, whose device memory is
  // host memory, runs its collectives over MPI). `mpi_comm` (a `const
  // MPI_Comm*`, null: the world) holds the ranks and bootstraps NCCL.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(
      const void* mpi_comm) = 0;
  // "CUDA graph: captured once, replayed N" or why steps run eagerly.
  virtual std::string Describe() const = 0;
  // The device's name ("NVIDIA H200 ...": what its datasheet is found by).
  virtual std::string Name() const = 0;
  // Device memory in use now (all of the GPU's, as cudaMemGetInfo counts
  // it), where the device can tell (not the emulation: host memory).
  virtual std::optional<int64_t> MemoryInUse() const = 0;
};

// Opens `library` from the directory of the shared object holding `symbol`
// (the runtime's optional layers live beside it).
absl::StatusOr<void*> OpenBeside(const void* symbol, const std::string& library);

// Loads libstepc_runtime_cuda.so (beside libstepc_runtime.so) and opens the
// GPU of this rank (local rank modulo the visible devices); `emulated`:
// libstepc_runtime_cuda_emulated.so, the same layer over host memory, for
// step.so files built for the host emulation of CUDA (tests).
absl::StatusOr<std::unique_ptr<Device>> MakeCudaDevice(bool emulated = false);

}  // namespace stepc

// The entry point libstepc_runtime_cuda.so exports: a new device, or null
// with a message in `error`.
extern "C" stepc::Device* stepc_make_cuda_device_v1(char* error, size_t error_len);

#endif  // STEPC_RUNTIME_DEVICE_H_
