//===- Remat.cpp - recompute forward values under a memory budget ---------===//
//
// A candidate is a forward value a backward op reads (reshapes see through
// to the value they alias), or under fsdp a gathered parameter the backward
// reads (recomputing it is gathering it again). Recomputing a set R of
// candidates rewrites each
// backward read of one into a read of a copy of its op, made (with the copies
// it needs) just before the first backward op that reads it. Every other
// forward value a copy reads is kept if it is a candidate outside R, else
// recomputed too. The decision is evaluated with the real planner
// (planMemory) on a copy of the step, so "fits the budget" means the plan
// the back end uses, not an estimate.
//
//===----------------------------------------------------------------------===//

#include "stepc/Analysis/FlopCount.h"
#include "stepc/Analysis/MemoryPlan.h"
#include "stepc/Analysis/StepStructure.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <map>

namespace stepc {
#define GEN_PASS_DEF_STEPREMAT
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

int64_t bytesOf(Value v) { return tensorBytes(v.getType()); }

/// Whether `op` gathers a sharded parameter (fsdp): an all_gather of an
/// argument, or the slice dropping its padding rows.
bool gathersParameter(Operation *op) {
  if (!op || getPhase(op) != Phase::Collective || !isa<mesh::AllGatherOp, SliceOp>(op))
    return false;
  Value in = op->getOperand(0);
  return isa<BlockArgument>(in) || gathersParameter(in.getDefiningOp());
}

/// Whether `v` can be computed again in the backward: a forward value or a
/// gathered parameter (computing it again is gathering it again).
bool isForwardValue(Value v) {
  Operation *def = v.getDefiningOp();
  return def && (getPhase(def) == Phase::Forward || gathersParameter(def));
}

/// The value whose storage `v` is: through forward reshapes.
Value storageOf(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    if (getPhase(reshape) != Phase::Forward)
      break;
    v = reshape.getInput();
  }
  return v;
}

/// The machine balance the cost model charges: FLOPs per byte written, and
/// per byte received by a collective.
struct CostModel {
  double flopsPerByte, flopsPerCommByte;
};

/// What computing `op` again costs: its FLOPs plus the bytes it writes (a
/// reshape writes nothing) at the machine balance, so memory-bound ops are
/// costed by bytes, and a gather by the bytes it receives.
double opCost(Operation *op, const CostModel &model) {
  FailureOr<int64_t> flops = getExecutedFlops(op);
  double cost = succeeded(flops) ? double(*flops) : 0.0;
  double perByte = isa<mesh::AllGatherOp>(op) ? model.flopsPerCommByte : model.flopsPerByte;
  if (!isa<ReshapeOp>(op))
    for (Value r : op->getResults())
      cost += perByte * double(bytesOf(r));
  return cost;
}

/// The forward values the backward reads, with what recomputing each costs.
struct Candidates {
  /// In program order.
  SmallVector<Value> values;
  DenseSet<Value> set;
  /// Cost of the copies recomputing a value makes (its op and the
  /// non-candidate forward ops it needs): FLOPs + flopsPerByte · bytes.
  DenseMap<Value, double> cost;
  /// Whether those copies include a matmul or attention.
  DenseSet<Value> needsProduct;
  /// The candidates those copies read (kept, or recomputed as well).
  DenseMap<Value, SmallVector<Value>> frontier;
  /// The block of each value ("" outside the blocks).
  DenseMap<Value, std::string> blockOf;
};

