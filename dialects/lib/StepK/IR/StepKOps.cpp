//===- StepKOps.cpp - the stepk kernel-level dialect ----------------------===//

#include "stepc/Dialect/StepK/IR/StepKOps.h"
#include "stepc/Dialect/StepK/IR/AdamwGroup.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::stepk;

#include "stepc/Dialect/StepK/IR/StepKDialect.cpp.inc"
#include "stepc/Dialect/StepK/IR/StepKEnums.cpp.inc"

void StepKDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "stepc/Dialect/StepK/IR/StepKOps.cpp.inc"
      >();
}

int64_t FusedOp::getNumElements() {
  return cast<RankedTensorType>(getResult(0).getType()).getNumElements();
}

YieldOp FusedOp::getYield() { return cast<YieldOp>(getBody().front().getTerminator()); }

/// What every kernel with a body checks: one block argument per input, of
/// its type, and a yield of the results' types.
static LogicalResult verifyKernelBody(Operation *op, ValueRange inputs, Region &region) {
  Block &body = region.front();
  if (body.getNumArguments() != inputs.size())
    return op->emitOpError() << "expects one body argument per input, got "
                             << body.getNumArguments() << " for " << inputs.size();
  for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
    if (input.getType() != arg.getType())
      return op->emitOpError() << "body argument #" << arg.getArgNumber() << " has type "
                               << arg.getType() << ", its input " << input.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return op->emitOpError() << "expects its body to end in 'stepk.yield'";
  if (yield.getValues().getTypes() != op->getResultTypes())
    return op->emitOpError() << "yields " << yield.getValues().getTypes()
                             << " but its results are " << op->getResultTypes();
  return success();
}

YieldOp CallOp::getYield() { return cast<YieldOp>(getBody().front().getTerminator()); }

Operation *CallOp::getKernelOp() {
  Block &body = getBody().front();
  // Values the kernel reads its inputs as: slices, widenings and
  // broadcasts of inputs (a table of rows read repeated), and sums of
  // those (a norm gradient's dy summed from bf16 terms).
  llvm::SmallPtrSet<Operation *, 4> reading;
  auto read = [&](Value v) { return v.getDefiningOp() && reading.count(v.getDefiningOp()); };
  for (Operation &op : body) {
    auto widening = dyn_cast<step::ConvertOp>(op);
    auto repeat = dyn_cast<step::BroadcastOp>(op);
    bool ofInput = (widening && isa<BlockArgument>(widening.getInput())) ||
                   (repeat && isa<BlockArgument>(repeat.getInput()));
    auto add = dyn_cast<step::AddOp>(op);
    bool sum = add && read(add.getLhs()) && read(add.getRhs());
    if ((!isa<step::SliceOp>(op) && !ofInput && !sum) || op.getNextNode() == body.getTerminator())
      return &op;
    reading.insert(&op);
  }
  return &body.front();
}

LogicalResult CallOp::verify() {
  if (getCallee().empty())
    return emitOpError() << "expects a callee";
  // Each scalar's type is its parameter's C type (the emitters declare the
  // kernel from them): i64 or i32, f64, an i64 or i32 array.
  for (Attribute scalar : getScalars()) {
    auto integer = dyn_cast<IntegerAttr>(scalar);
    auto real = dyn_cast<FloatAttr>(scalar);
    if (!(integer && (integer.getType().isInteger(64) || integer.getType().isInteger(32))) &&
        !(real && real.getType().isF64()) && !isa<DenseI64ArrayAttr, DenseI32ArrayAttr>(scalar))
      return emitOpError() << "expects i64, i32, f64 and integer-array scalars, got "
                           << scalar;
  }
  if (getScratchBytes() && *getScratchBytes() < 0)
    return emitOpError() << "expects scratch_bytes >= 0, got " << *getScratchBytes();
  bool check = getIdCheck().has_value();
  if (getIdOperand().has_value() != check || getIdBound().has_value() != check)
    return emitOpError() << "expects id_check, id_operand and id_bound together";
  if (check && (*getIdOperand() >= getInputs().size() || *getIdBound() < 1))
    return emitOpError() << "expects id_operand to name an input and id_bound >= 1";
  return verifyKernelBody(*this, getInputs(), getBody());
}

