// The Session's checkpoints: SaveCheckpoint, LoadCheckpoint and the state
// tensors they move (checkpoint.h has the directory's format).
//
// Saving is collective and atomic: rank 0 makes DIR.partial, every writing
// rank writes and fsyncs its shard file there, then rank 0 writes
// checkpoint.json, fsyncs the directory and renames it to DIR (swapping
// with an existing DIR in one renameat2). A crash at any point leaves DIR
// as it was (or absent) and at most a DIR.partial, which loading never
// reads. Loading reads every shard file's index, takes the global rows this
// rank holds from whichever shards wrote them (so fsdp:4 loads into ddp:2 or
// one rank), verifies each piece's CRC-32 before using it, and changes the
// session only once everything is read and checked.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/session/checkpoint.h"
#include "runtime/session/session.h"
#include "runtime/status_macros.h"


namespace stepc {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kShardMagic[8] = {'S', 'T', 'E', 'P', 'C', 'S', 'H', 'D'};
// The shard header: magic, version, CRC-32 of the index, index bytes.
constexpr int64_t kShardHeaderBytes = 8 + 4 + 4 + 8;

// One tensor's rows in one shard file.
struct Piece {
  std::string name;
  int64_t row_begin = 0, row_end = 0;  // global rows [begin, end)
  int64_t row_numel = 1;               // floats per row
  uint64_t offset = 0;                 // from the start of the data section
  uint32_t crc = 0;
  int64_t bytes() const { return (row_end - row_begin) * row_numel * 4; }
};


const char* RoleName(int kind) {
  switch (kind) {
    case STEPC_ARG_PARAM: return "param";
    case STEPC_ARG_EXP_AVG: return "exp_avg";
    default: return "exp_avg_sq";
  }
}



std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Every rank's outcome of a collective phase: the first failure anywhere
// fails the phase on every rank (none is left waiting in the next one).
absl::Status Agree(Communicator& comm, const absl::Status& mine, const char* what) {
  STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all,
                         comm.AllGather(mine.ok() ? 0 : static_cast<uint64_t>(mine.code())));
  if (!mine.ok()) return mine;
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != 0)
      return absl::Status(static_cast<absl::StatusCode>(all[r]),
                          absl::StrCat("rank ", r, " could not ", what, " (see its error)"));
  return absl::OkStatus();
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::PermissionDeniedError(
      absl::StrCat("cannot ", what, " '", path, "': ", std::strerror(errno)));
}

// Writes `bytes` at the end of `fd`, whole.
absl::Status WriteAll(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("write", path);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ReadAt(int fd, void* data, size_t bytes, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("read", path);
    if (n == 0) return absl::DataLossError(absl::StrCat("'", path, "' is truncated"));
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

// A file's contents, flushed to the disk before returning.
absl::Status WriteFileSynced(const std::string& path, const std::string& contents) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create", path);
  absl::Status written = WriteAll(fd, contents.data(), contents.size(), path);
  if (written.ok() && ::fsync(fd) != 0) written = Errno("fsync", path);
  if (::close(fd) != 0 && written.ok()) written = Errno("close", path);
  return written;
}

absl::Status SyncDirectory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open the directory", path);
  int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? absl::OkStatus() : Errno("fsync the directory", path);
}

// A crash on purpose, for the tests that a checkpoint survives one:
// STEPC_FAILPOINT=NAME:K kills this process (SIGKILL, as a power cut or the
// OOM killer would) the K-th time it passes the point NAME.
void Failpoint(const char* name) {
  static int passes = 0;
  const char* spec = std::getenv("STEPC_FAILPOINT");
  if (!spec) return;
  std::pair<std::string, std::string> f = absl::StrSplit(spec, ':');
  int when = 1;
  if (f.first != name || (!f.second.empty() && !absl::SimpleAtoi(f.second, &when))) return;
  if (++passes == when) ::kill(::getpid(), SIGKILL);
}

