#include "runtime/train/workspace.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/status_macros.h"
#include "runtime/train/communication.h"
#include "runtime/train/prediction.h"
#include "runtime/train/resident_memory.h"

namespace stepc {
namespace {

// The most floats a probe allocates for one operand (256 MiB), as for the
// GEMM shapes' rate probes.
constexpr int64_t kMaxProbeFloats = int64_t{1} << 26;

// A probe's operand: pages of its own, written (resident) and returned to
// the system when freed, so its bytes are known exactly and none of them
// stays behind in the heap to be taken for a library's.
class ScratchFloats {
 public:
  explicit ScratchFloats(int64_t floats) {
    const int64_t page = sysconf(_SC_PAGESIZE);
    bytes_ = std::max<int64_t>(page, (floats * 4 + page - 1) / page * page);
    void* map = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
      bytes_ = 0;
      return;
    }
    data_ = static_cast<float*>(map);
    std::fill(data_, data_ + bytes_ / 4, 0.5f);
  }
  ~ScratchFloats() {
    if (data_) munmap(data_, bytes_);
  }
  ScratchFloats(const ScratchFloats&) = delete;
  ScratchFloats& operator=(const ScratchFloats&) = delete;
  float* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  float* data_ = nullptr;
  int64_t bytes_ = 0;
};

// The largest count of each (kind, axes) of the step's collectives, in the
// order each first appears (the same on every rank).
std::vector<stepc_collective_info> LargestCollectives(const stepc_module_info& info) {
  std::vector<stepc_collective_info> largest;
  for (int i = 0; i < info.num_collectives; ++i) {
    const stepc_collective_info& c = info.collectives[i];
    auto same = std::find_if(largest.begin(), largest.end(), [&](const stepc_collective_info& l) {
      return l.kind == c.kind && l.axes == c.axes;
    });
    if (same == largest.end())
      largest.push_back(c);
    else
      same->count = std::max(same->count, c.count);
  }
  return largest;
}

// A collective's probe buffers (send, and recv unless in place), sized as
// the ABI's count says.
struct CollectiveBuffers {
  CollectiveBuffers(const stepc_collective_info& c, int64_t ranks)
      : send(c.kind == STEPC_REDUCE_SCATTER || c.kind == STEPC_ALL_TO_ALL ? c.count * ranks
                                                                           : c.count),
        recv(c.kind == STEPC_ALL_REDUCE                                     ? 0
             : c.kind == STEPC_ALL_GATHER || c.kind == STEPC_ALL_TO_ALL ? c.count * ranks
                                                                          : c.count) {}
  bool ok() const { return send.data() && recv.data(); }
  int64_t bytes() const { return send.bytes() + recv.bytes(); }
  ScratchFloats send, recv;
};

// The report's collectives_in_flight_peak as the ABI's table entries; empty
// where the report has none (or one this runtime does not read).
std::vector<stepc_collective_info> InFlightPeak(const nlohmann::json& report) {
  std::vector<stepc_collective_info> calls;
  if (!report.is_object() || !report.contains("collectives_in_flight_peak") ||
      !report["collectives_in_flight_peak"].is_array())
    return calls;
  const std::map<std::string, int32_t> kinds = {{"all_reduce", STEPC_ALL_REDUCE},
                                                {"all_gather", STEPC_ALL_GATHER},
                                                {"reduce_scatter", STEPC_REDUCE_SCATTER},
                                                {"all_to_all", STEPC_ALL_TO_ALL}};
  for (const nlohmann::json& c : report["collectives_in_flight_peak"]) {
    if (!c.is_object() || !c.contains("kind") || !c["kind"].is_string() ||
        !kinds.count(c["kind"].get<std::string>()) || !c.contains("axes") ||
        !c["axes"].is_string() || !c.contains("count") || !c["count"].is_number_integer())
      return {};
    const int mask = AxesMask(c["axes"].get<std::string>());
    const int64_t count = c["count"].get<int64_t>();
    // (A count past what a probe allocates is no set to replay either.)
    if (mask == 0 || count < 1 || count > kMaxProbeFloats) return {};
    calls.push_back({kinds.at(c["kind"].get<std::string>()), mask, count});
  }
  return calls;
}

// Whether `mine` holds on every rank: a rank that could not map its probe
// buffers makes every rank skip that probe (instead of leaving the others
// waiting in a collective it never joins).
absl::StatusOr<bool> OnEveryRank(Communicator& comm, bool mine) {
  STEPC_ASSIGN_OR_RETURN(const std::vector<uint64_t> all, comm.AllGather(uint64_t{mine}));
  return std::all_of(all.begin(), all.end(), [](uint64_t v) { return v != 0; });
}

absl::StatusOr<int> StartCollective(Communicator& comm, const stepc_collective_info& c,
                                    float* send, float* recv) {
  switch (c.kind) {
    case STEPC_ALL_REDUCE: return comm.StartAllReduceSum(c.axes, send, c.count);
    case STEPC_ALL_GATHER: return comm.StartAllGather(c.axes, send, recv, c.count);
    case STEPC_REDUCE_SCATTER: return comm.StartReduceScatterSum(c.axes, send, recv, c.count);
    case STEPC_ALL_TO_ALL: return comm.StartAllToAll(c.axes, send, recv, c.count);
  }
  return absl::InternalError("a collective of an unknown kind in the module's table");
}

// A grouped product of the report's grouped_calls_by_shape ("callee m k n
// experts blocks transpose_b") run once through `measure`; nullopt where the
// key or the kernel is not one to run.
template <typename Measure>
absl::StatusOr<std::optional<int64_t>> ProbeGrouped(const Module& module, const std::string& key,
                                                    Measure& measure) {
  using Grouped = void (*)(const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int, float*);
  std::vector<std::string> parts = absl::StrSplit(key, ' ');
  int64_t d[6];
  if (parts.size() != 7) return std::nullopt;
  for (int i = 0; i < 6; ++i)
    if (!absl::SimpleAtoi(parts[i + 1], &d[i]) || d[i] < 0) return std::nullopt;
  // (Plain names: a lambda may not capture structured bindings in C++17.)
  const int64_t m = d[0], k = d[1], n = d[2], experts = d[3], blocks = d[4], transpose_b = d[5];
  auto kernel = reinterpret_cast<Grouped>(module.Symbol(("stepc_cpu_" + parts[0]).c_str()));
  if (!kernel || experts < 1 || blocks < 1 || m % blocks || m * std::max(k, n) > kMaxProbeFloats ||
      experts * k * n > kMaxProbeFloats)
    return std::nullopt;
  const bool weight_grad = parts[0] == "grouped_matmul_weight_grad";
  ScratchFloats lhs(m * k), rhs(weight_grad ? m * n : experts * k * n),
      out(weight_grad ? experts * k * n : m * n);
  if (!lhs.data() || !rhs.data() || !out.data()) return std::nullopt;
  std::vector<int32_t> counts(blocks * experts);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t e = 0; e < experts; ++e)
      counts[b * experts + e] = static_cast<int32_t>(m / blocks / experts);
  STEPC_ASSIGN_OR_RETURN(const int64_t bytes,
                         measure(lhs.bytes() + rhs.bytes() + out.bytes(), [&]() -> absl::Status {
                           kernel(lhs.data(), rhs.data(), counts.data(), m, k, n, experts, blocks,
                                  static_cast<int>(transpose_b), out.data());
                           return absl::OkStatus();
                         }));
  return std::optional<int64_t>(bytes);
}