LogicalResult FusedOp::verify() {
  if (getNumResults() == 0)
    return emitOpError() << "expects at least one result";
  if (failed(verifyKernelBody(*this, getInputs(), getBody())))
    return failure();
  Block &body = getBody().front();
  int64_t n = getNumElements();
  SmallVector<Value> values(getInputs());
  llvm::append_range(values, getResults());
  for (Value v : values)
    if (cast<RankedTensorType>(v.getType()).getNumElements() != n)
      return emitOpError() << "expects every input and result to hold " << n
                           << " elements, got " << v.getType();
  for (Operation &op : body.without_terminator())
    if (!isa<step::ScalarMathOpInterface, step::ConvertOp, step::ReshapeOp>(op))
      return op.emitOpError() << "cannot be computed element by element in 'stepk.fused'";
  return success();
}

bool stepc::stepk::sameAdamwScalars(step::AdamwOp a, step::AdamwOp b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a.getGradScale() == b.getGradScale();
}

bool stepc::stepk::sameAdamwHyperparameters(step::AdamwOp a, step::AdamwOp b) {
  return a.getBeta1() == b.getBeta1() && a.getBeta2() == b.getBeta2() &&
         a.getEpsilon() == b.getEpsilon() && a.getWeightDecay() == b.getWeightDecay() &&
         a.getDecoupledWeightDecay() == b.getDecoupledWeightDecay();
}

Value AdamwGroupOp::inputOf(Value bodyValue) {
  auto arg = dyn_cast<BlockArgument>(bodyValue);
  if (!arg || arg.getOwner() != &getBody().front())
    return {};
  return getInputs()[arg.getArgNumber()];
}

LogicalResult AdamwGroupOp::verifyRegions() {
  if (failed(verifyKernelBody(*this, getInputs(), getBody())))
    return failure();
  Block &body = getBody().front();
  SmallVector<step::AdamwOp> updates = getUpdates();
  if (updates.empty() || updates.size() != body.getOperations().size() - 1)
    return emitOpError() << "expects a body of 'step.adamw' ops only";
  // One launch takes one set of scalars and hyperparameters.
  step::AdamwOp first = updates.front();
  for (step::AdamwOp u : updates) {
    if (!sameAdamwScalars(first, u))
      return u.emitOpError() << "reads another learning rate, step or gradient scale than the "
                                "group's first update";
    if (!sameAdamwHyperparameters(first, u))
      return u.emitOpError() << "has other hyperparameters than the group's first update";
    for (Value in : u->getOperands())
      if (!inputOf(in))
        return u.emitOpError() << "expects its operands to be body arguments";
  }
  // The results, each update's in order: the emitter's table and the memory
  // plan's in-place rule read them so.
  SmallVector<Value> expected;
  for (step::AdamwOp u : updates)
    llvm::append_range(expected, u->getResults());
  if (!llvm::equal(getYield().getValues(), expected))
    return emitOpError() << "expects to yield every update's results in body order";
  return success();
}

YieldOp AdamwGroupOp::getYield() { return cast<YieldOp>(getBody().front().getTerminator()); }

