//===- Autodiff.cpp - reverse-mode autodiff of loss functions -------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/LossFunctions.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace stepc {
#define GEN_PASS_DEF_STEPAUTODIFF
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// A zero tensor of `type`.
Value zeros(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(tensor, b.getFloatAttr(tensor.getElementType(), 0.0)));
}

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// The rules of tensor parallelism's two collectives (Megatron's f and g),
/// kept here so the Step dialect does not depend on the mesh dialect: a
/// forward all-reduce of partial sums passes its gradient through (every
/// rank's copy of the sum feeds the same replicated loss), and
/// copy_to_parallel's gradient is the sum of the ranks' partial gradients.
/// Fails (building nothing) for any other op.
LogicalResult collectiveVjp(OpBuilder &b, Operation *op, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  if (auto sum = dyn_cast<mesh::AllReduceOp>(op)) {
    if (sum.getReduction() != mesh::ReductionKind::Sum)
      return failure();
    operandGrads.push_back(resultGrads[0]);
    return success();
  }
  // A gather's inputs are each rank's part of the replicated result: the
  // gradient of a part is its slice of the result's gradient (the same on
  // every rank), and a slice's gradient is the gather of the parts'.
  if (auto gather = dyn_cast<mesh::AllGatherOp>(op)) {
    // A slice of an all-reduce over the same axes (a gathered value that
    // entered a tp region) is one reduce-scatter: half the bytes.
    auto sum = resultGrads[0].getDefiningOp<mesh::AllReduceOp>();
    // (At this point nothing reads the cotangent yet.)
    if (sum && sum->use_empty() && sum.getMeshAxes() == gather.getMeshAxes() &&
        sum.getReduction() == mesh::ReductionKind::Sum) {
      Value partials = sum.getInput();
      sum.erase();
      operandGrads.push_back(b.create<mesh::ReduceScatterOp>(
          op->getLoc(), gather.getInput().getType(), gather.getMesh(), gather.getMeshAxes(),
          partials, mesh::ReductionKind::Sum, gather.getGatherAxis()));
      return success();
    }
    operandGrads.push_back(b.create<mesh::AllSliceOp>(
        op->getLoc(), gather.getInput().getType(), gather.getMesh(), gather.getMeshAxes(),
        resultGrads[0], gather.getGatherAxis()));
    return success();
  }
  // reduce_scatter = slice of an all-reduce: the gradient is gathered.
  if (auto scatter = dyn_cast<mesh::ReduceScatterOp>(op)) {
    if (scatter.getReduction() != mesh::ReductionKind::Sum)
      return failure();
    operandGrads.push_back(b.create<mesh::AllGatherOp>(
        op->getLoc(), scatter.getInput().getType(), scatter.getMesh(), scatter.getMeshAxes(),
        resultGrads[0], scatter.getScatterAxis()));
    return success();
  }
  if (auto slice = dyn_cast<mesh::AllSliceOp>(op)) {
    operandGrads.push_back(b.create<mesh::AllGatherOp>(
        op->getLoc(), slice.getInput().getType(), slice.getMesh(), slice.getMeshAxes(),
        resultGrads[0], slice.getSliceAxis()));
    return success();
  }
  // all_to_all along one dimension sends block j to rank j and receives
  // rank j's block i: its transpose is the same exchange.
  if (auto exchange = dyn_cast<mesh::AllToAllOp>(op)) {
    if (exchange.getSplitAxis() != exchange.getConcatAxis())
      return failure();
    operandGrads.push_back(b.create<mesh::AllToAllOp>(
        op->getLoc(), resultGrads[0].getType(), exchange.getMesh(), exchange.getMeshAxes(),
        resultGrads[0], exchange.getSplitAxis(), exchange.getConcatAxis()));
    return success();
  }
  if (auto copy = dyn_cast<CopyToParallelOp>(op)) {
    SmallVector<mesh::MeshAxis> axes(copy.getMeshAxes());
    operandGrads.push_back(b.create<mesh::AllReduceOp>(
        op->getLoc(), resultGrads[0].getType(), copy.getMeshAttr().getValue(), axes,
        resultGrads[0], mesh::ReductionKind::Sum));
    return success();
  }
  return failure();
}

} // namespace

