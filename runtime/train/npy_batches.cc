#include "runtime/train/npy_batches.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <zlib.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/formats/npy.h"
#include "runtime/status_macros.h"

namespace stepc {
namespace {

namespace fs = std::filesystem;

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Input `a` from DIR/<name>.npy: this rank's rows, as ints or floats.
absl::Status ReadInput(const std::string& dir, const stepc_arg_info& a, int rank, int world,
                       InputBatch& batch) {
  const std::string path = absl::StrCat(dir, "/", a.name, ".npy");
  npy::Array array;
  std::string error;
  if (!npy::Read(path, array, error)) return absl::NotFoundError(error);
  const bool integer = a.dtype == STEPC_I32;
  if (integer && array.dtype[0] == 'f')
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' holds floats (", array.dtype, "); input '", a.name,
        "' (token ids, labels) must be an integer array"));
  std::vector<int64_t> local(a.shape, a.shape + a.rank), global = local;
  if (a.rank >= 1) global[0] *= world;
  if (array.shape != local && array.shape != global)
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' has shape ", Shape(array.shape), "; the step takes ", Shape(global),
        world > 1 ? absl::StrCat(" (or this rank's ", Shape(local), ")") : ""));
  // Under sharding a global array gives this rank its rows.
  size_t first = 0, count = array.data.size();
  if (world > 1 && array.shape == global && a.rank >= 1) {
    count = array.data.size() / world;
    first = static_cast<size_t>(rank) * count;
  }
  std::vector<int32_t> ints;
  std::vector<float> floats;
  for (size_t k = first; k < first + count; ++k) {
    const double v = array.data[k];
    if (integer) {
      const bool ignored = static_cast<double>(a.id_ignored) == v;  // e.g. SFT's -100
      if (!ignored && !(v >= 0 && v <= INT32_MAX))
        return absl::InvalidArgumentError(absl::StrCat(
            "'", path, "' holds the id ", v, " at element ", k,
            a.id_ignored == STEPC_NO_IGNORED_ID
                ? std::string(" (ids are >= 0)")
                : absl::StrCat(" (ids are >= 0, or ", a.id_ignored, ": not counted)")));
      ints.push_back(static_cast<int32_t>(v));
    } else {
      if (!std::isfinite(v))
        return absl::InvalidArgumentError(
            absl::StrCat("'", path, "' holds ", v, " at element ", k));
      floats.push_back(static_cast<float>(v));
    }
  }
  batch.names.push_back(a.name);
  batch.ints.push_back(std::move(ints));
  batch.floats.push_back(std::move(floats));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NpyBatches> NpyBatches::Open(const std::string& dir, const Module& module,
                                            int rank, int world) {
  NpyBatches batches;
  batches.module_ = &module;
  batches.rank_ = rank;
  batches.world_ = world;
  batches.source_ = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return absl::NotFoundError(absl::StrCat("no batch directory '", dir, "'"));
  const stepc_module_info& info = module.info();
  const stepc_arg_info* first = nullptr;
  for (int i = 0; i < info.num_args && !first; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT) first = &info.args[i];
  if (!first) return absl::InvalidArgumentError("the step has no inputs to read");
  // One batch here, or one per subdirectory.
  if (fs::exists(absl::StrCat(dir, "/", first->name, ".npy"), ec)) {
    batches.dirs_.push_back(dir);
  } else {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_directory(ec)) batches.dirs_.push_back(it->path().string());
    std::sort(batches.dirs_.begin(), batches.dirs_.end());
    if (batches.dirs_.empty())
      return absl::NotFoundError(absl::StrCat("'", dir, "' holds neither ", first->name,
                                              ".npy nor batch subdirectories"));
  }
  uint64_t hash = 0xCBF29CE484222325ull;
  auto mix = [&hash](uint64_t v) { hash = (hash ^ v) * 0x100000001B3ull; };
  // Every batch's every input, byte for byte (CRC-32 per file: another
  // batch anywhere in the stream is another run; reading them once is the
  // price).
  for (const std::string& d : batches.dirs_) {
    for (unsigned char c : fs::path(d).filename().string()) mix(c);
    for (int i = 0; i < info.num_args; ++i) {
      if (info.args[i].kind != STEPC_ARG_INPUT) continue;
      const std::string path = absl::StrCat(d, "/", info.args[i].name, ".npy");
      // (Not a FIFO or device, which would block or never end: loading the
      // batch names what is wrong with it.)
      if (!fs::is_regular_file(path, ec)) {
        mix(0);
        continue;
      }
      std::ifstream in(path, std::ios::binary);
      uLong crc = crc32_z(0L, Z_NULL, 0);
      char chunk[1 << 16];
      while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0)
        crc = crc32_z(crc, reinterpret_cast<const Bytef*>(chunk), static_cast<size_t>(in.gcount()));
      if (in.bad())
        return absl::DataLossError(absl::StrCat("--batch-npy: cannot read '", path, "'"));
      mix(static_cast<uint64_t>(fs::file_size(path, ec)));
      mix(crc);
    }
  }
  // The first batch is read now: a malformed stream fails before training.
  STEPC_RETURN_IF_ERROR(batches.Load(0).status());
  batches.fingerprint_ = hash;
  return batches;
}

absl::StatusOr<InputBatch> NpyBatches::Load(int64_t index) const {
  const std::string& dir = dirs_[static_cast<size_t>(index % count())];
  const stepc_module_info& info = module_->info();
  InputBatch batch;
  for (int i = 0; i < info.num_args; ++i)
    if (info.args[i].kind == STEPC_ARG_INPUT)
      STEPC_RETURN_IF_ERROR(ReadInput(dir, info.args[i], rank_, world_, batch));
  return batch;
}

absl::Status SetBatch(Session& session, const InputBatch& batch) {
  for (size_t i = 0; i < batch.names.size(); ++i) {
    if (batch.floats[i].empty()) {
      STEPC_RETURN_IF_ERROR(session.SetInput(batch.names[i], batch.ints[i]));
    } else {
      STEPC_RETURN_IF_ERROR(session.SetFloatInput(batch.names[i], batch.floats[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace stepc
