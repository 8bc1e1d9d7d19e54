//===- RebindBatch.cpp - change the batch size of a loss function ---------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/LossFunctions.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <map>

namespace stepc {
#define GEN_PASS_DEF_STEPREBINDBATCH
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// `type` with its leading dimension scaled by newBatch/oldBatch, when that
/// is whole; unchanged otherwise. Leading 1s are skipped: tensor
/// parallelism's [1, B, T] views carry the batch in their second dimension.
RankedTensorType scaleLeading(RankedTensorType type, int64_t oldBatch, int64_t newBatch) {
  int64_t d = 0;
  while (d + 1 < type.getRank() && type.getDimSize(d) == 1)
    ++d;
  if (type.getRank() == 0 || (type.getDimSize(d) * newBatch) % oldBatch != 0)
    return type;
  SmallVector<int64_t> shape(type.getShape());
  shape[d] = shape[d] * newBatch / oldBatch;
  return RankedTensorType::get(shape, type.getElementType());
}

/// The result type of a collective (or copy_to_parallel) whose operand went
/// from `before` to `after`: each result dimension scales as the operand's
/// does (a gather or slice axis keeps its ratio to the operand).
RankedTensorType scaleLike(RankedTensorType result, RankedTensorType before,
                           RankedTensorType after) {
  if (result.getRank() != before.getRank())
    return result;
  SmallVector<int64_t> shape(result.getShape());
  for (int64_t d = 0; d < result.getRank(); ++d)
    if (before.getDimSize(d) != after.getDimSize(d) &&
        (shape[d] * after.getDimSize(d)) % before.getDimSize(d) == 0)
      shape[d] = shape[d] * after.getDimSize(d) / before.getDimSize(d);
  return RankedTensorType::get(shape, result.getElementType());
}

} // namespace

FailureOr<int64_t> stepc::inputBatch(func::FuncOp loss, StringRef action) {
  int64_t batch = 0;
  for (unsigned i = 0, e = loss.getNumArguments(); i < e; ++i) {
    if (!loss.getArgAttr(i, StepDialect::kInputAttrName))
      continue;
    auto type = cast<RankedTensorType>(loss.getArgumentTypes()[i]);
    if (type.getRank() == 0 || (batch && type.getDimSize(0) != batch))
      return emitError(loss.getArgument(i).getLoc())
             << "cannot " << action << ": inputs disagree on dimension 0";
    batch = type.getDimSize(0);
  }
  if (!batch)
    return loss.emitOpError() << "has no inputs: cannot " << action;
  return batch;
}

/// After a split into `ranks` parts (marked `dropoutRowsAttr`): each count of
/// targets whose rows the split divided counts its part's, which the split
/// sums; each dropout whose rows it divided draws its part's rows.
static LogicalResult markSplitParts(func::FuncOp loss,
                                    ArrayRef<std::pair<Operation *, int64_t>> counts,
                                    ArrayRef<std::pair<DropoutOp, int64_t>> dropouts,
                                    StringRef dropoutRowsAttr, int64_t ranks) {
  for (auto [op, rows] : counts) {
    auto ce = dyn_cast<CrossEntropyOp>(op);
    Value targets = op->getOperand(ce ? 1 : 0);
    if (cast<RankedTensorType>(targets.getType()).getDimSize(0) == rows)
      continue;
    // The mean over this part's counted targets would weigh the parts
    // equally: the loss divides by the whole batch's count instead, a
    // count of this part's targets that the split sums (sumTokenCounts).
    Operation *count = op;
    if (ce) {
      OpBuilder b(ce);
      auto made = b.create<TokenCountOp>(ce.getLoc(), targets, ce.getIgnoreIndexAttr());
      copyPhase(ce, made);
      ce.getCountMutable().assign(made);
      count = made;
    }
    count->setAttr(dropoutRowsAttr, Builder(loss.getContext()).getI64IntegerAttr(ranks));
  }
  for (auto [d, rows] : dropouts) {
    int64_t now = d.getType().getDimSize(0);
    if (now == rows)
      continue;
    // Its part's rows would have to be added to a computed first row.
    if (d.getFirstRow())
      return d.emitOpError() << "draws 'rows from' a value of the model: its rows cannot "
                                "be split across data-parallel ranks or micro-batches";
    d->setAttr(dropoutRowsAttr, Builder(loss.getContext()).getI64IntegerAttr(now));
  }
  return success();
}