namespace {

/// The gradient function of `loss` (its arguments; the loss, one gradient
/// per trained parameter, then the loss function's outputs, computed by
/// the forward and never differentiated), inserted after it. The trained
/// parameters' argument indices into `params`.
func::FuncOp declareGradient(OpBuilder &b, func::FuncOp loss, SmallVectorImpl<unsigned> &params) {
  SmallVector<Type> resultTypes{loss.getResultTypes().front()};
  SmallVector<Attribute> resultAttrs{resultRoleDict(ResultAttr::get(b.getContext(), Role::Loss))};
  for (unsigned i = 0, e = loss.getNumArguments(); i < e; ++i) {
    // A frozen parameter gets no gradient: its weight-gradient products
    // are never built (nothing would read them).
    ParamAttr param = getTrainedParam(loss, i);
    if (!param)
      continue;
    params.push_back(i);
    resultTypes.push_back(loss.getArgumentTypes()[i]);
    resultAttrs.push_back(
        resultRoleDict(ResultAttr::get(b.getContext(), Role::Grad, param.getName())));
  }
  for (unsigned i = 1, e = loss.getNumResults(); i < e; ++i) {
    resultTypes.push_back(loss.getResultTypes()[i]);
    resultAttrs.push_back(resultRoleDict(getResultRole(loss, i)));
  }
  auto grad = b.create<func::FuncOp>(loss.getLoc(), (loss.getSymName() + "_grad").str(),
                                     b.getFunctionType(loss.getArgumentTypes(), resultTypes));
  if (ArrayAttr argAttrs = loss.getAllArgAttrs())
    grad.setAllArgAttrs(argAttrs);
  grad.setAllResultAttrs(resultAttrs);
  grad->setAttr(StepDialect::kGradientAttrName, FlatSymbolRefAttr::get(loss.getSymNameAttr()));
  return grad;
}

/// Values computed from a trained parameter (through anything but a
/// stop_gradient): an attention mask among them would need the gradient no
/// rule builds, so it is refused rather than trained as a constant.
LogicalResult checkAttentionMasks(Block &body, ArrayRef<unsigned> params,
                                  ArrayRef<Operation *> forward) {
  DenseSet<Value> fromParams;
  for (unsigned i : params)
    fromParams.insert(body.getArgument(i));
  for (Operation *op : forward)
    if (!isa<StopGradientOp>(op) && llvm::any_of(op->getOperands(), [&](Value v) {
          return fromParams.contains(v);
        }))
      fromParams.insert(op->result_begin(), op->result_end());
  for (Operation *op : forward)
    if (auto a = dyn_cast<AttentionOp>(op); a && a.getMask() && fromParams.contains(a.getMask()))
      return a.emitOpError() << "has a mask computed from a trained parameter: stepc builds no "
                                "gradient for attention's mask (stop its gradient, or write "
                                "the biased softmax op by op)";
  return success();
}

/// Each forward op's rule, in reverse order, before `ret`: the cotangents
/// of its operands from those of its results, summed over the uses.
/// `markNew(op)` runs after each op's rule.
LogicalResult backpropagate(OpBuilder &b, Operation *ret, ArrayRef<Operation *> forward,
                            DenseMap<Value, Value> &cotangents,
                            function_ref<void(Operation *)> markNew) {
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool needed = false;
    for (Value result : op->getResults()) {
      Value ct = cotangents.lookup(result);
      needed |= static_cast<bool>(ct);
      resultGrads.push_back(ct);
    }
    if (!needed)
      continue;
    b.setInsertionPoint(ret);
    SmallVector<Value> operandGrads;
    if (failed(collectiveVjp(b, op, resultGrads, operandGrads))) {
      auto rule = dyn_cast<AutodiffOpInterface>(op);
      if (!rule)
        return op->emitOpError() << "has no autodiff rule";
      if (failed(rule.buildVjp(b, resultGrads, operandGrads)))
        return failure();
    }
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError() << "autodiff rule returned " << operandGrads.size()
                               << " cotangents for " << op->getNumOperands() << " operands";
    for (auto [operand, ct] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!ct || !isFloatTensor(operand))
        continue;
      Value &sum = cotangents[operand];
      sum = sum ? b.create<AddOp>(op->getLoc(), sum, ct).getResult() : ct;
    }
    markNew(op);
  }
  return success();
}

/// The gradient's body once returned: copy_to_parallel is the identity
/// (its work was its gradient's all-reduce), quantize_grad_fp8 likewise
/// (its work its gradient's rounding); cotangents nothing returns (a
/// frozen parameter's, a float input's), which each rule builds for every
/// operand, are erased.
void finishGradient(Block &body) {
  for (auto copy : llvm::make_early_inc_range(body.getOps<CopyToParallelOp>())) {
    copy.getResult().replaceAllUsesWith(copy.getInput());
    copy.erase();
  }
  for (auto q : llvm::make_early_inc_range(body.getOps<QuantizeGradFp8Op>())) {
    q.getResult().replaceAllUsesWith(q.getInput());
    q.erase();
  }
  setMissingPhases(body, Phase::Backward);
  SmallVector<Operation *> made;
  for (Operation &op : body.without_terminator())
    if (getPhase(&op) == Phase::Backward)
      made.push_back(&op);
  for (Operation *op : llvm::reverse(made))
    if (isOpTriviallyDead(op))
      op->erase();
}

} // namespace

