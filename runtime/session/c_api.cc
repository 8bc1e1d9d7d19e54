// The C API (stepc_runtime.h) over Module and Session: statuses become
// codes and messages; nothing throws or exits, whatever the caller passes.
//
// Handles are checked, not trusted: every session ever created stays in a
// registry, and destroying one frees the session but keeps its small handle
// (marked dead) so that its address is never reused. NULL, a destroyed
// handle or a pointer this library never returned is an error (or, for
// destroy, nothing), never a crash on our side.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "runtime/comm/communicator.h"
#include "runtime/session/session.h"
#include "runtime/status_macros.h"
#include "runtime/stepc_abi.h"
#include "runtime/stepc_runtime.h"
#include "runtime/train/interrupt.h"
#include "runtime/train/options.h"
#include "runtime/train/trainer.h"

struct stepc_session {
  std::unique_ptr<stepc::Session> session;  // null once destroyed
};

namespace {

std::mutex registry_mutex;
absl::flat_hash_set<const stepc_session*>& Registry() {
  static auto* registry = new absl::flat_hash_set<const stepc_session*>();
  return *registry;
}

int Report(const absl::Status& status, char* error, size_t len) {
  if (status.ok()) return 0;
  if (error && len) {
    std::strncpy(error, std::string(status.message()).c_str(), len - 1);
    error[len - 1] = '\0';
  }
  return static_cast<int>(status.code());
}

// The live session behind `s`, or an error naming what is wrong with it.
absl::StatusOr<stepc::Session*> Live(stepc_session* s) {
  if (!s) return absl::InvalidArgumentError("session is NULL");
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (!Registry().contains(s))
    return absl::InvalidArgumentError("not a session created by stepc_session_create");
  if (!s->session) return absl::FailedPreconditionError("the session was destroyed");
  return s->session.get();
}

absl::Status NotNull(const void* p, const char* what) {
  return p ? absl::OkStatus() : absl::InvalidArgumentError(absl::StrCat(what, " is NULL"));
}

// Runs `body` (returning absl::Status) with every exception turned into an
// error code.
template <typename Body>
int Guarded(char* error, size_t len, Body body) {
  try {
    return Report(body(), error, len);
  } catch (const std::exception& e) {
    return Report(absl::InternalError(absl::StrCat("unexpected failure: ", e.what())), error,
                  len);
  } catch (...) {
    return Report(absl::InternalError("unexpected failure"), error, len);
  }
}

// Guarded, with the live session behind `s` (or its error).
template <typename Body>
int WithSession(stepc_session* s, char* error, size_t len, Body body) {
  // A host's signal handler runs off the stack the step's GEMMs may move.
  stepc::EnsureSignalStack();
  return Guarded(error, len, [&]() -> absl::Status {
    absl::StatusOr<stepc::Session*> session = Live(s);
    if (!session.ok()) return session.status();
    return body(**session);
  });
}

}  // namespace

// The process's communicator: under a launcher (mpirun, srun) the MPI world,
// initialised once and finalised at exit, so that a host trainer in any
// language (Python's stepc.Session) runs a sharded step.so as stepc-run
// does; the world of a host that initialised MPI itself (it finalises);
// otherwise none (each session alone).
absl::StatusOr<std::shared_ptr<stepc::Communicator>> ProcessCommunicator() {
  static std::mutex mutex;
  static std::shared_ptr<stepc::Communicator>* world = nullptr;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried) {
    tried = true;
    const bool host_initialised = stepc::MpiInitialized();
    bool launched = host_initialised;
    if (!host_initialised) {
      absl::StatusOr<bool> init = stepc::MpiInitIfLaunched(nullptr, nullptr);
      if (!init.ok()) return init.status();
      launched = *init;
    }
    if (launched) {
      absl::StatusOr<std::unique_ptr<stepc::Communicator>> comm =
          stepc::MakeMpiWorldCommunicator();
      if (!comm.ok()) return comm.status();
      // Never destroyed: sessions may outlive static destruction order.
      world = new std::shared_ptr<stepc::Communicator>(std::move(*comm));
      if (!host_initialised) std::atexit([] { stepc::MpiFinalize(); });
    }
  }
  return world ? *world : nullptr;
}

