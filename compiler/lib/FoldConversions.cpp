//===- FoldConversions.cpp - bf16 conversions made once -------------------===//
//
// Under --precision=bf16 the mixed-precision pass rounds every GEMM operand
// where it is read: the backward's weight gradients round again what the
// forward rounded (an activation converted for the forward GEMM and again,
// through a reshape, for dW = dYᵀ X), and a bf16 result widened to f32 is
// rounded straight back for the next GEMM. Each such conversion is a pass
// over the tensor. On the CPU, before kernels are formed:
//
//   convert(reshape*(convert(y : bf16 -> f32)) -> bf16)  ->  reshape*(y)
//   convert(reshape*(x) -> bf16), x also converted earlier  ->  reshape*(that)
//
// The first is exact (widening then rounding is the identity); the second
// reuses an identical value. Both keep the bf16 value live instead of the
// f32 one, which is half the bytes.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// `value` through the reshapes that produce it: the source and the
/// reshapes, outermost first.
Value throughReshapes(Value value, SmallVectorImpl<ReshapeOp> &reshapes) {
  while (auto reshape = value.getDefiningOp<ReshapeOp>()) {
    reshapes.push_back(reshape);
    value = reshape.getInput();
  }
  return value;
}

/// A bf16 value equal to `convert` (to bf16) of `source`, computed before
/// `convert`, or null.
Value roundedBefore(ConvertOp convert, Value source) {
  if (auto widen = source.getDefiningOp<ConvertOp>())
    if (widen.getInput().getType().getElementType().isBF16() &&
        widen.getType().getElementType().isF32())
      return widen.getInput();
  if (!cast<RankedTensorType>(source.getType()).getElementType().isF32())
    return nullptr;
  for (Operation *user : source.getUsers()) {
    auto other = dyn_cast<ConvertOp>(user);
    if (other && other != convert && other->getBlock() == convert->getBlock() &&
        other->isBeforeInBlock(convert) && other.getType().getElementType().isBF16())
      return other;
  }
  return nullptr;
}

} // namespace

void stepc::foldConversions(func::FuncOp step) {
  SmallVector<ConvertOp> converts;
  for (Operation &op : step.getBody().front())
    if (auto convert = dyn_cast<ConvertOp>(op))
      if (convert.getType().getElementType().isBF16())
        converts.push_back(convert);
  SmallVector<Operation *> maybeDead;
  for (ConvertOp convert : converts) {
    SmallVector<ReshapeOp> reshapes;
    Value source = throughReshapes(convert.getInput(), reshapes);
    Value rounded = roundedBefore(convert, source);
    if (!rounded)
      continue;
    OpBuilder b(convert);
    for (ReshapeOp reshape : llvm::reverse(reshapes)) {
      auto again = b.create<ReshapeOp>(reshape.getLoc(), asBF16Type(reshape.getType()), rounded);
      copyPhase(convert, again);
      rounded = again;
    }
    convert.replaceAllUsesWith(rounded);
    maybeDead.push_back(convert);
    maybeDead.append(reshapes.begin(), reshapes.end());
    if (Operation *def = source.getDefiningOp())
      maybeDead.push_back(def);
  }
  // Users before producers; what still has a use stays.
  llvm::sort(maybeDead, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
  maybeDead.erase(std::unique(maybeDead.begin(), maybeDead.end()), maybeDead.end());
  for (Operation *op : maybeDead)
    if (op->use_empty() && isa<ConvertOp, ReshapeOp>(op))
      op->erase();
}
