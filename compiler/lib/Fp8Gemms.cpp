//===- Fp8Gemms.cpp - the GEMMs that may run on fp8 tensor cores ----------===//
//
// step-fp8 rounds a linear layer's operands to fp8 values by tiles, and
// the GEMMs then multiply those values in bf16. On CUDA a GEMM whose
// operands' tiles contain cuBLASLt's scaling blocks (1x128 of the lhs along
// K, 128x128 of the rhs) can multiply them on the fp8 tensor cores instead:
// each block's values are one format's, scaled by a power of two, so the
// packing into bytes and block scales is exact and the product the same.
// The forward and input-gradient products qualify (their tiles lie along
// K), and so does the weight gradient, whose operands step-fp8-weight-grads
// rounds in [128, 1] tiles along its K, the tokens (the rhs then scaled per
// 1x128 block along K as the lhs).
//
// Where only fp8 GEMMs read a value's two roundings, the pass that rounds
// it writes the GEMMs' operands themselves: fp8 bytes and block scales
// (stepk.pack_fp8), which the GEMMs read without packing them again; so
// does a weight's rounding, in the layouts its products read.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "mlir/IR/IRMapping.h"

#include "runtime/kernels/cuda/launch_config.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The rounding `v` is (through converts, which keep its values): format
/// and tile of a step.quantize_fp8, or of a library call of one.
std::optional<std::pair<int32_t, ArrayRef<int64_t>>> fp8Rounding(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    // A library call: the op in its body that made this result (through
    // the body's converts): quantize_fp8, its bf16 forms, both roundings
    // of one value, or another kernel.
    if (auto call = dyn_cast<stepk::CallOp>(def)) {
      v = call.getYield()->getOperand(cast<OpResult>(v).getResultNumber());
      def = v.getDefiningOp();
      while (isa_and_nonnull<ConvertOp>(def))
        def = def->getOperand(0).getDefiningOp();
    }
    if (auto q = dyn_cast_or_null<QuantizeFp8Op>(def))
      return std::make_pair(static_cast<int32_t>(q.getFormat()), q.getTile());
    if (!isa_and_nonnull<ConvertOp>(def))
      return std::nullopt;
    v = def->getOperand(0);
  }
  return std::nullopt;
}

/// A tile's extent holds whole blocks of `block` along a dim of `size`.
bool holdsBlocks(int64_t extent, int64_t size, int64_t block) {
  return extent >= size || extent % block == 0;
}

} // namespace

void stepc::markFp8Gemms(func::FuncOp step) {
  const int64_t block = cuda::kFp8Block;
  step.walk([&](stepk::GemmOp gemm) {
    auto lhs = fp8Rounding(gemm.getLhs()), rhs = fp8Rounding(gemm.getRhs());
    if (!lhs || !rhs)
      return;
    auto a = cast<RankedTensorType>(gemm.getLhs().getType());
    auto b = cast<RankedTensorType>(gemm.getRhs().getType());
    auto out = cast<RankedTensorType>(gemm.getResult().getType());
    Type elem = a.getElementType();
    if (elem != b.getElementType() || !(elem.isBF16() || elem.isF32()))
      return;
    // The lhs's tiles hold its 1x128 blocks along K; the rhs's its 128x128
    // blocks, or else 1x128 blocks along K.
    const bool ta = gemm.getTransposeA(), tb = gemm.getTransposeB();
    int64_t k = gemm.getK();
    ArrayRef<int64_t> bShape = b.getShape().take_back(2);
    const int kDim = tb ? 1 : 0;  // of the rhs's last two
    if (!holdsBlocks(lhs->second[ta ? 0 : 1], k, block) ||
        !holdsBlocks(rhs->second[kDim], bShape[kDim], block))
      return;
    const bool rhsBlocks = holdsBlocks(rhs->second[1 - kDim], bShape[1 - kDim], block);
    int64_t m = out.getDimSize(out.getRank() - 2), n = out.getShape().back();
    int64_t batch = out.getNumElements() / (m * n);
    if (!cuda::Fp8GemmRunsInFp8(batch, m, n, k, ta, gemm.getSharedRhs(), lhs->first,
                                rhs->first))
      return;
    gemm.setFp8(ArrayRef<int32_t>{lhs->first, rhs->first, rhsBlocks ? 0 : 1});
  });
}