Candidates findCandidates(func::FuncOp step, const CostModel &model) {
  Candidates c;
  c.blockOf = attributeBlocks(step);
  Block &body = step.getBody().front();
  for (Operation &op : body) {
    if (getPhase(&op) != Phase::Backward)
      continue;
    for (Value operand : op.getOperands()) {
      Value v = storageOf(operand);
      if (isForwardValue(v) && !isa<ReshapeOp>(v.getDefiningOp()) && c.set.insert(v).second)
        c.values.push_back(v);
    }
  }
  llvm::sort(c.values, [](Value a, Value b) {
    return a.getDefiningOp()->isBeforeInBlock(b.getDefiningOp()) ||
           (a.getDefiningOp() == b.getDefiningOp() &&
            cast<OpResult>(a).getResultNumber() < cast<OpResult>(b).getResultNumber());
  });
  for (Value v : c.values) {
    double cost = 0;
    bool product = false;
    SmallVector<Value> frontier;
    DenseSet<Operation *> visited;
    std::function<void(Operation *)> visit = [&](Operation *op) {
      if (!visited.insert(op).second)
        return;
      cost += opCost(op, model);
      product |= isa<MatmulOp, BatchMatmulOp, AttentionOp>(op);
      for (Value w : op->getOperands()) {
        if (!isForwardValue(w))
          continue;
        if (c.set.contains(w)) {
          if (!llvm::is_contained(frontier, w))
            frontier.push_back(w);
          continue;
        }
        visit(w.getDefiningOp());
      }
    };
    visit(v.getDefiningOp());
    c.cost[v] = cost;
    if (product)
      c.needsProduct.insert(v);
    c.frontier[v] = std::move(frontier);
  }
  return c;
}

/// Writes the forward graph the decision is over as JSON, for an external
/// exact solver (bench/remat/remat_bound.py): every forward op (reshapes are
/// views of their input) with its executed FLOPs, result bytes and the
/// forward values it reads; the candidates; the argument bytes; the step's
/// executed FLOPs. Arguments and values outside the forward are free to read.
LogicalResult writeGraph(func::FuncOp step, const Candidates &c, int64_t extraBytes,
                         StringRef path) {
  DenseMap<Value, int64_t> ids;
  auto idOf = [&](Value v) {
    auto [it, inserted] = ids.try_emplace(v, int64_t(ids.size()));
    return it->second;
  };
  int64_t arguments = 0, executed = 0;
  for (Type type : step.getArgumentTypes())
    arguments += tensorBytes(type);
  llvm::json::Array ops;
  for (Operation &op : step.getBody().front()) {
    FailureOr<int64_t> flops = getExecutedFlops(&op);
    if (failed(flops))
      return failure();
    executed += *flops;
    if (isa<ReshapeOp>(op) || op.getNumResults() == 0 || !isForwardValue(op.getResult(0)))
      continue;
    llvm::json::Array results, operands;
    for (Value r : op.getResults())
      results.push_back(llvm::json::Object{{"value", idOf(r)}, {"bytes", bytesOf(r)}});
    for (Value w : op.getOperands())
      if (Value s = storageOf(w); isForwardValue(s))
        operands.push_back(idOf(s));
    ops.push_back(llvm::json::Object{{"name", op.getName().getStringRef()},
                                     {"flops", *flops},
                                     {"results", std::move(results)},
                                     {"operands", std::move(operands)}});
  }
  llvm::json::Array candidates;
  for (Value v : c.values)
    candidates.push_back(idOf(v));
  std::error_code error;
  llvm::raw_fd_ostream os(path, error, llvm::sys::fs::OF_Text);
  if (error)
    return emitError(step.getLoc()) << "cannot write the remat graph to '" << path
                                    << "': " << error.message();
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                  {"function", step.getSymName()},
                                  {"arguments_bytes", arguments},
                                  {"extra_bytes", extraBytes},
                                  {"step_executed_flops", executed},
                                  {"ops", std::move(ops)},
                                  {"candidates", std::move(candidates)},
                              }))
     << "\n";
  return success();
}

