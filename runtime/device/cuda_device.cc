// The CUDA device: one cudaMalloc for every argument and the arena, a compute
// stream, pinned memory for what a step reports (loss, norm, the device's id
// check), and the step run through a GraphRunner (captured as a CUDA graph
// after its first run, then replayed). Every CUDA error is a status naming
// the call, file and line. Built into libstepc_runtime_cuda.so.

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/device/cuda_status.h"
#include "runtime/device/device.h"
#include "runtime/device/graph_runner.h"
#include "runtime/kernels/cuda/launch_config.h"
#include "runtime/device/local_device.h"


namespace stepc {
namespace {

// What a step reports, in pinned host memory the step copies into.
struct Reported {
  float loss;
  float grad_norm;
  int32_t status[4];
};

class CudaDevice;

// Drives one step of one module for the graph runner.
class CudaLauncher : public StepLauncher {
 public:
  CudaLauncher(CudaDevice& device, const Module& module, const stepc_collectives* collectives)
      : device_(device), module_(module), collectives_(collectives) {}
  absl::Status Enqueue() override;
  absl::Status BeginCapture() override;
  absl::Status EndCapture(bool keep) override;
  absl::Status Replay() override;
  void DropGraph() override;

 private:
  CudaDevice& device_;
  const Module& module_;
  const stepc_collectives* collectives_;
};

class CudaDevice : public Device {
 public:
  ~CudaDevice() override {
    DropGraph();
    if (block_) cudaFree(block_);
    if (rows_block_) cudaFree(rows_block_);
    if (reported_) cudaFreeHost(reported_);
    if (metrics_) cudaFreeHost(metrics_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  absl::Status Open() {
    int devices = 0;
    // No GPU (or no driver) is the common case of a CUDA step.so on the wrong
    // machine: say so, and how to get a step for this one.
    const cudaError_t counted = cudaGetDeviceCount(&devices);
    if (counted != cudaSuccess || devices == 0)
      return absl::FailedPreconditionError(absl::StrCat(
          "this step.so targets CUDA, and no usable GPU was found (cudaGetDeviceCount: ",
          counted == cudaSuccess ? "0 devices" : cudaGetErrorString(counted),
          "); compile it for this machine with `stepc --target=cpu`, or for a host emulation "
          "of CUDA with `stepc --cuda-emulation`"));
    STEPC_CUDA_RETURN_IF_ERROR(cudaSetDevice(LocalDeviceOrdinal(devices)));
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    STEPC_CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&reported_), sizeof(Reported)));
    const char* graphs = std::getenv("STEPC_CUDA_GRAPHS");
    graphs_enabled_ = !(graphs && std::strcmp(graphs, "0") == 0);
    return absl::OkStatus();
  }

  absl::Status Allocate(const std::vector<int64_t>& arg_bytes, int64_t arena_bytes) override {
    using cuda::AlignUp;
    int64_t total = AlignUp(arena_bytes, 256);
    for (int64_t b : arg_bytes) total += AlignUp(b, 256);
    STEPC_CUDA_RETURN_IF_ERROR(cudaMalloc(&block_, total));
    bytes_ = total;
    char* at = static_cast<char*>(block_);
    arena_ = at;
    at += AlignUp(arena_bytes, 256);
    for (int64_t b : arg_bytes) {
      args_.push_back(at);
      at += AlignUp(b, 256);
    }
    STEPC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(block_, 0, total, stream_));
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  void* arg(int i) const override { return args_[i]; }
  char* arena() const override { return arena_; }
  int64_t allocated_bytes() const override { return bytes_; }

