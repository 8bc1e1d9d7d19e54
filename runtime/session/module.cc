#include "runtime/session/module.h"
#include "runtime/comm/communicator.h"
#include "runtime/status_macros.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/device/cpu_threads.h"

namespace stepc {
namespace {

// dlopen maps a shared object's segments by its headers: a truncated file
// maps pages past its end, and touching them is a bus error, not an error
// dlopen reports. So the headers are checked against the file first.
absl::Status CheckWholeElf(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  const uintmax_t size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr header;
  if (ec || !in.read(reinterpret_cast<char*>(&header), sizeof(header)) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a shared object (no ELF header)"));
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_type != ET_DYN ||
      header.e_phentsize != sizeof(Elf64_Phdr))
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a 64-bit shared object"));
  auto beyond = [&](uint64_t offset, uint64_t bytes) {
    return offset > size || bytes > size - offset;
  };
  if (beyond(header.e_phoff, uint64_t{header.e_phnum} * sizeof(Elf64_Phdr)) ||
      beyond(header.e_shoff, uint64_t{header.e_shnum} * header.e_shentsize))
    return absl::DataLossError(absl::StrCat("'", path, "' is truncated (", size,
                                            " bytes; its ELF headers reach further)"));
  in.seekg(static_cast<std::streamoff>(header.e_phoff));
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    if (!in.read(reinterpret_cast<char*>(&segment), sizeof(segment)))
      return absl::DataLossError(absl::StrCat("'", path, "' is truncated"));
    if (segment.p_type == PT_LOAD && beyond(segment.p_offset, segment.p_filesz))
      return absl::DataLossError(absl::StrCat("'", path, "' is truncated (", size,
                                              " bytes; a segment ends at byte ",
                                              segment.p_offset + segment.p_filesz, ")"));
  }
  return absl::OkStatus();
}

// The CPU features a CPU step.so was built for (stepc --cpu) that this
// machine lacks, named by /proc/cpuinfo: an error before its code runs
// (it would die of SIGILL).
absl::Status CheckCpuFeatures(const std::string& path, const stepc_module_info& info) {
  if (!info.cpu_features || !*info.cpu_features) return absl::OkStatus();
  std::set<std::string> have;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      for (std::string w; words >> w;) have.insert(w);
      break;
    }
  if (have.empty()) return absl::OkStatus();  // no /proc/cpuinfo: nothing to check against
  std::vector<std::string> missing;
  for (absl::string_view f : absl::StrSplit(info.cpu_features, ',', absl::SkipEmpty()))
    if (!have.count(std::string(f))) missing.push_back(std::string(f));
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "'", path, "' was built for ", info.cpu_isa ? info.cpu_isa : "another CPU",
      " and needs CPU features this machine lacks: ", absl::StrJoin(missing, ", "),
      " (rebuild it here, or with stepc --cpu=x86-64-v3 for any AVX2 CPU)"));
}

// Argument and output names become file names (--save-outputs DIR/<name>.npy,
// --init-npy, --save-npy, --batch-npy): each must be one plain path
// component, and the outputs must not shadow the eval files (loss, logits).
absl::Status CheckNames(const std::string& path, const stepc_module_info& info) {
  auto check = [&](const char* name, const char* what) -> absl::Status {
    const std::string n = name ? name : "";
    const bool plain = !n.empty() && n.size() <= 200 && n != "." && n != ".." &&
                       std::none_of(n.begin(), n.end(), [](char c) {
                         return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
                       });
    if (plain) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' names ", what, " '", absl::CHexEscape(n),
        "', which cannot be a file name (stepc-run writes <name>.npy files): rename it in the "
        "model (at most 200 characters, no '/', '\\', control characters, '.' or '..')"));
  };
  for (int i = 0; i < info.num_args; ++i) {
    if (absl::Status s = check(info.args[i].name, "an argument"); !s.ok()) return s;
    // A kind this runtime does not know would be left unset: refused.
    if (info.args[i].kind < STEPC_ARG_PARAM || info.args[i].kind > STEPC_ARG_SEED)
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' has an argument '", absl::CHexEscape(info.args[i].name), "' of kind ",
          info.args[i].kind, ", which this runtime does not know: rebuild it with this stepc"));
  }
  for (int k = 0; k < info.num_outputs; ++k) {
    if (absl::Status s = check(info.outputs[k].name, "an output"); !s.ok()) return s;
    const std::string n = info.outputs[k].name;
    if (n == "loss" || n == "logits")
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' names an output '", n, "', which would overwrite the evaluation's own ",
          n, ".npy: rename it in the model"));
    for (int j = 0; j < k; ++j)
      if (n == info.outputs[j].name)
        return absl::InvalidArgumentError(
            absl::StrCat("'", path, "' names two outputs '", n, "': rename one in the model"));
  }
  // Metrics become metric.<name>.npy, and the runtime holds their elements
  // (a buffer sized by their shapes): plain, distinct names, sane shapes.
  if (info.num_metrics < 0 || (info.num_metrics > 0 && !info.metrics))
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' has a bad metric table: rebuild it with this stepc"));
  int64_t elements = 0;
  for (int k = 0; k < info.num_metrics; ++k) {
    const stepc_output_info& m = info.metrics[k];
    if (absl::Status s = check(m.name, "a metric"); !s.ok()) return s;
    for (int j = 0; j < k; ++j)
      if (std::string(m.name) == info.metrics[j].name)
        return absl::InvalidArgumentError(absl::StrCat(
            "'", path, "' names two metrics '", m.name, "': rename one in the model"));
    bool sane = m.rank >= 0 && m.rank <= 8 && (m.rank == 0 || m.shape);
    int64_t count = 1;
    for (int d = 0; sane && d < m.rank; ++d) {
      sane = m.shape[d] >= 1 && m.shape[d] <= (int64_t{1} << 24) / count;
      count *= sane ? m.shape[d] : 1;
    }
    elements += count;
    if (!sane || elements > (int64_t{1} << 24))
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' has a metric '", absl::CHexEscape(m.name),
          "' of a shape this runtime cannot hold (rank 0 to 8, at most 2^24 elements in all): "
          "rebuild it with this stepc"));
  }
  return absl::OkStatus();
}