namespace {

/// How an fp8 GEMM reads one of a pair's roundings, packed: as its lhs or
/// its rhs.
struct PackedRead {
  stepk::GemmOp gemm;
  bool rhs;
};

/// The reads of a pair's rounding `v` (`byColumns`: the [128, 1] one, a 2-d
/// [tokens, features] value) that can take it packed: the rows as an
/// untransposed lhs (bytes stored as v, K its last dim); the columns as a
/// transposed lhs or an untransposed rhs in 1x128 blocks (the bytes v's
/// transpose, K the tokens). Empty if anything else reads it.
SmallVector<PackedRead> packedReads(Value v, bool byColumns) {
  SmallVector<PackedRead> reads;
  for (OpOperand &use : v.getUses()) {
    auto gemm = dyn_cast<stepk::GemmOp>(use.getOwner());
    if (!gemm || !gemm.getFp8() || gemm.getLhs() == gemm.getRhs() ||
        use.getOperandNumber() > 1)
      return {};
    const bool rhs = use.getOperandNumber() == 1;
    bool fits;
    if (!rhs)
      fits = gemm.getTransposeA() == byColumns &&
             gemm.getEpilogue() != stepk::Epilogue::bgrad;
    else
      fits = byColumns && !gemm.getTransposeB() && (*gemm.getFp8())[2] == 1 &&
             cast<RankedTensorType>(v.getType()).getRank() == 2;
    if (!fits)
      return {};
    reads.push_back({gemm, rhs});
  }
  return reads;
}

/// The GEMM of `read` takes `bytes` and `scales` for the operand it read.
void readPacked(const PackedRead &read, Value bytes, Value scales) {
  stepk::GemmOp gemm = read.gemm;
  if (read.rhs) {
    gemm.getRhsMutable().assign(bytes);
    gemm.getRhsScalesMutable().assign(scales);
    gemm.setTransposeB(true);
  } else {
    gemm.getLhsMutable().assign(bytes);
    gemm.getLhsScalesMutable().assign(scales);
    gemm.setTransposeA(false);
  }
}

/// The packing pass `packing` of an output gradient that a GELU's gradient
/// made and only this pass reads (the MLP's first product's, in every
/// GPT): the pass computes it from the GELU's input gradient and
/// pre-activation as it reads them (through their bf16 widenings, which go
/// with it), so the f32 gradient is neither written nor read again.
/// Whether it did (`packing` is gone then).
bool absorbGeluGrad(stepk::CallOp packing) {
  Value source = packing.getInputs()[0];
  auto gg = source.getDefiningOp<GeluGradOp>();
  if (packing.getInputs().size() != 1 || !gg || !source.hasOneUse() ||
      gg->getBlock() != packing->getBlock())
    return false;
  // Both operands bf16 widened only for the GELU's gradient, or both f32.
  auto widening = [&](Value v) {
    auto convert = v.getDefiningOp<ConvertOp>();
    return convert && convert->hasOneUse() && convert->getBlock() == gg->getBlock() &&
                   cast<RankedTensorType>(convert.getInput().getType()).getElementType().isBF16()
               ? convert
               : ConvertOp();
  };
  ConvertOp dyWide = widening(gg.getGrad()), preWide = widening(gg.getInput());
  if (static_cast<bool>(dyWide) != static_cast<bool>(preWide) || gg.getGrad() == gg.getInput())
    return false;
  const bool ofBf16 = static_cast<bool>(dyWide);
  SmallVector<Value> inputs{ofBf16 ? dyWide.getInput() : gg.getGrad(),
                            ofBf16 ? preWide.getInput() : gg.getInput()};
  StringRef rest = packing.getCallee().drop_front(StringRef("pack_fp8_rows_columns").size());
  if (!rest.empty() && rest != "_dbias")
    return false;
  OpBuilder b(packing);
  SmallVector<Attribute> scalars(packing.getScalars().begin(), packing.getScalars().end());
  scalars.push_back(b.getI32IntegerAttr(gg.isTanhApproximation() ? 1 : 0));
  auto fused = b.create<stepk::CallOp>(
      packing.getLoc(), packing.getResultTypes(),
      b.getStringAttr(("pack_fp8_rows_columns_gelu_grad" + rest + (ofBf16 ? "_of_bf16" : "")).str()),
      inputs, b.getArrayAttr(scalars), packing.getScratchBytesAttr(), StringAttr(),
      IntegerAttr(), IntegerAttr());
  copyPhase(packing, fused);
  // Its body: the widenings and the GELU's gradient, then the packing's.
  Block &old = packing.getBody().front();
  Block *body = b.createBlock(&fused.getBody(), {}, ValueRange(inputs).getTypes(),
                              {packing.getLoc(), packing.getLoc()});
  IRMapping map;
  map.map(inputs[0], body->getArgument(0));
  map.map(inputs[1], body->getArgument(1));
  if (ofBf16) {
    b.clone(*dyWide, map);
    b.clone(*preWide, map);
  }
  map.map(old.getArgument(0), b.clone(*gg, map)->getResult(0));
  for (Operation &op : old)
    b.clone(op, map);
  packing.replaceAllUsesWith(fused.getResults());
  packing.erase();
  gg.erase();
  if (ofBf16) {
    dyWide.erase();
    preWide.erase();
  }
  return true;
}

/// `v` widened from bf16 in `block`: the bf16 value, or null.
Value widenedBf16(Value v, Block *block) {
  auto convert = v.getDefiningOp<ConvertOp>();
  return convert && convert->getBlock() == block &&
                 cast<RankedTensorType>(convert.getInput().getType()).getElementType().isBF16()
             ? convert.getInput()
             : Value();
}

/// The packing pass `packing` of SwiGLU's product silu(gate) * other
/// (Llama's activation, other the up projection's output; the up
/// projection's output gradient, other the input gradient) or of the
/// gate's output gradient silu_grad(dy * up, gate), each of bf16 values
/// widened, when only the pass reads it: the pass computes it from the
/// bf16 values as it reads them (the chain cloned into its body, computed
/// as the elementwise kernels compute it), so the f32 value is neither
/// written nor read. A silu or product something else reads stays for it;
/// what nothing reads any more goes (the forward's silu, once the up
/// projection's gradient computes its own).
void absorbSwiglu(stepk::CallOp packing) {
  Value source = packing.getInputs()[0];
  Operation *top = source.getDefiningOp();
  Block *block = packing->getBlock();
  if (packing.getCallee() != "pack_fp8_rows_columns" || packing.getInputs().size() != 1 ||
      !top || top->getBlock() != block || !source.hasOneUse())
    return;
  auto siluOfBf16 = [&](Value v) {
    auto silu = v.getDefiningOp<SiluOp>();
    return silu && silu->getBlock() == block ? widenedBf16(silu.getInput(), block) : Value();
  };
  SmallVector<Value> inputs;
  StringRef callee;
  if (auto mul = dyn_cast<MulOp>(top)) {
    for (auto [s, o] : {std::pair(mul.getLhs(), mul.getRhs()),
                        std::pair(mul.getRhs(), mul.getLhs())})
      if (Value gate = siluOfBf16(s), other = widenedBf16(o, block); gate && other) {
        inputs = {gate, other};
        break;
      }
    callee = "pack_fp8_rows_columns_swiglu_of_bf16";
  } else if (auto grad = dyn_cast<SiluGradOp>(top)) {
    auto product = grad.getGrad().getDefiningOp<MulOp>();
    Value gate = widenedBf16(grad.getInput(), block);
    if (gate && product && product->getBlock() == block)
      if (Value dy = widenedBf16(product.getLhs(), block),
          up = widenedBf16(product.getRhs(), block);
          dy && up)
        inputs = {gate, dy, up};
    callee = "pack_fp8_rows_columns_swiglu_gate_grad_of_bf16";
  }
  auto shape = cast<RankedTensorType>(source.getType()).getShape();
  if (inputs.empty() || llvm::any_of(inputs, [&](Value v) {
        return cast<RankedTensorType>(v.getType()).getShape() != shape;
      }))
    return;
  OpBuilder b(packing);
  auto fused = b.create<stepk::CallOp>(packing.getLoc(), packing.getResultTypes(),
                                       b.getStringAttr(callee), inputs, packing.getScalars(),
                                       packing.getScratchBytesAttr(), StringAttr(), IntegerAttr(),
                                       IntegerAttr());
  copyPhase(packing, fused);
  // Its body: the chain from the bf16 values (its arguments), then the
  // packing's.
  Block &old = packing.getBody().front();
  SmallVector<Location> locs(inputs.size(), packing.getLoc());
  Block *body = b.createBlock(&fused.getBody(), {}, ValueRange(inputs).getTypes(), locs);
  IRMapping map;
  for (auto [input, arg] : llvm::zip(inputs, body->getArguments()))
    map.map(input, arg);
  std::function<Value(Value)> cloned = [&](Value v) -> Value {
    if (Value done = map.lookupOrNull(v))
      return done;
    Operation *def = v.getDefiningOp();
    for (Value operand : def->getOperands())
      cloned(operand);
    return b.clone(*def, map)->getResult(0);
  };
  map.map(old.getArgument(0), cloned(source));
  for (Operation &op : old)
    b.clone(op, map);
  packing.replaceAllUsesWith(fused.getResults());
  packing.erase();
  // The chain's ops nothing reads any more.
  SmallVector<Operation *> dead{top};
  while (!dead.empty()) {
    Operation *op = dead.pop_back_val();
    if (!op->use_empty() || !isa<ConvertOp, SiluOp, MulOp, SiluGradOp>(op))
      continue;
    SetVector<Operation *> defs;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && def->getBlock() == block)
        defs.insert(def);
    op->erase();
    for (Operation *def : defs)
      if (!llvm::is_contained(dead, def))
        dead.push_back(def);
  }
}

