// stepc-pipeline: builds a pipeline schedule, checks it (every pass once on
// its rank, every transfer received, no deadlock) and times it on per-chunk
// costs: the bubble (idle) fraction per rank and overall, the peak stash of
// in-flight micro-batches, the transfers. Or checks a schedule written by
// hand (--schedule-file), or cuts a layer sequence into balanced stages
// (a model's, from its stepc --report: by predicted time, under a per-rank
// memory budget that counts the schedule's stash).
//
//   stepc-pipeline --ranks P --micro-batches M [--schedule 1f1b]
//       [--costs F/BI/BW,...] [--latency S] [--schedule-file FILE]
//       [--balance-layers C0,C1,... | --report REPORT.json [--gflops G]
//        [--gbps B] [--memory-budget BYTES]] [--print]
//
// The compiler's pp:P will build its schedules with the same code
// (passes/lib/PipelineSchedule.cpp) from the model's per-stage costs.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "stepc/Transforms/PipelineSchedule.h"

ABSL_FLAG(int, ranks, 2, "pipeline ranks P");
ABSL_FLAG(int, micro_batches, 4, "micro-batches M per step");
ABSL_FLAG(std::string, schedule, "1f1b", "gpipe, 1f1b, interleaved:V or zero-bubble");
ABSL_FLAG(std::string, costs, "",
          "per chunk F/BI/BW (forward, input-gradient, weight-gradient time), comma "
          "separated; one entry applies to every chunk (default 1/1/1)");
ABSL_FLAG(double, latency, 0, "time of one point-to-point transfer");
ABSL_FLAG(std::string, schedule_file, "",
          "check this schedule instead: one rank per line, passes F|B|BI|BW<mb>.<chunk>");
ABSL_FLAG(int, chunks_per_rank, 1, "with --schedule-file: chunks per rank (interleaved)");
ABSL_FLAG(std::string, balance_layers, "",
          "cut these per-layer costs into P * V contiguous stages, least largest stage");
ABSL_FLAG(bool, print, false, "also print each rank's passes");
ABSL_FLAG(std::string, report, "",
          "balance the model of this stepc --report: its blocks in order, then what lies "
          "outside them (the embedding, the head, the loss) as the last layer; each "
          "layer's time is its FLOPs at --gflops plus its memory-bound bytes at --gbps");
ABSL_FLAG(double, gflops, 100, "with --report: the GEMM rate a stage's FLOPs run at");
ABSL_FLAG(double, gbps, 20, "with --report: the memory bandwidth its memory-bound kernels run at");
ABSL_FLAG(std::string, memory_budget, "",
          "with --report: bytes each rank may hold (parameters, gradients, optimizer state "
          "and the stashed micro-batches' activations), e.g. 12000000, 60MB or 1.5GB");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "stepc-pipeline: error: %s\n", message.c_str());
  return 1;
}

bool ParseCosts(const std::string& text, int chunks, std::vector<stepc::pipeline::ChunkCost>& out,
                std::string& error) {
  out.assign(chunks, {});
  if (text.empty()) return true;
  std::vector<std::string> items = absl::StrSplit(text, ',');
  if (items.size() != 1 && static_cast<int>(items.size()) != chunks) {
    error = "--costs has " + std::to_string(items.size()) + " entries for " +
            std::to_string(chunks) + " chunks";
    return false;
  }
  for (int c = 0; c < chunks; ++c) {
    std::vector<std::string> parts = absl::StrSplit(items[items.size() == 1 ? 0 : c], '/');
    double v[3];
    if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &v[0]) ||
        !absl::SimpleAtod(parts[1], &v[1]) || !absl::SimpleAtod(parts[2], &v[2]) ||
        !std::all_of(v, v + 3, [](double x) { return std::isfinite(x) && x >= 0; })) {
      error = "--costs entry '" + items[items.size() == 1 ? 0 : c] +
              "' is not F/BI/BW (three finite times >= 0)";
      return false;
    }
    out[c] = {v[0], v[1], v[2]};
  }
  return true;
}

