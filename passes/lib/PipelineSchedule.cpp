//===- PipelineSchedule.cpp - pipeline schedules, checked and timed -------===//

#include "stepc/Transforms/PipelineSchedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

namespace stepc::pipeline {
namespace {

// What a pass's result is for its dependents: a forward's activation, an
// input gradient (B or BI), or a weight gradient.
enum class Result { Activation, InputGradient, WeightGradient };

Result resultOf(PassKind kind) {
  switch (kind) {
  case PassKind::Forward:
    return Result::Activation;
  case PassKind::Backward:
  case PassKind::BackwardInput:
    return Result::InputGradient;
  case PassKind::BackwardWeight:
    return Result::WeightGradient;
  }
  return Result::Activation;
}

double costOf(const Pass &p, const std::vector<ChunkCost> &costs) {
  const ChunkCost &c = costs[p.chunk];
  switch (p.kind) {
  case PassKind::Forward:
    return c.forward;
  case PassKind::Backward:
    return c.backward();
  case PassKind::BackwardInput:
    return c.backwardInput;
  case PassKind::BackwardWeight:
    return c.backwardWeight;
  }
  return 0;
}

using Key = std::tuple<Result, int, int>; // result, micro-batch, chunk

// The results `p` waits for, each with whether it comes from another rank.
std::vector<std::pair<Key, bool>> dependencies(const Pass &p, const Schedule &s) {
  std::vector<std::pair<Key, bool>> deps;
  const int last = s.chunks() - 1;
  auto from = [&](Result r, int chunk) {
    deps.push_back({Key{r, p.microBatch, chunk}, s.rankOf(chunk) != s.rankOf(p.chunk)});
  };
  switch (p.kind) {
  case PassKind::Forward:
    if (p.chunk > 0)
      from(Result::Activation, p.chunk - 1);
    break;
  case PassKind::Backward:
  case PassKind::BackwardInput:
    from(Result::Activation, p.chunk);
    if (p.chunk < last)
      from(Result::InputGradient, p.chunk + 1);
    break;
  case PassKind::BackwardWeight:
    from(Result::InputGradient, p.chunk);
    break;
  }
  return deps;
}

std::string keyName(const Key &k) {
  const char *kind = std::get<0>(k) == Result::Activation      ? "the activation"
                     : std::get<0>(k) == Result::InputGradient ? "the input gradient"
                                                               : "the weight gradient";
  return std::string(kind) + " of micro-batch " + std::to_string(std::get<1>(k)) + ", chunk " +
         std::to_string(std::get<2>(k));
}

// Whether every input of `p` is there in `done`; if so, `start` is raised
// to the time the last arrives (a transfer `latency` after its producer).
bool inputsReady(const Pass &p, const Schedule &s, const std::map<Key, double> &done,
                 double latency, double &start) {
  for (auto &[key, remote] : dependencies(p, s)) {
    auto it = done.find(key);
    if (it == done.end())
      return false;
    start = std::max(start, it->second + (remote ? latency : 0));
  }
  return true;
}

// Whether a micro-batch's stash on its rank ends with this pass.
bool releasesStash(const Pass &p, bool split) {
  return split ? p.kind == PassKind::BackwardWeight : p.kind == PassKind::Backward;
}

// 1F1B's order on one rank of `chunksPerRank` chunks (Megatron's
// interleaved schedule when > 1): forward k and backward k of the rank's
// M·v passes are F(mb(k), chunk(k)) and B(mb(k), chunk of the k-th
// backward), warm-up forwards first, then one forward and one backward in
// turn, then the remaining backwards.
std::vector<Pass> oneFOneB(int rank, int ranks, int m, int v, PassKind backward) {
  const int total = m * v;
  auto mb = [&](int k) { return (k / (ranks * v)) * ranks + k % ranks; };
  auto forwardChunk = [&](int k) { return ((k / ranks) % v) * ranks + rank; };
  auto backwardChunk = [&](int k) { return (v - 1 - (k / ranks) % v) * ranks + rank; };
  int warmup = v == 1 ? ranks - rank - 1 : (ranks - rank - 1) * 2 + (v - 1) * ranks;
  warmup = std::min(warmup, total);
  std::vector<Pass> out;
  for (int k = 0; k < warmup; ++k)
    out.push_back({PassKind::Forward, mb(k), forwardChunk(k)});
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back({PassKind::Forward, mb(warmup + i), forwardChunk(warmup + i)});
    out.push_back({backward, mb(i), backwardChunk(i)});
  }
  for (int k = total - warmup; k < total; ++k)
    out.push_back({backward, mb(k), backwardChunk(k)});
  return out;
}

// Zero-bubble (the ZB-H1 shape): each rank keeps 1F1B's order of forwards
// and input gradients; every weight gradient waits in a queue and runs
// where the rank would otherwise idle (its next pass's input not there
// yet), or before a forward once as many wait as 1F1B keeps micro-batches
// in flight on the rank (P - r, so the stash stays 1F1B's), the rest at the
// end. Placed by simulating `costs`: ranks advance in order of the time
// they are free.
bool zeroBubble(Schedule &s, const std::vector<ChunkCost> &costs, std::string &error) {
  std::vector<std::vector<Pass>> main(s.ranks);
  for (int r = 0; r < s.ranks; ++r)
    main[r] = oneFOneB(r, s.ranks, s.microBatches, 1, PassKind::BackwardInput);
  std::map<Key, double> done;
  std::vector<size_t> next(s.ranks, 0);
  std::vector<double> free(s.ranks, 0);
  std::vector<std::vector<Pass>> pending(s.ranks);
  s.passes.assign(s.ranks, {});
  auto run = [&](int r, const Pass &p, double start) {
    free[r] = start + costOf(p, costs);
    done[Key{resultOf(p.kind), p.microBatch, p.chunk}] = free[r];
    s.passes[r].push_back(p);
    if (p.kind == PassKind::BackwardInput)
      pending[r].push_back({PassKind::BackwardWeight, p.microBatch, p.chunk});
  };
  for (;;) {
    std::vector<int> order(s.ranks);
    for (int r = 0; r < s.ranks; ++r)
      order[r] = r;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return free[a] < free[b]; });
    bool progressed = false, finished = true;
    for (int r : order) {
      if (next[r] == main[r].size()) {
        if (!pending[r].empty()) {
          finished = false;
          Pass w = pending[r].front();
          pending[r].erase(pending[r].begin());
          run(r, w, free[r]);
          progressed = true;
          break;
        }
        continue;
      }
      finished = false;
      const Pass &p = main[r][next[r]];
      double ready = free[r];
      const bool known = inputsReady(p, s, done, /*latency=*/0, ready);
      // Idle otherwise, or (before a forward) as many weight gradients
      // pending as 1F1B has micro-batches in flight on this rank: the stash
      // stays 1F1B's.
      const bool full = p.kind == PassKind::Forward &&
                        static_cast<int>(pending[r].size()) >= s.ranks - r;
      if ((!known || ready > free[r] || full) && !pending[r].empty()) {
        Pass w = pending[r].front();
        pending[r].erase(pending[r].begin());
        run(r, w, free[r]);
        progressed = true;
        break;
      }
      if (known) {
        run(r, p, ready);
        ++next[r];
        progressed = true;
        break;
      }
    }
    if (finished)
      return true;
    if (!progressed) {
      error = "zero-bubble: no rank can run its next pass (a bug in the schedule builder)";
      return false;
    }
  }
}

} // namespace