/// A packing pass of `input` (f32 or bf16, read as [rows, cols]) at `at`, returning
/// `types`: the call (scalars rows, cols, format) with an empty body whose
/// one argument is the input, `b` set at the start of that body.
stepk::CallOp createPackingCall(OpBuilder &b, Operation *at, TypeRange types, StringRef callee,
                                Value input, int32_t format) {
  auto type = cast<RankedTensorType>(input.getType());
  const int64_t cols = type.getShape().back(), rows = type.getNumElements() / cols;
  b.setInsertionPoint(at);
  auto packing = b.create<stepk::CallOp>(
      at->getLoc(), types, b.getStringAttr(callee), ValueRange{input},
      b.getArrayAttr({b.getI64IntegerAttr(rows), b.getI64IntegerAttr(cols),
                      b.getI32IntegerAttr(format)}),
      IntegerAttr(), StringAttr(), IntegerAttr(), IntegerAttr());
  copyPhase(at, packing);
  b.createBlock(&packing.getBody(), {}, {type}, {at->getLoc()});
  return packing;
}

/// A layer's input rounded only in [1, 128] tiles (a forward without its
/// backward: the eval step's), read only by fp8 GEMMs as their lhs along K:
/// one pass writes its bytes and scales as they read them (pack_fp8_rows;
/// of a widened bf16 value, pack_fp8_rows_of_bf16), which they take as they
/// are.
void packFp8Rows(stepk::CallOp rounding, QuantizeFp8Op q) {
  Value rounded = rounding.getResult(0);
  // (Rows read as a lhs along K alone: packedReads takes no rhs of them.)
  SmallVector<PackedRead> reads = packedReads(rounded, /*byColumns=*/false);
  if (reads.empty())
    return;
  auto type = cast<RankedTensorType>(rounding.getInputs()[0].getType());
  const int64_t cols = type.getShape().back(), rows = type.getNumElements() / cols;
  MLIRContext *ctx = rounding.getContext();
  const auto format = static_cast<int32_t>(q.getFormat());
  SmallVector<Type> types{type.clone(stepk::fp8BytesType(ctx, format)),
                          RankedTensorType::get({(cols + 127) / 128, rows}, Float32Type::get(ctx))};
  OpBuilder b(ctx);
  // A widened bf16 input (an attention's output) is read as it is.
  const bool ofBf16 = type.getElementType().isBF16();
  stepk::CallOp packing = createPackingCall(b, rounding, types,
                                            ofBf16 ? "pack_fp8_rows_of_bf16" : "pack_fp8_rows",
                                            rounding.getInputs()[0], format);
  // (The body widens a bf16 input first, as the pair passes' bodies do.)
  Value input = packing.getBody().getArgument(0);
  if (ofBf16)
    input = b.create<ConvertOp>(rounding.getLoc(), type.clone(b.getF32Type()), input);
  auto pack = b.create<stepk::PackFp8Op>(rounding.getLoc(), types[0], types[1], input,
                                         /*transposed=*/false);
  b.create<stepk::YieldOp>(rounding.getLoc(), pack.getResults());
  for (const PackedRead &read : reads)
    readPacked(read, packing.getResult(0), packing.getResult(1));
  rounding.erase();
}

} // namespace