// STEPC_FAILPOINT=NAME (any K) makes this a failed read on this process: a
// rank that cannot do its part of a collective phase, for tests that the
// others learn it rather than wait for it.
absl::Status FailpointStatus(const char* name) {
  const char* spec = std::getenv("STEPC_FAILPOINT");
  if (!spec) return absl::OkStatus();
  const std::pair<std::string, std::string> f = absl::StrSplit(spec, ':');
  if (f.first != name) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("failpoint ", name));
}

std::string ShardFileName(int rank, int world) {
  return absl::StrFormat("shard-%05d-of-%05d.bin", rank, world);
}

// A shard file's index, checked against the file's size.
absl::StatusOr<std::vector<Piece>> ReadShardIndex(int fd, const std::string& path,
                                                  uint64_t* data_start) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Errno("stat", path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  char header[kShardHeaderBytes];
  if (size < sizeof(header))
    return absl::DataLossError(absl::StrCat("'", path, "' is truncated (", size, " bytes)"));
  STEPC_RETURN_IF_ERROR(ReadAt(fd, header, sizeof(header), 0, path));
  uint32_t version, index_crc;
  uint64_t index_bytes;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&index_crc, header + 12, 4);
  std::memcpy(&index_bytes, header + 16, 8);
  if (std::memcmp(header, kShardMagic, 8) != 0)
    return absl::DataLossError(absl::StrCat("'", path, "' is not a stepc checkpoint shard"));
  if (version != kCheckpointFormatVersion)
    return absl::DataLossError(absl::StrCat("'", path, "' is shard format version ", version,
                                            "; this runtime reads version ", kCheckpointFormatVersion));
  if (index_bytes > size - sizeof(header))
    return absl::DataLossError(absl::StrCat("'", path, "' is truncated (its index)"));
  std::string index(index_bytes, '\0');
  STEPC_RETURN_IF_ERROR(ReadAt(fd, index.data(), index.size(), sizeof(header), path));
  if (Crc32(index.data(), index.size()) != index_crc)
    return absl::DataLossError(absl::StrCat("'", path, "': its index fails its checksum"));
  *data_start = sizeof(header) + index_bytes;
  std::vector<Piece> pieces;
  for (absl::string_view line : absl::StrSplit(index, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
    Piece p;
    if (f.size() != 6 || !absl::SimpleAtoi(f[1], &p.row_begin) ||
        !absl::SimpleAtoi(f[2], &p.row_end) || !absl::SimpleAtoi(f[3], &p.row_numel) ||
        !absl::SimpleAtoi(f[4], &p.offset) || !absl::SimpleAtoi(f[5], &p.crc) ||
        p.row_begin < 0 || p.row_end <= p.row_begin || p.row_numel < 1 ||
        p.row_numel > (int64_t{1} << 40) || p.row_end - p.row_begin > (int64_t{1} << 40) / p.row_numel)
      return absl::DataLossError(absl::StrCat("'", path, "': malformed index line '", line, "'"));
    p.name = std::string(f[0]);
    if (p.offset > size - *data_start || static_cast<uint64_t>(p.bytes()) > size - *data_start - p.offset)
      return absl::DataLossError(absl::StrCat("'", path, "' is truncated (tensor '", p.name, "')"));
    pieces.push_back(std::move(p));
  }
  return pieces;
}

}  // namespace