// Loads `path` and creates a session over the communicator `communicator`
// gives, registered as a handle.
stepc_session* CreateSession(
    const char* path, char* error, size_t len,
    absl::FunctionRef<absl::StatusOr<std::shared_ptr<stepc::Communicator>>()> communicator) {
  stepc_session* created = nullptr;
  Guarded(error, len, [&]() -> absl::Status {
    if (!path) return absl::InvalidArgumentError("module path is NULL");
    absl::StatusOr<std::unique_ptr<stepc::Module>> module = stepc::Module::Load(path);
    if (!module.ok()) return module.status();
    absl::StatusOr<std::shared_ptr<stepc::Communicator>> comm = communicator();
    if (!comm.ok()) return comm.status();
    absl::StatusOr<std::unique_ptr<stepc::Session>> session = stepc::Session::Create(
        std::shared_ptr<const stepc::Module>(std::move(*module)), *comm);
    if (!session.ok()) return session.status();
    created = new stepc_session{std::move(*session)};
    std::lock_guard<std::mutex> lock(registry_mutex);
    Registry().insert(created);
    return absl::OkStatus();
  });
  return created;
}

extern "C" stepc_session* stepc_session_create(const char* path, char* error, size_t len) {
  return CreateSession(path, error, len, ProcessCommunicator);
}

extern "C" stepc_session* stepc_session_create_mpi(const char* path, const void* mpi_comm,
                                                   char* error, size_t len) {
  return CreateSession(path, error, len,
                       [&]() -> absl::StatusOr<std::shared_ptr<stepc::Communicator>> {
                         absl::StatusOr<std::unique_ptr<stepc::Communicator>> comm =
                             stepc::MakeMpiCommunicator(mpi_comm);
                         if (!comm.ok()) return comm.status();
                         return std::shared_ptr<stepc::Communicator>(std::move(*comm));
                       });
}

extern "C" int stepc_train_run(const char* path, const char* options_json, char* error,
                               size_t len) {
  return Guarded(error, len, [&]() -> absl::Status {
    if (!path) return absl::InvalidArgumentError("module path is NULL");
    absl::StatusOr<stepc::TrainOptions> options =
        stepc::TrainOptionsFromJson(options_json ? options_json : "{}");
    if (!options.ok()) return options.status();
    absl::StatusOr<std::shared_ptr<stepc::Communicator>> comm = ProcessCommunicator();
    if (!comm.ok()) return comm.status();
    std::shared_ptr<stepc::Communicator> world = *comm;
    if (!world) world = stepc::MakeLocalCommunicator();
    return stepc::RunTrainingJob(path, *options, world);
  });
}

extern "C" void stepc_session_destroy(stepc_session* s) {
  if (!s) return;
  std::unique_ptr<stepc::Session> doomed;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    if (!Registry().contains(s)) return;
    doomed = std::move(s->session);  // the handle stays, dead
  }
  try {
    doomed.reset();
  } catch (...) {
  }
}

extern "C" int stepc_session_init_params(stepc_session* s, uint64_t seed, char* error,
                                         size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    return session.InitParams(seed);
  });
}

extern "C" int stepc_session_set_input(stepc_session* s, const char* name,
                                       const int32_t* values, size_t count, char* error,
                                       size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(name, "input name"); !ok.ok()) return ok;
    if (count > 0)
      if (absl::Status ok = NotNull(values, "values"); !ok.ok()) return ok;
    return session.SetInput(name, absl::MakeConstSpan(values, count));
  });
}