/// Recomputes the candidates in `recompute` in `step` (see the file comment).
void applyRemat(func::FuncOp step, const DenseSet<Value> &candidates,
                const DenseSet<Value> &recompute) {
  std::function<bool(Value)> kept = [&](Value v) {
    if (!isForwardValue(v))
      return true;
    if (auto reshape = v.getDefiningOp<ReshapeOp>())
      return kept(reshape.getInput());
    return candidates.contains(v) && !recompute.contains(v);
  };
  DenseMap<Value, Value> copies;
  std::function<Value(Value, Operation *)> materialize = [&](Value u, Operation *before) {
    if (Value copy = copies.lookup(u))
      return copy;
    Operation *def = u.getDefiningOp();
    IRMapping map;
    for (Value w : def->getOperands())
      if (!kept(w))
        map.map(w, materialize(w, before));
    OpBuilder b(before);
    Operation *copy = b.clone(*def, map);
    setPhase(copy, Phase::Recompute);
    for (auto [original, result] : llvm::zip(def->getResults(), copy->getResults()))
      copies[original] = result;
    return copies.lookup(u);
  };
  SmallVector<Operation *> backward;
  for (Operation &op : step.getBody().front())
    if (getPhase(&op) == Phase::Backward)
      backward.push_back(&op);
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands())
      if (!kept(use.get()))
        use.set(materialize(use.get(), op));
  // Re-gathers are prefetched one ahead, like the forward's gathers, so the
  // plans the search measures hold each gathered parameter that long.
  SmallVector<mesh::AllGatherOp> regathers;
  for (auto gather : step.getBody().front().getOps<mesh::AllGatherOp>())
    if (getPhase(gather) == Phase::Recompute && isa<BlockArgument>(gather.getInput()))
      regathers.push_back(gather);
  prefetchOneAhead(regathers, /*start=*/nullptr);
  // A gather whose readers now all read its copy is communication for
  // nothing: erase it (last first, so its slice goes before it).
  SmallVector<Operation *> ops;
  for (Operation &op : step.getBody().front())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && gathersParameter(op))
      op->erase();
}

/// A detached copy of `step` with `recompute` applied (the caller erases it).
func::FuncOp rematerialisedCopy(func::FuncOp step, const DenseSet<Value> &candidates,
                                const DenseSet<Value> &recompute, IRMapping &map) {
  auto copy = cast<func::FuncOp>(step->clone(map));
  DenseSet<Value> copiedCandidates, copiedRecompute;
  for (Value v : candidates)
    copiedCandidates.insert(map.lookup(v));
  for (Value v : recompute)
    copiedRecompute.insert(map.lookup(v));
  applyRemat(copy, copiedCandidates, copiedRecompute);
  return copy;
}

/// A choice of recomputed values, measured on a copy of the step with it
/// applied: the planned per-rank peak (arguments + the planner's arena, or
/// its live-set lower bound while searching, + what the back end adds) and
/// the recompute cost (Σ opCost over the copies).
struct Evaluation {
  int64_t arguments = 0, arena = 0, extra = 0;
  double cost = 0;
  /// The kept candidates whose buffers are live where the most bytes are
  /// (the op at which the live buffers' sizes sum highest).
  SmallVector<Value> liveAtPeak;
  int64_t peak() const { return arguments + arena + extra; }
};

/// The kept candidates (of the original step) live at the busiest op of
/// `plan`, a plan of `copy` (`map`: original -> copy values).
SmallVector<Value> candidatesLiveAtPeak(const MemoryPlan &plan, ArrayRef<Value> candidates,
                                        const DenseSet<Value> &recompute,
                                        const IRMapping &map) {
  int64_t at = plan.liveBytesPeakAt;
  SmallVector<Value> result;
  for (Value v : candidates) {
    if (recompute.contains(v))
      continue;
    auto buffer = plan.bufferOf.find(map.lookup(v));
    if (buffer == plan.bufferOf.end())
      continue;
    const MemoryPlan::Buffer &b = plan.buffers[buffer->second];
    if (b.firstDef <= at && at <= b.lastUse)
      result.push_back(v);
  }
  return result;
}