// An argument split over ranks (tp parts, or an expert weight's ep parts)
// names a dimension of itself, segments the parts divide, and a mesh axis
// of that many ranks: anything else would index out of bounds when the
// runtime places the parts.
absl::Status CheckSplits(const std::string& path, const stepc_module_info& info) {
  const int axes = std::clamp(info.mesh_axes, 1, kMaxMeshAxes);
  for (int i = 0; i < info.num_args; ++i) {
    const stepc_arg_info& a = info.args[i];
    if (a.tp_parts <= 1) continue;
    const int axis = a.tp_axis >= 0 ? a.tp_axis : info.tensor_parallel > 1 ? axes - 1 : -1;
    bool ok = a.rank >= 1 && a.tp_dim >= 0 && a.tp_dim < a.rank && a.tp_num_segments >= 1 &&
              a.tp_segments != nullptr && axis >= 0 && axis < axes &&
              info.mesh_shape[axis] == a.tp_parts;
    for (int k = 0; ok && k < a.tp_num_segments; ++k)
      ok = a.tp_segments[k] >= 1 && a.tp_segments[k] % a.tp_parts == 0;
    if (!ok)
      return absl::FailedPreconditionError(absl::StrCat(
          "'", path, "' is inconsistent: argument '", absl::CHexEscape(a.name),
          "' is split in ", a.tp_parts, " parts along a dimension, segments or mesh axis (",
          a.tp_axis, ") it does not have: rebuild it with this stepc"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> Module::Load(const std::string& path) {
  return Load(path, 0);
}

absl::StatusOr<std::shared_ptr<const Module>> Module::ForRank(
    std::shared_ptr<const Module> module, int rank, int world) {
  const stepc_module_info& info = module->info();
  const int stages = info.pipeline_stages;
  if (stages <= 1 || world != info.world_size || info.pipeline_axis < 0 ||
      info.pipeline_axis >= info.mesh_axes || info.mesh_axes > kMaxMeshAxes)
    return module;
  // The rank's coordinate along the pipeline axis of the row-major mesh.
  int stride = 1;
  for (int a = info.pipeline_axis + 1; a < info.mesh_axes; ++a) stride *= info.mesh_shape[a];
  const int stage = rank / stride % stages;
  if (stage == module->stage()) return module;
  STEPC_ASSIGN_OR_RETURN(std::unique_ptr<Module> staged, Load(module->path(), stage));
  return std::shared_ptr<const Module>(std::move(staged));
}

absl::StatusOr<std::unique_ptr<Module>> Module::Load(const std::string& path, int stage) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return absl::NotFoundError(absl::StrCat("no such module: '", path, "'"));
  if (absl::Status whole = CheckWholeElf(path); !whole.ok()) return whole;
  std::unique_ptr<Module> module(new Module());
  module->path_ = path;
  // A relative name without a slash would be searched on the library path.
  std::string open = path.find('/') == std::string::npos ? "./" + path : path;
  ChooseBlasKernels();  // before step.so brings OpenBLAS in
  // RTLD_NODELETE: step.so pulls in libgomp, whose worker threads outlive
  // the module; unmapping it under them would crash at exit.
  module->handle_ = dlopen(open.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!module->handle_)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load '", path, "' as a shared object: ", dlerror()));
  module->stage_ = stage;
  const std::string suffix = stage > 0 ? absl::StrCat("_stage", stage) : "";
  auto symbol = [&](const char* name) {
    return dlsym(module->handle_, absl::StrCat(name, suffix).c_str());
  };
  auto info = reinterpret_cast<decltype(&stepc_module_info_v12)>(symbol("stepc_module_info_v12"));
  module->step_ = reinterpret_cast<decltype(&stepc_train_step_v12)>(symbol("stepc_train_step_v12"));
  module->eval_ = reinterpret_cast<decltype(&stepc_eval_step_v12)>(symbol("stepc_eval_step_v12"));
  module->sample_ =
      reinterpret_cast<decltype(&stepc_sample_step_v12)>(symbol("stepc_sample_step_v12"));
  module->trace_ =
      reinterpret_cast<decltype(&stepc_profile_trace_v2)>(symbol("stepc_profile_trace_v2"));
  module->write_profile_ =
      reinterpret_cast<decltype(&stepc_profile_write_v1)>(symbol("stepc_profile_write_v1"));
  module->prepare_ = reinterpret_cast<decltype(&stepc_prepare_v1)>(symbol("stepc_prepare_v1"));
  if (stage > 0 && !info)
    return absl::FailedPreconditionError(
        absl::StrCat("'", path, "' has no pipeline stage ", stage));
  if (!info || !module->step_ || !module->eval_) {
    // Earlier ABIs named their entry points after their version.
    for (int version = STEPC_ABI_VERSION - 1; version >= 1; --version)
      if (dlsym(module->handle_, absl::StrCat("stepc_module_info_v", version).c_str()))
        return absl::FailedPreconditionError(absl::StrCat(
            "'", path, "' was built for ABI version ", version, "; this runtime expects ",
            STEPC_ABI_VERSION, ": rebuild it with this stepc"));
    return absl::FailedPreconditionError(absl::StrCat(
        "'", path, "' is not a stepc module of ABI version ", STEPC_ABI_VERSION, " (no stepc_module_info_v",
        STEPC_ABI_VERSION, "/stepc_train_step_v", STEPC_ABI_VERSION, "): rebuild it with this stepc"));
  }
  module->info_ = info();
  if (!module->info_ || module->info_->abi_version != STEPC_ABI_VERSION)
    return absl::FailedPreconditionError(absl::StrCat(
        "'", path, "' was built for ABI version ",
        module->info_ ? module->info_->abi_version : -1, "; this runtime expects ",
        STEPC_ABI_VERSION, ": rebuild it with this stepc"));
  if (absl::Status names = CheckNames(path, *module->info_); !names.ok()) return names;
  if (absl::Status splits = CheckSplits(path, *module->info_); !splits.ok()) return splits;
  // An entry point and its arena come together (a sample arena without the
  // entry would be an inconsistent file).
  if ((module->info_->sample_arena_bytes > 0) != (module->sample_ != nullptr) ||
      module->info_->sample_arena_bytes < 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "'", path, "' is inconsistent: its sampling step and its sample_arena_bytes (",
        module->info_->sample_arena_bytes, ") disagree"));
  if (std::strcmp(module->info_->target, "cpu") == 0)
    if (absl::Status cpu = CheckCpuFeatures(path, *module->info_); !cpu.ok()) return cpu;
  if (std::strcmp(module->info_->target, "cpu") != 0 && !module->is_cuda())
    return absl::FailedPreconditionError(absl::StrCat(
        "'", path, "' targets '", module->info_->target, "'; this runtime runs 'cpu' and 'cuda'"));
  return module;
}

void* Module::Symbol(const char* name) const { return dlsym(handle_, name); }

std::vector<const stepc_module_info*> Module::StageInfos() const {
  if (info_->pipeline_stages <= 1) return {info_};
  std::vector<const stepc_module_info*> infos;
  for (int stage = 0; stage < info_->pipeline_stages; ++stage) {
    auto info = reinterpret_cast<decltype(&stepc_module_info_v12)>(
        Symbol(stage == 0 ? "stepc_module_info_v12"
                          : absl::StrCat("stepc_module_info_v12_stage", stage).c_str()));
    if (!info) return {info_};  // checked when the stage was loaded
    infos.push_back(info());
  }
  return infos;
}

bool Module::is_cuda() const {
  return std::strcmp(info_->target, "cuda") == 0 || is_cuda_emulation();
}

bool Module::is_cuda_emulation() const {
  return std::strcmp(info_->target, "cuda-emulation") == 0;
}

Module::~Module() {
  if (handle_) dlclose(handle_);
}

int64_t Module::logits_count() const {
  if (info_->logits_rank <= 0) return 0;
  int64_t n = 1;
  for (int d = 0; d < info_->logits_rank; ++d) n *= info_->logits_shape[d];
  return n;
}

int64_t Module::output_count(int i) const {
  int64_t n = 1;
  for (int d = 0; d < info_->outputs[i].rank; ++d) n *= info_->outputs[i].shape[d];
  return n;
}

int64_t Module::metric_count(int i) const {
  int64_t n = 1;
  for (int d = 0; d < info_->metrics[i].rank; ++d) n *= info_->metrics[i].shape[d];
  return n;
}

int64_t Module::metrics_count() const {
  int64_t n = 0;
  for (int i = 0; i < info_->num_metrics; ++i) n += metric_count(i);
  return n;
}

int Module::FindArg(const std::string& name) const {
  for (int i = 0; i < info_->num_args; ++i)
    if (name == info_->args[i].name) return i;
  return -1;
}

}  // namespace stepc