extern "C" int stepc_session_step(stepc_session* s, float lr, float* loss, float* grad_norm,
                                  char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (!loss || !grad_norm) return absl::InvalidArgumentError("loss or grad_norm is NULL");
    absl::StatusOr<stepc::StepResult> r = session.Step(lr);
    if (!r.ok()) return r.status();
    *loss = r->loss;
    *grad_norm = r->grad_norm;
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_read_param(stepc_session* s, const char* name, float* out,
                                        size_t count, char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(name, "parameter name"); !ok.ok()) return ok;
    absl::StatusOr<std::vector<float>> values = session.ReadParam(name);
    if (!values.ok()) return values.status();
    if (values->size() != count)
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' holds ", values->size(),
                                                     " values, count is ", count));
    if (count > 0)
      if (absl::Status ok = NotNull(out, "out"); !ok.ok()) return ok;
    std::memcpy(out, values->data(), count * sizeof(float));
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_input_shape(stepc_session* s, const char* name, int64_t* batch,
                                         int64_t* seq, char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(name, "input name"); !ok.ok()) return ok;
    if (!batch || !seq) return absl::InvalidArgumentError("batch or seq is NULL");
    const int i = session.module().FindArg(name);
    if (i < 0 || session.module().info().args[i].kind != STEPC_ARG_INPUT)
      return absl::NotFoundError(absl::StrCat("the module has no input named '", name, "'"));
    absl::StatusOr<std::vector<int64_t>> shape = session.Shape(name);
    if (!shape.ok()) return shape.status();
    if (shape->size() != 2)
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is not [batch, seq]"));
    *batch = (*shape)[0];
    *seq = (*shape)[1];
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_write_param(stepc_session* s, const char* name, const float* values,
                                         size_t count, char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(name, "parameter name"); !ok.ok()) return ok;
    if (count > 0)
      if (absl::Status ok = NotNull(values, "values"); !ok.ok()) return ok;
    return session.WriteParam(name, absl::MakeConstSpan(values, count));
  });
}

namespace {

// The module argument of the index-th of those whose kind `keep` accepts,
// or -1.
template <typename Keep>
int NthArg(const stepc::Session& session, int32_t index, Keep keep) {
  const stepc_module_info& info = session.module().info();
  for (int i = 0, seen = 0; i < info.num_args; ++i)
    if (keep(info.args[i].kind) && seen++ == index) return i;
  return -1;
}

bool IsState(int32_t kind) { return kind <= STEPC_ARG_EXP_AVG_SQ; }
bool IsInput(int32_t kind) { return kind == STEPC_ARG_INPUT; }

}  // namespace

extern "C" int stepc_session_num_tensors(stepc_session* s, int32_t* count, char* error,
                                         size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(count, "count"); !ok.ok()) return ok;
    const stepc_module_info& info = session.module().info();
    *count = 0;
    for (int i = 0; i < info.num_args; ++i) *count += info.args[i].kind <= STEPC_ARG_EXP_AVG_SQ;
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_tensor_info(stepc_session* s, int32_t index, const char** name,
                                         int32_t* role, int32_t* rank, int64_t shape[8],
                                         char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (!name || !role || !rank || !shape)
      return absl::InvalidArgumentError("name, role, rank or shape is NULL");
    const int i = NthArg(session, index, IsState);
    if (i < 0) return absl::OutOfRangeError(absl::StrCat("no state tensor ", index));
    const stepc_arg_info& a = session.module().info().args[i];
    absl::StatusOr<std::vector<int64_t>> whole = session.GlobalShape(a.name);
    if (!whole.ok()) return whole.status();
    if (whole->size() > 8)
      return absl::OutOfRangeError(absl::StrCat("'", a.name, "' has more than 8 dimensions"));
    *name = a.name;
    *role = a.kind;
    *rank = static_cast<int32_t>(whole->size());
    std::copy(whole->begin(), whole->end(), shape);
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_ranks(stepc_session* s, int32_t* rank, int32_t* world_size,
                                   int32_t* tensor_parallel, char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (!rank || !world_size || !tensor_parallel)
      return absl::InvalidArgumentError("rank, world_size and tensor_parallel must not be NULL");
    *rank = session.communicator().rank();
    *world_size = session.communicator().size();
    *tensor_parallel = std::max<int32_t>(1, session.module().info().tensor_parallel);
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_steps_done(stepc_session* s, int64_t* steps, char* error,
                                        size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(steps, "steps"); !ok.ok()) return ok;
    *steps = session.steps_done();
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_save_checkpoint(stepc_session* s, const char* dir,
                                             const char* trainer_json, char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(dir, "checkpoint directory"); !ok.ok()) return ok;
    return session.SaveCheckpoint(dir, trainer_json ? trainer_json : "{}");
  });
}