std::vector<Session::StateTensor> Session::StateTensors() const {
  const stepc_module_info& info = module_->info();
  std::vector<StateTensor> tensors;
  if (info.pipeline_stages <= 1) {
    for (int i = 0; i < info.num_args; ++i)
      if (info.args[i].kind <= STEPC_ARG_EXP_AVG_SQ) {
        const std::vector<int64_t> shape = GlobalShapeOf(i);
        tensors.push_back({info.args[i].name, info.args[i].kind, shape, 0,
                           TpSplit(i) ? shape[0] : info.args[i].rank >= 1 ? info.args[i].shape[0] : 1});
      }
    return tensors;
  }
  // A pipeline's stages hold whole tensors (a tied one on two stages: its
  // first writes it).
  const std::vector<const stepc_module_info*> stages = module_->StageInfos();
  std::set<std::string> seen;
  for (int32_t kind = STEPC_ARG_PARAM; kind <= STEPC_ARG_EXP_AVG_SQ; ++kind)
    for (size_t s = 0; s < stages.size(); ++s)
      for (int i = 0; i < stages[s]->num_args; ++i) {
        const stepc_arg_info& a = stages[s]->args[i];
        if (a.kind != kind || !seen.insert(a.name).second) continue;
        // Under fsdp a stage's tensors are sharded along dim 0; under tp a
        // split one is written whole (as GlobalShapeOf and TpSplit say of
        // this stage's).
        std::vector<int64_t> shape(a.shape, a.shape + a.rank);
        if (a.rank >= 1) shape[0] = a.global_dim0;
        const bool tp_split = a.tp_parts > 1 && a.rank >= 1;
        if (tp_split) shape[a.tp_dim] *= a.tp_parts;
        tensors.push_back({a.name, a.kind, shape, static_cast<int>(s),
                           tp_split ? shape[0] : a.rank >= 1 ? a.shape[0] : 1});
      }
  return tensors;
}

absl::StatusOr<std::vector<Session::WholeParam>> Session::GatherParams() const {
  const stepc_module_info& info = module_->info();
  const int rank = communicator_->rank(), world = communicator_->size();
  std::vector<WholeParam> params;
  // This rank's stage's parameters, whole (gathered over fsdp and tp),
  // read on every rank before any is sent: a rank that cannot fails the
  // gather on every rank (rank 0 would otherwise wait in a receive from it).
  std::map<std::string, std::vector<float>> own;
  const absl::Status read = [&]() -> absl::Status {
    for (int i = 0; i < info.num_args; ++i) {
      if (info.args[i].kind != STEPC_ARG_PARAM) continue;
      STEPC_ASSIGN_OR_RETURN(own[info.args[i].name], ReadParam(info.args[i].name));
    }
    return FailpointStatus("gather-params-read");
  }();
  STEPC_RETURN_IF_ERROR(Agree(*communicator_, read, "read its parameters to gather them"));
  const bool pipeline = info.pipeline_stages > 1;
  const std::vector<int> mesh = MeshShape();
  // The rank at pipeline coordinate `stage` and 0 on every other axis.
  auto first_rank_of = [&](int stage) {
    for (int r = 0; r < world; ++r) {
      bool first = true;
      for (int axis = 0; axis < static_cast<int>(mesh.size()); ++axis)
        first &= MeshCoordinate(mesh, r, axis) == (axis == info.pipeline_axis ? stage : 0);
      if (first) return r;
    }
    return 0;
  };
  int tag = 0;
  for (const StateTensor& t : StateTensors()) {
    if (t.kind != STEPC_ARG_PARAM) continue;
    ++tag;
    const int source = pipeline ? first_rank_of(t.stage) : 0;
    if (source == 0) {
      if (rank == 0) params.push_back({t, own.at(t.name)});
      continue;
    }
    if (rank == source) {
      const std::vector<float>& values = own.at(t.name);
      STEPC_ASSIGN_OR_RETURN(const int request,
                             host_communicator_->StartSend(0, tag, values.data(),
                                                      values.size() * sizeof(float)));
      STEPC_RETURN_IF_ERROR(host_communicator_->Wait(request));
    } else if (rank == 0) {
      int64_t numel = 1;
      for (int64_t d : t.shape) numel *= d;
      WholeParam& p = params.emplace_back(WholeParam{t, std::vector<float>(numel)});
      STEPC_ASSIGN_OR_RETURN(const int request,
                             host_communicator_->StartRecv(source, tag, p.values.data(),
                                                      numel * sizeof(float)));
      STEPC_RETURN_IF_ERROR(host_communicator_->Wait(request));
    }
  }
  return params;
}

