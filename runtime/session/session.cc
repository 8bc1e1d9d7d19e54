#include "runtime/session/session.h"
#include "runtime/status_macros.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/session/init.h"

namespace stepc {
namespace {

int64_t Numel(const stepc_arg_info& a) {
  int64_t n = 1;
  for (int d = 0; d < a.rank; ++d) n *= a.shape[d];
  return n;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Session>> Session::Create(
    std::shared_ptr<const Module> module, std::shared_ptr<Communicator> communicator) {
  if (!communicator) communicator = MakeLocalCommunicator();
  // A pipeline rank runs its stage's step.
  STEPC_ASSIGN_OR_RETURN(module, Module::ForRank(std::move(module), communicator->rank(),
                                                 communicator->size()));
  std::unique_ptr<Session> s(new Session(std::move(module)));
  s->communicator_ = communicator;
  s->host_communicator_ = std::move(communicator);
  STEPC_RETURN_IF_ERROR(s->CheckWorld());
  const stepc_module_info& mesh = s->module_->info();
  if (mesh.world_size > 1) STEPC_RETURN_IF_ERROR(s->communicator_->SetMesh(s->MeshShape()));
  const stepc_module_info& info = s->module_->info();
  if (s->module_->is_cuda()) {
    STEPC_ASSIGN_OR_RETURN(s->device_, MakeCudaDevice(s->module_->is_cuda_emulation()));
    if (info.world_size > 1) {
      STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> nccl, s->device_->MakeCommunicator(
                                                               s->communicator_->mpi_comm()));
      if (nccl) {
        STEPC_RETURN_IF_ERROR(nccl->SetMesh(s->MeshShape()));
        // A pipeline rank's transfers go to the other stages of its group.
        if (info.pipeline_stages > 1)
          STEPC_RETURN_IF_ERROR(nccl->ConnectPeers(
              AxisPeers(s->MeshShape(), s->communicator_->rank(), info.pipeline_axis)));
        s->communicator_ = std::move(nccl);
      }
    }
  }
  s->last_metrics_.assign(s->module_->metrics_count(), 0.0f);
  s->floats_.resize(info.num_args);
  s->ints_.resize(info.num_args);
  s->args_.resize(info.num_args);
  for (int i = 0; i < info.num_args; ++i) {
    const stepc_arg_info& a = info.args[i];
    if (a.dtype == STEPC_F32) {
      s->floats_[i].assign(Numel(a), 0.0f);
      s->args_[i] = s->floats_[i].data();
    } else if (a.dtype == STEPC_I32) {
      s->ints_[i].assign(Numel(a), 0);
      s->args_[i] = s->ints_[i].data();
    } else {
      return absl::UnimplementedError(
          absl::StrCat("argument '", a.name, "' has a dtype the runtime does not hold"));
    }
  }
  // The training and the forward-only step share one arena, each at its
  // end (so the guard page follows either).
  const int64_t arena_bytes =
      std::max({info.arena_bytes, info.eval_arena_bytes, info.sample_arena_bytes});
  if (s->device_) {
    std::vector<int64_t> bytes(info.num_args);
    for (int i = 0; i < info.num_args; ++i) bytes[i] = s->ArgBytes(i);
    s->device_memory_before_ = s->device_->MemoryInUse();
    STEPC_RETURN_IF_ERROR(s->device_->Allocate(bytes, arena_bytes));
    for (int i = 0; i < info.num_args; ++i) s->args_[i] = s->device_->arg(i);
    s->arena_ = s->device_->arena();
    STEPC_RETURN_IF_ERROR(s->device_->Prepare(*s->module_));
    s->host_newer_.assign(info.num_args, true);
    s->device_newer_.assign(info.num_args, false);
    return s;
  }
  // The arena ends exactly at a PROT_NONE page: a kernel writing past its
  // planned end faults at once instead of corrupting memory.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t bytes = (static_cast<size_t>(arena_bytes) + page - 1) / page * page;
  s->mapping_bytes_ = bytes + page;
  void* map = mmap(nullptr, s->mapping_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map an arena of ", info.arena_bytes, " bytes"));
  s->mapping_ = static_cast<char*>(map);
  if (mprotect(s->mapping_ + bytes, page, PROT_NONE) != 0)
    return absl::InternalError("cannot protect the arena's guard page");
  s->arena_ = s->mapping_ + bytes - info.arena_bytes;  // arena_bytes is a multiple of 64
  s->eval_arena_ = s->mapping_ + bytes - info.eval_arena_bytes;
  s->sample_arena_ = s->mapping_ + bytes - info.sample_arena_bytes;
  return s;
}

// Before any step: the world the module was compiled for, and the same
// collective sequence on every rank (a mismatch would deadlock or corrupt).
absl::Status Session::CheckWorld() const {
  const stepc_module_info& info = module_->info();
  if (info.world_size != communicator_->size())
    return absl::FailedPreconditionError(absl::StrCat(
        "'", module_->path(), "' was compiled for ", info.world_size, " rank(s) (--shard=",
        info.sharding, ") but this run has ", communicator_->size()));
  uint64_t hash = 0xCBF29CE484222325ull;
  auto mix = [&hash](uint64_t v) { hash = (hash ^ v) * 0x100000001B3ull; };
  // The same model, batch and optimizer (the args table and the compile
  // report, which names the pipeline options) and the same collectives.
  auto mix_text = [&mix](const char* text) {
    for (const char* c = text ? text : ""; *c; ++c) mix(static_cast<unsigned char>(*c));
    mix(0xFF);
  };
  // A pipeline's stages differ in their arguments: each rank compares
  // stage 0's (the same step.so) and its own collectives, which every
  // stage runs alike.
  const stepc_module_info* shared = &info;
  if (info.pipeline_stages > 1)
    if (auto stage0 = reinterpret_cast<decltype(&stepc_module_info_v12)>(
            module_->Symbol("stepc_module_info_v12")))
      shared = stage0();
  mix_text(shared->sharding);
  mix_text(shared->report_json);
  for (int i = 0; i < shared->num_args; ++i) {
    mix_text(shared->args[i].name);
    for (int d = 0; d < shared->args[i].rank; ++d)
      mix(static_cast<uint64_t>(shared->args[i].shape[d]));
  }
  for (const stepc_module_info* stage : module_->StageInfos())
    for (int i = 0; i < stage->num_collectives; ++i) {
      mix(static_cast<uint64_t>(stage->collectives[i].kind));
      mix(static_cast<uint64_t>(stage->collectives[i].axes));
      mix(static_cast<uint64_t>(stage->collectives[i].count));
    }
  STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all, communicator_->AllGather(hash));
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != hash)
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", r, " runs a different step than rank ", communicator_->rank(),
          " (model, batch, optimizer options or collective sequence differ: hash ", all[r],
          " vs ", hash, "): every rank must load the same step.so"));
  return absl::OkStatus();
}