LogicalResult GemmOp::verify() {
  Epilogue epilogue = getEpilogue();
  const bool second = epilogue == Epilogue::gelu || epilogue == Epilogue::bgrad;
  if (second != static_cast<bool>(getEpilogueResult()))
    return emitOpError() << "returns a second result exactly with the gelu (pre-activation) and "
                            "bgrad (bias gradient) epilogues";
  if ((epilogue == Epilogue::dgelu) != static_cast<bool>(getAux()))
    return emitOpError() << "reads aux exactly with the dgelu epilogue";
  auto result = cast<RankedTensorType>(getResult().getType());
  if (result.getRank() < 2)
    return emitOpError() << "expects a result of rank >= 2, got " << result;
  if (epilogue == Epilogue::bgrad) {
    // A weight gradient: lhs [K, M] read transposed; the bias gradient [M].
    auto lhs = cast<RankedTensorType>(getLhs().getType());
    auto grad = cast<RankedTensorType>(getBiasGrad().getType());
    if (lhs.getRank() != 2 || result.getRank() != 2 || !getTransposeA() || !getSharedRhs() ||
        getBias())
      return emitOpError() << "takes the bgrad epilogue only on a weight gradient (a 2-d "
                              "transposed lhs and result, shared_rhs, no bias)";
    if (grad.getRank() != 1 || grad.getDimSize(0) != result.getDimSize(0) ||
        !grad.getElementType().isF32())
      return emitOpError() << "expects an f32 bias gradient of the result's rows ("
                           << result.getDimSize(0) << "), got " << grad;
  }
  if (Value bias = getBias()) {
    auto type = cast<RankedTensorType>(bias.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != result.getShape().back())
      return emitOpError() << "expects a bias of the result's last dim ("
                           << result.getShape().back() << "), got " << type;
  }
  for (Value v : {Value(getAux()), getPreActivation()})
    if (v && cast<RankedTensorType>(v.getType()).getShape() != result.getShape())
      return emitOpError() << "expects aux and pre_activation shaped like the result, got "
                           << v.getType();
  if (std::optional<ArrayRef<int32_t>> fp8 = getFp8()) {
    if (fp8->size() != 3 || llvm::any_of(*fp8, [](int32_t f) { return f != 0 && f != 1; }) ||
        ((*fp8)[0] == 1 && (*fp8)[1] == 1))
      return emitOpError() << "expects fp8 = [lhs format, rhs format, rhs scaling], formats 0 "
                              "(e4m3) or 1 (e5m2) and not both e5m2, scaling 0 (128x128 "
                              "blocks) or 1 (1x128 along K)";
  }
  // Packed operands (stepk.pack_fp8): bytes with each block's scale.
  auto lhsType = cast<RankedTensorType>(getLhs().getType());
  auto rhsType = cast<RankedTensorType>(getRhs().getType());
  const bool packedLhs = isFp8Bytes(lhsType.getElementType());
  const bool packedRhs = isFp8Bytes(rhsType.getElementType());
  if (packedLhs != static_cast<bool>(getLhsScales()) ||
      packedRhs != static_cast<bool>(getRhsScales()))
    return emitOpError() << "takes lhs_scales / rhs_scales exactly with an operand of fp8 bytes";
  if (packedLhs || packedRhs) {
    std::optional<ArrayRef<int32_t>> fp8 = getFp8();
    const int64_t k = getK();
    const int64_t rows = lhsType.getNumElements() / k;
    // 1x128 blocks along K: [K / 128, lines]; 128x128: [lines / 128, K
    // blocks padded to 4].
    auto scalesOf = [&](Value scales, int64_t lines, bool squareBlocks = false) {
      auto type = cast<RankedTensorType>(scales.getType());
      SmallVector<int64_t> want{(k + 127) / 128, lines};
      if (squareBlocks)
        want = {(lines + 127) / 128, fp8BlockScaleColumns(k)};
      return type.getElementType().isF32() && type.getShape() == ArrayRef<int64_t>(want);
    };
    if (!fp8 || epilogue == Epilogue::bgrad)
      return emitOpError() << "reads packed operands only as an fp8 GEMM without the bgrad "
                              "epilogue";
    if (packedLhs && (getTransposeA() || fp8FormatOf(lhsType.getElementType()) != (*fp8)[0] ||
                      !scalesOf(getLhsScales(), rows)))
      return emitOpError() << "expects packed lhs bytes [rows, K] (not transposed) in the "
                              "format fp8 names, with f32 scales [K / 128, rows]";
    if (packedRhs && (!getTransposeB() || rhsType.getRank() != 2 ||
                      fp8FormatOf(rhsType.getElementType()) != (*fp8)[1] ||
                      !scalesOf(getRhsScales(), rhsType.getDimSize(0), (*fp8)[2] == 0)))
      return emitOpError() << "expects packed rhs bytes [N, K] (transpose_b) in the format fp8 "
                              "names, with f32 scales [K / 128, N] (1x128 blocks) or [N / 128, "
                              "K / 128 padded to 4] (128x128)";
  }
  return success();
}

int32_t PackFp8Op::getFormat() {
  return fp8FormatOf(cast<RankedTensorType>(getBytes().getType()).getElementType());
}

LogicalResult PackFp8Op::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto bytes = cast<RankedTensorType>(getBytes().getType());
  auto scales = cast<RankedTensorType>(getScales().getType());
  if (in.getRank() < 2 || !(in.getElementType().isF32() || in.getElementType().isBF16()))
    return emitOpError() << "packs an f32 or bf16 input of rank >= 2, got " << in;
  if (!isFp8Bytes(bytes.getElementType()) || !scales.getElementType().isF32())
    return emitOpError() << "returns f8E4M3FN or f8E5M2 bytes and f32 scales";
  const int64_t cols = in.getShape().back(), rows = in.getNumElements() / cols;
  const bool t = getTransposed();
  if (t ? (in.getRank() != 2 || bytes.getShape() != ArrayRef<int64_t>{cols, rows})
        : bytes.getShape() != in.getShape())
    return emitOpError() << "expects bytes shaped like the input, or [cols, rows] of a 2-d input "
                            "where transposed, got "
                         << bytes;
  const int64_t along = t ? rows : cols, across = t ? cols : rows;
  if (getBlocks()) {
    // 128x128 blocks of [across, along] (bytes' rows, K), K-blocks padded.
    SmallVector<int64_t> want{(across + 127) / 128, fp8BlockScaleColumns(along)};
    if (in.getRank() != 2 || scales.getShape() != ArrayRef<int64_t>(want))
      return emitOpError() << "packs 128x128 blocks of a 2-d input, scales [" << want[0] << ", "
                           << want[1] << "], got " << in << " and " << scales;
    return success();
  }
  if (scales.getShape() != ArrayRef<int64_t>{(along + 127) / 128, across})
    return emitOpError() << "expects scales [" << (along + 127) / 128 << ", " << across
                         << "] (a block's along the " << (t ? "rows" : "last dim")
                         << "), got " << scales;
  return success();
}