std::string Session::ModelHash() const {
  uint64_t hash = 0xCBF29CE484222325ull;
  auto mix = [&hash](uint64_t v) { hash = (hash ^ v) * 0x100000001B3ull; };
  for (const StateTensor& t : StateTensors()) {
    for (char c : t.name) mix(static_cast<unsigned char>(c));
    mix(0xFF);
    mix(static_cast<uint64_t>(t.kind));
    for (int64_t d : t.shape) mix(static_cast<uint64_t>(d));
  }
  return absl::StrFormat("%016x", hash);
}

absl::Status Session::SaveCheckpoint(const std::string& dir_in,
                                     const std::string& trainer_json) const {
  if (!initialized_)
    return absl::FailedPreconditionError("no parameters to save: initialise or load them first");
  json trainer = json::parse(trainer_json, nullptr, /*allow_exceptions=*/false);
  if (trainer.is_discarded() || !trainer.is_object())
    return absl::InvalidArgumentError("the trainer state of a checkpoint must be a JSON object");
  const std::string dir = fs::path(dir_in).lexically_normal().string();
  if (dir.empty() || fs::path(dir).filename().empty())
    return absl::InvalidArgumentError(absl::StrCat("'", dir_in, "' is not a checkpoint path"));
  const std::string partial = dir + ".partial";
  const stepc_module_info& info = module_->info();
  const int rank = communicator_->rank(), world = communicator_->size();
  const bool lead = rank == 0;
  // fsdp-sharded tensors: the ranks of the first replica group and tp
  // index 0 (every rank under fsdp; ranks 0..S-1 under hsdp:RxS) write
  // their rows; tp-split tensors are gathered whole (every rank takes part)
  // and, like unsharded ones, written by rank 0.
  const std::vector<int> mesh = MeshShape();
  const std::vector<StateTensor> state = StateTensors();
  // Under a pipeline each whole tensor is written by its stage's rank.
  const bool pipeline = info.pipeline_stages > 1;
  // (the stage's ranks of data index 0 and tp index 0).
  bool first_of_stage = true;
  for (int axis = 0; pipeline && axis < static_cast<int>(mesh.size()); ++axis)
    if (axis != info.pipeline_axis) first_of_stage &= MeshCoordinate(mesh, rank, axis) == 0;
  std::set<std::string> mine, stage_tensors;
  for (const StateTensor& t : state) {
    if (pipeline ? t.stage == module_->stage() && first_of_stage : lead) mine.insert(t.name);
    if (!pipeline || t.stage == module_->stage()) stage_tensors.insert(t.name);
  }
  bool writes_shards = TpIndex() == 0;
  for (int axis = 0; axis < FsdpAxis(); ++axis)
    writes_shards &= MeshCoordinate(mesh, rank, axis) == 0;
  std::vector<std::vector<float>> wholes(info.num_args);
  for (int i = 0; i < info.num_args; ++i)
    if (TpSplit(i) && info.args[i].kind <= STEPC_ARG_EXP_AVG_SQ) {
      STEPC_ASSIGN_OR_RETURN(wholes[i], ReadParam(info.args[i].name));
    }

  // Phase 1: rank 0 makes a fresh DIR.partial (a crash's leftover goes).
  absl::Status made;
  if (lead) {
    std::error_code ec;
    fs::path parent = fs::path(dir).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (ec)
      made = absl::PermissionDeniedError(
          absl::StrCat("cannot create '", parent.string(), "': ", ec.message()));
    if (made.ok() && fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      made = absl::InvalidArgumentError(absl::StrCat("'", dir, "' exists and is not a directory"));
    if (made.ok()) fs::remove_all(partial, ec);
    if (made.ok() && !fs::create_directory(partial, ec))
      made = absl::PermissionDeniedError(
          absl::StrCat("cannot create '", partial, "': ", ec.message()));
  }
  STEPC_RETURN_IF_ERROR(Agree(*communicator_, made, "start the checkpoint"));

  // Phase 2: each writing rank's shard file.
  absl::Status wrote = [&]() -> absl::Status {
    std::vector<Piece> pieces;
    std::vector<const float*> sources;
    uint64_t offset = 0;
    for (int i = 0; i < info.num_args; ++i) {
      const stepc_arg_info& a = info.args[i];
      if (a.kind > STEPC_ARG_EXP_AVG_SQ) continue;
      const bool whole = TpSplit(i);
      if (!(Sharded(i) && !whole ? writes_shards && stage_tensors.count(a.name) > 0
                                 : mine.count(a.name) > 0))
        continue;
      if (std::strchr(a.name, '\t') || std::strchr(a.name, '\n'))
        return absl::InvalidArgumentError(
            absl::StrCat("tensor name '", a.name, "' holds a tab or newline"));
      STEPC_RETURN_IF_ERROR(Download(i));
      Piece p;
      p.name = a.name;
      if (whole) {
        const std::vector<int64_t> shape = GlobalShapeOf(i);
        p.row_numel = static_cast<int64_t>(wholes[i].size()) / shape[0];
        p.row_end = shape[0];
      } else {
        p.row_numel = a.rank >= 1 ? static_cast<int64_t>(floats_[i].size()) / a.shape[0] : 1;
        p.row_begin = Sharded(i) ? static_cast<int64_t>(ShardIndex()) * a.shape[0] : 0;
        p.row_end = p.row_begin + ValidRows(i);
      }
      if (p.row_end == p.row_begin) continue;  // a shard of padding only
      const float* source = whole ? wholes[i].data() : floats_[i].data();
      p.offset = offset;
      p.crc = Crc32(source, static_cast<size_t>(p.bytes()));
      offset += static_cast<uint64_t>(p.bytes());
      sources.push_back(source);
      pieces.push_back(std::move(p));
    }
    if (pieces.empty()) return absl::OkStatus();
    std::string index;
    for (const Piece& p : pieces)
      absl::StrAppend(&index, p.name, "\t", p.row_begin, "\t", p.row_end, "\t", p.row_numel, "\t",
                      p.offset, "\t", p.crc, "\n");
    char header[kShardHeaderBytes];
    const uint32_t version = kCheckpointFormatVersion, index_crc = Crc32(index.data(), index.size());
    const uint64_t index_bytes = index.size();
    std::memcpy(header, kShardMagic, 8);
    std::memcpy(header + 8, &version, 4);
    std::memcpy(header + 12, &index_crc, 4);
    std::memcpy(header + 16, &index_bytes, 8);
    const std::string path = absl::StrCat(partial, "/", ShardFileName(rank, world));
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("create", path);
    absl::Status status = WriteAll(fd, header, sizeof(header), path);
    if (status.ok()) status = WriteAll(fd, index.data(), index.size(), path);
    for (size_t k = 0; k < pieces.size() && status.ok(); ++k)
      status = WriteAll(fd, sources[k], static_cast<size_t>(pieces[k].bytes()), path);
    if (status.ok() && ::fsync(fd) != 0) status = Errno("fsync", path);
    if (::close(fd) != 0 && status.ok()) status = Errno("close", path);
    return status;
  }();
  Failpoint("checkpoint-shards-written");
  absl::Status agreed = Agree(*communicator_, wrote, "write its checkpoint shard");
  if (!agreed.ok()) {
    std::error_code ec;
    if (lead) fs::remove_all(partial, ec);
    return agreed;
  }

  // Phase 3: rank 0 writes the metadata and publishes the directory.
  absl::Status published;
  if (lead) {
    published = [&]() -> absl::Status {
      json meta;
      meta["format"] = "stepc-checkpoint";
      meta["version"] = kCheckpointFormatVersion;
      meta["step"] = steps_;
      meta["model_hash"] = ModelHash();
      meta["compile_options"] = CompileOptions(info);
      meta["sharding"] = info.sharding;
      meta["world_size"] = world;
      json tensors = json::array();
      for (int i = 0; i < info.num_args && !pipeline; ++i) {
        const stepc_arg_info& a = info.args[i];
        if (a.kind > STEPC_ARG_EXP_AVG_SQ) continue;
        const std::vector<int64_t> shape = GlobalShapeOf(i);
        // Rows per shard as the writer held them (padding included; a
        // tp-split tensor is written whole).
        tensors.push_back({{"name", a.name}, {"role", RoleName(a.kind)}, {"shape", shape},
                           {"shard_rows", TpSplit(i) ? shape[0] : a.rank >= 1 ? a.shape[0] : 1}});
      }
      // A pipeline's tensors, every stage's, are whole.
      for (const StateTensor& t : pipeline ? state : std::vector<StateTensor>{})
        tensors.push_back({{"name", t.name}, {"role", RoleName(t.kind)}, {"shape", t.shape},
                           {"shard_rows", t.shard_rows}});
      meta["tensors"] = tensors;
      json shards = json::array();
      std::error_code ec;
      for (int r = 0; r < world; ++r)
        if (fs::exists(absl::StrCat(partial, "/", ShardFileName(r, world)), ec))
          shards.push_back(ShardFileName(r, world));
      meta["shards"] = shards;
      meta["trainer"] = trainer;
      // Over everything else: an edited or bit-flipped field (a step count)
      // is caught when the checkpoint is read.
      meta["checksum"] = CheckpointMetadataChecksum(meta.dump());
      STEPC_RETURN_IF_ERROR(
          WriteFileSynced(absl::StrCat(partial, "/", kCheckpointMetadataFile), meta.dump(1) + "\n"));
      STEPC_RETURN_IF_ERROR(SyncDirectory(partial));
      Failpoint("checkpoint-metadata-written");
      if (fs::exists(dir, ec)) {
        // Swap in one step, then drop the old contents.
        if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0)
          return Errno("replace", dir);
        fs::remove_all(partial, ec);
      } else if (::rename(partial.c_str(), dir.c_str()) != 0) {
        return Errno("rename to", dir);
      }
      fs::path parent = fs::path(dir).parent_path();
      return SyncDirectory(parent.empty() ? "." : parent.string());
    }();
    if (!published.ok()) {
      std::error_code ec;
      fs::remove_all(partial, ec);
    }
  }
  return Agree(*communicator_, published, "publish the checkpoint");
}