// The libraries' data above a base while a probe runs, less the operands
// (resident before the reset, so the peak counts them too).
class ResidentProbe {
 public:
  ResidentProbe() : base_((ResetResidentPeak(), ReadResidentMemory())) {}

  template <typename Run>
  absl::StatusOr<int64_t> operator()(int64_t operand_bytes, Run&& run) const {
    ResetResidentPeak();
    STEPC_RETURN_IF_ERROR(run());
    return std::max<int64_t>(0, DataPeakAbove(base_, ReadResidentMemory()) - operand_bytes);
  }

 private:
  ResidentMemory base_;
};

// Each GEMM shape once through the step's own kernel: f32, or bf16 (its
// operands half the bytes; f32 C, the path whose K split keeps per-thread
// partial sums, and oneDNN's scratchpad either way); then each
// mixture-of-experts product, its rows split evenly between the experts:
// the primitive oneDNN makes per weight shape (and its scratchpad) stays
// for the run.
absl::Status ProbeGemms(const Module& module, const nlohmann::json& report,
                        const ResidentProbe& measure, LibraryWorkspace& w) {
  const stepc_module_info& info = module.info();
  const bool bf16 = std::strcmp(info.precision, "bf16") == 0;
  auto matmul = reinterpret_cast<CpuMatmul>(module.Symbol("stepc_cpu_matmul"));
  auto matmul_bf16 = reinterpret_cast<CpuMatmulBf16>(module.Symbol("stepc_cpu_matmul_bf16"));
  const bool probe_gemms = bf16 ? matmul_bf16 != nullptr
                                : matmul && std::strcmp(info.precision, "fp32") == 0;
  if (!probe_gemms || !report.is_object()) return absl::OkStatus();
  auto floats_of = [bf16](int64_t elements) { return bf16 ? (elements + 1) / 2 : elements; };
  if (report.contains("gemm_calls_by_shape") && report["gemm_calls_by_shape"].is_object())
    for (const auto& item : report["gemm_calls_by_shape"].items()) {
      const std::optional<GemmShape> shape = ParseGemmShape(item.key());
      if (!shape) continue;
      ScratchFloats a(floats_of(shape->a_floats())), b(floats_of(shape->b_floats())),
          c(shape->c_floats());
      if (!a.data() || !b.data() || !c.data()) continue;
      STEPC_ASSIGN_OR_RETURN(const int64_t bytes,
                             measure(a.bytes() + b.bytes() + c.bytes(), [&]() -> absl::Status {
                               if (bf16)
                                 shape->Run(matmul_bf16,
                                            reinterpret_cast<const uint16_t*>(a.data()),
                                            reinterpret_cast<const uint16_t*>(b.data()), c.data());
                               else
                                 shape->Run(matmul, a.data(), b.data(), c.data());
                               return absl::OkStatus();
                             }));
      w.gemm_bytes = std::max(w.gemm_bytes, bytes);
      ++w.gemm_shapes;
    }
  if (report.contains("grouped_calls_by_shape") && report["grouped_calls_by_shape"].is_object())
    for (const auto& item : report["grouped_calls_by_shape"].items()) {
      STEPC_ASSIGN_OR_RETURN(std::optional<int64_t> bytes,
                             ProbeGrouped(module, item.key(), measure));
      if (!bytes) continue;
      w.gemm_bytes = std::max(w.gemm_bytes, *bytes);
      ++w.gemm_shapes;
    }
  return absl::OkStatus();
}