extern "C" int stepc_session_load_checkpoint(stepc_session* s, const char* dir, int64_t* step,
                                             char* trainer_json, size_t trainer_json_len,
                                             char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(dir, "checkpoint directory"); !ok.ok()) return ok;
    // The trainer state must fit before anything is loaded.
    if (trainer_json) {
      absl::StatusOr<stepc::CheckpointInfo> info = stepc::ReadCheckpointInfo(dir);
      if (!info.ok()) return info.status();
      if (info->trainer_json.size() + 1 > trainer_json_len)
        return absl::OutOfRangeError(absl::StrCat(
            "the checkpoint's trainer state needs ", info->trainer_json.size() + 1,
            " bytes; trainer_json_len is ", trainer_json_len));
    }
    absl::StatusOr<stepc::CheckpointInfo> loaded = session.LoadCheckpoint(dir);
    if (!loaded.ok()) return loaded.status();
    if (step) *step = loaded->step;
    if (trainer_json)
      std::memcpy(trainer_json, loaded->trainer_json.c_str(), loaded->trainer_json.size() + 1);
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_eval(stepc_session* s, float* loss, char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(loss, "loss"); !ok.ok()) return ok;
    absl::StatusOr<float> value = session.Eval();
    if (!value.ok()) return value.status();
    *loss = *value;
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_eval_logits(stepc_session* s, float* loss, float* logits,
                                         size_t count, char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (!loss || !logits) return absl::InvalidArgumentError("loss or logits is NULL");
    const int64_t want = session.module().logits_count();
    if (want == 0) return absl::FailedPreconditionError("the module returns no logits");
    if (count != static_cast<size_t>(want))
      return absl::InvalidArgumentError(
          absl::StrCat("the logits hold ", want, " values, count is ", count));
    std::vector<float> values;
    absl::StatusOr<float> value = session.Eval(&values);
    if (!value.ok()) return value.status();
    *loss = *value;
    std::memcpy(logits, values.data(), count * sizeof(float));
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_row_logits(stepc_session* s, const char* input, const int32_t* row,
                                        size_t row_len, float* logits, size_t count,
                                        char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (!input || !row || !logits) return absl::InvalidArgumentError("input, row or logits is NULL");
    const stepc_module_info& info = session.module().info();
    if (info.logits_rank < 2 || info.logits_shape[0] <= 0)
      return absl::FailedPreconditionError("the module returns no logits with rows");
    const int64_t want = session.module().logits_count() / info.logits_shape[0];
    if (count != static_cast<size_t>(want))
      return absl::InvalidArgumentError(
          absl::StrCat("a row's logits hold ", want, " values, count is ", count));
    std::vector<float> values;
    STEPC_RETURN_IF_ERROR(session.RowLogits(input, absl::MakeConstSpan(row, row_len), &values));
    std::memcpy(logits, values.data(), count * sizeof(float));
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_logits_shape(stepc_session* s, int32_t* rank, int64_t shape[8],
                                          char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (!rank || !shape) return absl::InvalidArgumentError("rank or shape is NULL");
    const stepc_module_info& info = session.module().info();
    if (info.logits_rank > 8) return absl::OutOfRangeError("the logits have more than 8 dims");
    *rank = info.logits_rank;
    std::copy(info.logits_shape, info.logits_shape + info.logits_rank, shape);
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_set_input_f32(stepc_session* s, const char* name,
                                           const float* values, size_t count, char* error,
                                           size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(name, "input name"); !ok.ok()) return ok;
    if (count > 0)
      if (absl::Status ok = NotNull(values, "values"); !ok.ok()) return ok;
    return session.SetFloatInput(name, absl::MakeConstSpan(values, count));
  });
}


