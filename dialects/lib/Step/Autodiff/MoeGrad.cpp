//===- MoeGrad.cpp - VJPs of the mixture-of-experts ops -------------------===//

#include "GradBuilder.h"

using namespace mlir;
using namespace stepc::step;

// top_k: the values' cotangent scattered back to the chosen positions along
// the last dimension; the indices are integers.
LogicalResult TopKOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  auto input = cast<RankedTensorType>(getInput().getType());
  int64_t last = input.getRank() - 1;
  Value dvalues = dy[0];
  if (!dvalues) // only the indices were used: no gradient reaches the input
    dvalues = b.create<ConstantOp>(
        getLoc(), DenseElementsAttr::get(cast<RankedTensorType>(getValues().getType()),
                                         b.getFloatAttr(input.getElementType(), 0.0)));
  grads.push_back(b.create<GatherGradOp>(getLoc(), dvalues, getIndices(),
                                         b.getI64IntegerAttr(last),
                                         b.getI64IntegerAttr(input.getShape().back())));
  return success();
}

// moe_dispatch: dx[n] = Σ_k drows[slot(n, k)], moe_combine with unit gates
// (a pair the capacity dropped took no row: no gradient).
LogicalResult MoeDispatchOp::buildVjp(OpBuilder &b, ValueRange dy,
                                      SmallVectorImpl<Value> &grads) {
  auto experts = cast<RankedTensorType>(getExperts().getType());
  Type element = cast<RankedTensorType>(getInput().getType()).getElementType();
  Value drows = dy[0];
  if (!drows) {
    grads.append({nullptr, nullptr});
    return success();
  }
  Value ones = b.create<ConstantOp>(
      getLoc(), DenseElementsAttr::get(RankedTensorType::get(experts.getShape(), element),
                                       b.getFloatAttr(element, 1.0)));
  grads.push_back(b.create<MoeCombineOp>(getLoc(), drows, ones, getExperts(),
                                         getNumExpertsAttr(), getGroupsAttr(), getCapacityAttr(),
                                         getSegmentAttr()));
  grads.push_back(nullptr);
  return success();
}

// moe_combine: drows and dgates (moe_combine_grad); the experts are integers.
LogicalResult MoeCombineOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  auto grad = b.create<MoeCombineGradOp>(getLoc(), dy[0], getRows(), getGates(), getExperts(),
                                         getNumExpertsAttr(), getGroupsAttr(), getCapacityAttr(),
                                         getSegmentAttr());
  grads.append({grad.getRowsGrad(), grad.getGatesGrad(), nullptr});
  return success();
}

// grouped_matmul: Y_e = X_e W_e (X_e W_eᵀ with transpose_b), so
// dX_e = dY_e W_eᵀ (dY_e W_e) — a grouped product again — and dW_e from
// grouped_matmul_weight_grad; the counts are integers.
LogicalResult GroupedMatmulOp::buildVjp(OpBuilder &b, ValueRange dy,
                                        SmallVectorImpl<Value> &grads) {
  bool transposeB = getTransposeB();
  grads.push_back(b.create<GroupedMatmulOp>(getLoc(), dy[0], getRhs(), getCounts(),
                                            transposeB ? nullptr : b.getUnitAttr()));
  grads.push_back(b.create<GroupedMatmulWeightGradOp>(getLoc(), getLhs(), dy[0], getCounts(),
                                                      getTransposeBAttr()));
  grads.push_back(nullptr);
  return success();
}
