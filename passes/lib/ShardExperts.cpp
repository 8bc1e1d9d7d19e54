//===- ShardExperts.cpp - expert parallelism (ep:E) -----------------------===//
//
// Each rank holds E/ep experts of every mixture-of-experts layer; a token's
// rows reach its experts' ranks by one all-to-all and come back by another.
// Rewrites the loss function before step-autodiff (the backward follows from
// the all-to-alls' own gradients). Static and dropless: the grouped dispatch
// gives each destination rank a block of N·K rows, room for every pair.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/ADT/SetVector.h"

namespace stepc {
#define GEN_PASS_DEF_STEPSHARDEXPERTS
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

struct StepShardExpertsPass : public stepc::impl::StepShardExpertsBase<StepShardExpertsPass> {
  using StepShardExpertsBase::StepShardExpertsBase;

  /// Block i of `v` (split along dimension 0) to rank i of the ep axis.
  Value exchange(OpBuilder &b, Location loc, Value v) {
    return b.create<mesh::AllToAllOp>(
        loc, v.getType(), kWorldMeshName,
        ArrayRef<mesh::MeshAxis>{static_cast<mesh::MeshAxis>(axis.getValue())}, v,
        APInt(64, 0), APInt(64, 0));
  }

    /// The ops that read the dispatched rows up to (not including) the
  /// combines, and the combines; fails at an op that is neither a grouped
  /// product, elementwise math nor a combine.
  LogicalResult expertRegion(MoeDispatchOp dispatch, SetVector<Operation *> &region,
                             SmallVectorImpl<MoeCombineOp> &combines) {
    SmallVector<Value> work{dispatch.getRows()};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (auto combine = dyn_cast<MoeCombineOp>(user)) {
          if (combine.getRows() != v || combine.getExperts() != dispatch.getExperts())
            return combine.emitOpError()
                   << "combines rows of another routing: expert parallelism needs each "
                      "layer's combine to read its dispatch's rows with its experts";
          if (!llvm::is_contained(combines, combine))
            combines.push_back(combine);
          continue;
        }
        // Row by row: the grouped products and elementwise math.
        if (!isa<GroupedMatmulOp, ScalarMathOpInterface>(user))
          return user->emitOpError()
                 << "reads an expert's rows between moe_dispatch and moe_combine: expert "
                    "parallelism passes them only through grouped products and elementwise ops";
        if (region.insert(user))
          llvm::append_range(work, user->getResults());
      }
    }
    if (combines.empty())
      return dispatch.emitOpError() << "has no moe_combine: its rows never return to their tokens";
    return success();
  }

  /// Gives the expert weight `arg` of `loss` this rank's E/ep experts.
  LogicalResult shardWeight(func::FuncOp loss, BlockArgument arg, int64_t experts,
                            const SetVector<Operation *> &region, Operation *at) {
    if (!loss.getArgAttr(arg.getArgNumber(), StepDialect::kParamAttrName))
      return at->emitOpError() << "multiplies by experts that are not a parameter of the model: "
                                  "expert parallelism shards parameters only";
    for (Operation *user : arg.getUsers())
      if (!region.contains(user) || !isa<GroupedMatmulOp>(user) ||
          cast<GroupedMatmulOp>(user).getRhs() != arg)
        return user->emitOpError() << "uses an expert weight outside its layer's grouped "
                                      "products: expert parallelism cannot shard it";
    if (loss.getArgAttr(arg.getArgNumber(), StepDialect::kTpShardAttrName))
      return success(); // another product of the layer did it
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getDimSize(0) != experts)
      return at->emitOpError() << "multiplies by " << type.getDimSize(0) << " experts' weights, "
                               << "its dispatch routes to " << experts;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = experts / ep;
    arg.setType(RankedTensorType::get(shape, type.getElementType()));
    OpBuilder b(loss.getContext());
    loss.setArgAttr(arg.getArgNumber(), StepDialect::kTpShardAttrName,
                    b.getDictionaryAttr({b.getNamedAttr("dim", b.getI64IntegerAttr(0)),
                                         b.getNamedAttr("segments",
                                                        b.getDenseI64ArrayAttr({experts})),
                                         b.getNamedAttr("axis", b.getI64IntegerAttr(axis))}));
    return success();
  }

  LogicalResult shardLayer(func::FuncOp loss, MoeDispatchOp dispatch) {
    int64_t experts = dispatch.getNumExperts();
    if (dispatch.getGroups() != 1)
      return dispatch.emitOpError() << "is grouped already: expert parallelism applies once";
    if (experts % ep != 0)
      return dispatch.emitOpError() << "routes to " << experts << " experts, which ep:" << ep.getValue()
                                    << " does not divide";
    SetVector<Operation *> region;
    SmallVector<MoeCombineOp> combines;
    if (failed(expertRegion(dispatch, region, combines)))
      return failure();
    // The layer's grouped products take the received counts; other ops
    // outside the experts (a metric of the pairs kept) this rank's own. A
    // product elsewhere, or another op among the experts, has no such rule.
    for (Operation *user : dispatch.getCounts().getUsers())
      if (region.contains(user) != isa<GroupedMatmulOp>(user))
        return user->emitOpError() << "reads the dispatch's counts: expert parallelism passes "
                                      "the received ones to the layer's grouped products and "
                                      "this rank's own to what is outside its experts";
    for (Operation *op : region)
      if (auto product = dyn_cast<GroupedMatmulOp>(op)) {
        if (product.getCounts() != dispatch.getCounts())
          return product.emitOpError() << "groups the dispatched rows by other counts than "
                                          "their dispatch's: expert parallelism cannot "
                                          "exchange them";
        auto weight = dyn_cast<BlockArgument>(product.getRhs());
        if (!weight || weight.getOwner() != &loss.getBody().front())
          return product.emitOpError() << "multiplies by experts that are not a parameter of "
                                          "the model: expert parallelism shards parameters only";
        if (failed(shardWeight(loss, weight, experts, region, product)))
          return failure();
      }

    // Dispatch in ep blocks, one per destination; exchange rows and counts.
    Location loc = dispatch.getLoc();
    OpBuilder b(dispatch);
    auto grouped = b.create<MoeDispatchOp>(loc, dispatch.getInput(), dispatch.getExperts(),
                                           dispatch.getNumExpertsAttr(), b.getI64IntegerAttr(ep),
                                           dispatch.getCapacityAttr(), dispatch.getSegmentAttr());
    Value rows = exchange(b, loc, grouped.getRows());
    auto countsType = RankedTensorType::get(
        {ep, experts / ep}, cast<RankedTensorType>(grouped.getCounts().getType()).getElementType());
    Value counts = exchange(b, loc, b.create<ReshapeOp>(loc, countsType, grouped.getCounts()));
    dispatch.getRows().replaceAllUsesWith(rows);
    // The products take the received counts; anything else (a metric of
    // the pairs kept) this rank's own, which mean what one rank's did for
    // its tokens.
    dispatch.getCounts().replaceUsesWithIf(
        counts, [&](OpOperand &use) { return region.contains(use.getOwner()); });
    dispatch.getCounts().replaceAllUsesWith(grouped.getCounts());
    dispatch.erase();
    // The ops between take the received row count.
    for (Operation &each : loss.getBody().front()) {
      Operation *op = &each;
      if (!region.contains(op))
        continue;
      SmallVector<Type> types;
      if (failed(cast<InferTypeOpInterface>(op).inferReturnTypes(
              op->getContext(), op->getLoc(), op->getOperands(), op->getAttrDictionary(),
              op->getPropertiesStorage(), op->getRegions(), types)))
        return failure();
      for (auto [result, type] : llvm::zip(op->getResults(), types))
        result.setType(type);
    }
    // The products' rows go home, and are combined where the grouped
    // dispatch put them.
    for (MoeCombineOp combine : combines) {
      b.setInsertionPoint(combine);
      Value home = exchange(b, combine.getLoc(), combine.getRows());
      auto grouped = b.create<MoeCombineOp>(combine.getLoc(), home, combine.getGates(),
                                            combine.getExperts(), combine.getNumExpertsAttr(),
                                            b.getI64IntegerAttr(ep), combine.getCapacityAttr(),
                                            combine.getSegmentAttr());
      combine.replaceAllUsesWith(grouped.getResult());
      combine.erase();
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<int64_t> shape(meshShape.begin(), meshShape.end());
    if (shape.empty())
      shape.push_back(ep);
    if (ep < 1 || axis < 0 || axis >= int64_t(shape.size()) || shape[axis] != ep) {
      emitError(module.getLoc()) << "step-shard-experts expects ep >= 1 and a mesh whose axis "
                                 << axis.getValue() << " has ep ranks";
      return signalPassFailure();
    }
    if (!module.lookupSymbol(kWorldMeshName)) {
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPointToStart(module.getBody());
      auto mesh = b.create<mesh::MeshOp>(module.getLoc(), kWorldMeshName, shape);
      mesh->setAttr(StepDialect::kEpAxisAttrName, b.getI64IntegerAttr(axis));
    }
    bool found = false;
    for (auto loss : module.getOps<func::FuncOp>()) {
      if (!loss->hasAttr(StepDialect::kLossAttrName))
        continue;
      SmallVector<MoeDispatchOp> dispatches(loss.getBody().front().getOps<MoeDispatchOp>());
      for (MoeDispatchOp dispatch : dispatches) {
        if (failed(shardLayer(loss, dispatch)))
          return signalPassFailure();
        found = true;
      }
      SmallVector<Type> args;
      for (BlockArgument arg : loss.getArguments())
        args.push_back(arg.getType());
      loss.setFunctionType(FunctionType::get(loss.getContext(), args, loss.getResultTypes()));
    }
    if (!found) {
      emitError(module.getLoc()) << "ep:" << ep.getValue() << " needs a mixture-of-experts layer "
                                 << "(step.moe_dispatch); this model has none";
      signalPassFailure();
    }
  }
};

} // namespace