Session::~Session() {
  if (mapping_) munmap(mapping_, mapping_bytes_);
}

int64_t Session::ArgBytes(int i) const {
  return Numel(module_->info().args[i]) * 4;  // f32 and i32 arguments
}

absl::Status Session::Upload() {
  for (size_t i = 0; i < host_newer_.size(); ++i) {
    if (!host_newer_[i]) continue;
    const void* host = floats_[i].empty() ? static_cast<const void*>(ints_[i].data())
                                          : static_cast<const void*>(floats_[i].data());
    STEPC_RETURN_IF_ERROR(device_->CopyIn(i, host, ArgBytes(i)));
    host_newer_[i] = false;
  }
  return absl::OkStatus();
}

absl::Status Session::Download(int i) const {
  if (!device_ || !device_newer_[i]) return absl::OkStatus();
  void* host = floats_[i].empty() ? static_cast<void*>(const_cast<int32_t*>(ints_[i].data()))
                                  : static_cast<void*>(const_cast<float*>(floats_[i].data()));
  STEPC_RETURN_IF_ERROR(device_->CopyOut(i, host, ArgBytes(i)));
  device_newer_[i] = false;
  return absl::OkStatus();
}

std::string Session::DescribeDevice() const {
  if (!device_) return "cpu";
  std::string text = "cuda on " + device_->Name() + " (" + device_->Describe() + ")";
  // Which engine runs the step's bf16 attention (cuDNN or ours), as the
  // step's kernel library says (kernels/cuda/cudnn_attention.h).
  using Engine = const char* (*)();
  if (auto engine = reinterpret_cast<Engine>(module_->Symbol("stepc_cudnn_attention_engine")))
    text += absl::StrCat("; bf16 attention: ", engine());
  return text;
}

