// The C API (stepc_runtime.h) over Module and Session: statuses become
// codes and messages; nothing throws or exits.

#include <cstring>
#include <memory>

#include "runtime/session.h"
#include "runtime/stepc_runtime.h"

struct stepc_session {
  std::unique_ptr<stepc::Session> session;
};

namespace {

int Report(const absl::Status& status, char* error, size_t len) {
  if (status.ok()) return 0;
  if (error && len) {
    std::strncpy(error, std::string(status.message()).c_str(), len - 1);
    error[len - 1] = '\0';
  }
  return static_cast<int>(status.code());
}

}  // namespace

extern "C" stepc_session* stepc_session_create(const char* path, char* error, size_t len) {
  absl::StatusOr<std::unique_ptr<stepc::Module>> module = stepc::Module::Load(path);
  if (!module.ok()) {
    Report(module.status(), error, len);
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<stepc::Session>> session =
      stepc::Session::Create(std::shared_ptr<const stepc::Module>(std::move(*module)));
  if (!session.ok()) {
    Report(session.status(), error, len);
    return nullptr;
  }
  return new stepc_session{std::move(*session)};
}

extern "C" void stepc_session_destroy(stepc_session* s) { delete s; }

extern "C" int stepc_session_init_params(stepc_session* s, uint64_t seed, char* error,
                                         size_t len) {
  return Report(s->session->InitParams(seed), error, len);
}

extern "C" int stepc_session_set_input(stepc_session* s, const char* name,
                                       const int32_t* values, size_t count, char* error,
                                       size_t len) {
  return Report(s->session->SetInput(name, absl::MakeConstSpan(values, count)), error, len);
}

extern "C" int stepc_session_step(stepc_session* s, float lr, float* loss, float* grad_norm,
                                  char* error, size_t len) {
  absl::StatusOr<stepc::StepResult> r = s->session->Step(lr);
  if (!r.ok()) return Report(r.status(), error, len);
  *loss = r->loss;
  *grad_norm = r->grad_norm;
  return 0;
}

extern "C" int stepc_session_read_param(stepc_session* s, const char* name, float* out,
                                        size_t count, char* error, size_t len) {
  absl::StatusOr<std::vector<float>> values = s->session->ReadParam(name);
  if (!values.ok()) return Report(values.status(), error, len);
  if (values->size() != count)
    return Report(absl::InvalidArgumentError("count does not match the tensor's size"), error,
                  len);
  std::memcpy(out, values->data(), count * sizeof(float));
  return 0;
}

extern "C" int stepc_session_input_shape(stepc_session* s, const char* name, int64_t* batch,
                                         int64_t* seq, char* error, size_t len) {
  absl::StatusOr<std::vector<int64_t>> shape = s->session->Shape(name);
  if (!shape.ok()) return Report(shape.status(), error, len);
  if (shape->size() != 2)
    return Report(absl::InvalidArgumentError("the input is not [batch, seq]"), error, len);
  *batch = (*shape)[0];
  *seq = (*shape)[1];
  return 0;
}