/// Gives `op` the types of the rebound batch: a collective scales like its
/// operand, a batch-shaped splat constant takes the part's shape, a
/// broadcast or reshape that makes the batch dimension makes the part's;
/// the rest by their shape rules. `before`: each value's type before.
static LogicalResult rebindOp(Operation &op, const DenseMap<Value, RankedTensorType> &before,
                              int64_t oldBatch, int64_t newBatch) {
  if (isa<mesh::AllReduceOp, mesh::AllGatherOp, mesh::AllSliceOp, mesh::AllToAllOp,
          mesh::ReduceScatterOp, CopyToParallelOp>(op)) {
    auto in = cast<RankedTensorType>(op.getOperand(0).getType());
    auto out = cast<RankedTensorType>(op.getResult(0).getType());
    op.getResult(0).setType(scaleLike(out, before.lookup(op.getOperand(0)), in));
    return success();
  }
  if (isa<IotaOp>(op))
    return success(); // its shape is its own, as a constant's
  // A splat constant shaped like the batch (a front end's scalar operand,
  // `0.5 * x`) takes the part's shape; other constants keep theirs.
  if (auto c = dyn_cast<ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    auto type = cast<RankedTensorType>(c.getType());
    if (dense && dense.isSplat() && type.getRank() >= 1 && type.getDimSize(0) == oldBatch) {
      auto scaled = scaleLeading(type, oldBatch, newBatch);
      c.setValueAttr(dense.resizeSplat(scaled));
      c.getResult().setType(scaled);
    }
    return success();
  }
  if (auto convert = dyn_cast<ConvertOp>(op)) {
    auto in = convert.getInput().getType();
    convert.getResult().setType(
        RankedTensorType::get(in.getShape(), convert.getType().getElementType()));
    return success();
  }
  if (isa<BroadcastOp>(op)) {
    auto in = cast<RankedTensorType>(op.getOperand(0).getType());
    auto out = cast<RankedTensorType>(op.getResult(0).getType());
    // Dimensions the operand had keep its (rebound) sizes: read off its
    // type before, as a batch rebound to 1 looks broadcast after; a
    // broadcast that adds the batch dimension, or expands a leading 1 to
    // it (a table [1, T, 1, D] over [B, T, H, D]), makes the part's.
    RankedTensorType was = before.lookup(op.getOperand(0));
    if (!was)
      was = in;
    SmallVector<int64_t> shape(out.getShape());
    int64_t added = out.getRank() - in.getRank();
    for (int64_t d = 0; d < in.getRank(); ++d)
      if (was.getDimSize(d) != 1)
        shape[d + added] = in.getDimSize(d);
    const bool makesLeading = added > 0 || (in.getRank() > 0 && was.getDimSize(0) == 1);
    if (makesLeading && out.getDimSize(0) == oldBatch &&
        (shape[0] * newBatch) % oldBatch == 0)
      shape[0] = shape[0] * newBatch / oldBatch;
    op.getResult(0).setType(RankedTensorType::get(shape, out.getElementType()));
    return success();
  }
  if (isa<ReshapeOp>(op)) {
    auto in = cast<RankedTensorType>(op.getOperand(0).getType());
    auto out = cast<RankedTensorType>(op.getResult(0).getType());
    // A reshape whose operand's batch was scaled scales its own.
    if (in.getNumElements() != out.getNumElements())
      op.getResult(0).setType(scaleLeading(out, oldBatch, newBatch));
    return success();
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    // A slice over the whole leading dimension keeps covering all of it.
    int64_t rows = slice.getInput().getType().getDimSize(0);
    SmallVector<int64_t> sizes(slice.getSizes());
    if (!sizes.empty() && slice.getOffsets()[0] == 0 && sizes[0] * newBatch == rows * oldBatch)
      sizes[0] = rows;
    slice.setSizes(sizes);
  }
  auto infer = dyn_cast<InferTypeOpInterface>(op);
  if (!infer)
    return op.emitOpError() << "has no shape rule: cannot rebind the batch";
  SmallVector<Type> types;
  if (failed(infer.inferReturnTypes(op.getContext(), op.getLoc(), op.getOperands(),
                                    op.getAttrDictionary(), op.getPropertiesStorage(),
                                    op.getRegions(), types)))
    return failure();
  for (auto [result, type] : llvm::zip(op.getResults(), types))
    result.setType(type);
  return success();
}

