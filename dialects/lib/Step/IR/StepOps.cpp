//===- StepOps.cpp - step dialect operations ------------------------------===//
//
// Shape rules of every op. Ops with InferTypeOpInterface check their operands
// in `inferReturnTypes`, which runs when a builder omits the result type and
// when a parsed op is verified (its declared result type must equal the
// inferred one). Each check carries a label (`matmul_c2`) naming the
// `-verify-diagnostics` test in test/Dialect/Step/invalid.mlir that covers it.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

#include "ShapeRules.h"
// The scalar helpers ScalarMathOpInterface::evalScalar calls (in double).
#include "runtime/kernels/elementwise_math.h"

#include <cmath>

using namespace mlir;
using namespace stepc::step;

namespace {

/// Runs `OpT`'s shape rules on `op` (emitting their error at the op) and
/// checks the declared result type against the inferred one.
template <typename OpT>
LogicalResult verifyInferredResultType(OpT op) {
  SmallVector<Type, 1> inferred;
  if (failed(OpT::inferReturnTypes(op.getContext(), op.getLoc(),
                                   typename OpT::Adaptor(op), inferred)))
    return failure();
  if (TypeRange(inferred) != op->getResultTypes())
    return op.emitOpError() << "expects result type " << inferred.front()
                            << ", got " << op->getResultTypes().front();
  return success();
}

} // namespace

#include "stepc/Dialect/Step/IR/StepInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "stepc/Dialect/Step/IR/StepOps.cpp.inc"


//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto value = dyn_cast_or_null<ElementsAttr>(adaptor.getValueAttr());
  auto type = value ? dyn_cast<RankedTensorType>(value.getType()) : nullptr;
  // constant_c1
  if (!type || !type.hasStaticShape())
    return opError<ConstantOp>(loc, "expects a statically shaped tensor value");
  types.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