void stepc::packFp8Pairs(func::FuncOp step) {
  SmallVector<stepk::CallOp> pairs;
  for (auto call : step.getBody().front().getOps<stepk::CallOp>())
    if (call.getCallee().starts_with("quantize_fp8_rows_columns"))
      pairs.push_back(call);
  for (stepk::CallOp pair : pairs) {
    SmallVector<PackedRead> rowReads = packedReads(pair.getResult(0), false);
    SmallVector<PackedRead> columnReads = packedReads(pair.getResult(1), true);
    if (rowReads.empty() || columnReads.empty())
      continue;
    // The body's two roundings (each a quantize_fp8 and its bf16 convert)
    // become the two packings of what they rounded.
    Block &body = pair.getBody().front();
    auto yield = cast<stepk::YieldOp>(body.getTerminator());
    Value rows = yield.getOperand(0), columns = yield.getOperand(1);
    auto rowsRounding = rows.getDefiningOp()->getOperand(0).getDefiningOp<QuantizeFp8Op>();
    auto columnsRounding = columns.getDefiningOp()->getOperand(0).getDefiningOp<QuantizeFp8Op>();
    if (!rowsRounding || !columnsRounding)
      continue;
    MLIRContext *ctx = step.getContext();
    Type f32 = Float32Type::get(ctx);
    Type bytesType = stepk::fp8BytesType(ctx, static_cast<int32_t>(rowsRounding.getFormat()));
    auto flat = cast<RankedTensorType>(columns.getType());  // [tokens, features]
    const int64_t tokens = flat.getDimSize(0), features = flat.getDimSize(1);
    const int64_t featureBlocks = (features + 127) / 128, tokenBlocks = (tokens + 127) / 128;
    OpBuilder b(yield);
    auto rowsPacked = b.create<stepk::PackFp8Op>(
        pair.getLoc(), cast<RankedTensorType>(rows.getType()).clone(bytesType),
        RankedTensorType::get({featureBlocks, tokens}, f32), rowsRounding.getInput(), false);
    auto columnsPacked = b.create<stepk::PackFp8Op>(
        pair.getLoc(), RankedTensorType::get({features, tokens}, bytesType),
        RankedTensorType::get({tokenBlocks, features}, f32), columnsRounding.getInput(), true);
    SmallVector<Value> yields{rowsPacked.getBytes(), rowsPacked.getScales(),
                              columnsPacked.getBytes(), columnsPacked.getScales()};
    for (Value rest : yield.getOperands().drop_front(2))
      yields.push_back(rest);  // the bias gradient
    b.create<stepk::YieldOp>(yield.getLoc(), yields);
    yield.erase();
    for (Operation *dead : {rows.getDefiningOp(), columns.getDefiningOp()})
      dead->erase();
    rowsRounding.erase();
    columnsRounding.erase();
    // The call of the packing pass: the pair's inputs, scalars and scratch.
    b.setInsertionPoint(pair);
    // quantize_fp8_rows_columns[_gelu|_dbias][_of_bf16]_bf16 ->
    // pack_fp8_rows_columns[_gelu|_dbias][_of_bf16]
    std::string callee = ("pack_fp8" + pair.getCallee()
                                           .drop_front(StringRef("quantize_fp8").size())
                                           .drop_back(StringRef("_bf16").size()))
                             .str();
    auto packing = b.create<stepk::CallOp>(
        pair.getLoc(), ValueRange(yields).getTypes(), b.getStringAttr(callee), pair.getInputs(),
        pair.getScalars(), pair.getScratchBytesAttr(), StringAttr(), IntegerAttr(),
        IntegerAttr());
    copyPhase(pair, packing);
    packing.getBody().takeBody(pair.getBody());
    for (const PackedRead &read : rowReads)
      readPacked(read, packing.getResult(0), packing.getResult(1));
    for (const PackedRead &read : columnReads)
      readPacked(read, packing.getResult(2), packing.getResult(3));
    for (auto [from, to] : llvm::zip(pair.getResults().drop_front(2), packing.getResults().drop_front(4)))
      from.replaceAllUsesWith(to);
    pair.erase();
    if (!absorbGeluGrad(packing))
      absorbSwiglu(packing);
  }
}