extern "C" int stepc_session_num_inputs(stepc_session* s, int32_t* count, char* error,
                                        size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(count, "count"); !ok.ok()) return ok;
    *count = 0;
    while (NthArg(session, *count, IsInput) >= 0) ++*count;
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_input_name(stepc_session* s, int32_t index, const char** name,
                                        char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(name, "name"); !ok.ok()) return ok;
    const int i = NthArg(session, index, IsInput);
    if (i < 0) return absl::OutOfRangeError(absl::StrCat("no input ", index));
    *name = session.module().info().args[i].name;
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_input_info(stepc_session* s, const char* name, int32_t* dtype,
                                        int32_t* rank, int64_t shape[8], char* error,
                                        size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(name, "input name"); !ok.ok()) return ok;
    if (!dtype || !rank || !shape) return absl::InvalidArgumentError("dtype, rank or shape is NULL");
    const int i = session.module().FindArg(name);
    if (i < 0 || session.module().info().args[i].kind != STEPC_ARG_INPUT)
      return absl::NotFoundError(absl::StrCat("the module has no input named '", name, "'"));
    const stepc_arg_info& a = session.module().info().args[i];
    if (a.rank > 8) return absl::OutOfRangeError(absl::StrCat("'", name, "' has more than 8 dims"));
    *dtype = a.dtype;
    *rank = a.rank;
    std::copy(a.shape, a.shape + a.rank, shape);
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_num_outputs(stepc_session* s, int32_t* count, char* error,
                                         size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(count, "count"); !ok.ok()) return ok;
    *count = session.module().info().num_outputs;
    return absl::OkStatus();
  });
}

namespace {

// Entry `index` of a table of `count` outputs or metrics (`what`): its
// name, rank and shape.
absl::Status TableEntry(const stepc_output_info* table, int32_t count, const char* what,
                        int32_t index, const char** name, int32_t* rank, int64_t shape[8]) {
  if (!name || !rank || !shape) return absl::InvalidArgumentError("name, rank or shape is NULL");
  if (index < 0 || index >= count)
    return absl::OutOfRangeError(
        absl::StrCat("no ", what, " ", index, " (the module has ", count, ")"));
  const stepc_output_info& o = table[index];
  if (o.rank > 8) return absl::OutOfRangeError(absl::StrCat("'", o.name, "' has more than 8 dims"));
  *name = o.name;
  *rank = o.rank;
  std::copy(o.shape, o.shape + o.rank, shape);
  return absl::OkStatus();
}

}  // namespace

extern "C" int stepc_session_num_metrics(stepc_session* s, int32_t* count, char* error,
                                         size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (absl::Status ok = NotNull(count, "count"); !ok.ok()) return ok;
    *count = session.module().info().num_metrics;
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_metric_info(stepc_session* s, int32_t index, const char** name,
                                         int32_t* rank, int64_t shape[8], char* error,
                                         size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    const stepc_module_info& info = session.module().info();
    return TableEntry(info.metrics, info.num_metrics, "metric", index, name, rank, shape);
  });
}

extern "C" int stepc_session_last_metrics(stepc_session* s, float* values, size_t count,
                                          char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    const std::vector<float>& last = session.last_metrics();
    if (count != last.size())
      return absl::InvalidArgumentError(absl::StrCat("the metrics hold ", last.size(),
                                                     " values, count is ", count));
    if (count > 0)
      if (absl::Status ok = NotNull(values, "values"); !ok.ok()) return ok;
    std::copy(last.begin(), last.end(), values);
    return absl::OkStatus();
  });
}

extern "C" int stepc_session_output_info(stepc_session* s, int32_t index, const char** name,
                                         int32_t* rank, int64_t shape[8], char* error,
                                         size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    const stepc_module_info& info = session.module().info();
    return TableEntry(info.outputs, info.num_outputs, "output", index, name, rank, shape);
  });
}

extern "C" int stepc_session_eval_outputs(stepc_session* s, float* loss, float* const* outputs,
                                          char* error, size_t len) {
  return WithSession(s, error, len, [&](stepc::Session& session) -> absl::Status {
    if (!loss || !outputs) return absl::InvalidArgumentError("loss or outputs is NULL");
    std::vector<std::vector<float>> values;
    absl::StatusOr<float> value = session.Eval(nullptr, &values);
    if (!value.ok()) return value.status();
    *loss = *value;
    for (size_t k = 0; k < values.size(); ++k)
      if (outputs[k]) std::memcpy(outputs[k], values[k].data(), values[k].size() * sizeof(float));
    return absl::OkStatus();
  });
}