std::optional<int64_t> Session::DeviceMemoryAboveBaseline() const {
  if (!device_ || !device_memory_before_) return std::nullopt;
  const std::optional<int64_t> now = device_->MemoryInUse();
  if (!now) return std::nullopt;
  return *now - *device_memory_before_;
}

absl::StatusOr<int> Session::Arg(const std::string& name) const {
  int i = module_->FindArg(name);
  if (i < 0)
    return absl::NotFoundError(absl::StrCat("the module has no argument named '", name, "'"));
  return i;
}

bool Session::Sharded(int i) const {
  const stepc_arg_info& a = module_->info().args[i];
  std::string_view sharding = module_->info().sharding;
  return (sharding.rfind("fsdp:", 0) == 0 || sharding.rfind("hsdp:", 0) == 0) &&
         a.kind <= STEPC_ARG_EXP_AVG_SQ && a.rank >= 1;
}

std::vector<int> Session::MeshShape() const {
  const stepc_module_info& info = module_->info();
  const int axes = std::clamp(info.mesh_axes, 1, kMaxMeshAxes);
  return std::vector<int>(info.mesh_shape, info.mesh_shape + axes);
}

int Session::TpAxis() const {
  const stepc_module_info& info = module_->info();
  return info.tensor_parallel > 1 ? static_cast<int>(MeshShape().size()) - 1 : -1;
}

// Shards live along the last data axis: the world for fsdp, the group for
// hsdp (the axis before tp's or the pipeline's); -1 for tp alone.
int Session::FsdpAxis() const {
  return static_cast<int>(MeshShape().size()) - 1 - (TpAxis() >= 0 ? 1 : 0) -
         (module_->info().pipeline_stages > 1 ? 1 : 0);
}

int Session::ShardIndex() const {
  return FsdpAxis() >= 0 ? MeshCoordinate(MeshShape(), communicator_->rank(), FsdpAxis()) : 0;
}

int Session::ShardAxes() const { return FsdpAxis() >= 0 ? 1 << FsdpAxis() : 0; }

int Session::ShardCount() const { return FsdpAxis() >= 0 ? MeshShape()[FsdpAxis()] : 1; }

bool Session::TpSplit(int i) const {
  const stepc_arg_info& a = module_->info().args[i];
  return a.tp_parts > 1 && a.kind <= STEPC_ARG_EXP_AVG_SQ && a.rank >= 1;
}

