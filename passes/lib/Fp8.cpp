//===- Fp8.cpp - the linear layers' products rounded to fp8 by tiles ------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace stepc {
#define GEN_PASS_DEF_STEPFP8
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The parameter `v` is, through ops that change only its type or layout.
BlockArgument parameterOf(Value v, func::FuncOp loss) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<ConvertOp, ReshapeOp, TransposeOp>(def))
      return nullptr;
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && loss.getArgAttr(arg.getArgNumber(), StepDialect::kParamAttrName) ? arg : nullptr;
}

/// Whether `v` reaches an op of type OpT through reshapes and converts.
template <typename OpT>
bool feeds(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<OpT>(user))
      return true;
    if (isa<ReshapeOp, ConvertOp>(user) && feeds<OpT>(user->getResult(0)))
      return true;
  }
  return false;
}

/// A linear layer's product: its weight a rank-2 parameter no embedding
/// reads, its result not logits.
bool isLinearLayer(MatmulOp m, func::FuncOp loss) {
  BlockArgument w = parameterOf(m.getRhs(), loss);
  if (!w || cast<RankedTensorType>(w.getType()).getRank() != 2 || feeds<EmbeddingOp>(w))
    return false;
  return !feeds<CrossEntropyOp>(m.getResult());
}

struct StepFp8Pass : public stepc::impl::StepFp8Base<StepFp8Pass> {
  using StepFp8Base::StepFp8Base;
  void runOnOperation() override {
    if (scaling != "tile" && scaling != "matrix") {
      emitError(getOperation().getLoc())
          << "step-fp8: unknown scaling '" << scaling << "' (expected tile or matrix)";
      return signalPassFailure();
    }
    // A tile larger than any matrix: one scale per matrix.
    const int64_t whole = int64_t{1} << 40;
    for (auto loss : getOperation().getOps<func::FuncOp>()) {
      if (!loss->hasAttr(StepDialect::kLossAttrName))
        continue;
      SmallVector<MatmulOp> linear;
      loss.walk([&](MatmulOp m) {
        if (isLinearLayer(m, loss))
          linear.push_back(m);
      });
      OpBuilder b(loss.getContext());
      auto e4m3 = Fp8FormatAttr::get(b.getContext(), Fp8Format::E4M3);
      auto e5m2 = Fp8FormatAttr::get(b.getContext(), Fp8Format::E5M2);
      bool tiles = scaling == "tile";
      auto rows = b.getDenseI64ArrayAttr(tiles ? ArrayRef<int64_t>{1, 128}
                                               : ArrayRef<int64_t>{whole, whole});
      auto blocks = b.getDenseI64ArrayAttr(tiles ? ArrayRef<int64_t>{128, 128}
                                                 : ArrayRef<int64_t>{whole, whole});
      // One rounding of a value however many layers read it (Llama's q, k
      // and v projections read one normed input).
      DenseMap<Value, QuantizeFp8Op> roundedRows;
      auto inputRounding = [&](MatmulOp m) -> Value {
        QuantizeFp8Op &q = roundedRows[m.getLhs()];
        if (!q || q->getBlock() != m->getBlock() || !q->isBeforeInBlock(m))
          q = b.create<QuantizeFp8Op>(m.getLoc(), m.getLhs(), e4m3, rows);
        return q;
      };
      for (MatmulOp m : linear) {
        b.setInsertionPoint(m);
        m.getLhsMutable().assign(inputRounding(m));
        m.getRhsMutable().assign(b.create<QuantizeFp8Op>(m.getLoc(), m.getRhs(), e4m3, blocks));
        b.setInsertionPointAfter(m);
        auto grad = b.create<QuantizeGradFp8Op>(m.getLoc(), m.getResult(), e5m2, rows);
        m.getResult().replaceAllUsesExcept(grad, grad);
      }
    }
  }
};

} // namespace