// "12000000", "60MB", "1.5GB" (decimal units, as stepc --memory-budget).
bool ParseBytes(const std::string& text, double& bytes) {
  double scale = 1;
  std::string number = text;
  for (auto [suffix, factor] : {std::pair<const char*, double>{"KB", 1e3}, {"MB", 1e6},
                                {"GB", 1e9}, {"B", 1}}) {
    const size_t n = std::strlen(suffix);
    if (number.size() > n && number.compare(number.size() - n, n, suffix) == 0) {
      number.resize(number.size() - n);
      scale = factor;
      break;
    }
  }
  return absl::SimpleAtod(number, &bytes) && std::isfinite(bytes) && bytes > 0 &&
         (bytes *= scale, true);
}

double Number(const nlohmann::json& object, const std::string& key) {
  return object.is_object() && object.contains(key) && object[key].is_number()
             ? object[key].get<double>()
             : 0;
}

// The whole of `path`, a regular file: a directory or a FIFO (which would
// wait for a writer) is an error, as is a file that cannot be read.
bool ReadRegularFile(const std::string& flag, const std::string& path, std::string& text,
                     std::string& error) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    error = flag + " '" + path + "' " +
            (std::filesystem::exists(path, ec) ? "is not a regular file" : "does not exist");
    return false;
  }
  std::ifstream file(path, std::ios::binary);
  std::stringstream read;
  read << file.rdbuf();
  if (!file) {
    error = "cannot read " + flag + " '" + path + "'";
    return false;
  }
  text = read.str();
  return true;
}