/// `placed`: the arena the planner places; else the live-set peak, its
/// lower bound (equal but for fragmentation), in time linear in the step.
Evaluation evaluate(func::FuncOp step, ArrayRef<Value> candidates,
                    const DenseSet<Value> &recompute, int64_t extraBytes,
                    const CostModel &model, bool placed) {
  IRMapping map;
  DenseSet<Value> candidateSet(candidates.begin(), candidates.end());
  func::FuncOp copy = rematerialisedCopy(step, candidateSet, recompute, map);
  Evaluation e;
  for (Type type : copy.getArgumentTypes())
    e.arguments += tensorBytes(type);
  MemoryPlan plan = placed ? planMemory(copy) : planLiveness(copy);
  e.arena = placed ? plan.arenaBytes : plan.liveBytesPeak;
  e.liveAtPeak = candidatesLiveAtPeak(plan, candidates, recompute, map);
  e.extra = extraBytes;
  for (Operation &op : copy.getBody().front())
    if (getPhase(&op) == Phase::Recompute)
      e.cost += opCost(&op, model);
  copy->erase();
  return e;
}

/// Candidates in increasing cost per byte, accepted under the chain rule: a
/// recomputed value's frontier in another block stays kept, so chains of
/// copies stay inside one block (recomputing the residual stream across
/// blocks would keep every block's copy alive at once). `admit` filters.
SmallVector<Value> greedyOrder(const Candidates &c, function_ref<bool(Value)> admit) {
  SmallVector<Value> order(c.values);
  llvm::stable_sort(order, [&](Value a, Value b) {
    return c.cost.lookup(a) / double(bytesOf(a)) < c.cost.lookup(b) / double(bytesOf(b));
  });
  SmallVector<Value> accepted;
  DenseSet<Value> chosen, pinned;
  for (Value v : order) {
    if (!admit(v) || pinned.contains(v))
      continue;
    SmallVector<Value> across;
    for (Value w : c.frontier.lookup(v))
      if (c.blockOf.lookup(w) != c.blockOf.lookup(v))
        across.push_back(w);
    if (llvm::any_of(across, [&](Value w) { return chosen.contains(w); }))
      continue;
    accepted.push_back(v);
    chosen.insert(v);
    pinned.insert(across.begin(), across.end());
  }
  return accepted;
}

/// Candidates inside a block that no other block's forward reads.
DenseSet<Value> blockRecompute(const Candidates &c) {
  const DenseMap<Value, std::string> &blockOf = c.blockOf;
  std::function<bool(Value, StringRef)> readElsewhere = [&](Value v, StringRef block) {
    for (Operation *user : v.getUsers()) {
      if (getPhase(user) != Phase::Forward)
        continue;
      if (isa<ReshapeOp>(user) ? readElsewhere(user->getResult(0), block)
                               : blockOf.lookup(user->getResult(0)) != block)
        return true;
    }
    return false;
  };
  DenseSet<Value> recompute;
  for (Value v : c.values) {
    std::string block = blockOf.lookup(v);
    if (!block.empty() && !readElsewhere(v, block))
      recompute.insert(v);
  }
  return recompute;
}

/// Block checkpointing that also keeps, inside each block, the values
/// several forward ops read (the residual stream between attention and
/// MLP): a block's backward then recomputes one half at a time, so its peak
/// is lower than block's, at about the same cost.
DenseSet<Value> residualCheckpoints(const Candidates &c) {
  std::function<unsigned(Value)> forwardReaders = [&](Value v) {
    unsigned n = 0;
    for (Operation *user : v.getUsers())
      if (getPhase(user) == Phase::Forward)
        n += isa<ReshapeOp>(user) ? forwardReaders(user->getResult(0)) : 1;
    return n;
  };
  DenseSet<Value> recompute = blockRecompute(c);
  for (Value v : c.values)
    if (recompute.contains(v) && forwardReaders(v) >= 2)
      recompute.erase(v);
  return recompute;
}

/// The most evaluations refine() spends (each plans a copy of the step).
constexpr int kRefineEvaluations = 64;
/// Candidates the greedy scores by a plan each per step.
constexpr size_t kScored = 6;
/// The greedy's costliest choices the exchange step re-solves without.
constexpr size_t kExchanges = 4;
/// Steps with at most this many candidates are searched on placed plans.
constexpr size_t kPlacedSearchCandidates = 64;
/// The searches searchFitting runs before giving up on fragmentation.
constexpr int kFragmentationRounds = 4;
/// The most candidates search=exhaustive accepts (2^n evaluations).
constexpr size_t kExhaustiveCandidates = 16;