std::string passName(const Pass &p) {
  const char *kind = p.kind == PassKind::Forward          ? "F"
                     : p.kind == PassKind::Backward       ? "B"
                     : p.kind == PassKind::BackwardInput  ? "BI"
                                                          : "BW";
  return std::string(kind) + std::to_string(p.microBatch) + "." + std::to_string(p.chunk);
}

bool buildSchedule(const std::string &name, int ranks, int microBatches,
                   const std::vector<ChunkCost> &costs, Schedule &out, std::string &error) {
  if (ranks < 1 || ranks > kMaxRanks || microBatches < 1 || microBatches > kMaxMicroBatches) {
    error = "a pipeline needs 1 to " + std::to_string(kMaxRanks) + " ranks and 1 to " +
            std::to_string(kMaxMicroBatches) + " micro-batches";
    return false;
  }
  Schedule s;
  s.ranks = ranks;
  s.microBatches = microBatches;
  s.name = name;
  if (name.rfind("interleaved:", 0) == 0) {
    char *end = nullptr;
    const long v = std::strtol(name.c_str() + 12, &end, 10);
    if (*end || v < 2 || v > 64) {
      error = "interleaved:V needs V, the chunks per rank, in [2, 64]";
      return false;
    }
    if (microBatches % ranks) {
      error = "interleaved:" + std::to_string(v) + " needs micro-batches (" +
              std::to_string(microBatches) + ") a multiple of the pipeline ranks (" +
              std::to_string(ranks) + "): its passes go round the ranks in groups of P";
      return false;
    }
    s.chunksPerRank = static_cast<int>(v);
  } else if (name != "gpipe" && name != "1f1b" && name != "zero-bubble") {
    error = "unknown pipeline schedule '" + name +
            "' (expected gpipe, 1f1b, interleaved:V or zero-bubble)";
    return false;
  }
  if (static_cast<int>(costs.size()) != s.chunks()) {
    error = "the schedule has " + std::to_string(s.chunks()) + " chunks, the costs " +
            std::to_string(costs.size());
    return false;
  }
  if (name == "zero-bubble") {
    if (!zeroBubble(s, costs, error))
      return false;
    out = std::move(s);
    return true;
  }
  s.passes.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    if (name == "gpipe") {
      for (int m = 0; m < microBatches; ++m)
        s.passes[r].push_back({PassKind::Forward, m, r});
      for (int m = 0; m < microBatches; ++m)
        s.passes[r].push_back({PassKind::Backward, m, r});
    } else {
      s.passes[r] = oneFOneB(r, ranks, microBatches, s.chunksPerRank, PassKind::Backward);
    }
  }
  out = std::move(s);
  return true;
}