// Each of the step's largest collectives alone: the data above the base
// (GEMM libraries' included); how many kinds were probed into `kinds`.
absl::StatusOr<int64_t> ProbeEachCollective(const stepc_module_info& info, Communicator& comm,
                                            const ResidentProbe& measure, int& kinds) {
  int64_t most = 0;
  for (const stepc_collective_info& c : LargestCollectives(info)) {
    const int64_t ranks = comm.Ranks(c.axes);
    // Every rank skips the same ones (the tables are equal): no probe
    // past 2^26 floats an operand, as for the GEMMs.
    if (ranks < 2 || c.count < 1 || c.count > kMaxProbeFloats / ranks) continue;
    CollectiveBuffers buffers(c, ranks);
    STEPC_ASSIGN_OR_RETURN(const bool mapped, OnEveryRank(comm, buffers.ok()));
    if (!mapped) continue;
    STEPC_ASSIGN_OR_RETURN(const int64_t bytes, measure(buffers.bytes(), [&]() -> absl::Status {
                             STEPC_ASSIGN_OR_RETURN(
                                 const int request,
                                 StartCollective(comm, c, buffers.send.data(),
                                                 buffers.recv.data()));
                             return comm.Wait(request);
                           }));
    most = std::max(most, bytes);
    ++kinds;
  }
  return most;
}