struct StepRematPass : public stepc::impl::StepRematBase<StepRematPass> {
  using StepRematBase::StepRematBase;

  CostModel costModel() const { return {flopsPerByte, flopsPerCommByte}; }

  /// Whether evaluateChoice places plans (small steps; searchFitting's
  /// fallback).
  bool placeWhileSearching = false;

  /// Ranks choices during the search: the live-set peak, linear in the step
  /// (the placement is quadratic in buffers, and the search plans hundreds
  /// of choices), unless `placeWhileSearching`.
  Evaluation evaluateChoice(func::FuncOp step, const Candidates &c,
                            const DenseSet<Value> &recompute) {
    return evaluate(step, c.values, recompute, extraBytes, costModel(), placeWhileSearching);
  }

  /// The plan the back end will use: what the budget is checked against.
  Evaluation placeChoice(func::FuncOp step, const Candidates &c,
                         const DenseSet<Value> &recompute) {
    return evaluate(step, c.values, recompute, extraBytes, costModel(), /*placed=*/true);
  }

  /// searchGreedy ranks by live-set peaks; when the placed plan of what it
  /// finds is over `limit` (fragmentation), it searches again with the limit
  /// lowered by the overshoot. If that fails too, `placedFallback` searches
  /// once more ranking by placed plans (slower; it matters on small steps,
  /// where fragmentation is a larger share).
  std::optional<DenseSet<Value>> searchFitting(func::FuncOp step, const Candidates &c,
                                               int64_t limit, bool placedFallback) {
    int64_t target = limit;
    for (int round = 0; round < kFragmentationRounds; ++round) {
      std::optional<DenseSet<Value>> found = searchGreedy(step, c, target);
      if (!found)
        break;
      int64_t peak = placeChoice(step, c, *found).peak();
      if (peak <= limit)
        return found;
      target -= peak - limit;
    }
    if (!placedFallback || placeWhileSearching)
      return std::nullopt;
    placeWhileSearching = true;
    std::optional<DenseSet<Value>> found = searchGreedy(step, c, limit);
    placeWhileSearching = false;
    return found;
  }

  /// Keeps again what `recompute` need not recompute to fit: members tried
  /// costliest first, each dropped if the step still fits without it.
  void refine(func::FuncOp step, const Candidates &c, DenseSet<Value> &recompute,
              int64_t limit) {
    SmallVector<Value> members(recompute.begin(), recompute.end());
    llvm::sort(members, [&](Value a, Value b) {
      double ca = c.cost.lookup(a), cb = c.cost.lookup(b);
      return ca != cb ? ca > cb
                      : llvm::find(c.values, a) < llvm::find(c.values, b); // deterministic
    });
    int tries = 0;
    for (Value v : members) {
      if (c.cost.lookup(v) <= 0 || tries++ >= kRefineEvaluations)
        break;
      recompute.erase(v);
      if (evaluateChoice(step, c, recompute).peak() > limit)
        recompute.insert(v);
    }
  }