void stepc::packFp8Roundings(func::FuncOp step) {
  SmallVector<stepk::CallOp> roundings;
  for (auto call : step.getBody().front().getOps<stepk::CallOp>())
    if (call.getCallee() == "quantize_fp8_bf16" || call.getCallee() == "quantize_fp8_of_bf16_bf16")
      roundings.push_back(call);
  for (stepk::CallOp rounding : roundings) {
    // A 2-d f32 value rounded in 128x128 tiles (a weight), read only as the
    // rhs of fp8 GEMMs in 128x128 blocks: as stored ([N, K], transpose_b,
    // the forward's) or transposed ([K, N], the input gradient's).
    // The body: the quantize_fp8 and its bf16 convert.
    Operation *convert = rounding.getYield()->getOperand(0).getDefiningOp();
    auto q = convert ? convert->getOperand(0).getDefiningOp<QuantizeFp8Op>() : QuantizeFp8Op();
    auto type = cast<RankedTensorType>(rounding.getInputs()[0].getType());
    if (q && q.getTile() == ArrayRef<int64_t>{1, 128}) {
      packFp8Rows(rounding, q);
      continue;
    }
    if (!q || q.getTile() != ArrayRef<int64_t>{128, 128} || type.getRank() != 2 ||
        !type.getElementType().isF32())
      continue;
    Value rounded = rounding.getResult(0);
    SmallVector<stepk::GemmOp> asStored, transposed;
    bool other = false;
    for (OpOperand &use : rounded.getUses()) {
      auto gemm = dyn_cast<stepk::GemmOp>(use.getOwner());
      if (!gemm || use.getOperandNumber() != 1 || !gemm.getFp8() || (*gemm.getFp8())[2] != 0 ||
          gemm.getLhs() == rounded) {
        other = true;
        break;
      }
      (gemm.getTransposeB() ? asStored : transposed).push_back(gemm);
    }
    if (other || (asStored.empty() && transposed.empty()))
      continue;
    MLIRContext *ctx = step.getContext();
    const int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
    Type bytes = stepk::fp8BytesType(ctx, static_cast<int32_t>(q.getFormat()));
    Type f32 = Float32Type::get(ctx);
    // The body: the weight packed in each layout its products read.
    std::string callee = asStored.empty()     ? "pack_fp8_blocks_transposed"
                         : transposed.empty() ? "pack_fp8_blocks"
                                              : "pack_fp8_blocks_both";
    SmallVector<Type> types;
    if (!asStored.empty())
      types.append({RankedTensorType::get({rows, cols}, bytes),
                    RankedTensorType::get({(rows + 127) / 128, stepk::fp8BlockScaleColumns(cols)},
                                          f32)});
    if (!transposed.empty())
      types.append({RankedTensorType::get({cols, rows}, bytes),
                    RankedTensorType::get({(cols + 127) / 128, stepk::fp8BlockScaleColumns(rows)},
                                          f32)});
    OpBuilder b(ctx);
    stepk::CallOp packing = createPackingCall(b, rounding, types, callee, rounding.getInputs()[0],
                                              static_cast<int32_t>(q.getFormat()));
    Block *body = &packing.getBody().front();
    SmallVector<Value> yields;
    for (bool t : {false, true}) {
      if ((t ? transposed : asStored).empty())
        continue;
      auto pack = b.create<stepk::PackFp8Op>(rounding.getLoc(), types[yields.size()],
                                             types[yields.size() + 1], body->getArgument(0),
                                             /*transposed=*/t, /*blocks=*/true);
      yields.append({pack.getBytes(), pack.getScales()});
    }
    b.create<stepk::YieldOp>(rounding.getLoc(), yields);
    unsigned next = 0;
    for (bool t : {false, true}) {
      if ((t ? transposed : asStored).empty())
        continue;
      for (stepk::GemmOp gemm : t ? transposed : asStored) {
        gemm.getRhsMutable().assign(packing.getResult(next));
        gemm.getRhsScalesMutable().assign(packing.getResult(next + 1));
        gemm.setTransposeB(true);
      }
      next += 2;
    }
    rounding.erase();
  }
}
