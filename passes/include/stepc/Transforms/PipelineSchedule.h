//===- PipelineSchedule.h - pipeline schedules, checked and timed -*- C++ -*-===//
//
// The schedule of a pipeline-parallel step as data: for each pipeline rank,
// the ordered list of the micro-batch passes it runs. A model's layer
// sequence is cut into S = P·v stages ("chunks"), chunk c on rank c mod P
// (v > 1: interleaved). A forward F(m, c) needs F(m, c-1)'s activation; a
// backward needs F(m, c) on its own rank and the input gradient of
// (m, c+1); with the backward split (zero-bubble), BI(m, c) is that input
// gradient and BW(m, c) the weight gradient after it, which nothing else
// waits for. Transfers are implied: a pass whose producer is on another
// rank receives from it (sends are buffered, receives block).
//
// The schedule is checked before it is used (every pass once, on its rank;
// every transfer received; no cycle of ranks waiting on one another) and
// timed by simulating it on per-stage costs, which gives each rank's idle
// (bubble) fraction and its peak stash of in-flight micro-batches.
//
// Plain C++: no MLIR, so a tool or a test can build schedules alone.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_PIPELINESCHEDULE_H
#define STEPC_COMPILER_PIPELINESCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace stepc::pipeline {

/// Bounds on what a schedule may name (beyond them: an error, not an
/// allocation the machine cannot make).
constexpr int kMaxRanks = 4096, kMaxMicroBatches = 1 << 16;

enum class PassKind { Forward, Backward, BackwardInput, BackwardWeight };

struct Pass {
  PassKind kind;
  int microBatch, chunk;
  bool operator==(const Pass &o) const {
    return kind == o.kind && microBatch == o.microBatch && chunk == o.chunk;
  }
};

struct Schedule {
  int ranks = 1, microBatches = 1, chunksPerRank = 1;
  /// "gpipe", "1f1b", "interleaved:V", "zero-bubble" or "given".
  std::string name;
  /// Per rank, its passes in order.
  std::vector<std::vector<Pass>> passes;
  int chunks() const { return ranks * chunksPerRank; }
  int rankOf(int chunk) const { return chunk % ranks; }
};

/// Seconds (or any unit) of each pass of one micro-batch, per chunk.
struct ChunkCost {
  double forward = 1, backwardInput = 1, backwardWeight = 1;
  double backward() const { return backwardInput + backwardWeight; }
};

/// Builds a schedule by name: "gpipe", "1f1b", "interleaved:V" (Megatron's
/// interleaved 1F1B: needs micro-batches a multiple of the ranks) or
/// "zero-bubble" (1F1B's order of forwards and input gradients, each
/// weight gradient run where its rank would otherwise wait, placed by
/// simulating `costs`). `costs` has one entry per chunk (ranks · V). An
/// unknown name or an impossible combination is an error in `error`.
bool buildSchedule(const std::string &name, int ranks, int microBatches,
                   const std::vector<ChunkCost> &costs, Schedule &out, std::string &error);

/// Reads a schedule written by hand, one rank per line: passes as F, B, BI
/// or BW followed by micro-batch.chunk ("F0.0 F1.0 B0.0 B1.0").
bool parseSchedule(const std::string &text, int microBatches, int chunksPerRank,
                   Schedule &out, std::string &error);

struct Timing {
  /// When the last pass ends; each rank's busy time and idle fraction of
  /// the makespan; the mean idle fraction (the bubble).
  double makespan = 0;
  std::vector<double> busy, idleFraction;
  double bubbleFraction = 0;
  /// Per rank, the most micro-batches whose forward ran and whose
  /// backward (input gradient) had not: the activations stashed.
  std::vector<int> peakStash;
  /// Point-to-point transfers per step (activations and gradients).
  int transfers = 0;
};

/// Checks `schedule` and simulates it on `costs` (one per chunk) with
/// buffered sends and blocking receives, each transfer taking `latency`.
/// On a malformed schedule or a deadlock returns false with `error` naming
/// what is missing or which ranks wait on which passes.
bool checkAndTime(const Schedule &schedule, const std::vector<ChunkCost> &costs, double latency,
                  Timing &timing, std::string &error);

/// The contiguous cut of `layerCosts` into `stages` stages whose largest
/// sum is least (exact); returns the first layer of each stage.
std::vector<int> balanceStages(const std::vector<double> &layerCosts, int stages);

/// One layer of the sequence a pipeline cuts: its time per micro-batch, the
/// bytes its rank holds for it whatever the schedule (parameters, their
/// gradients, optimizer state), and the activations each micro-batch in
/// flight keeps for its backward.
struct LayerCost {
  double seconds = 0, stateBytes = 0, stashBytes = 0;
};

/// The contiguous cut of `layers` into stashPerStage.size() stages whose
/// largest time is least among the cuts where every stage fits
/// `budgetBytes`: stage s holds its layers' state and stashPerStage[s]
/// micro-batches of their activations (the schedule's peak stash on its
/// rank). Exact (dynamic programming over cuts). A budget <= 0 bounds
/// nothing. Returns false, with what the least feasible stage would need in
/// `error`, when no cut fits.
bool balanceStagesUnderBudget(const std::vector<LayerCost> &layers,
                              const std::vector<int> &stashPerStage, double budgetBytes,
                              std::vector<int> &firsts, std::string &error);

/// The bytes stage [first, end) of `layers` holds with `stash` micro-batches
/// in flight.
double stageBytes(const std::vector<LayerCost> &layers, int first, int end, int stash);

std::string passName(const Pass &pass);

} // namespace stepc::pipeline

#endif // STEPC_COMPILER_PIPELINESCHEDULE_H
