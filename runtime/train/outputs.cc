#include "runtime/train/outputs.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/formats/npy.h"
#include "runtime/formats/safetensors.h"
#include "runtime/status_macros.h"

namespace stepc {
namespace {

absl::StatusOr<npy::Array> ReadArray(const std::string& dir, const std::string& name) {
  npy::Array array;
  std::string error;
  if (!npy::Read(dir + "/" + name + ".npy", array, error)) return absl::NotFoundError(error);
  return array;
}

absl::Status SaveState(const Session& session, const std::string& dir,
                       std::optional<StepResult> last) {
  const stepc_module_info& info = session.module().info();
  std::string error;
  auto write = [&](const std::string& name, const std::vector<int64_t>& shape,
                   const std::vector<double>& data) -> absl::Status {
    if (!npy::Write(dir + "/" + name + ".npy", shape, data.data(), data.size(), npy::Dtype::kF4,
                    error))
      return absl::PermissionDeniedError(error);
    return absl::OkStatus();
  };
  for (int i = 0; i < info.num_args; ++i) {
    const stepc_arg_info& a = info.args[i];
    if (a.kind > STEPC_ARG_EXP_AVG_SQ) continue;
    STEPC_ASSIGN_OR_RETURN(std::vector<float> values, session.ReadParam(a.name));
    STEPC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, session.GlobalShape(a.name));
    std::string name = a.kind == STEPC_ARG_PARAM ? absl::StrCat("param.", a.name) : a.name;
    STEPC_RETURN_IF_ERROR(write(name, shape, std::vector<double>(values.begin(), values.end())));
  }
  // No step this run (--steps 0, or a checkpoint with none left): no loss
  // or norm to write, rather than zeros that look like one.
  if (!last) return absl::OkStatus();
  STEPC_RETURN_IF_ERROR(write("loss", {}, {last->loss}));
  STEPC_RETURN_IF_ERROR(write("grad_norm", {}, {last->grad_norm}));
  // The step's metrics, each as its loss function result (metric.<name>).
  size_t at = 0;
  for (int i = 0; i < info.num_metrics && at < last->metrics.size(); ++i) {
    const stepc_output_info& m = info.metrics[i];
    const std::vector<int64_t> shape(m.shape, m.shape + m.rank);
    const int64_t count = session.module().metric_count(i);
    STEPC_RETURN_IF_ERROR(write(absl::StrCat("metric.", m.name), shape,
                                std::vector<double>(last->metrics.begin() + at,
                                                    last->metrics.begin() + at + count)));
    at += count;
  }
  return absl::OkStatus();
}

}  // namespace

// Whether every parameter of `session` was missing from `source` (then
// nothing was loaded: the wrong file, not a partial one).
static absl::Status CheckSomeLoaded(const Session& session, const std::string& source,
                             const std::vector<std::string>& missing) {
  const stepc_module_info& info = session.module().info();
  int params = 0;
  for (int i = 0; i < info.num_args; ++i) params += info.args[i].kind == STEPC_ARG_PARAM;
  if (missing.empty() || static_cast<int>(missing.size()) < params) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      source, " holds none of the step's ", params, " parameters (e.g. '", missing.front(), "')"));
}

absl::Status LoadParams(Session& session, const std::string& dir,
                        std::vector<std::string>* missing) {
  const stepc_module_info& info = session.module().info();
  for (int i = 0; i < info.num_args; ++i) {
    if (info.args[i].kind != STEPC_ARG_PARAM) continue;
    const std::string name = info.args[i].name;
    // DIR/<name>.npy, or DIR/param.<name>.npy as --save-npy writes it.
    std::error_code ec;
    const bool plain = std::filesystem::exists(dir + "/" + name + ".npy", ec);
    const std::string file =
        !plain && std::filesystem::exists(dir + "/param." + name + ".npy", ec) ? "param." + name
                                                                              : name;
    if (missing && !std::filesystem::exists(dir + "/" + file + ".npy", ec)) {
      missing->push_back(name);
      continue;
    }
    STEPC_ASSIGN_OR_RETURN(npy::Array array, ReadArray(dir, file));
    STEPC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, session.GlobalShape(name));
    if (array.shape != shape)
      return absl::InvalidArgumentError(
          absl::StrCat("'", dir, "/", file, ".npy' has shape [", absl::StrJoin(array.shape, ", "),
                       "]; parameter '", name, "' is [", absl::StrJoin(shape, ", "), "]"));
    for (size_t k = 0; k < array.data.size(); ++k)
      if (!std::isfinite(array.data[k]))
        return absl::InvalidArgumentError(
            absl::StrCat("'", dir, "/", file, ".npy' holds ", array.data[k], " at element ", k));
    std::vector<float> values(array.data.begin(), array.data.end());
    STEPC_RETURN_IF_ERROR(session.WriteParam(name, values));
  }
  return missing ? CheckSomeLoaded(session, absl::StrCat("--init-npy '", dir, "'"), *missing)
                 : absl::OkStatus();
}

