//===- StepGradOps.cpp - backward and optimizer ops -----------------------===//
//
// Shape rules of the ops autodiff and the optimizer emit. Labels name the
// `-verify-diagnostics` tests in test/Dialect/Step/invalid-grad.mlir.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"

#include "ShapeRules.h"

#include <cmath>

using namespace mlir;
using namespace stepc::step;

/// grad_c1: the incoming cotangent has the type of the forward result.
template <typename OpT>
static LogicalResult checkGradType(std::optional<Location> loc, Type grad,
                                   Type expected) {
  if (grad != expected)
    return opError<OpT>(loc, "expects a gradient of type ", expected, ", got ",
                        grad);
  return success();
}

LogicalResult ReduceMaxGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  SmallVector<Type, 1> reduced;
  if (failed(inferReduction<ReduceMaxGradOp>(loc, adaptor, reduced)) ||
      failed(checkGradType<ReduceMaxGradOp>(loc, adaptor.getGrad().getType(),
                                            reduced.front())))
    return failure();
  types.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<LayerNormGradOp>(loc, "expects ranked tensor operands");
  if (failed(checkNormVector<LayerNormGradOp>(loc, input, adaptor.getWeight(), "weight")) ||
      failed(checkEpsilon<LayerNormGradOp>(loc, adaptor.getEpsilon().convertToDouble())) ||
      failed(checkGradType<LayerNormGradOp>(loc, adaptor.getGrad().getType(), input)))
    return failure();
  Type weight = adaptor.getWeight().getType();
  types.append({input, weight, weight});
  return success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<RmsNormGradOp>(loc, "expects ranked tensor operands");
  if (failed(checkNormVector<RmsNormGradOp>(loc, input, adaptor.getWeight(), "weight")) ||
      failed(checkEpsilon<RmsNormGradOp>(loc, adaptor.getEpsilon().convertToDouble())) ||
      failed(checkGradType<RmsNormGradOp>(loc, adaptor.getGrad().getType(), input)))
    return failure();
  types.append({input, adaptor.getWeight().getType()});
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  if (failed(checkAttention<AttentionGradOp>(loc, adaptor)) ||
      failed(checkGradType<AttentionGradOp>(loc, adaptor.getGrad().getType(),
                                            adaptor.getQuery().getType())))
    return failure();
  types.append({adaptor.getQuery().getType(), adaptor.getKey().getType(),
                adaptor.getValue().getType()});
  return success();
}

double AttentionGradOp::getEffectiveScale() {
  if (std::optional<llvm::APFloat> scale = getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(getHeadDim()));
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(MLIRContext *,
                                                   std::optional<Location> loc,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> logits = checkCrossEntropy<CrossEntropyGradOp>(loc, adaptor);
  if (failed(logits))
    return failure();
  types.push_back(*logits);
  return success();
}

LogicalResult EmbeddingGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  RankedTensorType grad = tensorOf(adaptor.getGrad()), ids = tensorOf(adaptor.getIds());
  if (!grad || !ids)
    return opError<EmbeddingGradOp>(loc, "expects ranked tensor operands");
  // embedding_grad_c1
  if (grad.getRank() != ids.getRank() + 1 ||
      grad.getShape().drop_back() != ids.getShape())
    return opError<EmbeddingGradOp>(loc, "expects a gradient of shape [ids..., D], got ",
                                    Type(grad), " for ids ", Type(ids));
  // (A count past int64 would become a negative dimension.)
  const uint64_t rows = adaptor.getNumEmbeddings();
  if (rows < 1 || rows > (uint64_t{1} << 40))
    return opError<EmbeddingGradOp>(loc, "expects num_embeddings in [1, 2^40], got ",
                                    std::to_string(rows));
  types.push_back(tensor({static_cast<int64_t>(rows), grad.getDimSize(grad.getRank() - 1)},
                         grad.getElementType()));
  return success();
}

LogicalResult GatherGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType grad = tensorOf(adaptor.getGrad()), index = tensorOf(adaptor.getIndex());
  // gather_grad_c1
  if (failed(checkGather<GatherGradOp>(loc, grad, index, adaptor.getDim(), true)))
    return failure();
  const uint64_t size = adaptor.getSize();
  if (size < 1 || size > (uint64_t{1} << 40))
    return opError<GatherGradOp>(loc, "expects size in [1, 2^40], got ", std::to_string(size));
  SmallVector<int64_t> shape(grad.getShape());
  shape[adaptor.getDim()] = static_cast<int64_t>(size);
  types.push_back(tensor(shape, grad.getElementType()));
  return success();
}

LogicalResult AdamwOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  Type param = adaptor.getParam().getType();
  // adamw_c1
  for (Value state : {adaptor.getGrad(), adaptor.getM(), adaptor.getV()})
    if (state.getType() != param)
      return opError<AdamwOp>(loc, "expects gradient and moments of the "
                                   "parameter's type ",
                              param, ", got ", state.getType());
  double beta1 = adaptor.getBeta1().convertToDouble();
  double beta2 = adaptor.getBeta2().convertToDouble();
  // adamw_c2
  if (!(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0))
    return opError<AdamwOp>(loc, "expects betas in [0, 1), got ", beta1, " and ",
                            beta2);
  // adamw_c3
  if (!(adaptor.getEpsilon().convertToDouble() > 0.0) ||
      !(adaptor.getWeightDecay().convertToDouble() >= 0.0))
    return opError<AdamwOp>(loc, "expects a positive epsilon and a non-negative "
                                 "weight decay");
  types.append({param, param, param});
  return success();
}

LogicalResult SgdOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  Type param = adaptor.getParam().getType();
  for (Value state : {adaptor.getGrad(), adaptor.getBuf()})
    if (state.getType() != param)
      return opError<SgdOp>(loc, "expects gradient and momentum buffer of the parameter's type ",
                            param, ", got ", state.getType());
  double momentum = adaptor.getMomentum().convertToDouble();
  if (!(momentum >= 0.0 && momentum < 1.0) ||
      !(adaptor.getWeightDecay().convertToDouble() >= 0.0))
    return opError<SgdOp>(loc, "expects a momentum in [0, 1) and a non-negative weight "
                               "decay");
  if (adaptor.getNesterov() && momentum == 0.0)
    return opError<SgdOp>(loc, "expects a momentum > 0 with nesterov");
  types.append({param, param});
  return success();
}

LogicalResult LionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  Type param = adaptor.getParam().getType();
  for (Value state : {adaptor.getGrad(), adaptor.getM()})
    if (state.getType() != param)
      return opError<LionOp>(loc, "expects gradient and moment of the parameter's type ", param,
                             ", got ", state.getType());
  double beta1 = adaptor.getBeta1().convertToDouble();
  double beta2 = adaptor.getBeta2().convertToDouble();
  if (!(beta1 >= 0.0 && beta1 < 1.0 && beta2 >= 0.0 && beta2 < 1.0) ||
      !(adaptor.getWeightDecay().convertToDouble() >= 0.0))
    return opError<LionOp>(loc, "expects betas in [0, 1) and a non-negative weight decay");
  types.append({param, param});
  return success();
}