  absl::Status CopyIn(int i, const void* host, int64_t bytes) override {
    STEPC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(args_[i], host, bytes, cudaMemcpyHostToDevice, stream_));
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  absl::Status CopyOut(int i, void* host, int64_t bytes) override {
    STEPC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, args_[i], bytes, cudaMemcpyDeviceToHost, stream_));
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  absl::StatusOr<StepResult> Run(const Module& module,
                                 const stepc_collectives* collectives) override {
    if (!runner_)
      // A multi-rank step runs eagerly: its collectives are not captured yet.
      runner_ = std::make_unique<GraphRunner>(graphs_enabled_ && module.info().world_size == 1);
    // The metrics' pinned buffer, which a captured step writes to: made
    // once per size, before any capture that binds it.
    const int64_t metrics = module.metrics_count();
    if (metrics > metrics_count_) {
      if (metrics_) STEPC_CUDA_RETURN_IF_ERROR(cudaFreeHost(metrics_));
      metrics_ = nullptr;
      STEPC_CUDA_RETURN_IF_ERROR(
          cudaMallocHost(reinterpret_cast<void**>(&metrics_), metrics * sizeof(float)));
      metrics_count_ = metrics;
    }
    CudaLauncher launcher(*this, module, collectives);
    const uint64_t binding = reinterpret_cast<uintptr_t>(collectives) ^
                             reinterpret_cast<uintptr_t>(&module) ^
                             reinterpret_cast<uintptr_t>(metrics_);
    if (absl::Status s = runner_->Run(launcher, binding); !s.ok()) return s;
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    STEPC_RETURN_IF_ERROR(CheckStatus(module));
    StepResult result{reported_->loss, reported_->grad_norm};
    if (metrics > 0) result.metrics.assign(metrics_, metrics_ + metrics);
    return result;
  }

  // The first id out of range the step's device checks found, as an error.
  absl::Status CheckStatus(const Module& module) const {
    const int32_t* st = reported_->status;
    if (st[0] == 0) return absl::OkStatus();
    const stepc_module_info& info = module.info();
    const char* site = st[0] <= info.num_check_sites ? info.check_sites[st[0] - 1] : "an op";
    return absl::InvalidArgumentError(absl::StrCat(site, " ", st[2], " at position ", st[1],
                                                   " is outside [0, ", st[3], ")"));
  }

  absl::Status RunSample(const Module& module, const stepc_collectives* collectives,
                         const std::vector<std::vector<int32_t>>& rows, float* logits) override {
    // The rows' device buffers, made at the first sample and kept.
    if (!rows_block_) {
      int64_t total = 0;
      for (const std::vector<int32_t>& r : rows) total += cuda::AlignUp(r.size() * 4, 256);
      STEPC_CUDA_RETURN_IF_ERROR(cudaMalloc(&rows_block_, std::max<int64_t>(total, 256)));
    }
    std::vector<void*> args = args_;
    char* at = static_cast<char*>(rows_block_);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].empty()) continue;
      STEPC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(at, rows[i].data(), rows[i].size() * 4,
                                                 cudaMemcpyHostToDevice, stream_));
      args[i] = at;
      at += cuda::AlignUp(rows[i].size() * 4, 256);
    }
    stepc_device dev{stream_, reported_->status};
    char error[512] = {0};
    if (module.RunSample(args.data(), arena_, collectives, &dev, &reported_->loss, logits, error,
                         sizeof(error)))
      return absl::InternalError(error);
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return CheckStatus(module);
  }

  absl::Status Prepare(const Module& module) override {
    if (!module.prepare()) return absl::OkStatus();
    stepc_device dev{stream_, reported_->status};
    char error[512] = {0};
    if (module.prepare()(&dev, error, sizeof(error)))
      return absl::FailedPreconditionError(
          absl::StrCat("preparing the step's library calls: ", error));
    return absl::OkStatus();
  }

  absl::StatusOr<float> RunEval(const Module& module, const stepc_collectives* collectives,
                                float* logits, float* const* outputs) override {
    stepc_device dev{stream_, reported_->status};
    char error[512] = {0};
    if (module.RunEval(args_.data(), arena_, collectives, &dev, &reported_->loss, logits, outputs,
                       error, sizeof(error)))
      return absl::InternalError(error);
    STEPC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    STEPC_RETURN_IF_ERROR(CheckStatus(module));
    return reported_->loss;
  }

  // NCCL lives in libstepc_runtime_nccl.so beside this library, loaded
  // only for a multi-GPU step.
  absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(const void* mpi_comm) override {
#ifdef STEPC_CUDA_EMULATION
    return std::unique_ptr<Communicator>();  // host memory: MPI serves
#endif
    const std::string library = "libstepc_runtime_nccl.so";
    absl::StatusOr<void*> handle =
        OpenBeside(reinterpret_cast<void*>(&stepc_make_cuda_device_v1), library);
    if (!handle.ok())
      return absl::FailedPreconditionError(absl::StrCat(
          "a multi-GPU step needs NCCL: cannot load ", library, ": ", handle.status().message()));
    using Make = Communicator* (*)(void*, const void*, char*, size_t);
    auto make = reinterpret_cast<Make>(dlsym(*handle, "stepc_make_nccl_communicator_v2"));
    if (!make)
      return absl::FailedPreconditionError(
          absl::StrCat("'", library, "' has no stepc_make_nccl_communicator_v2"));
    char error[512] = {0};
    Communicator* comm = make(stream_, mpi_comm, error, sizeof(error));
    if (!comm) return absl::UnavailableError(error);
    return std::unique_ptr<Communicator>(comm);
  }

  std::string Name() const override {
#ifdef STEPC_CUDA_EMULATION
    return "emulated CUDA device";
#else
    cudaDeviceProp prop;
    int ordinal = 0;
    if (cudaGetDevice(&ordinal) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess)
      return "unknown CUDA device";
    return prop.name;
#endif
  }
  std::optional<int64_t> MemoryInUse() const override {
#ifdef STEPC_CUDA_EMULATION
    return std::nullopt;  // the emulation's device memory is the host's
#else
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return std::nullopt;
    return static_cast<int64_t>(total - free);
#endif
  }

  std::string Describe() const override {
    if (!runner_) return "no step run yet";
    if (runner_->mode() == GraphRunner::Mode::kEager)
      return runner_->fallback_reason().empty()
                 ? std::string("eager launches (CUDA graphs off)")
                 : absl::StrCat("eager launches (graph capture failed: ",
                                runner_->fallback_reason(), ")");
    return absl::StrCat("CUDA graph: captured ", runner_->captures(), "x, replayed ",
                        runner_->replays(), "x");
  }

  void DropGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }

  cudaStream_t stream_ = nullptr;
  Reported* reported_ = nullptr;
  float* metrics_ = nullptr;  // pinned: the training step's metrics
  int64_t metrics_count_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;

 private:
  void* block_ = nullptr;
  void* rows_block_ = nullptr;  // the sampling step's input rows
  char* arena_ = nullptr;
  int64_t bytes_ = 0;
  std::vector<void*> args_;
  bool graphs_enabled_ = true;
  std::unique_ptr<GraphRunner> runner_;
};