absl::Status LoadSafetensors(Session& session, const std::string& path,
                             std::vector<std::string>* missing, std::vector<std::string>* unused) {
  std::map<std::string, safetensors::Tensor> tensors;
  std::string error;
  if (!safetensors::Read(path, tensors, error)) return absl::NotFoundError(error);
  const stepc_module_info& info = session.module().info();
  for (int i = 0; i < info.num_args; ++i) {
    if (info.args[i].kind != STEPC_ARG_PARAM) continue;
    const std::string name = info.args[i].name;
    auto it = tensors.find(name);
    if (it == tensors.end() && missing) {
      missing->push_back(name);
      continue;
    }
    if (it == tensors.end())
      return absl::InvalidArgumentError(
          absl::StrCat("--init-safetensors '", path, "' has no tensor '", name,
                       "' (--init-missing keeps the initialiser's values of those it lacks)"));
    STEPC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, session.GlobalShape(name));
    if (it->second.shape != shape)
      return absl::InvalidArgumentError(
          absl::StrCat("--init-safetensors '", path, "': '", name, "' has shape [",
                       absl::StrJoin(it->second.shape, ", "), "]; the parameter is [",
                       absl::StrJoin(shape, ", "), "]"));
    for (size_t k = 0; k < it->second.data.size(); ++k)
      if (!std::isfinite(it->second.data[k]))
        return absl::InvalidArgumentError(absl::StrCat("--init-safetensors '", path, "': '", name,
                                                       "' holds ", it->second.data[k],
                                                       " at element ", k));
    STEPC_RETURN_IF_ERROR(session.WriteParam(name, it->second.data));
    tensors.erase(it);
  }
  if (unused)
    for (const auto& [name, tensor] : tensors) unused->push_back(name);
  return missing ? CheckSomeLoaded(session, absl::StrCat("--init-safetensors '", path, "'"),
                                   *missing)
                 : absl::OkStatus();
}

absl::Status SaveSafetensors(const Session& session, const std::string& path, bool lead) {
  // Every stage's parameters under a pipeline: rank 0 gathers them.
  STEPC_ASSIGN_OR_RETURN(std::vector<Session::WholeParam> params, session.GatherParams());
  std::map<std::string, safetensors::Tensor> tensors;
  for (Session::WholeParam& p : params) {
    safetensors::Tensor& t = tensors[p.tensor.name];
    t.shape = p.tensor.shape;
    t.data = std::move(p.values);
  }
  std::string error;
  if (lead && !safetensors::Write(path, tensors, error))
    return absl::PermissionDeniedError(absl::StrCat("--save-safetensors: ", error));
  return absl::OkStatus();
}

absl::Status SaveOutputs(Session& session, std::string dir, int rank) {
  const stepc_module_info& info = session.module().info();
  std::vector<float> logits;
  std::vector<std::vector<float>> outputs;
  STEPC_ASSIGN_OR_RETURN(const float loss,
                         session.Eval(info.logits_rank > 0 ? &logits : nullptr, &outputs));
  if (rank > 0) dir = absl::StrCat(dir, ".rank", rank);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string error;
  auto write = [&](const std::string& name, std::vector<int64_t> shape,
                   const std::vector<float>& values) -> absl::Status {
    std::vector<double> data(values.begin(), values.end());
    if (!npy::Write(absl::StrCat(dir, "/", name, ".npy"), shape, data.data(), data.size(),
                    npy::Dtype::kF4, error))
      return absl::PermissionDeniedError(error);
    return absl::OkStatus();
  };
  STEPC_RETURN_IF_ERROR(write("loss", {}, {loss}));
  if (info.logits_rank > 0)
    STEPC_RETURN_IF_ERROR(write(
        "logits", std::vector<int64_t>(info.logits_shape, info.logits_shape + info.logits_rank),
        logits));
  for (int k = 0; k < info.num_outputs; ++k)
    STEPC_RETURN_IF_ERROR(write(
        info.outputs[k].name,
        std::vector<int64_t>(info.outputs[k].shape, info.outputs[k].shape + info.outputs[k].rank),
        outputs[k]));
  return absl::OkStatus();
}

absl::Status SaveNpy(const Session& session, std::string dir, int rank,
                     std::optional<StepResult> last) {
  if (rank > 0) dir = absl::StrCat(dir, ".rank", rank);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec))
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create the --save-npy directory '", dir, "'"));
  return SaveState(session, dir, last);
}

}  // namespace stepc
