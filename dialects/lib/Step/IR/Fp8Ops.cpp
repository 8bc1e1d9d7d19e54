//===- Fp8Ops.cpp - shape rules of the fp8 tile ops -----------------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"

#include "ShapeRules.h"

using namespace mlir;
using namespace stepc::step;

namespace {

/// quantize_fp8 / quantize_grad_fp8: rank >= 2 and a positive [r, c] tile.
template <typename OpT, typename AdaptorT>
LogicalResult checkFp8Tiles(std::optional<Location> loc, AdaptorT adaptor) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input || input.getRank() < 2)
    return opError<OpT>(loc, "expects a tensor of rank >= 2 (tiles of its last two dims)");
  ArrayRef<int64_t> tile = adaptor.getTile();
  if (tile.size() != 2 || tile[0] < 1 || tile[1] < 1)
    return opError<OpT>(loc, "expects a tile of two positive sizes [rows, cols]");
  return success();
}

} // namespace

LogicalResult QuantizeFp8Op::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  // quantize_fp8_c1
  if (failed(checkFp8Tiles<QuantizeFp8Op>(loc, adaptor)))
    return failure();
  types.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult QuantizeGradFp8Op::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkFp8Tiles<QuantizeGradFp8Op>(loc, adaptor)))
    return failure();
  types.push_back(adaptor.getInput().getType());
  return success();
}
