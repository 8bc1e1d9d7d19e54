//===- ShardDataParallel.cpp - data-parallel gradients (DDP) --------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"

namespace stepc {
#define GEN_PASS_DEF_STEPSHARDDATAPARALLEL
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

constexpr llvm::StringLiteral kMeshName = "world";

struct StepShardDataParallelPass
    : public stepc::impl::StepShardDataParallelBase<StepShardDataParallelPass> {
  using StepShardDataParallelBase::StepShardDataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1) {
      module.emitError() << "step-shard-data-parallel expects ranks >= 1, got "
                         << ranks.getValue();
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> grads;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(StepDialect::kGradientAttrName))
        grads.push_back(f);
    if (grads.empty()) {
      module.emitError() << "no function is marked '" << StepDialect::kGradientAttrName
                         << "' (run step-autodiff first)";
      return signalPassFailure();
    }
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToStart(module.getBody());
    b.create<mesh::MeshOp>(module.getLoc(), kMeshName, ArrayRef<int64_t>{ranks.getValue()});
    for (func::FuncOp grad : grads) {
      auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
      b.setInsertionPoint(ret);
      SmallVector<Value> results;
      // loss and every gradient: mean over the ranks = SUM, then · 1/N.
      for (Value v : ret.getOperands()) {
        auto type = cast<RankedTensorType>(v.getType());
        Value sum = b.create<mesh::AllReduceOp>(ret.getLoc(), type, kMeshName,
                                                ArrayRef<mesh::MeshAxis>{0}, v,
                                                mesh::ReductionKind::Sum);
        Value inv = b.create<ConstantOp>(
            ret.getLoc(), DenseElementsAttr::get(
                              type, b.getFloatAttr(type.getElementType(), 1.0 / ranks)));
        results.push_back(b.create<MulOp>(ret.getLoc(), sum, inv));
      }
      ret.getOperandsMutable().assign(results);
    }
  }
};

} // namespace
