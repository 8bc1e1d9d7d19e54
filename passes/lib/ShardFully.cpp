//===- ShardFully.cpp - fully sharded data parallelism (FSDP, ZeRO-3) -----===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/LossFunctions.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace stepc {
#define GEN_PASS_DEF_STEPSHARDFULLY
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

RankedTensorType withRows(RankedTensorType type, int64_t rows) {
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = rows;
  return RankedTensorType::get(shape, type.getElementType());
}

Value splat(OpBuilder &b, Location loc, Type type, double value) {
  auto t = cast<RankedTensorType>(type);
  return b.create<ConstantOp>(loc,
                              DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), value)));
}

/// Where shards live: the last data axis, after the replica axes (none for
/// fsdp; [R] for hsdp's groups; [E] or [R, E] beside ep).
struct Layout {
  int64_t ranks;
  SmallVector<int64_t> replicaShape;
  int64_t replicas() const {
    int64_t n = 1;
    for (int64_t r : replicaShape)
      n *= r;
    return n;
  }
  mesh::MeshAxis shardAxis() const { return static_cast<mesh::MeshAxis>(replicaShape.size()); }
  /// Every data axis: the replica axes and the shard axis.
  SmallVector<mesh::MeshAxis> dataAxes() const {
    SmallVector<mesh::MeshAxis> axes;
    for (mesh::MeshAxis a = 0; a <= shardAxis(); ++a)
      axes.push_back(a);
    return axes;
  }
};

/// The full parameter, gathered from the shards: all_gather, then the rows
/// past d0 (padding) dropped.
Value gather(OpBuilder &b, Location loc, Value shard, const Layout &layout, int64_t rows) {
  auto type = cast<RankedTensorType>(shard.getType());
  int64_t ranks = layout.ranks;
  Value full = b.create<mesh::AllGatherOp>(loc, withRows(type, type.getDimSize(0) * ranks),
                                           kWorldMeshName,
                                           ArrayRef<mesh::MeshAxis>{layout.shardAxis()},
                                           shard, APInt(64, 0));
  if (rows == type.getDimSize(0) * ranks)
    return full;
  SmallVector<int64_t> offsets(type.getRank(), 0), sizes(withRows(type, rows).getShape());
  return b.create<SliceOp>(loc, full, b.getDenseI64ArrayAttr(offsets),
                           b.getDenseI64ArrayAttr(sizes));
}