FailureOr<func::FuncOp> stepc::differentiateLoss(func::FuncOp loss, SymbolTable &symbols,
                                                 bool recordOrigins,
                                                 SmallVectorImpl<unsigned> *unreached) {
  OpBuilder b(loss);
  b.setInsertionPointAfter(loss);
  Location loc = loss.getLoc();
  SmallVector<unsigned> paramIndices;
  func::FuncOp grad = declareGradient(b, loss, paramIndices);
  symbols.insert(grad);

  // Forward: a copy of the loss function's body.
  IRMapping mapping;
  loss.getBody().cloneInto(&grad.getBody(), mapping);
  Block &body = grad.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value lossValue = ret.getOperand(0);
  for (Operation &op : body.without_terminator())
    setPhase(&op, Phase::Forward);
  // Each op made while `op` is differentiated is marked with its position:
  // the unmarked ops before the return (a rule may erase an op it made
  // earlier, so no op is remembered across rules).
  DenseMap<Operation *, int64_t> position;
  auto markNew = [&](Operation *origin) {
    if (!recordOrigins)
      return;
    for (Operation *made = ret->getPrevNode();
         made && !made->hasAttr(StepDialect::kOriginAttrName); made = made->getPrevNode())
      made->setAttr(StepDialect::kOriginAttrName, b.getI64IntegerAttr(position[origin]));
  };
  if (recordOrigins)
    for (Operation &op : body.without_terminator()) {
      position[&op] = static_cast<int64_t>(position.size());
      op.setAttr(StepDialect::kOriginAttrName, b.getI64IntegerAttr(position[&op]));
    }
  b.setInsertionPoint(ret);

  // Backward: cotangents in reverse order, seeded with d loss = 1.
  DenseMap<Value, Value> cotangents;
  auto lossType = cast<RankedTensorType>(lossValue.getType());
  cotangents[lossValue] = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(lossType, b.getFloatAttr(lossType.getElementType(), 1.0)));
  if (recordOrigins && lossValue.getDefiningOp())
    cotangents[lossValue].getDefiningOp()->setAttr(
        StepDialect::kOriginAttrName, b.getI64IntegerAttr(position[lossValue.getDefiningOp()]));
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  if (failed(checkAttentionMasks(body, paramIndices, forward)) ||
      failed(backpropagate(b, ret, forward, cotangents, markNew)))
    return failure();

  SmallVector<Value> results{lossValue};
  for (unsigned i : paramIndices) {
    Value arg = body.getArgument(i);
    Value ct = cotangents.lookup(arg);
    if (!ct && unreached)
      unreached->push_back(i);
    results.push_back(ct ? ct : zeros(b, loc, arg.getType()));
  }
  for (Value output : ret.getOperands().drop_front())
    results.push_back(output);
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  finishGradient(body);
  return grad;
}

namespace {

struct StepAutodiffPass : public stepc::impl::StepAutodiffBase<StepAutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> losses;
    for (auto function : module.getOps<func::FuncOp>())
      if (function->hasAttr(StepDialect::kLossAttrName))
        losses.push_back(function);
    if (losses.empty()) {
      emitError(module.getLoc()) << "no function is marked '" << StepDialect::kLossAttrName << "'";
      return signalPassFailure();
    }
    // Differentiating twice would add a second gradient of each loss.
    for (auto function : module.getOps<func::FuncOp>())
      if (function->hasAttr(StepDialect::kGradientAttrName)) {
        function.emitOpError() << "is already a gradient function: step-autodiff runs once";
        return signalPassFailure();
      }
    for (func::FuncOp loss : losses) {
      bool hasParams = false, trains = false;
      for (unsigned i = 0, e = loss.getNumArguments(); i < e; ++i) {
        hasParams |= static_cast<bool>(loss.getArgAttr(i, StepDialect::kParamAttrName));
        trains |= static_cast<bool>(getTrainedParam(loss, i));
      }
      if (!hasParams) {
        loss.emitOpError()
            << "has no parameters (no argument marked 'step.param'): nothing to train";
        return signalPassFailure();
      }
      if (!trains) {
        loss.emitOpError() << "has only frozen parameters: nothing to train";
        return signalPassFailure();
      }
      SmallVector<unsigned> unreached;
      FailureOr<func::FuncOp> grad = differentiateLoss(loss, symbols, false, &unreached);
      if (failed(grad))
        return signalPassFailure();
      if (unreached.empty())
        continue;
      // A parameter the loss does not depend on has no gradient: PyTorch's
      // optimizers skip it (no update, no weight decay, no state), so it is
      // frozen here, with a warning, and the gradient made again.
      int64_t trained = 0;
      for (unsigned i = 0, e = loss.getNumArguments(); i < e; ++i)
        trained += static_cast<bool>(getTrainedParam(loss, i));
      if (static_cast<int64_t>(unreached.size()) == trained) {
        loss.emitOpError() << "has a loss that depends on none of its parameters: nothing "
                              "to train";
        return signalPassFailure();
      }
      for (unsigned i : unreached) {
        ParamAttr param = getTrainedParam(loss, i);
        emitWarning(loss.getArgument(i).getLoc())
            << "parameter '" << param.getName()
            << "' does not affect the loss: it is held but not trained (frozen), as "
               "PyTorch's optimizers skip a parameter without a gradient";
        loss.setArgAttr(i, StepDialect::kParamAttrName, param.withFrozen(true));
      }
      symbols.erase(*grad);
      if (failed(differentiateLoss(loss, symbols)))
        return signalPassFailure();
    }
  }
};

} // namespace
