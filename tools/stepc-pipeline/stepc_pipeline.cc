// stepc-pipeline: builds a pipeline schedule, checks it (every pass once on
// its rank, every transfer received, no deadlock) and times it on per-chunk
// costs: the bubble (idle) fraction per rank and overall, the peak stash of
// in-flight micro-batches, the transfers. Or checks a schedule written by
// hand (--schedule-file), or cuts a layer sequence into balanced stages.
//
//   stepc-pipeline --ranks P --micro-batches M [--schedule 1f1b]
//       [--costs F/BI/BW,...] [--latency S] [--schedule-file FILE]
//       [--balance-layers C0,C1,... | --report REPORT.json] [--print]
//
// The compiler's pp:P will build its schedules with the same code
// (compiler/lib/PipelineSchedule.cpp) from the model's per-stage costs.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
#include "stepc/Compiler/PipelineSchedule.h"

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
          "balance the model of this stepc --report: its blocks' executed FLOPs in order, "
          "then what lies outside them (the head, the loss) as the last layer");

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
  if (!absl::GetFlag(FLAGS_balance_layers).empty() || !absl::GetFlag(FLAGS_report).empty()) {
    std::vector<double> layers;
    std::vector<std::string> names;
    if (!absl::GetFlag(FLAGS_report).empty()) {
      std::ifstream file(absl::GetFlag(FLAGS_report));
      const nlohmann::json report = nlohmann::json::parse(file, nullptr, false);
      if (!file || report.is_discarded() || !report.contains("executed_flops_by_block") ||
          !report["executed_flops_by_block"].is_object())
        return Fail("'" + absl::GetFlag(FLAGS_report) +
                    "' is not a stepc --report with executed_flops_by_block");
      const nlohmann::json& by_block = report["executed_flops_by_block"];
      for (int b = 0;; ++b) {
        const std::string name = "block " + std::to_string(b);
        if (!by_block.contains(name) || !by_block[name].is_number()) break;
        layers.push_back(by_block[name].get<double>());
        names.push_back(name);
      }
      if (layers.empty()) return Fail("the report's model has no blocks to cut into stages");
      if (by_block.contains("outside blocks") && by_block["outside blocks"].is_number()) {
        layers.push_back(by_block["outside blocks"].get<double>());
        names.push_back("head and loss");
      }
    } else {
      for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_balance_layers), ',')) {
        double c;
        if (!absl::SimpleAtod(item, &c) || !std::isfinite(c) || c < 0)
          return Fail("--balance-layers: '" + std::string(item) + "' is not a finite cost >= 0");
        layers.push_back(c);
        names.push_back("layer " + std::to_string(layers.size() - 1));
      }
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
                     {"first", names[firsts[st]]},
                     {"last", names[end - 1]},
                     {"cost", sum}});
    }
    out["stages"] = cut;
    out["imbalance"] = total > 0 ? largest / (total / firsts.size()) : 1.0;
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  Schedule schedule;
  if (!absl::GetFlag(FLAGS_schedule_file).empty()) {
    std::ifstream file(absl::GetFlag(FLAGS_schedule_file));
    if (!file) return Fail("cannot read '" + absl::GetFlag(FLAGS_schedule_file) + "'");
    std::stringstream text;
    text << file.rdbuf();
    if (!parseSchedule(text.str(), m, chunks_flag, schedule, error))
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