LogicalResult shard(func::FuncOp grad, const Layout &layout, bool reshard) {
  const int64_t ranks = layout.ranks, world = layout.ranks * layout.replicas();
  Block &body = grad.getBody().front();
  DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : body)
    index[&op] = n++;
  OpBuilder b(grad.getContext());
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  SmallVector<Type> argTypes(grad.getArgumentTypes());
  DenseMap<unsigned, int64_t> rowsOf; // param argument -> d0
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto type = cast<RankedTensorType>(arg.getType());
    // (A balanced routing bias stays whole: every rank moves it alike.)
    if (!grad.getArgAttr(i, StepDialect::kParamAttrName) || type.getRank() == 0 ||
        grad.getArgAttr(i, StepDialect::kBalanceAttrName))
      continue;
    int64_t rows = type.getDimSize(0), shardRows = (rows + ranks - 1) / ranks;
    rowsOf[i] = rows;
    SmallVector<OpOperand *> forward, backward;
    for (OpOperand &use : arg.getUses()) {
      if (isa<func::ReturnOp>(use.getOwner()))
        continue;
      bool inForward = getPhase(use.getOwner()) == Phase::Forward;
      (inForward || !reshard ? forward : backward).push_back(&use);
    }
    arg.setType(withRows(type, shardRows));
    argTypes[i] = arg.getType();
    grad.setArgAttr(i, StepDialect::kShardOfAttrName, b.getI64IntegerAttr(rows));
    // One gather at the function start for the forward (and, without
    // resharding, every) use; another just before the first backward use.
    b.setInsertionPointToStart(&body);
    Value full = gather(b, grad.getLoc(), arg, layout, rows);
    for (OpOperand *use : forward)
      use->set(full);
    if (!backward.empty()) {
      Operation *first = backward.front()->getOwner();
      for (OpOperand *use : backward)
        if (index[use->getOwner()] < index[first])
          first = use->getOwner();
      b.setInsertionPoint(first);
      Value again = gather(b, first->getLoc(), arg, layout, rows);
      for (OpOperand *use : backward)
        use->set(again);
    }
  }
  grad.setFunctionType(FunctionType::get(grad.getContext(), argTypes, grad.getResultTypes()));

  // Results: the loss averaged over the ranks; each gradient padded,
  // reduce-scattered to this rank's rows and scaled by 1/N.
  b.setInsertionPoint(ret);
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  SmallVector<unsigned> params;
  for (unsigned i = 0, e = grad.getNumArguments(); i < e; ++i)
    if (getTrainedParam(grad, i)) // one gradient each, in this order
      params.push_back(i);
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    // The loss function's outputs (after the gradients) stay this rank's;
    // its metrics are averaged as the loss is.
    const bool metric = hasResultRole(grad, k, Role::Metric);
    if (k > params.size() && !metric) {
      results.push_back(v);
      resultTypes.push_back(v.getType());
      continue;
    }
    auto type = cast<RankedTensorType>(v.getType());
    Location loc = ret.getLoc();
    Value mean;
    SmallVector<mesh::MeshAxis> allAxes = layout.dataAxes();
    if (k == 0 || metric || !rowsOf.count(params[k - 1])) {
      Value sum = b.create<mesh::AllReduceOp>(loc, type, kWorldMeshName, allAxes, v,
                                              mesh::ReductionKind::Sum);
      mean = b.create<MulOp>(loc, sum, splat(b, loc, type, 1.0 / world));
    } else {
      int64_t rows = rowsOf[params[k - 1]], shardRows = (rows + ranks - 1) / ranks;
      Value padded = v;
      if (shardRows * ranks != rows) {
        SmallVector<int64_t> low(type.getRank(), 0), high(type.getRank(), 0);
        high[0] = shardRows * ranks - rows;
        padded = b.create<PadOp>(loc, v, b.getDenseI64ArrayAttr(low), b.getDenseI64ArrayAttr(high));
      }
      auto shardType = withRows(type, shardRows);
      Value scattered = b.create<mesh::ReduceScatterOp>(
          loc, shardType, kWorldMeshName, ArrayRef<mesh::MeshAxis>{layout.shardAxis()}, padded,
          mesh::ReductionKind::Sum, APInt(64, 0));
      // The replica axes hold replicas of each shard's gradient; sum them.
      // (Not over an expert weight's ep axis: its ranks hold other
      // experts, each with every rank's tokens already.)
      auto split = grad.getArgAttrOfType<DictionaryAttr>(params[k - 1],
                                                         StepDialect::kTpShardAttrName);
      auto splitAxis = split ? split.getAs<IntegerAttr>("axis") : IntegerAttr();
      SmallVector<mesh::MeshAxis> replicaAxes;
      for (mesh::MeshAxis a = 0; a < layout.shardAxis(); ++a)
        if (!(splitAxis && splitAxis.getInt() == a))
          replicaAxes.push_back(a);
      if (!replicaAxes.empty())
        scattered = b.create<mesh::AllReduceOp>(loc, shardType, kWorldMeshName, replicaAxes,
                                                scattered, mesh::ReductionKind::Sum);
      mean = b.create<MulOp>(loc, scattered, splat(b, loc, shardType, 1.0 / world));
    }
    results.push_back(mean);
    resultTypes.push_back(mean.getType());
  }
  ret.getOperandsMutable().assign(results);
  grad.setFunctionType(FunctionType::get(grad.getContext(), argTypes, resultTypes));
  setMissingPhases(body, Phase::Collective);
  return success();
}

struct StepShardFullyPass : public stepc::impl::StepShardFullyBase<StepShardFullyPass> {
  using StepShardFullyBase::StepShardFullyBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1 || replicas < 1) {
      emitError(module.getLoc()) << "step-shard-fully expects ranks and replicas >= 1, got "
                         << ranks.getValue() << " and " << replicas.getValue();
      return signalPassFailure();
    }
    Layout layout{ranks, SmallVector<int64_t>(replicaShape.begin(), replicaShape.end())};
    if (layout.replicaShape.empty() && replicas > 1)
      layout.replicaShape.push_back(replicas);
    if (llvm::any_of(layout.replicaShape, [](int64_t r) { return r < 1; }) ||
        (replicas > 1 && layout.replicas() != replicas)) {
      emitError(module.getLoc()) << "step-shard-fully expects replica-shape of positive sizes "
                                    "whose product is replicas ("
                                 << replicas.getValue() << ")";
      return signalPassFailure();
    }
    SmallVector<int64_t> meshShape(layout.replicaShape);
    meshShape.push_back(ranks);
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToStart(module.getBody());
    // With tp, step-shard-tensor made the mesh: these axes, then tp.
    if (!module.lookupSymbol(kWorldMeshName))
      b.create<mesh::MeshOp>(module.getLoc(), kWorldMeshName, meshShape);
    bool any = false;
    for (auto grad : llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
      if (!grad->hasAttr(StepDialect::kGradientAttrName))
        continue;
      any = true;
      if (failed(shard(grad, layout, reshard)))
        return signalPassFailure();
      // The data ranks: the replica axes' ranks too.
      SmallVector<int16_t> dataAxes(layout.dataAxes());
      if (failed(offsetDropoutRows(grad, StepDialect::kRankRowsAttrName, dataAxes,
                                   ranks * layout.replicas())) ||
          failed(sumTokenCounts(grad, StepDialect::kRankRowsAttrName, dataAxes,
                                ranks * layout.replicas())))
        return signalPassFailure();
    }
    if (!any) {
      emitError(module.getLoc()) << "no function is marked '" << StepDialect::kGradientAttrName
                         << "' (run step-autodiff first)";
      return signalPassFailure();
    }
  }
};

} // namespace
