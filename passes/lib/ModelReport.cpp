//===- ModelReport.cpp - what a loss function computes --------------------===//

#include "stepc/Analysis/ModelReport.h"
#include "stepc/Analysis/FlopCount.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

/// True if `value` reaches a matmul operand, directly or through ops that
/// only change its type or layout.
static bool feedsMatmul(Value value) {
  for (Operation *user : value.getUsers()) {
    if (isa<MatmulOp, BatchMatmulOp, GroupedMatmulOp>(user))
      return true;
    if (isa<ConvertOp, ReshapeOp, TransposeOp>(user) && feedsMatmul(user->getResult(0)))
      return true;
  }
  return false;
}

/// True if `value` is a frozen parameter, directly or through ops that only
/// change its type or layout: a product with it computes no gradient for it.
static bool isFrozenParameter(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isa<ConvertOp, ReshapeOp, TransposeOp, BroadcastOp>(def))
      return false;
    value = def->getOperand(0);
  }
  auto arg = cast<BlockArgument>(value);
  auto function = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  auto param = function ? function.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                                                 StepDialect::kParamAttrName)
                        : ParamAttr();
  return param && !param.isTrained();
}

FailureOr<ModelReport> stepc::analyzeModel(func::FuncOp loss) {
  ModelReport report;
  for (unsigned i = 0, e = loss.getNumArguments(); i < e; ++i) {
    if (!loss.getArgAttr(i, StepDialect::kParamAttrName))
      continue;
    BlockArgument arg = loss.getArgument(i);
    int64_t elements = cast<RankedTensorType>(arg.getType()).getNumElements();
    report.params += elements;
    report.paramTensors += 1;
    report.paramBytes += tensorBytes(arg.getType());
    if (feedsMatmul(arg))
      report.matmulParams += elements;
  }
  WalkResult walk = loss.walk([&](Operation *op) {
    if (op == loss.getOperation())
      return WalkResult::advance();
    FailureOr<OpFlops> flops = getModelFlops(op);
    if (failed(flops))
      return WalkResult::interrupt();
    // A product's backward is one product per operand, each as costly as
    // the forward: a frozen parameter's is never computed.
    if (isa<MatmulOp, BatchMatmulOp, GroupedMatmulOp>(op))
      for (Value operand : op->getOperands().take_front(2))
        if (isFrozenParameter(operand))
          flops->backward -= flops->forward;
    if (llvm::AddOverflow(report.forwardFlops, flops->forward, report.forwardFlops) ||
        llvm::AddOverflow(report.modelFlops, flops->forward + flops->backward,
                          report.modelFlops)) {
      op->emitOpError() << "brings the step's model FLOPs beyond 2^63 - 1";
      return WalkResult::interrupt();
    }
    if (auto ce = dyn_cast<CrossEntropyOp>(op))
      report.tokens += ce.getTargets().getType().getNumElements();
    if (auto pieces = op->getAttrOfType<IntegerAttr>(StepDialect::kLossTokensAttrName))
      report.tokens += pieces.getInt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return report;
}