void Session::ForEachRun(int i, int shard, int tp,
                         const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
  const stepc_arg_info& a = module_->info().args[i];
  if (a.rank == 0) return fn(0, 0, 1);
  const int64_t local_rows = a.shape[0];
  const int64_t row_begin = Sharded(i) ? shard * local_rows : 0;
  const int64_t rows =
      Sharded(i) ? std::clamp<int64_t>(a.global_dim0 - row_begin, 0, local_rows) : local_rows;
  const int64_t row_size = Numel(a) / local_rows;
  if (!TpSplit(i)) return fn(0, row_begin * row_size, rows * row_size);
  // The tp part's extent along tp_dim, and the elements after it.
  const int d = a.tp_dim, parts = a.tp_parts;
  const int64_t part_extent = d == 0 ? (Sharded(i) ? a.global_dim0 : local_rows) : a.shape[d];
  int64_t inner = 1, middle = 1;
  for (int k = d + 1; k < a.rank; ++k) inner *= a.shape[k];
  for (int k = 1; k < d; ++k) middle *= a.shape[k];
  const int64_t global_extent = part_extent * parts;
  // Segment k: this tp index holds elements [t·n_k, (t+1)·n_k) of it, n_k = size / parts.
  auto emit = [&](int64_t local, int64_t global_base, int64_t first, int64_t count) {
    // Elements [first, first + count) of the part along d, from local.
    int64_t local_start = 0, global_start = 0;
    for (int k = 0; k < a.tp_num_segments && count > 0; ++k) {
      const int64_t n = a.tp_segments[k] / parts;
      const int64_t lo = std::max(first, local_start), hi = std::min(first + count, local_start + n);
      if (lo < hi)
        fn(local + (lo - first) * inner,
           global_base + (global_start + tp * n + (lo - local_start)) * inner, (hi - lo) * inner);
      local_start += n;
      global_start += a.tp_segments[k];
    }
  };
  if (d == 0) return emit(0, 0, row_begin, rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t m = 0; m < middle; ++m) {
      const int64_t outer_local = r * middle + m, outer_global = (row_begin + r) * middle + m;
      emit(outer_local * part_extent * inner, outer_global * global_extent * inner, 0, part_extent);
    }
}

int64_t Session::ValidRows(int i) const {
  const stepc_arg_info& a = module_->info().args[i];
  if (!Sharded(i)) return a.rank >= 1 ? a.shape[0] : 1;
  int64_t first = ShardIndex() * a.shape[0];
  return std::max<int64_t>(0, std::min<int64_t>(a.shape[0], a.global_dim0 - first));
}

absl::Status Session::InitParams(uint64_t seed) {
  const stepc_module_info& info = module_->info();
  for (int i = 0; i < info.num_args; ++i) {
    const stepc_arg_info& a = info.args[i];
    if (a.kind == STEPC_ARG_PARAM) {
      // A shard draws the elements the whole tensor has where it holds them;
      // padding rows are zero.
      std::fill(floats_[i].begin(), floats_[i].end(), 0.0f);
      ForEachRun(i, ShardIndex(), SplitIndex(i), [&](int64_t local, int64_t global, int64_t n) {
        FillInitial(seed, a.name, static_cast<stepc_init>(a.init), a.init_std,
                    absl::MakeSpan(floats_[i]).subspan(local, n), global);
      });
    }
    else if (a.kind == STEPC_ARG_EXP_AVG || a.kind == STEPC_ARG_EXP_AVG_SQ)
      std::fill(floats_[i].begin(), floats_[i].end(), 0.0f);
    else if (a.kind == STEPC_ARG_SEED)  // dropout's key: fixed for the run
      ints_[i][0] = static_cast<int32_t>(static_cast<uint32_t>(seed));
  }
  steps_ = 0;
  initialized_ = true;
  if (device_) {
    host_newer_.assign(info.num_args, true);
    device_newer_.assign(info.num_args, false);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Session::Input(const std::string& name, int32_t dtype, size_t count) const {
  STEPC_ASSIGN_OR_RETURN(const int i, Arg(name));
  const stepc_arg_info& a = module_->info().args[i];
  if (a.kind != STEPC_ARG_INPUT || a.dtype != dtype)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", name, "' is not ", dtype == STEPC_F32 ? "a float" : "an integer", " input"));
  if (static_cast<int64_t>(count) != Numel(a))
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' expects ", Numel(a),
                                                   " values (the compiled batch), got ", count));
  return i;
}