absl::StatusOr<CheckpointInfo> Session::LoadCheckpoint(const std::string& dir) {
  const stepc_module_info& info = module_->info();
  // Everything is read into `loaded` and checked before the session changes.
  std::vector<std::vector<float>> loaded(info.num_args);
  absl::StatusOr<CheckpointInfo> result = [&]() -> absl::StatusOr<CheckpointInfo> {
    CheckpointInfo ckpt;
    STEPC_ASSIGN_OR_RETURN(const std::string meta_text, ReadCheckpointMetadata(dir, ckpt));
    const json meta = json::parse(meta_text);
    const std::string meta_path = absl::StrCat(dir, "/", kCheckpointMetadataFile);
    // The model's state tensors against the checkpoint's.
    std::map<std::string, std::pair<std::string, std::vector<int64_t>>> saved;
    for (const json& t : meta["tensors"]) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("role") ||
          !t["role"].is_string() || !t.contains("shape") || !t["shape"].is_array())
        return absl::DataLossError(absl::StrCat("checkpoint '", meta_path,
                                                "' has a malformed tensor entry"));
      std::vector<int64_t> shape;
      for (const json& d : t["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 1)
          return absl::DataLossError(absl::StrCat("checkpoint '", meta_path, "': tensor '",
                                                  t["name"].get<std::string>(),
                                                  "' has a malformed shape"));
        shape.push_back(d.get<int64_t>());
      }
      saved[t["name"].get<std::string>()] = {t["role"].get<std::string>(), shape};
    }
    // The whole model's tensors (every pipeline stage's) against the
    // checkpoint's; this rank reads its own.
    std::set<std::string> model;
    for (const StateTensor& t : StateTensors()) {
      auto it = saved.find(t.name);
      if (it == saved.end())
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint '", dir, "' has no tensor '", t.name, "' (", RoleName(t.kind), " ",
            ShapeText(t.shape), "): it was written for another model"));
      if (it->second.first != RoleName(t.kind) || it->second.second != t.shape)
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint '", dir, "' holds '", t.name, "' as ", it->second.first, " ",
            ShapeText(it->second.second), "; this model's is ", RoleName(t.kind), " ",
            ShapeText(t.shape)));
      model.insert(t.name);
    }
    std::map<std::string, int> wanted;  // name -> argument
    for (int i = 0; i < info.num_args; ++i)
      if (info.args[i].kind <= STEPC_ARG_EXP_AVG_SQ) wanted[info.args[i].name] = i;
    for (const auto& [name, role_shape] : saved)
      if (!model.count(name))
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint '", dir, "' holds '", name, "' (", role_shape.first, " ",
            ShapeText(role_shape.second), "), which this model does not have"));
    if (ckpt.model_hash != ModelHash())
      return absl::DataLossError(absl::StrCat("checkpoint '", meta_path, "': its model hash ",
                                              ckpt.model_hash, " does not match its tensors"));

    // This rank's rows of each tensor, from whichever shards hold them; a
    // tp-split tensor is assembled whole, then this rank's part taken.
    std::vector<std::vector<char>> covered(info.num_args);
    std::vector<std::vector<float>> wholes(info.num_args);
    for (const auto& [name, i] : wanted) {
      loaded[i].assign(floats_[i].size(), 0.0f);
      if (TpSplit(i)) {
        wholes[i].assign(GlobalNumel(i), 0.0f);
        covered[i].assign(GlobalShapeOf(i)[0], 0);
      } else {
        covered[i].assign(ValidRows(i), 0);
      }
    }
    for (const json& shard : meta["shards"]) {
      if (!shard.is_string() || shard.get<std::string>().find('/') != std::string::npos)
        return absl::DataLossError(absl::StrCat("checkpoint '", meta_path,
                                                "' names a malformed shard file"));
      const std::string path = absl::StrCat(dir, "/", shard.get<std::string>());
      std::error_code ec;
      // Not a FIFO or device: opening one would block or read without end.
      int fd = fs::is_regular_file(path, ec) ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC) : -1;
      if (fd < 0)
        return absl::DataLossError(absl::StrCat("checkpoint '", dir, "' lacks its shard '",
                                                shard.get<std::string>(), "'"));
      absl::Status read = [&]() -> absl::Status {
        uint64_t data_start = 0;
        STEPC_ASSIGN_OR_RETURN(std::vector<Piece> pieces, ReadShardIndex(fd, path, &data_start));
        std::vector<float> buffer;
        for (const Piece& p : pieces) {
          auto it = wanted.find(p.name);
          if (it == wanted.end() && model.count(p.name)) continue;  // another stage's
          if (it == wanted.end())
            return absl::DataLossError(absl::StrCat("'", path, "' holds '", p.name,
                                                    "', which checkpoint.json does not list"));
          const int i = it->second;
          const stepc_arg_info& a = info.args[i];
          const bool whole = TpSplit(i);
          const int64_t global_rows = a.rank >= 1 ? GlobalShapeOf(i)[0] : 1;
          const int64_t row_numel = GlobalNumel(i) / global_rows;
          if (p.row_numel != row_numel || p.row_end > global_rows)
            return absl::DataLossError(absl::StrCat("'", path, "': rows of '", p.name,
                                                    "' do not fit its shape"));
          const int64_t first =
              Sharded(i) && !whole ? static_cast<int64_t>(ShardIndex()) * a.shape[0] : 0;
          const int64_t lo = std::max(first, p.row_begin);
          const int64_t hi = std::min(first + (whole ? global_rows : ValidRows(i)), p.row_end);
          if (lo >= hi) continue;  // rows another rank holds
          buffer.resize(static_cast<size_t>(p.bytes() / 4));
          STEPC_RETURN_IF_ERROR(ReadAt(fd, buffer.data(), static_cast<size_t>(p.bytes()),
                                       data_start + p.offset, path));
          if (Crc32(buffer.data(), static_cast<size_t>(p.bytes())) != p.crc)
            return absl::DataLossError(absl::StrCat(
                "checkpoint '", dir, "': tensor '", p.name, "' (rows ", p.row_begin, "..",
                p.row_end, " in '", shard.get<std::string>(),
                "') fails its checksum: the file is corrupt"));
          std::copy(buffer.begin() + (lo - p.row_begin) * row_numel,
                    buffer.begin() + (hi - p.row_begin) * row_numel,
                    (whole ? wholes[i] : loaded[i]).begin() + (lo - first) * row_numel);
          for (int64_t r = lo; r < hi; ++r) {
            if (covered[i][r - first])
              return absl::DataLossError(absl::StrCat("checkpoint '", dir, "' holds row ", r,
                                                      " of '", p.name, "' twice"));
            covered[i][r - first] = 1;
          }
        }
        return absl::OkStatus();
      }();
      ::close(fd);
      STEPC_RETURN_IF_ERROR(read);
    }
    for (const auto& [name, i] : wanted)
      for (size_t r = 0; r < covered[i].size(); ++r)
        if (!covered[i][r])
          return absl::DataLossError(absl::StrCat("checkpoint '", dir, "' lacks row ", r,
                                                  " of '", name, "' (a shard file is missing)"));
    for (const auto& [name, i] : wanted)
      if (TpSplit(i))
        ForEachRun(i, ShardIndex(), SplitIndex(i), [&, i = i](int64_t local, int64_t global, int64_t n) {
          std::copy(wholes[i].begin() + global, wholes[i].begin() + global + n,
                    loaded[i].begin() + local);
        });
    // Checksums prove the bytes are the ones written, not that they are
    // weights: a NaN parameter (or a negative second moment) written by a
    // diverged run would only show as a NaN loss or garbage samples later.
    for (const auto& [name, i] : wanted) {
      const bool second_moment = info.args[i].kind == STEPC_ARG_EXP_AVG_SQ;
      for (size_t k = 0; k < loaded[i].size(); ++k) {
        const float v = loaded[i][k];
        if (std::isfinite(v) && !(second_moment && v < 0)) continue;
        return absl::DataLossError(absl::StrCat(
            "checkpoint '", dir, "': tensor '", name, "' (", RoleName(info.args[i].kind),
            ") holds ", std::isfinite(v) ? "a negative second moment" : "a non-finite value",
            " (", v, ") at element ", k, " of this rank's part: the checkpoint is not a "
            "trainable state (was it written by a diverged run?)"));
      }
    }
    return ckpt;
  }();
  STEPC_RETURN_IF_ERROR(Agree(*communicator_, result.status(), "load the checkpoint"));
  for (int i = 0; i < info.num_args; ++i) {
    if (info.args[i].kind > STEPC_ARG_EXP_AVG_SQ) continue;
    floats_[i] = std::move(loaded[i]);
    args_[i] = device_ ? args_[i] : floats_[i].data();
    if (device_) {
      host_newer_[i] = true;
      device_newer_[i] = false;
    }
  }
  steps_ = result->step;
  initialized_ = true;
  return result;
}

}  // namespace stepc