//===----------------------------------------------------------------------===//
// ConvertOp, BroadcastOp, ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  // broadcast_c1
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "expects the same element type, got "
                         << input.getElementType() << " and "
                         << result.getElementType();
  // broadcast_c2
  if (input.getRank() > result.getRank())
    return emitOpError() << "expects the result rank (" << result.getRank()
                         << ") to be at least the operand rank ("
                         << input.getRank() << ")";
  int64_t offset = result.getRank() - input.getRank();
  for (int64_t i = 0; i < input.getRank(); ++i) {
    int64_t from = input.getDimSize(i), to = result.getDimSize(i + offset);
    // broadcast_c3
    if (from != 1 && from != to)
      return emitOpError() << "cannot broadcast operand dimension " << i
                           << " of size " << from << " to result dimension "
                           << i + offset << " of size " << to;
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  // reshape_c1
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "expects the same element type, got "
                         << input.getElementType() << " and "
                         << result.getElementType();
  // reshape_c2
  if (input.getNumElements() != result.getNumElements())
    return emitOpError() << "expects as many elements in the result ("
                         << result.getNumElements() << ") as in the operand ("
                         << input.getNumElements() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// TransposeOp, SliceOp, ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<TransposeOp>(loc, "expects a ranked tensor operand");
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  // transpose_c1
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return opError<TransposeOp>(loc, "expects a permutation of ", input.getRank(),
                                " dimensions, got ", perm.size());
  llvm::SmallBitVector seen(perm.size());
  SmallVector<int64_t> shape;
  for (int64_t dim : perm) {
    // transpose_c2
    if (dim < 0 || dim >= input.getRank() || seen.test(dim))
      return opError<TransposeOp>(loc, "expects a permutation of [0, ",
                                  input.getRank(), "), got dimension ", dim,
                                  " out of range or repeated");
    seen.set(dim);
    shape.push_back(input.getDimSize(dim));
  }
  types.push_back(tensor(shape, input.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<SliceOp>(loc, "expects a ranked tensor operand");
  ArrayRef<int64_t> offsets = adaptor.getOffsets(), sizes = adaptor.getSizes();
  // slice_c1
  if (static_cast<int64_t>(offsets.size()) != input.getRank() ||
      static_cast<int64_t>(sizes.size()) != input.getRank())
    return opError<SliceOp>(loc, "expects ", input.getRank(),
                            " offsets and sizes, got ", offsets.size(), " and ",
                            sizes.size());
  for (int64_t i = 0; i < input.getRank(); ++i) {
    // slice_c2
    if (offsets[i] < 0 || sizes[i] < 1 ||
        offsets[i] > input.getDimSize(i) - sizes[i])
      return opError<SliceOp>(loc, "slice [", offsets[i], ", ",
                              offsets[i] + sizes[i], ") of dimension ", i,
                              " is empty or outside [0, ", input.getDimSize(i),
                              ")");
  }
  types.push_back(tensor(sizes, input.getElementType()));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<PadOp>(loc, "expects a ranked tensor operand");
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  // pad_c1
  if (static_cast<int64_t>(low.size()) != input.getRank() ||
      static_cast<int64_t>(high.size()) != input.getRank())
    return opError<PadOp>(loc, "expects ", input.getRank(),
                          " low and high paddings, got ", low.size(), " and ",
                          high.size());
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < input.getRank(); ++i) {
    // pad_c2
    if (low[i] < 0 || high[i] < 0)
      return opError<PadOp>(loc, "expects non-negative paddings, got ", low[i],
                            " and ", high[i], " in dimension ", i);
    shape.push_back(low[i] + input.getDimSize(i) + high[i]);
  }
  types.push_back(tensor(shape, input.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  ValueRange inputs = adaptor.getInputs();
  // concat_c1
  if (inputs.empty())
    return opError<ConcatOp>(loc, "expects at least one operand");
  RankedTensorType first = tensorOf(inputs.front());
  if (!first)
    return opError<ConcatOp>(loc, "expects ranked tensor operands");
  int64_t dim = adaptor.getDim();
  // concat_c2
  if (dim < 0 || dim >= first.getRank())
    return opError<ConcatOp>(loc, "expects dim in [0, ", first.getRank(),
                             "), got ", dim);
  SmallVector<int64_t> shape(first.getShape());
  for (auto [index, value] : llvm::enumerate(inputs.drop_front())) {
    RankedTensorType type = tensorOf(value);
    // concat_c3
    if (!type || type.getElementType() != first.getElementType() ||
        type.getRank() != first.getRank())
      return opError<ConcatOp>(loc, "expects operands of one element type and "
                                    "rank, operand #",
                               index + 1, " is ", Type(type), ", operand #0 is ",
                               Type(first));
    for (int64_t i = 0; i < first.getRank(); ++i) {
      // concat_c4
      if (i != dim && type.getDimSize(i) != first.getDimSize(i))
        return opError<ConcatOp>(loc, "expects operands to agree outside dim ",
                                 dim, ", operand #", index + 1,
                                 " has size ", type.getDimSize(i),
                                 " in dimension ", i, " where operand #0 has ",
                                 first.getDimSize(i));
    }
    shape[dim] += type.getDimSize(dim);
  }
  types.push_back(tensor(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferReduction<ReduceSumOp>(loc, adaptor, types);
}

LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferReduction<ReduceMaxOp>(loc, adaptor, types);
}

LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  return inferReduction<ReduceMeanOp>(loc, adaptor, types);
}

//===----------------------------------------------------------------------===//
// MatmulOp, BatchMatmulOp
//===----------------------------------------------------------------------===//

/// The (rows, columns) of the matrix in the last two dims, transposed if asked.
static std::pair<int64_t, int64_t> matrixDims(RankedTensorType type,
                                              bool transpose) {
  int64_t rows = type.getDimSize(type.getRank() - 2);
  int64_t cols = type.getDimSize(type.getRank() - 1);
  return transpose ? std::make_pair(cols, rows) : std::make_pair(rows, cols);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  RankedTensorType lhs = tensorOf(adaptor.getLhs()), rhs = tensorOf(adaptor.getRhs());
  if (!lhs || !rhs)
    return opError<MatmulOp>(loc, "expects ranked tensor operands");
  // matmul_c1
  if (lhs.getRank() < 2)
    return opError<MatmulOp>(loc, "expects lhs of rank >= 2, got ", Type(lhs));
  // matmul_c2
  if (rhs.getRank() != 2)
    return opError<MatmulOp>(loc, "expects rhs of rank 2, got ", Type(rhs),
                             " (use step.batch_matmul for batched rhs)");
  // matmul_c3
  if (lhs.getElementType() != rhs.getElementType())
    return opError<MatmulOp>(loc, "expects operands of one element type, got ",
                             lhs.getElementType(), " and ", rhs.getElementType());
  auto [m, k] = matrixDims(lhs, adaptor.getTransposeA());
  auto [k2, n] = matrixDims(rhs, adaptor.getTransposeB());
  // matmul_c4
  if (k != k2)
    return opError<MatmulOp>(loc, "expects contracting dimensions to match, got ",
                             k, " (lhs) and ", k2, " (rhs)");
  SmallVector<int64_t> shape(lhs.getShape().drop_back(2));
  shape.append({m, n});
  types.push_back(tensor(shape, lhs.getElementType()));
  return success();
}

LogicalResult BatchMatmulOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  RankedTensorType lhs = tensorOf(adaptor.getLhs()), rhs = tensorOf(adaptor.getRhs());
  if (!lhs || !rhs)
    return opError<BatchMatmulOp>(loc, "expects ranked tensor operands");
  // batch_matmul_c1
  if (lhs.getRank() < 3 || lhs.getRank() != rhs.getRank())
    return opError<BatchMatmulOp>(loc, "expects operands of one rank >= 3, got ",
                                  Type(lhs), " and ", Type(rhs));
  // batch_matmul_c2
  if (lhs.getElementType() != rhs.getElementType())
    return opError<BatchMatmulOp>(loc, "expects operands of one element type, got ",
                                  lhs.getElementType(), " and ",
                                  rhs.getElementType());
  // batch_matmul_c3
  if (lhs.getShape().drop_back(2) != rhs.getShape().drop_back(2))
    return opError<BatchMatmulOp>(loc, "expects equal batch dimensions, got ",
                                  Type(lhs), " and ", Type(rhs));
  auto [m, k] = matrixDims(lhs, adaptor.getTransposeA());
  auto [k2, n] = matrixDims(rhs, adaptor.getTransposeB());
  // batch_matmul_c4
  if (k != k2)
    return opError<BatchMatmulOp>(loc,
                                  "expects contracting dimensions to match, got ",
                                  k, " (lhs) and ", k2, " (rhs)");
  SmallVector<int64_t> shape(lhs.getShape().drop_back(2));
  shape.append({m, n});
  types.push_back(tensor(shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType table = tensorOf(adaptor.getTable()), ids = tensorOf(adaptor.getIds());
  if (!table || !ids)
    return opError<EmbeddingOp>(loc, "expects ranked tensor operands");
  // embedding_c1
  if (table.getRank() != 2)
    return opError<EmbeddingOp>(loc, "expects a table of rank 2 [V, D], got ",
                                Type(table));
  // embedding_c2: a shard names the whole table's rows, at least its own.
  if (bool(adaptor.getFirstRow()) != adaptor.getNumIds().has_value())
    return opError<EmbeddingOp>(loc, "expects 'shard' with both the first row and the row count");
  if (adaptor.getNumIds() && int64_t(*adaptor.getNumIds()) < table.getDimSize(0))
    return opError<EmbeddingOp>(loc, "expects the whole table's ", std::to_string(*adaptor.getNumIds()),
                                " rows to hold this shard's ", std::to_string(table.getDimSize(0)));
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(tensor(shape, table.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<LayerNormOp>(loc, "expects a ranked tensor operand");
  if (failed(checkNormVector<LayerNormOp>(loc, input, adaptor.getWeight(), "weight")) ||
      failed(checkNormVector<LayerNormOp>(loc, input, adaptor.getBias(), "bias")) ||
      failed(checkEpsilon<LayerNormOp>(loc, adaptor.getEpsilon().convertToDouble())))
    return failure();
  types.push_back(input);
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<RmsNormOp>(loc, "expects a ranked tensor operand");
  if (failed(checkNormVector<RmsNormOp>(loc, input, adaptor.getWeight(), "weight")) ||
      failed(checkEpsilon<RmsNormOp>(loc, adaptor.getEpsilon().convertToDouble())))
    return failure();
  types.push_back(input);
  return success();
}

//===----------------------------------------------------------------------===//
// PowOp
//===----------------------------------------------------------------------===//

// pow_c1: the back ends print the exponent as a literal.
LogicalResult PowOp::verify() {
  double p = getExponent().convertToDouble();
  if (!std::isfinite(p))
    return emitOpError() << "expects a finite exponent, got " << p;
  return success();
}

//===----------------------------------------------------------------------===//
// CompareOp, IotaOp, ArgmaxOp, GatherOp
//===----------------------------------------------------------------------===//

LogicalResult CompareOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType lhs = tensorOf(adaptor.getLhs()), rhs = tensorOf(adaptor.getRhs());
  if (!lhs || !rhs)
    return opError<CompareOp>(loc, "expects ranked tensor operands");
  // compare_c1
  if (lhs != rhs)
    return opError<CompareOp>(loc, "expects operands of one type, got ", Type(lhs), " and ",
                              Type(rhs));
  types.push_back(tensor(lhs.getShape(), IntegerType::get(context, 1)));
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getOnTrue().getType());
  return success();
}

LogicalResult IotaOp::verify() {
  // iota_c1
  if (getDim() < 0 || getDim() >= getType().getRank())
    return emitOpError() << "expects dim in [0, " << getType().getRank() << "), got "
                         << getDim();
  return success();
}

LogicalResult ArgmaxOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<ArgmaxOp>(loc, "expects a ranked tensor operand");
  int64_t dim = adaptor.getDim();
  // argmax_c1
  if (dim < 0 || dim >= input.getRank())
    return opError<ArgmaxOp>(loc, "expects dim in [0, ", input.getRank(), "), got ", dim);
  SmallVector<int64_t> shape(input.getShape());
  shape.erase(shape.begin() + dim);
  types.push_back(tensor(shape, IntegerType::get(context, 32)));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput()), index = tensorOf(adaptor.getIndex());
  // gather_c1, gather_c2
  if (failed(checkGather<GatherOp>(loc, input, index, adaptor.getDim(), false)))
    return failure();
  types.push_back(tensor(index.getShape(), input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// DropoutOp
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<DropoutOp>(loc, "expects a ranked tensor operand");
  // dropout_c1: a rate of 1 would scale by infinity.
  double rate = adaptor.getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return opError<DropoutOp>(loc, "expects a rate in [0, 1), got ", rate);
  // dropout_c2: the stream is the key's second word.
  int64_t stream = adaptor.getStream();
  if (stream < 0 || stream > int64_t(UINT32_MAX))
    return opError<DropoutOp>(loc, "expects a stream in [0, 2^32), got ", stream);
  // dropout_c3: keyed by both the seed and the step, or by neither.
  if (bool(adaptor.getSeed()) != bool(adaptor.getStep()))
    return opError<DropoutOp>(loc, "expects both 'seed' and 'step', or neither");
  // dropout_c4: rows are counted along dimension 0.
  if (adaptor.getFirstRow() && input.getRank() == 0)
    return opError<DropoutOp>(loc, "expects 'rows from' only on a tensor of rank >= 1");
  types.push_back(input);
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp, RotaryOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  if (failed(checkAttention<AttentionOp>(loc, adaptor)))
    return failure();
  types.push_back(adaptor.getQuery().getType());
  return success();
}

double AttentionOp::getEffectiveScale() {
  if (std::optional<llvm::APFloat> scale = getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(getHeadDim()));
}

LogicalResult RotaryOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input)
    return opError<RotaryOp>(loc, "expects a ranked tensor operand");
  int64_t headDim = adaptor.getHeadDim();
  // rotary_c1
  if (input.getRank() != 3)
    return opError<RotaryOp>(loc, "expects an operand of rank 3 "
                                  "[B, T, heads*head_dim], got ",
                             Type(input));
  // rotary_c2
  if (headDim % 2 != 0 || input.getDimSize(2) % headDim != 0)
    return opError<RotaryOp>(loc, "expects an even head_dim dividing ",
                             input.getDimSize(2), ", got ", headDim);
  // rotary_c3
  if (!(adaptor.getTheta().convertToDouble() > 0.0))
    return opError<RotaryOp>(loc, "expects a positive theta, got ",
                             adaptor.getTheta().convertToDouble());
  types.push_back(input);
  return success();
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  FailureOr<RankedTensorType> logits = checkCrossEntropy<CrossEntropyOp>(loc, adaptor);
  if (failed(logits))
    return failure();
  Type lossType = logits->getElementType().isF64() ? Type(Float64Type::get(context))
                                                  : Type(Float32Type::get(context));
  types.push_back(tensor({}, lossType));
  return success();
}

LogicalResult TargetMaskOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkTokenCount<TargetMaskOp>(loc, adaptor)))
    return failure();
  auto targets = cast<RankedTensorType>(adaptor.getTargets().getType());
  types.push_back(targets);
  types.push_back(tensor(targets.getShape(), Float32Type::get(context)));
  return success();
}

LogicalResult TokenCountOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(checkTokenCount<TokenCountOp>(loc, adaptor)))
    return failure();
  types.push_back(tensor({}, Float32Type::get(context)));
  return success();
}
