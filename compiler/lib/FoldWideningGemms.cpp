//===- FoldWideningGemms.cpp - bf16 GEMMs that write f32 ------------------===//
//
// Under --precision=bf16 every GEMM's bf16 result is widened for its f32
// consumers (step-mixed-precision). The CPU's bf16 GEMM accumulates in f32
// and can write that sum directly: a GEMM whose every user widens it
// becomes a stepk.gemm with an f32 result, and the widening loops go.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

namespace stepc {
#define GEN_PASS_DEF_STEPFOLDWIDENINGGEMMS
#include "stepc/Compiler/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The converts to f32 that are all of `v`'s users, or none if another op
/// reads it.
SmallVector<ConvertOp> wideningUsers(Value v) {
  SmallVector<ConvertOp> converts;
  for (Operation *user : v.getUsers()) {
    auto convert = dyn_cast<ConvertOp>(user);
    if (!convert || !convert.getType().getElementType().isF32())
      return {};
    converts.push_back(convert);
  }
  return converts;
}

template <typename OpT>
void foldWidening(OpT op, bool sharedRhs) {
  RankedTensorType lhs = op.getLhs().getType();
  if (!lhs.getElementType().isBF16())
    return;
  SmallVector<ConvertOp> converts = wideningUsers(op.getResult());
  if (converts.empty())
    return;
  OpBuilder b(op);
  auto gemm = b.create<stepk::GemmOp>(op.getLoc(), converts.front().getType(), Type(),
                                      op.getLhs(), op.getRhs(), Value(), Value(),
                                      op.getTransposeA(), op.getTransposeB(), sharedRhs,
                                      stepk::Epilogue::none);
  copyPhase(op, gemm);
  for (ConvertOp convert : converts) {
    convert.getResult().replaceAllUsesWith(gemm.getResult());
    convert.erase();
  }
  op.erase();
}

struct StepFoldWideningGemmsPass
    : public stepc::impl::StepFoldWideningGemmsBase<StepFoldWideningGemmsPass> {
  void runOnOperation() override {
    for (func::FuncOp step : trainingSteps(getOperation())) {
      SmallVector<Operation *> gemms;
      for (Operation &op : step.getBody().front())
        if (isa<MatmulOp, BatchMatmulOp>(op))
          gemms.push_back(&op);
      for (Operation *op : gemms) {
        if (auto m = dyn_cast<MatmulOp>(op))
          foldWidening(m, /*sharedRhs=*/true);
        else
          foldWidening(cast<BatchMatmulOp>(op), /*sharedRhs=*/false);
      }
    }
  }
};

} // namespace