bool parseSchedule(const std::string &text, int microBatches, int chunksPerRank, Schedule &out,
                   std::string &error) {
  if (microBatches < 1 || microBatches > kMaxMicroBatches || chunksPerRank < 1 ||
      chunksPerRank > 64) {
    error = "a given schedule needs 1 to " + std::to_string(kMaxMicroBatches) +
            " micro-batches and 1 to 64 chunks per rank";
    return false;
  }
  Schedule s;
  s.name = "given";
  s.microBatches = microBatches;
  s.chunksPerRank = chunksPerRank;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#')
      continue;
    std::istringstream words(line);
    std::vector<Pass> passes;
    std::string word;
    while (words >> word) {
      size_t letters = word.find_first_of("0123456789");
      const std::string kind = word.substr(0, letters);
      Pass p{PassKind::Forward, 0, 0};
      if (kind == "F")
        p.kind = PassKind::Forward;
      else if (kind == "B")
        p.kind = PassKind::Backward;
      else if (kind == "BI")
        p.kind = PassKind::BackwardInput;
      else if (kind == "BW")
        p.kind = PassKind::BackwardWeight;
      else
        letters = std::string::npos;
      char *end = nullptr;
      if (letters != std::string::npos) {
        // (Out of int range: -1, which the check rejects.)
        auto number = [](long v) { return v < 0 || v > 1 << 30 ? -1 : static_cast<int>(v); };
        p.microBatch = number(std::strtol(word.c_str() + letters, &end, 10));
        if (*end == '.')
          p.chunk = number(std::strtol(end + 1, &end, 10));
        else
          end = nullptr;
      }
      if (letters == std::string::npos || !end || *end) {
        error = "schedule rank " + std::to_string(s.passes.size()) + ": '" + word +
                "' is not F, B, BI or BW followed by micro-batch.chunk";
        return false;
      }
      passes.push_back(p);
    }
    s.passes.push_back(std::move(passes));
  }
  s.ranks = static_cast<int>(s.passes.size());
  if (s.ranks == 0 || s.ranks > kMaxRanks) {
    error = "the schedule names " + std::to_string(s.ranks) + " ranks (1 to " +
            std::to_string(kMaxRanks) + ")";
    return false;
  }
  out = std::move(s);
  return true;
}