LogicalResult stepc::rebindBatch(func::FuncOp loss, int64_t globalBatch, int64_t ranks,
                                 StringRef dropoutRowsAttr) {
  FailureOr<int64_t> batch = inputBatch(loss, "rebind the batch");
  if (failed(batch))
    return failure();
  int64_t oldBatch = *batch;
  if (!globalBatch)
    globalBatch = oldBatch;
  if (globalBatch % ranks != 0)
    return loss.emitOpError() << "the global batch " << globalBatch
                              << " does not divide across " << ranks
                              << " data-parallel ranks";
  int64_t newBatch = globalBatch / ranks;
  if (oldBatch == newBatch)
    return success();

  Block &body = loss.getBody().front();
  // Each dropout's rows before: one the split divides draws its part's rows.
  SmallVector<std::pair<DropoutOp, int64_t>> dropouts;
  loss.walk([&](DropoutOp d) {
    if (d.getType().getRank() >= 1)
      dropouts.push_back({d, d.getType().getDimSize(0)});
  });
  // Each count of targets before: one the split divides counts its part's.
  SmallVector<std::pair<Operation *, int64_t>> counts;
  loss.walk([&](Operation *op) {
    auto ce = dyn_cast<CrossEntropyOp>(op);
    if ((ce && ce.getIgnoreIndex() && !ce.getCount()) || isa<TokenCountOp>(op)) {
      auto targets = cast<RankedTensorType>(op->getOperand(ce ? 1 : 0).getType());
      if (targets.getRank() >= 1)
        counts.push_back({op, targets.getDimSize(0)});
    }
  });
  SmallVector<Type> argTypes;
  for (BlockArgument arg : body.getArguments()) {
    if (loss.getArgAttr(arg.getArgNumber(), StepDialect::kInputAttrName)) {
      auto type = cast<RankedTensorType>(arg.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = newBatch;
      arg.setType(RankedTensorType::get(shape, type.getElementType()));
    }
    argTypes.push_back(arg.getType());
  }
  loss.setFunctionType(FunctionType::get(loss.getContext(), argTypes, loss.getResultTypes()));

  // Each value's type before rebinding (collectives scale like their operand).
  DenseMap<Value, RankedTensorType> before;
  for (Operation &op : body.without_terminator())
    for (Value operand : op.getOperands())
      if (auto t = dyn_cast<RankedTensorType>(operand.getType()))
        before.try_emplace(operand, t);
  for (Operation &op : body.without_terminator())
    if (failed(rebindOp(op, before, oldBatch, newBatch)))
      return failure();
  // The loss function's outputs take their new shapes (the loss stays a
  // scalar); a metric is a mean over the batch, whose parts' means the split
  // averages: its shape cannot follow the batch's rows.
  for (unsigned i = 1, e = loss.getNumResults(); i < e; ++i)
    if (hasResultRole(loss, i, Role::Metric) &&
        body.getTerminator()->getOperand(i).getType() != loss.getResultTypes()[i])
      return loss.emitOpError() << "metric '" << getResultRole(loss, i).getName()
                                << "' has the batch's rows: a metric is a measure of the whole "
                                   "batch (per-row values are an output)";
  loss.setFunctionType(FunctionType::get(loss.getContext(), argTypes,
                                         body.getTerminator()->getOperandTypes()));
  if (!dropoutRowsAttr.empty() &&
      failed(markSplitParts(loss, counts, dropouts, dropoutRowsAttr, ranks)))
    return failure();
  return verify(loss);
}

LogicalResult stepc::offsetDropoutRows(func::FuncOp function, StringRef rowsAttr,
                                       ArrayRef<int16_t> axes, int64_t parts) {
  OpBuilder b(function.getContext());
  b.setInsertionPointToStart(&function.getBody().front());
  auto i32 = RankedTensorType::get({}, b.getI32Type());
  // One table per (rows, constant first row): [c, rows + c, 2·rows + c, ...].
  std::map<std::pair<int64_t, int64_t>, Value> firsts;
  WalkResult walk = function.walk([&](DropoutOp d) -> WalkResult {
    auto rows = d->getAttrOfType<IntegerAttr>(rowsAttr);
    if (!rows)
      return WalkResult::advance();
    d->removeAttr(rowsAttr);
    // The first row step-micro-batch set (a constant), if any.
    int64_t constant = 0;
    if (Value old = d.getFirstRow()) {
      auto c = old.getDefiningOp<ConstantOp>();
      if (!c)
        return d.emitOpError() << "draws 'rows from' a computed value: its rows cannot be "
                                  "offset per rank";
      constant = (*cast<DenseElementsAttr>(c.getValue()).getValues<APInt>().begin()).getSExtValue();
    }
    if ((parts - 1) * rows.getInt() + constant > INT32_MAX)
      return d.emitOpError() << "has " << parts * rows.getInt()
                             << " rows across the ranks: a first row is an i32";
    Value &first = firsts[{rows.getInt(), constant}];
    if (!first) {
      Location loc = function.getLoc();
      SmallVector<int32_t> starts;
      for (int64_t p = 0; p < parts; ++p)
        starts.push_back(static_cast<int32_t>(p * rows.getInt() + constant));
      auto all = RankedTensorType::get({parts}, b.getI32Type());
      auto table = b.create<ConstantOp>(loc, DenseElementsAttr::get(all, ArrayRef<int32_t>(starts)));
      SmallVector<mesh::MeshAxis> meshAxes(axes.begin(), axes.end());
      auto mine = b.create<mesh::AllSliceOp>(loc, RankedTensorType::get({1}, b.getI32Type()),
                                             kWorldMeshName, meshAxes, table, APInt(64, 0));
      auto scalar = b.create<ReshapeOp>(loc, i32, mine);
      for (Operation *op : {table.getOperation(), mine.getOperation(), scalar.getOperation()})
        setPhase(op, Phase::Forward);
      first = scalar;
    }
    d.getFirstRowMutable().assign(first);
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult stepc::sumTokenCounts(func::FuncOp function, StringRef partsAttr,
                                    ArrayRef<int16_t> axes, int64_t parts) {
  SmallVector<Operation *> marked;
  function.walk([&](Operation *op) {
    if (!isa<DropoutOp>(op) && op->hasAttr(partsAttr))
      marked.push_back(op);
  });
  for (Operation *op : marked) {
    op->removeAttr(partsAttr);
    Value part = op->getResult(0);
    auto type = cast<RankedTensorType>(part.getType());
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Location loc = op->getLoc();
    SmallVector<mesh::MeshAxis> meshAxes(axes.begin(), axes.end());
    auto sum = b.create<mesh::AllReduceOp>(loc, type, kWorldMeshName, meshAxes, part,
                                           mesh::ReductionKind::Sum);
    auto inverse = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 1.0 / parts)));
    auto share = b.create<MulOp>(loc, sum, inverse);
    setPhase(sum, Phase::Collective);
    setPhase(inverse, Phase::Forward);
    setPhase(share, Phase::Forward);
    part.replaceAllUsesExcept(share, sum);
  }
  return success();
}

namespace {

struct StepRebindBatchPass : public stepc::impl::StepRebindBatchBase<StepRebindBatchPass> {
  using StepRebindBatchBase::StepRebindBatchBase;

  void runOnOperation() override {
    if (batch < 0 || ranks < 1) {
      emitError(getOperation().getLoc())
          << "step-rebind-batch expects batch >= 0 and ranks >= 1, got batch "
          << batch.getValue() << " and ranks " << ranks.getValue();
      return signalPassFailure();
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (function->hasAttr(StepDialect::kLossAttrName) &&
          failed(rebindBatch(function, batch, ranks,
                             ranks > 1 ? StringRef(StepDialect::kRankRowsAttrName) : StringRef())))
        return signalPassFailure();
  }
};

} // namespace