  /// The peak-driven greedy from `greedy` (`banned` never recomputed):
  /// while the plan is over `limit`, scores the kScored cheapest-per-byte
  /// classes of kept candidates live at the plan's busiest op (a class: the
  /// candidates of one cost and size, the same value in every layer) by
  /// what recomputing one really saves (peak bytes, planned) per unit of
  /// cost it adds, and recomputes the best ones: the most useful first,
  /// then more while their summed savings stay under half the remaining
  /// excess (so the plans per step do not grow with depth). A candidate that saves nothing alone still goes when
  /// none saves anything (a plateau: the next peak is behind it); when some
  /// candidate alone makes the plan fit, the cheapest such one ends it
  /// (unless `endAlone` is false).
  DenseSet<Value> greedyFrom(func::FuncOp step, const Candidates &c, DenseSet<Value> greedy,
                             int64_t limit, Value banned = {}, bool endAlone = true) {
    for (Evaluation e = evaluateChoice(step, c, greedy); e.peak() > limit;
         e = evaluateChoice(step, c, greedy)) {
      SmallVector<Value> live = e.liveAtPeak;
      llvm::erase(live, banned);
      if (live.empty())
        break;
      llvm::stable_sort(live, [&](Value a, Value b) {
        return c.cost.lookup(a) / double(bytesOf(a)) < c.cost.lookup(b) / double(bytesOf(b));
      });
      // Candidates alike in cost and size (the same value in another layer)
      // form one class, scored by one plan: a deep step repeats its layers,
      // and scoring each copy would make the search quadratic in depth.
      SmallVector<SmallVector<Value>> classes;
      std::map<std::pair<double, int64_t>, size_t> classOf;
      for (Value v : live) {
        // (Small steps, searched on placed plans, score every candidate.)
        std::pair<double, int64_t> key = {c.cost.lookup(v), bytesOf(v)};
        if (placeWhileSearching)
          key = {double(classes.size()), -1};
        auto [it, added] = classOf.try_emplace(key, classes.size());
        if (added)
          classes.emplace_back();
        classes[it->second].push_back(v);
      }
      classes.truncate(std::min<size_t>(classes.size(), kScored));
      struct Scored {
        ArrayRef<Value> members;
        int64_t saved;
        double score;
        double cost;
      };
      SmallVector<Scored> scored;
      for (ArrayRef<Value> members : classes) {
        greedy.insert(members.front());
        Evaluation with = evaluateChoice(step, c, greedy);
        greedy.erase(members.front());
        // Savings past the excess are worth nothing.
        int64_t saved = e.peak() - with.peak();
        double useful = double(std::min(saved, e.peak() - limit));
        scored.push_back({members, saved, useful / std::max(with.cost - e.cost, 1.0), with.cost});
      }
      // The last step: the cheapest candidate that alone makes it fit.
      const Scored *last = nullptr;
      for (const Scored &s : scored)
        if (e.peak() - s.saved <= limit && (!last || s.cost < last->cost))
          last = &s;
      if (last && endAlone) {
        greedy.insert(last->members.front());
        break;
      }
      // The most useful first, then more (of its class, then of the next
      // ones) while their expected savings stay under half the excess.
      llvm::stable_sort(scored, [](const Scored &a, const Scored &b) { return a.score > b.score; });
      int64_t excess = e.peak() - limit, expected = 0;
      bool first = true;
      for (const Scored &s : scored) {
        for (Value v : s.members) {
          if (!first && (s.saved <= 0 || 2 * (expected + s.saved) > excess))
            break;
          greedy.insert(v);
          expected += s.saved;
          first = false;
        }
        if (s.saved <= 0 || 2 * (expected + s.saved) > excess)
          break;
      }
    }
    return greedy;
  }