/// What both attention kernels check: `query` [B, Tq, Hq·Dh], `key` and
/// `value` [B, Tk, Hkv·Dh] with Hq a multiple of Hkv, and `out` (the
/// forward's result, or the query's gradient) shaped like `query`.
static LogicalResult verifyAttentionShapes(Operation *op, Value query, Value key, Value value,
                                           Value out, int64_t heads, int64_t kvHeads,
                                           int64_t headDim) {
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  if (q.getRank() != 3 || k.getShape() != v.getShape() || k.getRank() != 3 ||
      q.getDimSize(0) != k.getDimSize(0))
    return op->emitOpError() << "expects query [B, Tq, Hq*Dh] and key, value [B, Tk, Hkv*Dh], got "
                             << q << ", " << k << ", " << v;
  // Divided, not multiplied: the attributes may be as large as an i64.
  auto splits = [headDim](int64_t width, int64_t n) {
    return width % n == 0 && width / n == headDim;
  };
  if (heads % kvHeads != 0 || !splits(q.getDimSize(2), heads) ||
      !splits(k.getDimSize(2), kvHeads))
    return op->emitOpError() << "expects " << heads << " query heads and " << kvHeads
                             << " key/value heads (a divisor) of " << headDim << " channels";
  if (cast<RankedTensorType>(out.getType()).getShape() != q.getShape())
    return op->emitOpError() << "expects " << out.getType() << " shaped like the query " << q;
  return success();
}

/// An additive f32 mask [B or 1, Hq or 1, Tq or 1, Tk] (step.attention's).
static LogicalResult verifyMask(Operation *op, Value mask, Value query, Value key,
                                int64_t heads) {
  if (!mask)
    return success();
  auto q = cast<RankedTensorType>(query.getType());
  auto m = cast<RankedTensorType>(mask.getType());
  int64_t full[4] = {q.getDimSize(0), heads, q.getDimSize(1),
                     cast<RankedTensorType>(key.getType()).getDimSize(1)};
  bool fits = m.getElementType().isF32() && m.getRank() == 4;
  for (int d = 0; fits && d < 4; ++d)
    fits = m.getDimSize(d) == full[d] || (d < 3 && m.getDimSize(d) == 1);
  if (!fits)
    return op->emitOpError() << "expects an f32 mask [" << full[0] << " or 1, " << full[1]
                             << " or 1, " << full[2] << " or 1, " << full[3] << "], got " << m;
  return success();
}

/// A log-sum-exp per batch, query head and query position: [B, Hq, Tq] f32.
static LogicalResult verifyLse(Operation *op, Value lse, Value query, int64_t heads) {
  auto q = cast<RankedTensorType>(query.getType());
  auto type = cast<RankedTensorType>(lse.getType());
  if (!type.getElementType().isF32() ||
      type.getShape() != ArrayRef<int64_t>{q.getDimSize(0), heads, q.getDimSize(1)})
    return op->emitOpError() << "expects a log-sum-exp tensor<" << q.getDimSize(0) << "x" << heads
                             << "x" << q.getDimSize(1) << "xf32>, got " << type;
  return success();
}

