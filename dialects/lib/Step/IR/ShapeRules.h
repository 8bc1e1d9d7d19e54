//===- ShapeRules.h - shape-rule helpers shared by step ops -----*- C++ -*-===//
//
// Private to dialects/lib/Step/IR: diagnostics and checks used by the shape
// rules of forward (StepOps.cpp) and backward (StepGradOps.cpp) ops.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEP_IR_SHAPERULES_H
#define STEPC_DIALECT_STEP_IR_SHAPERULES_H

#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdint>

namespace stepc::step {
using namespace mlir;

/// Emits "'step.<op>' op <message>" at `loc` when there is one, and fails.
template <typename OpT, typename... Args>
LogicalResult opError(std::optional<Location> loc, Args &&...args) {
  return emitOptionalError(loc, "'", OpT::getOperationName(), "' op ",
                           std::forward<Args>(args)...);
}

/// The operand's type as a ranked tensor (ODS constraints guarantee it on
/// verified IR; a builder handing anything else gets a failure, not a crash).
inline RankedTensorType tensorOf(Value value) {
  return value ? dyn_cast<RankedTensorType>(value.getType())
               : RankedTensorType();
}

/// A tensor of `shape` with `elementType`.
inline RankedTensorType tensor(ArrayRef<int64_t> shape, Type elementType) {
  return RankedTensorType::get(shape, elementType);
}


/// line_c1 / line_c2 (Step_LineOp): `dim` in range, and every operand of
/// the last one's type, which is the result's (an earlier one is a gradient).
template <typename OpT>
LogicalResult inferLineType(std::optional<Location> loc, ValueRange operands, int64_t dim,
                            SmallVectorImpl<Type> &types) {
  RankedTensorType line = operands.empty() ? RankedTensorType() : tensorOf(operands.back());
  if (!line)
    return opError<OpT>(loc, "expects ranked tensor operands");
  // line_c1
  if (dim < 0 || dim >= line.getRank())
    return opError<OpT>(loc, "expects dim in [0, ", line.getRank(), "), got ", dim);
  // line_c2
  for (Value operand : operands.drop_back())
    if (operand.getType() != line)
      return opError<OpT>(loc, "expects a gradient of type ", line, ", got ",
                          operand.getType());
  types.push_back(line);
  return success();
}

/// reduce_c1 / reduce_c2: `dims` sorted, distinct and in range.
template <typename OpT>
LogicalResult inferReduction(std::optional<Location> loc,
                                    typename OpT::Adaptor adaptor,
                                    SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<OpT>(loc, "expects a ranked tensor operand");
  ArrayRef<int64_t> dims = adaptor.getDims();
  // reduce_c1
  if (dims.empty())
    return opError<OpT>(loc, "expects at least one dimension to reduce");
  for (auto [i, dim] : llvm::enumerate(dims)) {
    // reduce_c2
    if (dim < 0 || dim >= input.getRank() || (i > 0 && dims[i - 1] >= dim))
      return opError<OpT>(loc, "expects dims sorted, distinct and in [0, ",
                          input.getRank(), "), got ", dim, " at position ", i);
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < input.getRank(); ++i) {
    if (!llvm::is_contained(dims, i))
      shape.push_back(input.getDimSize(i));
    else if (adaptor.getKeepDims())
      shape.push_back(1);
  }
  types.push_back(tensor(shape, input.getElementType()));
  return success();
}

/// norm_c1 / norm_c2: `vector` is a [D] tensor of the input's element type,
/// where D is the input's last dimension.
template <typename OpT>
LogicalResult checkNormVector(std::optional<Location> loc,
                                     RankedTensorType input, Value vector,
                                     StringRef role) {
  RankedTensorType type = tensorOf(vector);
  // norm_c1
  if (input.getRank() < 1)
    return opError<OpT>(loc, "expects an operand of rank >= 1, got ", Type(input));
  int64_t d = input.getDimSize(input.getRank() - 1);
  // norm_c2
  if (!type || type.getRank() != 1 || type.getDimSize(0) != d ||
      type.getElementType() != input.getElementType())
    return opError<OpT>(loc, "expects ", role, " of type ",
                        Type(tensor({d}, input.getElementType())), ", got ",
                        Type(type));
  return success();
}

/// norm_c3: a positive epsilon.
template <typename OpT>
LogicalResult checkEpsilon(std::optional<Location> loc, double epsilon) {
  if (!(epsilon > 0.0))
    return opError<OpT>(loc, "expects a positive epsilon, got ", epsilon);
  return success();
}

/// attention_c1 .. attention_c9: the operand and attribute rules shared by
/// attention and attention_grad.
template <typename OpT, typename AdaptorT>
LogicalResult checkAttention(std::optional<Location> loc, AdaptorT adaptor) {
  RankedTensorType q = tensorOf(adaptor.getQuery()), k = tensorOf(adaptor.getKey()),
                   v = tensorOf(adaptor.getValue());
  if (!q || !k || !v)
    return opError<OpT>(loc, "expects ranked tensor operands");
  int64_t heads = adaptor.getNumHeads(), kvHeads = adaptor.getNumKvHeads(),
          headDim = adaptor.getHeadDim();
  // attention_c1
  if (q.getRank() != 3 || k.getRank() != 3)
    return opError<OpT>(loc, "expects query, key and value of rank 3 "
                                     "[B, T, heads*head_dim], got ",
                                Type(q), " and ", Type(k));
  // attention_c2
  if (k != v)
    return opError<OpT>(loc, "expects key and value of one type, got ",
                                Type(k), " and ", Type(v));
  // attention_c3
  if (q.getElementType() != k.getElementType())
    return opError<OpT>(loc, "expects operands of one element type, got ",
                                q.getElementType(), " and ", k.getElementType());
  // attention_c4
  if (heads % kvHeads != 0)
    return opError<OpT>(loc, "expects heads (", heads,
                                ") to be a multiple of kv_heads (", kvHeads, ")");
  // attention_c5
  if (q.getDimSize(2) != heads * headDim)
    return opError<OpT>(loc, "expects query channels ", q.getDimSize(2),
                                " to equal heads * head_dim = ", heads * headDim);
  // attention_c6
  if (k.getDimSize(2) != kvHeads * headDim)
    return opError<OpT>(loc, "expects key/value channels ", k.getDimSize(2),
                                " to equal kv_heads * head_dim = ",
                                kvHeads * headDim);
  // attention_c7
  if (q.getDimSize(0) != k.getDimSize(0))
    return opError<OpT>(loc, "expects one batch size, got ",
                                q.getDimSize(0), " (query) and ", k.getDimSize(0),
                                " (key)");
  // attention_c8
  if (adaptor.getCausal() && q.getDimSize(1) != k.getDimSize(1))
    return opError<OpT>(loc, "expects one sequence length for causal "
                                     "attention, got ",
                                q.getDimSize(1), " (query) and ", k.getDimSize(1),
                                " (key)");
  // attention_c9
  if (std::optional<llvm::APFloat> scale = adaptor.getScale();
      scale && !(scale->convertToDouble() > 0.0))
    return opError<OpT>(loc, "expects a positive scale, got ",
                                scale->convertToDouble());
  if (!adaptor.getMask())
    return success();
  RankedTensorType m = tensorOf(adaptor.getMask());
  // attention_c10
  if (!m || !m.getElementType().isF32() || m.getRank() != 4)
    return opError<OpT>(loc, "expects an f32 mask of rank 4 [B, heads, Tq, Tk], got ",
                        adaptor.getMask().getType());
  // attention_c11
  int64_t full[4] = {q.getDimSize(0), heads, q.getDimSize(1), k.getDimSize(1)};
  for (int d = 0; d < 4; ++d)
    if (m.getDimSize(d) != full[d] && (d == 3 || m.getDimSize(d) != 1))
      return opError<OpT>(loc, "expects a mask of shape [", full[0], " or 1, ", full[1],
                          " or 1, ", full[2], " or 1, ", full[3], "], got ", Type(m));
  return success();
}


/// cross_entropy_c1: `logits` [..., V] and `targets` [...]; returns logits.
template <typename OpT, typename AdaptorT>
FailureOr<RankedTensorType> checkCrossEntropy(std::optional<Location> loc,
                                              AdaptorT adaptor) {
  RankedTensorType logits = tensorOf(adaptor.getLogits()),
                   targets = tensorOf(adaptor.getTargets());
  if (!logits || !targets)
    return opError<OpT>(loc, "expects ranked tensor operands");
  if (logits.getRank() < 1 ||
      targets.getShape() != logits.getShape().drop_back())
    return opError<OpT>(loc, "expects targets of shape [...] for logits [..., V], got ",
                        Type(targets), " for ", Type(logits));
  // cross_entropy_c2: the options are in range.
  if (std::optional<int64_t> ignore = adaptor.getIgnoreIndex();
      ignore && (*ignore < INT32_MIN || *ignore > INT32_MAX))
    return opError<OpT>(loc, "expects an ignore_index that an i32 target can equal, got ",
                        *ignore);
  if (std::optional<llvm::APFloat> eps = adaptor.getLabelSmoothing()) {
    double e = eps->convertToDouble();
    if (!(e >= 0.0 && e <= 1.0))
      return opError<OpT>(loc, "expects a label_smoothing in [0, 1], got ", e);
  }
  if (std::optional<llvm::APFloat> z = adaptor.getZLoss()) {
    double v = z->convertToDouble();
    if (!(v >= 0.0 && std::isfinite(v)))
      return opError<OpT>(loc, "expects a finite z_loss >= 0, got ", v);
  }
  return logits;
}

/// token_count_c1: an ignore_index that an i32 target can equal.
template <typename OpT, typename AdaptorT>
LogicalResult checkTokenCount(std::optional<Location> loc, AdaptorT adaptor) {
  int64_t ignore = adaptor.getIgnoreIndex();
  if (ignore < INT32_MIN || ignore > INT32_MAX)
    return opError<OpT>(loc, "expects an ignore_index that an i32 target can equal, got ",
                        ignore);
  return success();
}

/// gather_c1/c2 (and gather_grad's): `index` has the rank of `values` (the
/// gathered input, or the gradient of the gathered result) and its shape
/// except along `dim`, which is a dimension of both; `along` is the size
/// the values have along `dim` (gather: the input's; gather_grad: the
/// index's).
template <typename OpT>
LogicalResult checkGather(std::optional<Location> loc, RankedTensorType values,
                          RankedTensorType index, int64_t dim, bool sameAlongDim) {
  if (!values || !index)
    return opError<OpT>(loc, "expects ranked tensor operands");
  if (dim < 0 || dim >= values.getRank())
    return opError<OpT>(loc, "expects dim in [0, ", values.getRank(), "), got ", dim);
  if (index.getRank() != values.getRank())
    return opError<OpT>(loc, "expects an index of rank ", values.getRank(), ", got ",
                        Type(index));
  for (int64_t d = 0; d < values.getRank(); ++d)
    if ((d != dim || sameAlongDim) && index.getDimSize(d) != values.getDimSize(d))
      return opError<OpT>(loc, "expects the index ", Type(index), " to match ", Type(values),
                          sameAlongDim ? "" : " except along dim ",
                          sameAlongDim ? "" : std::to_string(dim));
  return success();
}

} // namespace stepc::step

#endif // STEPC_DIALECT_STEP_IR_SHAPERULES_H