  /// auto: see greedyFrom. The greedy's costliest choices are then each
  /// banned in turn and the rest re-solved (an exchange step: one costly
  /// value may be worth two cheap ones), keeping any cheaper fit.
  std::optional<DenseSet<Value>> searchGreedy(func::FuncOp step, const Candidates &c,
                                               int64_t limit) {
    SmallVector<DenseSet<Value>> fits;
    DenseSet<Value> greedy = greedyFrom(step, c, {}, limit);
    Evaluation found = evaluateChoice(step, c, greedy);
    // The same without ending on one value: several small ones may be cheaper.
    if (DenseSet<Value> small = greedyFrom(step, c, {}, limit, {}, /*endAlone=*/false);
        small != greedy) {
      Evaluation e = evaluateChoice(step, c, small);
      if (e.peak() <= limit && (found.peak() > limit || e.cost < found.cost)) {
        greedy = std::move(small);
        found = e;
      }
    }
    if (found.peak() <= limit) {
      SmallVector<Value> costliest(greedy.begin(), greedy.end());
      llvm::sort(costliest, [&](Value a, Value b) {
        return c.cost.lookup(a) > c.cost.lookup(b) ||
               (c.cost.lookup(a) == c.cost.lookup(b) &&
                llvm::find(c.values, a) < llvm::find(c.values, b));
      });
      costliest.truncate(std::min<size_t>(costliest.size(), kExchanges));
      for (Value v : costliest) {
        DenseSet<Value> without = greedy;
        without.erase(v);
        for (bool endAlone : {true, false}) {
          DenseSet<Value> other = greedyFrom(step, c, without, limit, v, endAlone);
          Evaluation e = evaluateChoice(step, c, other);
          if (e.peak() <= limit && e.cost < found.cost) {
            greedy = std::move(other);
            found = e;
          }
        }
      }
      fits.push_back(std::move(greedy));
    }
    if (DenseSet<Value> block = blockRecompute(c);
        evaluateChoice(step, c, block).peak() <= limit)
      fits.push_back(std::move(block));
    if (DenseSet<Value> sub = residualCheckpoints(c);
        evaluateChoice(step, c, sub).peak() <= limit)
      fits.push_back(std::move(sub));
    // And the reverse: everything recomputed, then kept again while it fits.
    if (DenseSet<Value> all(c.values.begin(), c.values.end());
        evaluateChoice(step, c, all).peak() <= limit)
      fits.push_back(std::move(all));
    std::optional<DenseSet<Value>> best;
    double bestCost = 0;
    for (DenseSet<Value> &r : fits) {
      refine(step, c, r, limit);
      double cost = evaluateChoice(step, c, r).cost;
      if (!best || cost < bestCost) {
        best = std::move(r);
        bestCost = cost;
      }
    }
    return best;
  }

  /// The optimum over every subset of the candidates (for small steps: the
  /// yardstick of the greedy search's optimality gap).
  FailureOr<std::optional<DenseSet<Value>>> searchExhaustive(func::FuncOp step,
                                                             const Candidates &c) {
    if (c.values.size() > kExhaustiveCandidates)
      return emitError(step.getLoc())
             << "step-remat search=exhaustive takes at most " << kExhaustiveCandidates
             << " candidates, this step has " << c.values.size();
    std::optional<DenseSet<Value>> best;
    double bestCost = 0;
    for (uint64_t mask = 0; mask < (uint64_t{1} << c.values.size()); ++mask) {
      DenseSet<Value> r;
      for (auto [i, v] : llvm::enumerate(c.values))
        if (mask >> i & 1)
          r.insert(v);
      Evaluation e = placeChoice(step, c, r);
      if (e.peak() <= budget && (!best || e.cost < bestCost)) {
        best = std::move(r);
        bestCost = e.cost;
      }
    }
    return best;
  }