bool checkAndTime(const Schedule &s, const std::vector<ChunkCost> &costs, double latency,
                  Timing &timing, std::string &error) {
  const int chunks = s.chunks(), m = s.microBatches;
  if (static_cast<int>(s.passes.size()) != s.ranks ||
      static_cast<int>(costs.size()) != chunks) {
    error = "the schedule's ranks or the costs do not match its chunks";
    return false;
  }
  // Every pass exactly once, on its chunk's rank; a chunk's backward whole
  // (B) or split (BI and BW) for every micro-batch alike.
  std::map<std::tuple<int, int, int>, int> seen; // kind, micro-batch, chunk -> count
  for (int r = 0; r < s.ranks; ++r)
    for (const Pass &p : s.passes[r]) {
      if (p.microBatch < 0 || p.microBatch >= m || p.chunk < 0 || p.chunk >= chunks) {
        error = "rank " + std::to_string(r) + " runs " + passName(p) + ": micro-batches are 0.." +
                std::to_string(m - 1) + ", chunks 0.." + std::to_string(chunks - 1);
        return false;
      }
      if (s.rankOf(p.chunk) != r) {
        error = "rank " + std::to_string(r) + " runs " + passName(p) + ", whose chunk is rank " +
                std::to_string(s.rankOf(p.chunk)) + "'s";
        return false;
      }
      if (++seen[{static_cast<int>(p.kind), p.microBatch, p.chunk}] > 1) {
        error = passName(p) + " runs twice";
        return false;
      }
    }
  bool split = false;
  for (int c = 0; c < chunks; ++c)
    for (int b = 0; b < m; ++b) {
      auto has = [&](PassKind k) { return seen.count({static_cast<int>(k), b, c}) > 0; };
      const std::string what = "micro-batch " + std::to_string(b) + " of chunk " +
                               std::to_string(c) + " (rank " + std::to_string(s.rankOf(c)) + ")";
      if (!has(PassKind::Forward)) {
        error = what + " has no forward";
        return false;
      }
      const bool whole = has(PassKind::Backward),
                 parts = has(PassKind::BackwardInput) && has(PassKind::BackwardWeight);
      if (whole == parts) {
        error = what + " needs one backward: B, or BI and BW";
        return false;
      }
      split |= parts;
    }

  // Simulate: a pass starts when its rank is free and its inputs are there
  // (a transfer from another rank `latency` after its producer ends).
  std::map<Key, double> done;
  std::vector<size_t> next(s.ranks, 0);
  std::vector<double> free(s.ranks, 0);
  std::vector<int> stash(s.ranks, 0);
  timing = Timing{};
  timing.busy.assign(s.ranks, 0);
  timing.peakStash.assign(s.ranks, 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int r = 0; r < s.ranks; ++r)
      while (next[r] < s.passes[r].size()) {
        const Pass &p = s.passes[r][next[r]];
        double start = free[r];
        if (!inputsReady(p, s, done, latency, start))
          break;
        const double cost = costOf(p, costs);
        free[r] = start + cost;
        timing.busy[r] += cost;
        done[Key{resultOf(p.kind), p.microBatch, p.chunk}] = free[r];
        if (p.kind == PassKind::Forward)
          timing.peakStash[r] = std::max(timing.peakStash[r], ++stash[r]);
        if (releasesStash(p, split))
          --stash[r];
        for (auto &[key, remote] : dependencies(p, s))
          timing.transfers += remote;
        ++next[r];
        progressed = true;
      }
  }
  std::string waits;
  for (int r = 0; r < s.ranks; ++r) {
    if (next[r] == s.passes[r].size())
      continue;
    const Pass &p = s.passes[r][next[r]];
    for (auto &[key, remote] : dependencies(p, s))
      if (!done.count(key)) {
        waits += "\n  rank " + std::to_string(r) + " waits at " + passName(p) + " for " +
                 keyName(key) + " (rank " + std::to_string(s.rankOf(std::get<2>(key))) + ")";
        break;
      }
  }
  if (!waits.empty()) {
    error = "the " + s.name + " schedule deadlocks: every rank left waits on another" + waits;
    return false;
  }
  for (int r = 0; r < s.ranks; ++r)
    timing.makespan = std::max(timing.makespan, free[r]);
  for (int r = 0; r < s.ranks; ++r) {
    const double idle = timing.makespan > 0 ? 1 - timing.busy[r] / timing.makespan : 0;
    timing.idleFraction.push_back(idle);
    timing.bubbleFraction += idle / s.ranks;
  }
  return true;
}