/// A packed attention's operand: query, key and value one [B, T, W] tensor
/// whose last-dim columns [offset, offset + width) are the query (Hq·Dh
/// wide), key and value (Hkv·Dh), in range, disjoint and, for a gradient
/// (`tiled`), covering W. No mask (the packed kernels take none).
static LogicalResult verifyPacked(Operation *op, ArrayRef<int64_t> offsets, Value query,
                                  Value key, Value value, Value mask, int64_t heads,
                                  int64_t kvHeads, int64_t headDim, bool tiled) {
  if (query != key || query != value)
    return op->emitOpError() << "expects one packed operand as query, key and value";
  if (mask)
    return op->emitOpError() << "expects no mask on a packed attention";
  auto x = cast<RankedTensorType>(query.getType());
  if (x.getRank() != 3 || offsets.size() != 3 || heads % kvHeads != 0)
    return op->emitOpError() << "expects a packed [B, T, W] operand and three offsets, got "
                             << x << " and " << offsets.size();
  const int64_t width = x.getDimSize(2);
  // Divided, not multiplied: the attributes may be as large as an i64.
  if (headDim > width / heads)
    return op->emitOpError() << "expects " << heads << " heads of " << headDim
                             << " channels to fit a row of " << width;
  const int64_t sizes[3] = {heads * headDim, kvHeads * headDim, kvHeads * headDim};
  bool ok = true;
  for (int i = 0; i < 3; ++i)
    ok = ok && offsets[i] >= 0 && offsets[i] <= width - sizes[i];
  for (int i = 0; ok && i < 3; ++i)
    for (int j = 0; j < i; ++j)
      ok = ok && (offsets[i] + sizes[i] <= offsets[j] || offsets[j] + sizes[j] <= offsets[i]);
  if (ok && tiled)
    ok = sizes[0] == width - sizes[1] - sizes[2]; // (no sum past int64: each is <= width)
  if (!ok)
    return op->emitOpError() << "expects query, key and value columns of widths " << sizes[0]
                             << ", " << sizes[1] << ", " << sizes[2] << " at ["
                             << llvm::make_range(offsets.begin(), offsets.end())
                             << "] inside a row of " << width
                             << (tiled ? ", tiling it" : ", not overlapping");
  return success();
}

/// [B, T, Hq·Dh] of a packed operand [B, T, W].
static SmallVector<int64_t> packedQueryShape(Value packed, int64_t heads, int64_t headDim) {
  auto x = cast<RankedTensorType>(packed.getType());
  return {x.getDimSize(0), x.getDimSize(1), heads * headDim};
}

LogicalResult AttentionOp::verify() {
  if (std::optional<ArrayRef<int64_t>> packed = getPacked()) {
    if (failed(verifyPacked(*this, *packed, getQuery(), getKey(), getValue(), getMask(),
                            getNumHeads(), getNumKvHeads(), getHeadDim(), /*tiled=*/false)))
      return failure();
    if (cast<RankedTensorType>(getResult().getType()).getShape() !=
        ArrayRef(packedQueryShape(getQuery(), getNumHeads(), getHeadDim())))
      return emitOpError() << "expects the output [B, T, Hq*Dh], got " << getResult().getType();
  } else if (failed(verifyAttentionShapes(*this, getQuery(), getKey(), getValue(), getResult(),
                                          getNumHeads(), getNumKvHeads(), getHeadDim())) ||
             failed(verifyMask(*this, getMask(), getQuery(), getKey(), getNumHeads()))) {
    return failure();
  }
  return getLse() ? verifyLse(*this, getLse(), getQuery(), getNumHeads()) : success();
}

LogicalResult AttentionGradOp::verify() {
  auto shape = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  if (std::optional<ArrayRef<int64_t>> packed = getPacked()) {
    if (failed(verifyPacked(*this, *packed, getQuery(), getKey(), getValue(), getMask(),
                            getNumHeads(), getNumKvHeads(), getHeadDim(), /*tiled=*/true)))
      return failure();
    SmallVector<int64_t> rows = packedQueryShape(getQuery(), getNumHeads(), getHeadDim());
    if (getGrads().size() != 1 || shape(getGrads()[0]) != shape(getQuery()))
      return emitOpError() << "expects one gradient shaped like the packed operand";
    if (shape(getGrad()) != ArrayRef(rows) || (getOut() && shape(getOut()) != ArrayRef(rows)))
      return emitOpError() << "expects the output's gradient and the saved output [B, T, Hq*Dh]";
  } else {
    if (getGrads().size() != 3)
      return emitOpError() << "expects three gradients (query, key, value)";
    if (failed(verifyAttentionShapes(*this, getQuery(), getKey(), getValue(), getQueryGrad(),
                                     getNumHeads(), getNumKvHeads(), getHeadDim())) ||
        failed(verifyMask(*this, getMask(), getQuery(), getKey(), getNumHeads())))
      return failure();
    if (shape(getKeyGrad()) != shape(getKey()) || shape(getValueGrad()) != shape(getValue()) ||
        shape(getGrad()) != shape(getQuery()))
      return emitOpError() << "expects the gradients shaped like what they are gradients of";
    if (getOut() && shape(getOut()) != shape(getQuery()))
      return emitOpError() << "expects the saved output shaped like the query";
  }
  if (static_cast<bool>(getOut()) != static_cast<bool>(getLse()))
    return emitOpError() << "expects the saved output and log-sum-exp together";
  return getLse() ? verifyLse(*this, getLse(), getQuery(), getNumHeads()) : success();
}

#define GET_OP_CLASSES
#include "stepc/Dialect/StepK/IR/StepKOps.cpp.inc"