  LogicalResult rematerialise(func::FuncOp step) {
    Candidates c = findCandidates(step, costModel());
    if (!graphJson.empty() && failed(writeGraph(step, c, extraBytes, graphJson)))
      return failure();
    // A small step is searched on placed plans: they are cheap there, and
    // fragmentation is a larger share of its peak.
    placeWhileSearching = c.values.size() <= kPlacedSearchCandidates;
    DenseSet<Value> recompute;
    if (mode == "given") {
      for (int64_t i : recomputeList) {
        if (i < 0 || i >= int64_t(c.values.size()))
          return emitError(step.getLoc()) << "step-remat recompute index " << i
                                          << " is out of range: the step has "
                                          << c.values.size() << " candidates";
        recompute.insert(c.values[i]);
      }
    } else if (mode == "block") {
      recompute = blockRecompute(c);
    } else if (mode == "selective") {
      SmallVector<Value> order =
          greedyOrder(c, [&](Value v) {
            return !c.needsProduct.contains(v) && !gathersParameter(v.getDefiningOp());
          });
      recompute.insert(order.begin(), order.end());
    } else if (mode == "auto" && placeChoice(step, c, {}).peak() > budget) {
      std::optional<DenseSet<Value>> found;
      if (search == "exhaustive") {
        FailureOr<std::optional<DenseSet<Value>>> exact = searchExhaustive(step, c);
        if (failed(exact))
          return failure();
        found = std::move(*exact);
      } else {
        found = searchFitting(step, c, budget, /*placedFallback=*/true);
      }
      if (found)
        recompute = std::move(*found);
    }

    Evaluation chosen = placeChoice(step, c, recompute);
    if (budget > 0 && chosen.peak() > budget) {
      // Name the smallest budget the search meets: the lowest peak of every
      // candidate recomputed, block, and the greedy driven as low as it
      // goes, then bisection between that and the budget asked for.
      Evaluation best = chosen;
      for (const DenseSet<Value> &r : {DenseSet<Value>(c.values.begin(), c.values.end()),
                                       blockRecompute(c), residualCheckpoints(c),
                                       greedyFrom(step, c, {}, 0)}) {
        Evaluation e = placeChoice(step, c, r);
        if (e.peak() < best.peak())
          best = e;
      }
      for (int64_t lo = budget; best.peak() - lo > std::max<int64_t>(1, best.peak() / 1000);) {
        int64_t mid = lo + (best.peak() - lo) / 2;
        std::optional<DenseSet<Value>> r = searchFitting(step, c, mid, /*placedFallback=*/false);
        if (r)
          best = placeChoice(step, c, *r);
        else
          lo = mid;
      }
      InFlightDiagnostic diag = emitError(step.getLoc())
                                << "memory budget of " << budget.getValue()
                                << " bytes per rank is infeasible" << onPipelineStage(step)
                                << " with --remat=" << mode
                                << " (planned peak " << chosen.peak()
                                << " bytes); the smallest feasible budget stepc finds is "
                                << best.peak()
                                << " bytes (--remat=auto): arguments (parameters, optimizer "
                                   "state, inputs) "
                                << best.arguments << " bytes, activation arena " << best.arena
                                << " bytes";
      if (best.extra)
        diag << ", back-end workspace " << best.extra << " bytes";
      return failure();
    }
    Builder b(step.getContext());
    step->setAttr(StepDialect::kRematAttrName,
                  b.getDictionaryAttr({
                      b.getNamedAttr("mode", b.getStringAttr(mode)),
                      b.getNamedAttr("budget", b.getI64IntegerAttr(budget)),
                      b.getNamedAttr("candidates", b.getI64IntegerAttr(c.values.size())),
                      b.getNamedAttr("recomputed", b.getI64IntegerAttr(recompute.size())),
                      b.getNamedAttr("planned_peak", b.getI64IntegerAttr(chosen.peak())),
                      b.getNamedAttr("cost", b.getI64IntegerAttr(int64_t(chosen.cost))),
                  }));
    applyRemat(step, c.set, recompute);
    return success();
  }

  void runOnOperation() override {
    if (search != "greedy" && search != "exhaustive") {
      emitError(getOperation().getLoc())
          << "unknown step-remat search '" << search << "' (expected greedy or exhaustive)";
      return signalPassFailure();
    }
    if (mode != "none" && mode != "block" && mode != "selective" && mode != "auto" &&
        mode != "given") {
      emitError(getOperation().getLoc()) << "unknown remat mode '" << mode
                                         << "' (expected none, block, selective, auto or given)";
      return signalPassFailure();
    }
    if (mode == "auto" && budget == 0) {
      emitError(getOperation().getLoc())
          << "step-remat mode=auto needs a budget (block and selective need none)";
      return signalPassFailure();
    }
    if (budget < 0 || extraBytes < 0 || !(flopsPerByte >= 0) || !(flopsPerCommByte >= 0)) {
      emitError(getOperation().getLoc())
          << "step-remat expects budget, extra-bytes, flops-per-byte and flops-per-comm-byte "
             ">= 0";
      return signalPassFailure();
    }
    bool found = false;
    for (auto step : getOperation().getOps<func::FuncOp>()) {
      if (!step->hasAttr(StepDialect::kTrainStepAttrName))
        continue;
      found = true;
      if (failed(rematerialise(step)))
        return signalPassFailure();
    }
    if (!found) {
      emitError(getOperation().getLoc())
          << "step-remat needs a training step (a function marked 'step.train_step': run "
             "step-optimizer first)";
      signalPassFailure();
    }
  }
};

} // namespace