// --report: the model's blocks (and what lies outside them, last) cut into
// P stages by predicted time under the memory budget, the schedule timed on
// the stages' costs.
int BalanceReport(int ranks, int m, int chunks_per_rank) {
  using namespace stepc::pipeline;
  const std::string path = absl::GetFlag(FLAGS_report);
  std::string text, error;
  if (!ReadRegularFile("--report", path, text, error)) return Fail(error);
  const nlohmann::json report = nlohmann::json::parse(text, nullptr, false);
  if (report.is_discarded() || !report.is_object() || !report.contains("executed_flops_by_block") ||
      !report["executed_flops_by_block"].is_object())
    return Fail("'" + path + "' is not a stepc --report with executed_flops_by_block");
  // (A report from a stepc before these keys would balance on zeros.)
  for (const char* key : {"memory_bound_bytes_by_block", "param_bytes_by_block",
                          "optimizer_state_bytes_by_block", "saved_activation_bytes_by_block"})
    if (!report.contains(key) || !report[key].is_object())
      return Fail("'" + path + "' has no " + key + " (a report of an older stepc: compile the " +
                  "model again with --report)");
  const double gflops = absl::GetFlag(FLAGS_gflops), gbps = absl::GetFlag(FLAGS_gbps);
  if (!std::isfinite(gflops) || gflops <= 0 || !std::isfinite(gbps) || gbps <= 0)
    return Fail("--gflops and --gbps must be finite and > 0");
  double budget = 0;
  if (!absl::GetFlag(FLAGS_memory_budget).empty() &&
      !ParseBytes(absl::GetFlag(FLAGS_memory_budget), budget))
    return Fail("--memory-budget: '" + absl::GetFlag(FLAGS_memory_budget) +
                "' is not a byte count (12000000, 60MB, 1.5GB)");
  if (budget > 0 && chunks_per_rank > 1)
    return Fail("--memory-budget with interleaved stages is not supported yet (a rank's "
                "chunks are not contiguous)");
  const nlohmann::json& flops = report["executed_flops_by_block"];
  struct Layer {
    std::string name, key;
    double flops, bytes;
    LayerCost cost;
  };
  std::vector<Layer> layers;
  auto add = [&](const std::string& key, const std::string& name) {
    Layer l{name, key, Number(flops, key), Number(report["memory_bound_bytes_by_block"], key), {}};
    // Per micro-batch: 1/M of the step's work and activations. Held
    // whatever the schedule: parameters, their (accumulated) gradients and
    // the optimizer's state.
    l.cost.seconds = (l.flops / m) / (gflops * 1e9) + (l.bytes / m) / (gbps * 1e9);
    l.cost.stateBytes = 2 * Number(report["param_bytes_by_block"], key) +
                        Number(report["optimizer_state_bytes_by_block"], key);
    l.cost.stashBytes = Number(report["saved_activation_bytes_by_block"], key) / m;
    layers.push_back(l);
  };
  for (int b = 0; flops.contains("block " + std::to_string(b)); ++b)
    add("block " + std::to_string(b), "block " + std::to_string(b));
  if (layers.empty()) return Fail("the report's model has no blocks to cut into stages");
  if (flops.contains("outside blocks")) add("outside blocks", "head and loss");
  const int stages = ranks * chunks_per_rank;
  if (stages > static_cast<int>(layers.size()))
    return Fail(std::to_string(layers.size()) + " layers cannot fill " + std::to_string(stages) +
                " stages");
  // Each rank's stash comes from the schedule's own simulation (equal
  // costs: gpipe and 1f1b stash the same whatever the costs).
  const std::string name = absl::GetFlag(FLAGS_schedule);
  Schedule equal;
  Timing equalTiming;
  if (!buildSchedule(name, ranks, m, std::vector<ChunkCost>(stages), equal, error) ||
      !checkAndTime(equal, std::vector<ChunkCost>(stages), 0, equalTiming, error))
    return Fail(error);
  std::vector<int> stash(stages);
  for (int c = 0; c < stages; ++c) stash[c] = equalTiming.peakStash[c % ranks];
  std::vector<LayerCost> costs;
  for (const Layer& l : layers) costs.push_back(l.cost);
  std::vector<int> firsts;
  if (!balanceStagesUnderBudget(costs, stash, budget, firsts, error)) return Fail(error);
  // The schedule timed on the stages' own costs: a forward a third of a
  // stage's work, each half of the backward (input and weight gradients) a
  // third, as the FLOPs of a matmul's backward are twice its forward's.
  nlohmann::json cut = nlohmann::json::array();
  std::vector<ChunkCost> stageCosts;
  double largest = 0, total = 0, peak = 0;
  for (int st = 0; st < stages; ++st) {
    const int end = st + 1 < stages ? firsts[st + 1] : static_cast<int>(layers.size());
    double seconds = 0, stageFlops = 0, stageBytesMoved = 0;
    for (int i = firsts[st]; i < end; ++i) {
      seconds += layers[i].cost.seconds;
      stageFlops += layers[i].flops;
      stageBytesMoved += layers[i].bytes;
    }
    const double held = stageBytes(costs, firsts[st], end, 0);
    const double stashed = stageBytes(costs, firsts[st], end, stash[st]) - held;
    largest = std::max(largest, seconds);
    total += seconds;
    peak = std::max(peak, held + stashed);
    stageCosts.push_back({seconds / 3, seconds / 3, seconds / 3});
    cut.push_back({{"layers", {firsts[st], end - 1}},
                   {"first", layers[firsts[st]].name},
                   {"last", layers[end - 1].name},
                   {"flops_per_step", stageFlops},
                   {"memory_bound_bytes_per_step", stageBytesMoved},
                   {"seconds_per_micro_batch", seconds},
                   {"state_bytes", held},
                   {"stashed_micro_batches", stash[st]},
                   {"stash_bytes", stashed},
                   {"peak_bytes", held + stashed}});
  }
  Schedule schedule;
  Timing timing;
  if (!buildSchedule(name, ranks, m, stageCosts, schedule, error) ||
      !checkAndTime(schedule, stageCosts, 0, timing, error))
    return Fail(error);
  nlohmann::json out = {{"stages", cut},
                        {"imbalance", total > 0 ? largest / (total / stages) : 1.0},
                        {"peak_bytes", peak},
                        {"schedule", schedule.name},
                        {"micro_batches", m},
                        {"predicted_step_seconds", timing.makespan},
                        {"bubble_fraction", timing.bubbleFraction},
                        {"idle_fraction_by_rank", timing.idleFraction},
                        {"rates", {{"gflops", gflops}, {"gbps", gbps}}}};
  if (budget > 0) out["memory_budget_bytes"] = budget;
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("builds, checks and times a pipeline schedule");
  // Flags are spelled with dashes (--micro-batches); Abseil names them with
  // underscores.
  std::vector<std::string> spelled(argv, argv + argc);
  std::vector<char*> args;
  for (std::string& arg : spelled) {
    if (arg.rfind("--", 0) == 0)
      for (size_t i = 2; i < arg.size() && arg[i] != '='; ++i)
        if (arg[i] == '-') arg[i] = '_';
    args.push_back(arg.data());
  }
  if (absl::ParseCommandLine(static_cast<int>(args.size()), args.data()).size() != 1)
    return Fail("takes flags only (see --help)");
  using namespace stepc::pipeline;
  const int ranks = absl::GetFlag(FLAGS_ranks), m = absl::GetFlag(FLAGS_micro_batches);
  const int chunks_flag = absl::GetFlag(FLAGS_chunks_per_rank);
  const double latency = absl::GetFlag(FLAGS_latency);
  if (ranks < 1 || ranks > kMaxRanks)
    return Fail("--ranks must be in [1, " + std::to_string(kMaxRanks) + "]");
  if (m < 1 || m > kMaxMicroBatches)
    return Fail("--micro-batches must be in [1, " + std::to_string(kMaxMicroBatches) + "]");
  if (chunks_flag < 1 || chunks_flag > 64) return Fail("--chunks-per-rank must be in [1, 64]");
  if (!std::isfinite(latency) || latency < 0) return Fail("--latency must be finite and >= 0");
  nlohmann::json out;
  std::string error;
  if (!absl::GetFlag(FLAGS_report).empty())
    return BalanceReport(ranks, m, chunks_flag);
  if (!absl::GetFlag(FLAGS_balance_layers).empty()) {
    std::vector<double> layers;
    for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_balance_layers), ',')) {
      double c;
      if (!absl::SimpleAtod(item, &c) || !std::isfinite(c) || c < 0)
        return Fail("--balance-layers: '" + std::string(item) + "' is not a finite cost >= 0");
      layers.push_back(c);
    }
    const int stages = ranks * chunks_flag;
    if (stages > static_cast<int>(layers.size()))
      return Fail(std::to_string(layers.size()) + " layers cannot fill " +
                  std::to_string(stages) + " stages");
    std::vector<int> firsts = balanceStages(layers, stages);
    nlohmann::json cut = nlohmann::json::array();
    double largest = 0, total = 0;
    for (size_t st = 0; st < firsts.size(); ++st) {
      const int end = st + 1 < firsts.size() ? firsts[st + 1] : static_cast<int>(layers.size());
      double sum = 0;
      for (int i = firsts[st]; i < end; ++i) sum += layers[i];
      largest = std::max(largest, sum);
      total += sum;
      cut.push_back({{"layers", {firsts[st], end - 1}},
                     {"first", "layer " + std::to_string(firsts[st])},
                     {"last", "layer " + std::to_string(end - 1)},
                     {"cost", sum}});
    }
    out["stages"] = cut;
    out["imbalance"] = total > 0 ? largest / (total / firsts.size()) : 1.0;
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  Schedule schedule;
  if (!absl::GetFlag(FLAGS_schedule_file).empty()) {
    std::string text;
    if (!ReadRegularFile("--schedule-file", absl::GetFlag(FLAGS_schedule_file), text, error))
      return Fail(error);
    if (!parseSchedule(text, m, chunks_flag, schedule, error))
      return Fail(error);
  }
  std::string name = absl::GetFlag(FLAGS_schedule);
  int chunks_per_rank = 1;
  // (An out-of-range V is buildSchedule's error, not a huge cost table.)
  if (name.rfind("interleaved:", 0) == 0)
    chunks_per_rank = std::clamp(std::atoi(name.c_str() + 12), 1, 64);
  const int chunks = schedule.passes.empty() ? ranks * std::max(1, chunks_per_rank)
                                             : schedule.chunks();
  std::vector<ChunkCost> costs;
  if (!ParseCosts(absl::GetFlag(FLAGS_costs), chunks, costs, error)) return Fail(error);
  if (schedule.passes.empty() && !buildSchedule(name, ranks, m, costs, schedule, error))
    return Fail(error);
  Timing timing;
  if (!checkAndTime(schedule, costs, latency, timing, error))
    return Fail(error);
  out = {{"schedule", schedule.name},
         {"ranks", schedule.ranks},
         {"micro_batches", schedule.microBatches},
         {"chunks_per_rank", schedule.chunksPerRank},
         {"checked", "every pass once on its rank, every transfer received, no deadlock"},
         {"makespan", timing.makespan},
         {"bubble_fraction", timing.bubbleFraction},
         {"idle_fraction_by_rank", timing.idleFraction},
         {"peak_stash_by_rank", timing.peakStash},
         {"transfers", timing.transfers}};
  if (absl::GetFlag(FLAGS_print)) {
    nlohmann::json passes = nlohmann::json::array();
    for (const auto& rank : schedule.passes) {
      std::string line;
      for (const Pass& p : rank) line += (line.empty() ? "" : " ") + passName(p);
      passes.push_back(line);
    }
    out["passes"] = passes;
  }
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
