//===- MicroBatch.cpp - gradient accumulation over micro-batches ----------===//
//
// The gradient function runs its forward and backward M times, each over
// 1/M of its batch, and returns the mean of the M losses and gradients: the
// full batch's loss and gradients (every micro-batch has as many samples)
// with one micro-batch's activations live at a time. The micro-batch's
// gradient is built as step-autodiff built the step's, from the loss
// function rebound to the smaller batch, and inlined M times on slices of
// the inputs, each gradient accumulated as soon as its backward makes it.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/LossFunctions.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Analysis/SliceAnalysis.h"
#include "llvm/ADT/SetVector.h"

namespace stepc {
#define GEN_PASS_DEF_STEPMICROBATCH
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

bool isInput(func::FuncOp function, unsigned i) {
  return static_cast<bool>(function.getArgAttr(i, StepDialect::kInputAttrName));
}

/// Rebuilds the body of `grad` (the gradient of the loss function
/// `micro` was cloned from) as `count` runs of the micro-batch gradient
/// `microGrad`, each on its slice of the inputs, accumulated.
class Accumulation {
public:
  Accumulation(func::FuncOp micro, func::FuncOp microGrad, func::FuncOp grad, int64_t batch,
               int64_t count, bool pipeline)
      : micro(micro), microBody(microGrad.getBody().front()), body(grad.getBody().front()),
        b(OpBuilder::atBlockEnd(&body)), loc(grad.getLoc()), count(count), rows(batch / count),
        pipeline(pipeline), multiUse(multiUseGradients(microGrad)) {}

  void build() {
    while (!body.empty())
      body.back().erase();
    b.setInsertionPointToEnd(&body);
    sumCounts();
    splitUses();
    SmallVector<SmallVector<Value>> sums(uses.size());
    for (int64_t m = 0; m < count; ++m)
      accumulate(m, cloneMicroBatch(m), sums);
    // The uses' sums added in step-autodiff's order (after every
    // micro-batch: unmarked), then the means: (l_1 + ... + l_M) · 1/M, as
    // the data-parallel mean over ranks.
    SmallVector<Value> results;
    for (SmallVector<Value> &parts : sums) {
      Value total = parts.front();
      for (Value part : llvm::drop_begin(parts)) {
        auto add = b.create<AddOp>(loc, total, part);
        setPhase(add, Phase::Backward);
        total = add;
      }
      results.push_back(overCount(total, Phase::Backward));
    }
    b.create<func::ReturnOp>(loc, results);
  }

private:
  /// Whether returned value i of `microGrad` is the gradient of a
  /// parameter the forward reads more than once (results: the loss, then
  /// the parameters' gradients in argument order).
  static SmallVector<bool> multiUseGradients(func::FuncOp microGrad) {
    SmallVector<bool> multiUse{false};
    for (BlockArgument arg : microGrad.getBody().front().getArguments())
      if (getTrainedParam(microGrad, arg.getArgNumber()))
        multiUse.push_back(llvm::count_if(arg.getUsers(), [](Operation *user) {
                             return getPhase(user) == Phase::Forward;
                           }) > 1);
    return multiUse;
  }

  /// Under a pipeline, each op of micro-batch m is marked m.
  void markMicroBatch(Operation *op, int64_t m) {
    if (pipeline)
      op->setAttr(StepDialect::kMicroBatchAttrName, b.getI64IntegerAttr(m));
  }

