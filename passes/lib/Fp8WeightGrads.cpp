//===- Fp8WeightGrads.cpp - weight gradients' operands rounded by tokens --===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace stepc {
#define GEN_PASS_DEF_STEPFP8WEIGHTGRADS
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The rank-2 operand `v` of a product contracted along its rows, when it
/// is a rounding in row tiles ([1, c]) seen through reshapes: `v` rounded
/// again from the rounding's input, reshaped the same way, in [128, 1]
/// tiles, right after the first rounding (so that the forward keeps this
/// rounding for the backward, as it kept the first, and not its input).
/// Null when it is not such an operand.
Value roundedByTokens(OpBuilder &b, Operation *product, Value v,
                      DenseMap<std::pair<Operation *, Type>, Value> &made) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() != 2)
    return nullptr;
  Value seen = v;
  while (auto reshape = seen.getDefiningOp<ReshapeOp>())
    seen = reshape.getInput();
  auto rounding = seen.getDefiningOp<QuantizeFp8Op>();
  if (!rounding || rounding.getTile()[0] != 1)
    return nullptr;
  // Once per rounding and shape, however many products read it.
  Value &again = made[{rounding.getOperation(), type}];
  if (again)
    return again;
  b.setInsertionPointAfter(rounding);
  Value input = rounding.getInput();
  if (input.getType() != type) {
    auto reshaped = b.create<ReshapeOp>(rounding.getLoc(), type, input);
    copyPhase(rounding, reshaped);
    input = reshaped;
  }
  auto columns = b.create<QuantizeFp8Op>(rounding.getLoc(), input, rounding.getFormatAttr(),
                                         b.getDenseI64ArrayAttr({128, 1}));
  copyPhase(rounding, columns);
  return again = columns;
}

struct StepFp8WeightGradsPass
    : public stepc::impl::StepFp8WeightGradsBase<StepFp8WeightGradsPass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    DenseMap<std::pair<Operation *, Type>, Value> made;
    getOperation().walk([&](MatmulOp m) {
      if (getPhase(m) != Phase::Backward)
        return;
      if (m.getTransposeA())
        if (Value lhs = roundedByTokens(b, m, m.getLhs(), made))
          m.getLhsMutable().assign(lhs);
      if (!m.getTransposeB())
        if (Value rhs = roundedByTokens(b, m, m.getRhs(), made))
          m.getRhsMutable().assign(rhs);
    });
    // The row-tiled roundings' reshapes the products no longer read.
    getOperation().walk([](ReshapeOp r) {
      if (r.use_empty())
        r.erase();
    });
  }
};

} // namespace
