//===- FuseGemmEpilogues.cpp - epilogues into stepk.gemm ------------------===//
//
// The folds are the CUDA back end's (planCudaFusions decides them, the same
// rules the emitter used when they were a side table); this pass writes
// each decision into the IR as one stepk.gemm at the GEMM's position.
//
//===----------------------------------------------------------------------===//

#include "stepc/Compiler/Emitter.h"
#include "LoweringUtils.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

namespace stepc {
#define GEN_PASS_DEF_STEPFUSEGEMMEPILOGUES
#include "stepc/Compiler/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// Rewrites `op` and the ops `fusions` folds into it as one stepk.gemm at
/// the GEMM's position (planCudaFusions folds only what the epilogue can
/// read there: the bias and DGELU's pre-activation exist before the GEMM;
/// the verifier after the pass would catch a violation). `replaced` maps
/// the values earlier folds replaced (a forward GELU's pre-activation,
/// which a backward DGELU reads) to their stepk.gemm results.
/// The folded ops and the GEMM are appended to `dead`, erased once every
/// fold is done (so no value in `replaced` is freed and reused meanwhile).
void fold(Operation *op, const CudaFusions &fusions, DenseMap<Value, Value> &replaced,
          SmallVectorImpl<Operation *> &dead) {
  auto current = [&](Value v) {
    Value now = v ? replaced.lookup(v) : Value();
    return now ? now : v;
  };
  Value result = op->getResult(0);
  Value written = fusions.writesTo.lookup(result);
  if (!written)
    written = result;
  Value bias = current(fusions.biasOf.lookup(op));
  auto [epilogue, stale] = fusions.epilogueOf.lookup(op);
  Value aux = current(stale);
  OpBuilder b(op);
  bool shared = isa<MatmulOp>(op);
  bool ta = shared ? cast<MatmulOp>(op).getTransposeA() : cast<BatchMatmulOp>(op).getTransposeA();
  bool tb = shared ? cast<MatmulOp>(op).getTransposeB() : cast<BatchMatmulOp>(op).getTransposeB();
  // epilogueOf: 1 = GELU (aux: the pre-activation it also writes), 2 = DGELU
  // (aux: the pre-activation it reads).
  StringRef name = epilogue == 1 ? "gelu" : epilogue == 2 ? "dgelu" : "none";
  Type pre = epilogue == 1 ? aux.getType() : Type();
  auto gemm = b.create<stepk::GemmOp>(op->getLoc(), written.getType(), pre, op->getOperand(0),
                                      op->getOperand(1), bias, epilogue == 2 ? aux : Value(),
                                      ta, tb, shared, name);
  step::copyPhase(op, gemm);
  for (auto [member, kernel] : fusions.computedBy)
    if (kernel == op)
      dead.push_back(member);
  dead.push_back(op);
  written.replaceAllUsesWith(gemm.getResult());
  replaced[written] = gemm.getResult();
  if (epilogue == 1) {
    aux.replaceAllUsesWith(gemm.getPreActivation());
    replaced[aux] = gemm.getPreActivation();
  }
}

struct StepFuseGemmEpiloguesPass
    : public stepc::impl::StepFuseGemmEpiloguesBase<StepFuseGemmEpiloguesPass> {
  using StepFuseGemmEpiloguesBase::StepFuseGemmEpiloguesBase;
  void runOnOperation() override {
    for (func::FuncOp step : trainingSteps(getOperation())) {
      CudaFusions fusions = planCudaFusions(step);
      SmallVector<Operation *> gemms;
      for (Operation &op : step.getBody().front())
        if (isa<MatmulOp, BatchMatmulOp>(op) &&
            (fusions.writesTo.count(op.getResult(0)) || fusions.biasOf.count(&op) ||
             fusions.epilogueOf.count(&op)))
          gemms.push_back(&op);
      DenseMap<Value, Value> replaced;
      SmallVector<Operation *> dead;
      for (Operation *op : gemms)
        fold(op, fusions, replaced, dead);
      // Users before what they use: last in the block first.
      llvm::sort(dead, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
      for (Operation *op : dead)
        op->erase();
    }
  }
};

} // namespace
