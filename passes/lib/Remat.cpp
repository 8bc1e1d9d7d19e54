//===- Remat.cpp - recompute forward values under a memory budget ---------===//
//
// A candidate is a forward value a backward op reads (reshapes see through
// to the value they alias). Recomputing a set R of candidates rewrites each
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
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <functional>

namespace stepc {
#define GEN_PASS_DEF_STEPREMAT
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

int64_t bytesOf(Value v) { return tensorBytes(v.getType()); }

bool isForwardValue(Value v) {
  Operation *def = v.getDefiningOp();
  return def && getPhase(def) == Phase::Forward;
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

Candidates findCandidates(func::FuncOp step, double flopsPerByte) {
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
      FailureOr<int64_t> flops = getExecutedFlops(op);
      cost += (succeeded(flops) ? double(*flops) : 0.0);
      if (!isa<ReshapeOp>(op))
        for (Value r : op->getResults())
          cost += flopsPerByte * double(bytesOf(r));
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
}

/// A detached copy of `step` with `recompute` applied (the caller erases it).
func::FuncOp rematerialisedCopy(func::FuncOp step, const DenseSet<Value> &candidates,
                                const DenseSet<Value> &recompute) {
  IRMapping map;
  auto copy = cast<func::FuncOp>(step->clone(map));
  DenseSet<Value> copiedCandidates, copiedRecompute;
  for (Value v : candidates)
    copiedCandidates.insert(map.lookup(v));
  for (Value v : recompute)
    copiedRecompute.insert(map.lookup(v));
  applyRemat(copy, copiedCandidates, copiedRecompute);
  return copy;
}

/// The planned per-rank peak of `step` with `recompute` applied, measured on
/// a copy: arguments + the planner's arena + what the back end adds.
struct Peak {
  int64_t arguments = 0, arena = 0, extra = 0;
  int64_t total() const { return arguments + arena + extra; }
};

Peak plannedPeak(func::FuncOp step, const DenseSet<Value> &candidates,
                 const DenseSet<Value> &recompute, int64_t extraBytes) {
  func::FuncOp copy = rematerialisedCopy(step, candidates, recompute);
  Peak peak;
  for (Type type : copy.getArgumentTypes())
    peak.arguments += tensorBytes(type);
  peak.arena = planMemory(copy).arenaBytes;
  peak.extra = extraBytes;
  copy->erase();
  return peak;
}

/// FLOPs the copies of `recompute` execute, counted on a copy of the step.
int64_t recomputeCost(func::FuncOp step, const DenseSet<Value> &candidates,
                      const DenseSet<Value> &recompute) {
  func::FuncOp copy = rematerialisedCopy(step, candidates, recompute);
  int64_t flops = 0;
  for (Operation &op : copy.getBody().front())
    if (getPhase(&op) == Phase::Recompute)
      if (FailureOr<int64_t> f = getExecutedFlops(&op); succeeded(f))
        flops += *f;
  copy->erase();
  return flops;
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

struct StepRematPass : public stepc::impl::StepRematBase<StepRematPass> {
  using StepRematBase::StepRematBase;

  LogicalResult rematerialise(func::FuncOp step) {
    Candidates c = findCandidates(step, flopsPerByte);
    auto peakOf = [&](const DenseSet<Value> &r) {
      return plannedPeak(step, c.set, r, extraBytes);
    };
    auto prefix = [](ArrayRef<Value> order, size_t k) {
      return DenseSet<Value>(order.begin(), order.begin() + k);
    };
    DenseSet<Value> recompute;
    std::string chosen = mode;
    if (mode == "block") {
      recompute = blockRecompute(c);
    } else if (mode == "selective") {
      SmallVector<Value> order =
          greedyOrder(c, [&](Value v) { return !c.needsProduct.contains(v); });
      recompute = prefix(order, order.size());
    } else if (mode == "auto" && budget > 0 && peakOf({}).total() > budget) {
      // The shortest prefix of the greedy order that fits (bisection: the
      // peak falls, not strictly, as the prefix grows), or block
      // checkpointing if that fits at a lower recompute cost.
      SmallVector<Value> order = greedyOrder(c, [](Value) { return true; });
      std::optional<DenseSet<Value>> greedy;
      if (peakOf(prefix(order, order.size())).total() <= budget) {
        size_t lo = 0, hi = order.size();
        while (hi - lo > 1) {
          size_t mid = lo + (hi - lo) / 2;
          (peakOf(prefix(order, mid)).total() <= budget ? hi : lo) = mid;
        }
        greedy = prefix(order, hi);
      }
      DenseSet<Value> block = blockRecompute(c);
      bool blockFits = peakOf(block).total() <= budget;
      if (greedy && (!blockFits || recomputeCost(step, c.set, *greedy) <=
                                       recomputeCost(step, c.set, block))) {
        recompute = std::move(*greedy);
      } else if (blockFits) {
        recompute = std::move(block);
        chosen = "block";
      }
    }

    if (budget > 0) {
      Peak peak = peakOf(recompute);
      if (peak.total() > budget) {
        // Name the smallest peak any mode reaches.
        Peak best = peak;
        std::string bestMode = chosen;
        SmallVector<Value> all = greedyOrder(c, [](Value) { return true; });
        for (auto [name, r] : {std::make_pair("auto", prefix(all, all.size())),
                               std::make_pair("block", blockRecompute(c))}) {
          Peak p = peakOf(r);
          if (p.total() < best.total()) {
            best = p;
            bestMode = name;
          }
        }
        InFlightDiagnostic diag = emitError(step.getLoc())
                                  << "memory budget of " << budget.getValue()
                                  << " bytes per rank is infeasible with --remat=" << mode
                                  << " (planned peak " << peak.total()
                                  << " bytes); the smallest feasible budget is "
                                  << best.total() << " bytes (--remat=" << bestMode
                                  << "): arguments (parameters, optimizer state, inputs) "
                                  << best.arguments << " bytes, activation arena "
                                  << best.arena << " bytes";
        if (best.extra)
          diag << ", back-end workspace " << best.extra << " bytes";
        return failure();
      }
    }
    applyRemat(step, c.set, recompute);
    return success();
  }

  void runOnOperation() override {
    if (mode != "none" && mode != "block" && mode != "selective" && mode != "auto") {
      emitError(getOperation().getLoc())
          << "unknown remat mode '" << mode << "' (expected none, block, selective or auto)";
      return signalPassFailure();
    }
    if (mode == "auto" && budget == 0) {
      emitError(getOperation().getLoc())
          << "step-remat mode=auto needs a budget (block and selective need none)";
      return signalPassFailure();
    }
    if (budget < 0 || extraBytes < 0 || !(flopsPerByte >= 0)) {
      emitError(getOperation().getLoc())
          << "step-remat expects budget, extra-bytes and flops-per-byte >= 0";
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