  /// v · 1/M, in `phase`.
  Value overCount(Value v, Phase phase) {
    auto type = cast<RankedTensorType>(v.getType());
    auto inverse = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 1.0 / count)));
    auto product = b.create<MulOp>(loc, v, inverse);
    setPhase(inverse, phase);
    setPhase(product, phase);
    return product;
  }

  /// A micro-batch's slice of input `arg`.
  Value sliceOf(BlockArgument arg, int64_t m, bool mark = true) {
    Value full = body.getArgument(arg.getArgNumber());
    auto type = cast<RankedTensorType>(full.getType());
    SmallVector<int64_t> offsets(type.getRank(), 0);
    SmallVector<int64_t> sizes(type.getShape());
    offsets[0] = m * rows;
    sizes[0] = rows;
    auto slice = b.create<SliceOp>(loc, full, b.getDenseI64ArrayAttr(offsets),
                                   b.getDenseI64ArrayAttr(sizes));
    setPhase(slice, Phase::Forward);
    if (mark)
      markMicroBatch(slice, m);
    return slice;
  }

  /// Each count of targets the split divided: every micro-batch's count
  /// summed before the first runs, times 1/M, for each to divide by.
  void sumCounts() {
    for (Operation &op : microBody.without_terminator()) {
      auto parts = op.getAttrOfType<IntegerAttr>(StepDialect::kMicroRowsAttrName);
      if (!parts || isa<DropoutOp>(op))
        continue;
      llvm::SetVector<Operation *> needed;
      BackwardSliceOptions options;
      options.inclusive = true;
      getBackwardSlice(&op, &needed, options);
      Value total;
      for (int64_t m = 0; m < count; ++m) {
        IRMapping map;
        for (Operation *def : needed)
          for (Value operand : def->getOperands())
            if (auto arg = dyn_cast<BlockArgument>(operand);
                arg && arg.getOwner() == &microBody && !map.contains(arg))
              map.map(arg, isInput(micro, arg.getArgNumber())
                               ? sliceOf(arg, m, false)
                               : body.getArgument(arg.getArgNumber()));
        Operation *last = nullptr;
        for (Operation *def : needed) {
          last = b.clone(*def, map);
          last->removeAttr(StepDialect::kMicroRowsAttrName);
          last->removeAttr(StepDialect::kRankRowsAttrName);
          setPhase(last, Phase::Forward);
        }
        Value counted = last->getResult(0);
        if (total) {
          auto add = b.create<AddOp>(loc, total, counted);
          setPhase(add, Phase::Forward);
          counted = add;
        }
        total = counted;
      }
      Value share = overCount(total, Phase::Forward);
      // A data-parallel split sums it over the ranks next.
      if (Attribute ranks = op.getAttr(StepDialect::kRankRowsAttrName))
        share.getDefiningOp()->setAttr(StepDialect::kRankRowsAttrName, ranks);
      totals[&op] = share;
    }
  }

  /// A parameter used more than once (a tied embedding and head) has one
  /// cotangent per use, added by step-autodiff: each use's is accumulated
  /// over the micro-batches by itself and the uses' sums added after the
  /// last. Under a pipeline the uses may sit on different stages: each then
  /// sums its own, and one partial crosses stages per step, not one per
  /// micro-batch (gpt2's tied embedding: 154 MB each).
  void splitUses() {
    for (auto [i, result] : llvm::enumerate(microBody.getTerminator()->getOperands())) {
      SmallVector<Value> &parts = uses.emplace_back();
      const bool split = i < multiUse.size() && multiUse[i];
      const Type type = result.getType();
      std::function<void(Value)> collect = [&](Value v) {
        auto add = v.getDefiningOp<AddOp>();
        if (split && add && add->hasOneUse() && add.getType() == type &&
            getPhase(add) == Phase::Backward) {
          collect(add.getLhs());
          collect(add.getRhs());
          joins.insert(add);
          return;
        }
        parts.push_back(v);
      };
      collect(result);
    }
  }

  /// Micro-batch m's forward and backward, on its slices of the inputs:
  /// the mapping from the micro-batch gradient's values, and the ops made.
  std::pair<IRMapping, llvm::SmallPtrSet<Operation *, 32>> cloneMicroBatch(int64_t m) {
    IRMapping map;
    llvm::SmallPtrSet<Operation *, 32> made;
    for (BlockArgument arg : microBody.getArguments()) {
      Value full = body.getArgument(arg.getArgNumber());
      map.map(arg, isInput(micro, arg.getArgNumber()) ? sliceOf(arg, m) : full);
    }
    for (Operation &op : microBody.without_terminator()) {
      if (auto total = totals.find(&op); total != totals.end()) {
        map.map(op.getResult(0), total->second);
        continue;
      }
      if (joins.contains(&op))
        continue;
      Operation *copy = b.clone(op, map);
      made.insert(copy);
      markMicroBatch(copy, m);
      // A dropout over the batch draws this micro-batch's rows of the mask.
      auto d = dyn_cast<DropoutOp>(copy);
      auto dropRows = d ? d->getAttrOfType<IntegerAttr>(StepDialect::kMicroRowsAttrName) : nullptr;
      if (!dropRows)
        continue;
      d->removeAttr(StepDialect::kMicroRowsAttrName);
      OpBuilder at(d);
      auto first = at.create<ConstantOp>(
          loc, DenseElementsAttr::get(RankedTensorType::get({}, b.getI32Type()),
                                      static_cast<int32_t>(m * dropRows.getInt())));
      setPhase(first, Phase::Forward);
      d.getFirstRowMutable().assign(first);
    }
    return {std::move(map), std::move(made)};
  }

  /// Each gradient accumulated right where micro-batch m's backward makes
  /// it: the micro-batch's gradient is dead from there (not all of them
  /// live to the end of the backward), and the add runs in its block's code.
  void accumulate(int64_t m,
                  const std::pair<IRMapping, llvm::SmallPtrSet<Operation *, 32>> &cloned,
                  SmallVector<SmallVector<Value>> &sums) {
    const auto &[map, made] = cloned;
    DenseMap<Operation *, Operation *> lastAfter;
    for (auto [i, parts] : llvm::enumerate(uses)) {
      for (auto [j, part] : llvm::enumerate(parts)) {
        Value value = map.lookupOrDefault(part);
        if (m == 0) {
          sums[i].push_back(value);
          continue;
        }
        OpBuilder at = b;
        Operation *def = value.getDefiningOp();
        if (made.contains(def)) {
          Operation *&after = lastAfter[def];
          at.setInsertionPointAfter(after ? after : def);
        }
        auto add = at.create<AddOp>(loc, sums[i][j], value);
        setPhase(add, Phase::Backward);
        markMicroBatch(add, m);
        if (made.contains(def))
          lastAfter[def] = add;
        sums[i][j] = add;
      }
    }
  }

  func::FuncOp micro;
  Block &microBody, &body;
  OpBuilder b;
  Location loc;
  const int64_t count, rows;
  const bool pipeline;
  const SmallVector<bool> multiUse;
  /// The counts of targets, summed over the micro-batches.
  DenseMap<Operation *, Value> totals;
  /// Per returned value: what is accumulated (a multi-use parameter's
  /// uses apart), and the adds that joined those uses.
  SmallVector<SmallVector<Value>> uses;
  llvm::SmallPtrSet<Operation *, 8> joins;
};