namespace {

// Every id of `values` within input `a`'s bound (or its ignored id).
absl::Status CheckIds(const stepc_arg_info& a, absl::Span<const int32_t> values) {
  for (size_t k = 0; k < values.size(); ++k)
    if (a.id_bound > 0 && (values[k] < 0 || values[k] >= a.id_bound) &&
        values[k] != a.id_ignored)
      return absl::InvalidArgumentError(absl::StrCat("input '", a.name, "': id ", values[k],
                                                     " at position ", k, " is outside [0, ",
                                                     a.id_bound, ")"));
  return absl::OkStatus();
}

}  // namespace

absl::Status Session::SetInput(const std::string& name, absl::Span<const int32_t> values) {
  STEPC_ASSIGN_OR_RETURN(const int i, Input(name, STEPC_I32, values.size()));
  const stepc_arg_info& a = module_->info().args[i];
  STEPC_RETURN_IF_ERROR(CheckIds(a, values));
  std::copy(values.begin(), values.end(), ints_[i].begin());
  inputs_set_.insert(i);
  if (device_) host_newer_[i] = true;
  return absl::OkStatus();
}

std::optional<int64_t> Session::CountedTargets() const {
  const stepc_module_info& info = module_->info();
  for (int i = 0; i < info.num_args; ++i) {
    const stepc_arg_info& a = info.args[i];
    if (a.kind != STEPC_ARG_INPUT || a.id_ignored == STEPC_NO_IGNORED_ID) continue;
    return static_cast<int64_t>(std::count_if(ints_[i].begin(), ints_[i].end(), [&](int32_t v) {
      return v != a.id_ignored;
    }));
  }
  return std::nullopt;
}