absl::Status CudaLauncher::Enqueue() {
  stepc_device dev{device_.stream_, device_.reported_->status};
  char error[512] = {0};
  std::vector<void*> args(module_.info().num_args);
  for (int i = 0; i < module_.info().num_args; ++i) args[i] = device_.arg(i);
  if (module_.Run(args.data(), device_.arena(), collectives_, &dev, &device_.reported_->loss,
                  &device_.reported_->grad_norm, device_.metrics_, error, sizeof(error)))
    return absl::InternalError(error);
  return absl::OkStatus();
}

absl::Status CudaLauncher::BeginCapture() {
  STEPC_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(device_.stream_, cudaStreamCaptureModeThreadLocal));
  return absl::OkStatus();
}

absl::Status CudaLauncher::EndCapture(bool keep) {
  cudaGraph_t graph = nullptr;
  STEPC_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(device_.stream_, &graph));
  if (!keep) {
    if (graph) cudaGraphDestroy(graph);
    return absl::OkStatus();
  }
  device_.graph_ = graph;
  STEPC_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&device_.exec_, graph, 0));
  return absl::OkStatus();
}

absl::Status CudaLauncher::Replay() {
  STEPC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(device_.exec_, device_.stream_));
  return absl::OkStatus();
}

void CudaLauncher::DropGraph() { device_.DropGraph(); }

}  // namespace
}  // namespace stepc

extern "C" stepc::Device* stepc_make_cuda_device_v1(char* error, size_t error_len) {
  auto device = std::make_unique<stepc::CudaDevice>();
  if (absl::Status s = device->Open(); !s.ok()) {
    std::snprintf(error, error_len, "%s", std::string(s.message()).c_str());
    return nullptr;
  }
  return device.release();
}