// The collectives the step has in flight together at their peak, all
// started before any is waited for, as the step does: the data above the
// base, or nullopt when not probed; how many into `count`.
absl::StatusOr<std::optional<int64_t>> ProbeInFlight(const nlohmann::json& report,
                                                     Communicator& comm,
                                                     const ResidentProbe& measure, int& count) {
  const std::vector<stepc_collective_info> together = InFlightPeak(report);
  int64_t together_floats = 0;
  for (const stepc_collective_info& c : together)
    together_floats += 2 * c.count * std::max(1, comm.Ranks(c.axes));
  if (together.empty() || together_floats > kMaxProbeFloats) return std::optional<int64_t>();
  std::vector<std::unique_ptr<CollectiveBuffers>> buffers;
  int64_t operand_bytes = 0;
  bool ok = true;
  for (const stepc_collective_info& c : together) {
    buffers.push_back(std::make_unique<CollectiveBuffers>(c, comm.Ranks(c.axes)));
    ok &= buffers.back()->ok();
    operand_bytes += buffers.back()->bytes();
  }
  auto start_all_then_wait = [&]() -> absl::Status {
    std::vector<int> requests;
    for (size_t i = 0; i < together.size(); ++i) {
      STEPC_ASSIGN_OR_RETURN(const int request,
                             StartCollective(comm, together[i], buffers[i]->send.data(),
                                             buffers[i]->recv.data()));
      requests.push_back(request);
    }
    for (int request : requests) STEPC_RETURN_IF_ERROR(comm.Wait(request));
    return absl::OkStatus();
  };
  STEPC_ASSIGN_OR_RETURN(const bool mapped, OnEveryRank(comm, ok));
  if (!mapped) return std::optional<int64_t>();
  STEPC_ASSIGN_OR_RETURN(const int64_t bytes, measure(operand_bytes, start_all_then_wait));
  count = static_cast<int>(together.size());
  return std::optional<int64_t>(bytes);
}

}  // namespace

absl::StatusOr<LibraryWorkspace> ProbeLibraryWorkspace(const Module& module,
                                                       Communicator& comm) {
  LibraryWorkspace w;
  const stepc_module_info& info = module.info();
  if (module.is_cuda()) return w;
#ifdef __GLIBC__
  // Freed heap (what reading --init-npy files leaves) goes back to the
  // system first: probes that reused it would see less growth than the
  // step, whose buffers it does not fit, will (1.11x under the measured peak
  // on gpt-small's MoE with --init-npy; 1.03x after).
  malloc_trim(0);
#endif
  const ResidentProbe measure;
  const nlohmann::json report =
      info.report_json ? nlohmann::json::parse(info.report_json, nullptr, false) : nlohmann::json();
  STEPC_RETURN_IF_ERROR(ProbeGemms(module, report, measure, w));
  // What a GEMM library touched stays: the collectives' figure includes
  // it, and only their excess is theirs. A pipeline's stages have tables
  // of their own: no probe every rank would run alike.
  int64_t with_collectives = w.gemm_bytes;
  if (comm.size() > 1 && info.pipeline_stages <= 1) {
    STEPC_ASSIGN_OR_RETURN(const int64_t each,
                           ProbeEachCollective(info, comm, measure, w.collective_kinds));
    with_collectives = std::max(with_collectives, each);
    STEPC_ASSIGN_OR_RETURN(const std::optional<int64_t> together,
                           ProbeInFlight(report, comm, measure, w.collectives_in_flight));
    if (together) with_collectives = std::max(with_collectives, *together);
  }
  w.collective_bytes = with_collectives - w.gemm_bytes;
  w.known = true;
  return w;
}

}  // namespace stepc