absl::Status Session::SetFloatInput(const std::string& name, absl::Span<const float> values) {
  STEPC_ASSIGN_OR_RETURN(const int i, Input(name, STEPC_F32, values.size()));
  for (size_t k = 0; k < values.size(); ++k)
    if (!std::isfinite(values[k]))
      return absl::InvalidArgumentError(
          absl::StrCat("input '", name, "': ", values[k], " at position ", k, " is not finite"));
  std::copy(values.begin(), values.end(), floats_[i].begin());
  inputs_set_.insert(i);
  if (device_) host_newer_[i] = true;
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Session::Step(float lr) {
  if (!(lr >= 0.0f) || !std::isfinite(lr))
    return absl::InvalidArgumentError(absl::StrCat("learning rate ", lr, " is not a finite value >= 0"));
  const stepc_module_info& info = module_->info();
  if (!initialized_)
    return absl::FailedPreconditionError(
        "no parameters yet: initialise them (InitParams) before the first step");
  for (int i = 0; i < info.num_args; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT && !inputs_set_.contains(i))
      return absl::FailedPreconditionError(
          absl::StrCat("input '", info.args[i].name, "' was never set (SetInput)"));
  for (int i = 0; i < info.num_args; ++i) {
    if (info.args[i].kind == STEPC_ARG_LR) floats_[i][0] = lr;
    if (info.args[i].kind == STEPC_ARG_STEP) floats_[i][0] = static_cast<float>(steps_ + 1);
  }
  if (device_) {
    for (int i = 0; i < info.num_args; ++i)
      if (info.args[i].kind == STEPC_ARG_LR || info.args[i].kind == STEPC_ARG_STEP)
        host_newer_[i] = true;
    STEPC_RETURN_IF_ERROR(Upload());
    absl::StatusOr<StepResult> result = device_->Run(*module_, communicator_->table());
    if (!result.ok())
      return absl::Status(result.status().code(),
                          absl::StrCat("step ", steps_ + 1, " failed: ", result.status().message()));
    for (int i = 0; i < info.num_args; ++i)
      if (info.args[i].kind <= STEPC_ARG_EXP_AVG_SQ) device_newer_[i] = true;
    ++steps_;
    last_metrics_ = result->metrics;
    return *result;
  }
  StepResult result;
  result.metrics.resize(module_->metrics_count());
  char error[512] = {0};
  if (module_->Run(args_.data(), arena_, communicator_->table(), nullptr, &result.loss,
                   &result.grad_norm, result.metrics.data(), error, sizeof(error))) {
    if (!communicator_->last_error().ok())
      return absl::UnavailableError(absl::StrCat("step ", steps_ + 1, " failed: ", error, ": ",
                                                 communicator_->last_error().message()));
    return absl::InvalidArgumentError(absl::StrCat("step ", steps_ + 1, " failed: ", error));
  }
  ++steps_;
  last_metrics_ = result.metrics;
  return result;
}

absl::StatusOr<float> Session::Eval(std::vector<float>* logits) {
  return Eval(logits, nullptr);
}

absl::StatusOr<float> Session::Eval(std::vector<float>* logits,
                                    std::vector<std::vector<float>>* outputs) {
  const stepc_module_info& info = module_->info();
  if (logits) {
    if (module_->logits_count() == 0)
      return absl::FailedPreconditionError(absl::StrCat(
          "'", module_->path(), "' returns no logits (its loss is not one f32 cross-entropy)"));
    logits->resize(module_->logits_count());
  }
  float* out = logits ? logits->data() : nullptr;
  std::vector<float*> output_ptrs;
  if (outputs) {
    outputs->resize(info.num_outputs);
    for (int k = 0; k < info.num_outputs; ++k) {
      (*outputs)[k].resize(module_->output_count(k));
      output_ptrs.push_back((*outputs)[k].data());
    }
  }
  float* const* outs = outputs && info.num_outputs > 0 ? output_ptrs.data() : nullptr;
  if (!initialized_)
    return absl::FailedPreconditionError(
        "no parameters yet: initialise or load them before evaluating");
  for (int i = 0; i < info.num_args; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT && !inputs_set_.contains(i))
      return absl::FailedPreconditionError(
          absl::StrCat("input '", info.args[i].name, "' was never set (SetInput)"));
  if (device_) {
    STEPC_RETURN_IF_ERROR(Upload());
    absl::StatusOr<float> loss = device_->RunEval(*module_, communicator_->table(), out, outs);
    if (!loss.ok())
      return absl::Status(loss.status().code(),
                          absl::StrCat("evaluation failed: ", loss.status().message()));
    return *loss;
  }
  float loss = 0;
  char error[512] = {0};
  if (module_->RunEval(args_.data(), eval_arena_, communicator_->table(), nullptr, &loss, out,
                       outs, error, sizeof(error))) {
    if (!communicator_->last_error().ok())
      return absl::UnavailableError(absl::StrCat("evaluation failed: ", error, ": ",
                                                 communicator_->last_error().message()));
    return absl::InvalidArgumentError(absl::StrCat("evaluation failed: ", error));
  }
  return loss;
}

absl::Status Session::RowLogits(const std::string& input, absl::Span<const int32_t> row,
                               std::vector<float>* logits) {
  const stepc_module_info& info = module_->info();
  if (info.logits_rank < 2 && logits)
    return absl::FailedPreconditionError(absl::StrCat(
        "'", module_->path(), "' returns no logits with rows (its loss is not one f32 "
        "cross-entropy)"));
  const int named = module_->FindArg(input);
  if (named < 0 || info.args[named].kind != STEPC_ARG_INPUT || info.args[named].dtype != STEPC_I32)
    return absl::NotFoundError(absl::StrCat("no integer input named '", input, "'"));
  // Each input's row: its elements over its leading dimension.
  auto rowElements = [&](int i) {
    const stepc_arg_info& a = info.args[i];
    return a.rank > 0 && a.shape[0] > 0 ? Numel(a) / a.shape[0] : Numel(a);
  };
  if (static_cast<int64_t>(row.size()) != rowElements(named))
    return absl::InvalidArgumentError(absl::StrCat("input '", input, "' has rows of ",
                                                   rowElements(named), " values, got ",
                                                   row.size()));
  STEPC_RETURN_IF_ERROR(CheckIds(info.args[named], row));
  for (int i = 0; i < info.num_args; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT && info.args[i].dtype != STEPC_I32)
      return absl::UnimplementedError(absl::StrCat(
          "one row's logits of a model with the float input '", info.args[i].name, "'"));
  const int64_t row_logits = info.logits_rank >= 2 && info.logits_shape[0] > 0
                                 ? module_->logits_count() / info.logits_shape[0]
                                 : 0;
  if (!module_->has_sample_step()) {
    // The eval step: the row first in a batch of zeros.
    for (int i = 0; i < info.num_args; ++i) {
      if (info.args[i].kind != STEPC_ARG_INPUT) continue;
      std::vector<int32_t> batch(Numel(info.args[i]), 0);
      if (i == named) std::copy(row.begin(), row.end(), batch.begin());
      STEPC_RETURN_IF_ERROR(SetInput(info.args[i].name, batch));
    }
    std::vector<float> all;
    STEPC_RETURN_IF_ERROR(Eval(logits ? &all : nullptr).status());
    if (logits) logits->assign(all.begin(), all.begin() + row_logits);
    return absl::OkStatus();
  }
  if (!initialized_)
    return absl::FailedPreconditionError(
        "no parameters yet: initialise or load them before evaluating");
  // The sampling step: the same arguments, each input one row.
  std::vector<std::vector<int32_t>> rows(info.num_args);
  std::vector<void*> args = args_;
  for (int i = 0; i < info.num_args; ++i) {
    if (info.args[i].kind != STEPC_ARG_INPUT) continue;
    rows[i].assign(rowElements(i), 0);
    if (i == named) std::copy(row.begin(), row.end(), rows[i].begin());
    args[i] = rows[i].data();
  }
  std::vector<float> scratch;
  std::vector<float>& out = logits ? *logits : scratch;
  out.resize(row_logits);
  if (device_) {
    STEPC_RETURN_IF_ERROR(Upload());
    absl::Status ran = device_->RunSample(*module_, communicator_->table(), rows, out.data());
    if (!ran.ok())
      return absl::Status(ran.code(), absl::StrCat("sampling step failed: ", ran.message()));
    return absl::OkStatus();
  }
  float loss = 0;
  char error[512] = {0};
  if (module_->RunSample(args.data(), sample_arena_, communicator_->table(), nullptr, &loss,
                         out.data(), error, sizeof(error))) {
    if (!communicator_->last_error().ok())
      return absl::UnavailableError(absl::StrCat("sampling step failed: ", error, ": ",
                                                 communicator_->last_error().message()));
    return absl::InvalidArgumentError(absl::StrCat("sampling step failed: ", error));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Session::ReadParam(const std::string& name) const {
  STEPC_ASSIGN_OR_RETURN(const int i, Arg(name));
  const stepc_arg_info& a = module_->info().args[i];
  if (a.dtype != STEPC_F32)
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a float tensor"));
  STEPC_RETURN_IF_ERROR(Download(i));
  if (!Sharded(i) && !TpSplit(i)) return floats_[i];
  // Every holder's part (the ranks along the fsdp and tp axes, in rank
  // order: fsdp index major), then each placed where it belongs.
  const int shards = Sharded(i) ? ShardCount() : 1, tps = TpSplit(i) ? SplitCount(i) : 1;
  const int axes = (Sharded(i) ? ShardAxes() : 0) | (TpSplit(i) ? 1 << SplitAxis(i) : 0);
  const int64_t count = static_cast<int64_t>(floats_[i].size());
  std::vector<float> parts(count * shards * tps);
  // Host memory: over MPI, on GPUs too.
  STEPC_RETURN_IF_ERROR(
      host_communicator_->AllGather(axes, floats_[i].data(), parts.data(), count));
  std::vector<float> all(GlobalNumel(i));
  // The parts arrive in rank order: the outer mesh axis major (an expert
  // weight's ep axis comes before fsdp's shards).
  const bool split_major = TpSplit(i) && Sharded(i) && SplitAxis(i) < FsdpAxis();
  for (int shard = 0; shard < shards; ++shard)
    for (int tp = 0; tp < tps; ++tp) {
      const int64_t at = split_major ? int64_t{tp} * shards + shard : int64_t{shard} * tps + tp;
      const float* part = parts.data() + at * count;
      ForEachRun(i, shard, tp, [&](int64_t local, int64_t global, int64_t n) {
        std::copy(part + local, part + local + n, all.begin() + global);
      });
    }
  return all;
}

absl::Status Session::WriteParam(const std::string& name, absl::Span<const float> values) {
  STEPC_ASSIGN_OR_RETURN(const int i, Arg(name));
  if (module_->info().args[i].dtype != STEPC_F32)
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a float tensor"));
  const int64_t whole = GlobalNumel(i);
  if (static_cast<int64_t>(values.size()) != whole)
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' holds ", whole, " values, got ", values.size()));
  // A NaN written here would surface steps later as a non-finite loss.
  const bool second_moment = module_->info().args[i].kind == STEPC_ARG_EXP_AVG_SQ;
  for (size_t k = 0; k < values.size(); ++k)
    if (!std::isfinite(values[k]) || (second_moment && values[k] < 0))
      return absl::InvalidArgumentError(absl::StrCat(
          "'", name, "' would hold ", values[k], " at element ", k, ": ",
          second_moment ? "a second moment is finite and >= 0" : "its values must be finite"));
  std::fill(floats_[i].begin(), floats_[i].end(), 0.0f);
  ForEachRun(i, ShardIndex(), SplitIndex(i), [&](int64_t local, int64_t global, int64_t n) {
    std::copy(values.begin() + global, values.begin() + global + n, floats_[i].begin() + local);
  });
  if (device_) {
    host_newer_[i] = true;
    device_newer_[i] = false;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> Session::Shape(const std::string& name) const {
  STEPC_ASSIGN_OR_RETURN(const int i, Arg(name));
  const stepc_arg_info& a = module_->info().args[i];
  return std::vector<int64_t>(a.shape, a.shape + a.rank);
}

absl::StatusOr<std::vector<int64_t>> Session::GlobalShape(const std::string& name) const {
  STEPC_ASSIGN_OR_RETURN(const int i, Arg(name));
  return GlobalShapeOf(i);
}

std::vector<int64_t> Session::GlobalShapeOf(int i) const {
  const stepc_arg_info& a = module_->info().args[i];
  std::vector<int64_t> shape(a.shape, a.shape + a.rank);
  if (Sharded(i)) shape[0] = a.global_dim0;
  if (TpSplit(i)) shape[a.tp_dim] *= a.tp_parts;
  return shape;
}

int64_t Session::GlobalNumel(int i) const {
  int64_t n = 1;
  for (int64_t d : GlobalShapeOf(i)) n *= d;
  return n;
}

int Session::TpIndex() const {
  return TpAxis() >= 0 ? MeshCoordinate(MeshShape(), communicator_->rank(), TpAxis()) : 0;
}

int Session::TpCount() const { return TpAxis() >= 0 ? MeshShape()[TpAxis()] : 1; }

int Session::SplitAxis(int i) const {
  const stepc_arg_info& a = module_->info().args[i];
  return a.tp_axis >= 0 ? a.tp_axis : TpAxis();
}

int Session::SplitIndex(int i) const {
  if (!TpSplit(i)) return 0;
  return MeshCoordinate(MeshShape(), communicator_->rank(), SplitAxis(i));
}

int Session::SplitCount(int i) const { return TpSplit(i) ? module_->info().args[i].tp_parts : 1; }

int64_t Session::planned_bytes() const {
  const stepc_module_info& info = module_->info();
  int64_t bytes = std::max({info.arena_bytes, info.eval_arena_bytes, info.sample_arena_bytes});
  for (const auto& f : floats_) bytes += f.size() * sizeof(float);
  for (const auto& v : ints_) bytes += v.size() * sizeof(int32_t);
  return bytes;
}

}  // namespace stepc