std::vector<int> balanceStages(const std::vector<double> &layerCosts, int stages) {
  const int n = static_cast<int>(layerCosts.size());
  stages = std::max(1, std::min(stages, n));
  std::vector<LayerCost> layers;
  for (double c : layerCosts)
    layers.push_back({c, 0, 0});
  std::vector<int> firsts;
  std::string error;
  balanceStagesUnderBudget(layers, std::vector<int>(stages, 0), 0, firsts, error);
  return firsts;
}

double stageBytes(const std::vector<LayerCost> &layers, int first, int end, int stash) {
  double state = 0, perMicroBatch = 0;
  for (int i = first; i < end; ++i) {
    state += layers[i].stateBytes;
    perMicroBatch += layers[i].stashBytes;
  }
  return state + stash * perMicroBatch;
}

/// The exact cut (dynamic programming over cuts), or false if no cut fits.
static bool cutUnderBudget(const std::vector<LayerCost> &layers,
                           const std::vector<int> &stashPerStage, double budgetBytes,
                           std::vector<int> &firsts) {
  const int n = static_cast<int>(layers.size());
  const int stages = static_cast<int>(stashPerStage.size());
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + layers[i].seconds;
  auto fits = [&](int st, int j, int i) {
    return budgetBytes <= 0 || stageBytes(layers, j, i, stashPerStage[st - 1]) <= budgetBytes;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: the least largest stage over the first i layers in s
  // stages that each fit the budget (inf: none does).
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int st = 1; st <= stages; ++st)
    for (int i = st; i <= n; ++i)
      for (int j = st - 1; j < i; ++j) {
        if (best[st - 1][j] == inf || !fits(st, j, i))
          continue;
        const double worst = std::max(best[st - 1][j], prefix[i] - prefix[j]);
        if (worst < best[st][i]) {
          best[st][i] = worst;
          cut[st][i] = j;
        }
      }
  if (best[stages][n] == inf)
    return false;
  firsts.assign(stages, 0);
  for (int st = stages, i = n; st >= 1; --st) {
    firsts[st - 1] = cut[st][i];
    i = cut[st][i];
  }
  return true;
}

bool balanceStagesUnderBudget(const std::vector<LayerCost> &layers,
                              const std::vector<int> &stashPerStage, double budgetBytes,
                              std::vector<int> &firsts, std::string &error) {
  const int n = static_cast<int>(layers.size());
  const int stages = static_cast<int>(stashPerStage.size());
  if (stages < 1 || stages > n) {
    error = std::to_string(n) + " layers cannot fill " + std::to_string(stages) + " stages";
    return false;
  }
  if (cutUnderBudget(layers, stashPerStage, budgetBytes, firsts))
    return true;
  // The least budget that admits a cut (bisected over bytes): what the
  // error tells the user to give.
  double low = 0, high = stageBytes(layers, 0, n, *std::max_element(stashPerStage.begin(),
                                                                       stashPerStage.end()));
  std::vector<int> unused;
  for (int k = 0; k < 60; ++k) {
    const double mid = (low + high) / 2;
    (cutUnderBudget(layers, stashPerStage, mid, unused) ? high : low) = mid;
  }
  error = "no cut of " + std::to_string(n) + " layers into " + std::to_string(stages) +
          " stages fits " + std::to_string(static_cast<int64_t>(budgetBytes)) +
          " bytes per rank: the least budget that fits one is " +
          std::to_string(static_cast<int64_t>(std::ceil(high))) + " bytes";
  return false;
}

} // namespace stepc::pipeline