/// Replaces the body of `grad`, the gradient of `loss`, by `count`
/// micro-batch steps.
LogicalResult accumulate(func::FuncOp loss, func::FuncOp grad, int64_t count,
                         SymbolTable &symbols, bool pipeline) {
  FailureOr<int64_t> perRank = inputBatch(loss, "split into micro-batches");
  if (failed(perRank))
    return failure();
  int64_t batch = *perRank;
  if (batch % count != 0)
    return loss.emitOpError() << "the batch of " << batch << " per rank does not split into "
                              << count << " micro-batches";
  // Metrics are averaged as the loss is; outputs would need their own rule
  // (concatenate the rows?).
  for (unsigned i = 1, e = loss.getNumResults(); i < e; ++i)
    if (!hasResultRole(loss, i, Role::Metric))
      return loss.emitOpError() << "returns outputs besides the loss: micro-batches cannot "
                                   "split them";

  // The micro-batch's gradient, built beside the module's functions and
  // erased once inlined.
  auto micro = cast<func::FuncOp>(loss->clone());
  micro.setSymName((loss.getSymName() + "_micro").str());
  symbols.insert(micro);
  auto cleanup = [&](LogicalResult result, func::FuncOp microGrad) {
    if (microGrad)
      microGrad.erase();
    micro.erase();
    return result;
  };
  if (failed(rebindBatch(micro, batch, count, StepDialect::kMicroRowsAttrName)))
    return cleanup(failure(), nullptr);
  FailureOr<func::FuncOp> microGrad = differentiateLoss(micro, symbols, pipeline);
  if (failed(microGrad))
    return cleanup(failure(), nullptr);
  Accumulation(micro, *microGrad, grad, batch, count, pipeline).build();
  return cleanup(success(), *microGrad);
}

struct StepMicroBatchPass : public stepc::impl::StepMicroBatchBase<StepMicroBatchPass> {
  using StepMicroBatchBase::StepMicroBatchBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (count < 1) {
      emitError(module.getLoc()) << "step-micro-batch expects count >= 1, got "
                                 << count.getValue();
      return signalPassFailure();
    }
    if (count == 1 && !pipeline)
      return;
    SymbolTable symbols(module);
    // Each gradient function by the loss it differentiates (its mark).
    llvm::StringMap<func::FuncOp> gradientOf;
    for (auto f : module.getOps<func::FuncOp>())
      if (auto loss = f->getAttrOfType<FlatSymbolRefAttr>(StepDialect::kGradientAttrName))
        gradientOf[loss.getValue()] = f;
    SmallVector<std::pair<func::FuncOp, func::FuncOp>> pairs;
    for (auto loss : module.getOps<func::FuncOp>()) {
      if (!loss->hasAttr(StepDialect::kLossAttrName))
        continue;
      func::FuncOp grad = gradientOf.lookup(loss.getSymName());
      if (!grad) {
        loss.emitOpError() << "has no gradient function: step-micro-batch runs after "
                              "step-autodiff";
        return signalPassFailure();
      }
      pairs.push_back({loss, grad});
    }
    for (auto [loss, grad] : pairs)
      if (failed(accumulate(loss, grad, count, symbols, pipeline)))
        return signalPassFailure();
  }
};

} // namespace
