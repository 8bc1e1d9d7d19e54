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
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "stepc/Dialect/Step/IR/StepOps.h"

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

/// The fp8 GEMMs reading `v` as their lhs, rounded along K: `transposed`
/// (the weight gradient's [128, 1]-rounded output gradient, a 2-d lhs read
/// transposed) or not (the input gradient's [1, 128] rows); empty if
/// anything else reads it.
SmallVector<stepk::GemmOp> lhsReaders(Value v, bool transposed) {
  SmallVector<stepk::GemmOp> gemms;
  for (OpOperand &use : v.getUses()) {
    auto gemm = dyn_cast<stepk::GemmOp>(use.getOwner());
    if (!gemm || use.getOperandNumber() != 0 || !gemm.getFp8() || gemm.getRoundLhs() ||
        gemm.getTransposeA() != transposed || gemm.getRhs() == v)
      return {};
    gemms.push_back(gemm);
  }
  return gemms;
}

/// Whether every reader of `v` comes after `op` in its block.
bool readAfter(Value v, Operation *op) {
  return llvm::all_of(v.getUsers(), [&](Operation *user) {
    Operation *at = op->getBlock()->findAncestorOpInBlock(*user);
    return at && op->isBeforeInBlock(at);
  });
}

} // namespace

void stepc::foldFp8LhsRoundings(func::FuncOp step) {
  SmallVector<stepk::CallOp> pairs;
  for (auto call : step.getBody().front().getOps<stepk::CallOp>())
    if (call.getCallee().starts_with("quantize_fp8_rows_columns"))
      pairs.push_back(call);
  for (stepk::CallOp pair : pairs) {
    Value source = pair.getInputs()[0];
    Value byRows = pair.getResult(0), byColumns = pair.getResult(1);
    Value dbias = pair.getNumResults() > 2 ? pair.getResult(2) : Value();
    SmallVector<stepk::GemmOp> rowReaders = lhsReaders(byRows, false);
    SmallVector<stepk::GemmOp> columnReaders = lhsReaders(byColumns, true);
    // A forward pair's column rounding is the weight gradient's rhs (saved
    // for the backward: folding it would keep x itself, twice the bytes).
    if (rowReaders.empty() || columnReaders.empty())
      continue;
    // The bias gradient the pair summed: from the one weight-gradient GEMM
    // (bgrad sums the unrounded values), if nothing reads it before.
    stepk::GemmOp weightGrad = columnReaders.front();
    if (dbias && (columnReaders.size() != 1 || weightGrad.getBias() ||
                  weightGrad.getEpilogue() != stepk::Epilogue::none ||
                  !readAfter(dbias, weightGrad)))
      continue;
    OpBuilder b(pair);
    for (stepk::GemmOp gemm : rowReaders) {
      gemm.getLhsMutable().assign(source);
      gemm.setRoundLhs(true);
    }
    for (stepk::GemmOp gemm : columnReaders) {
      b.setInsertionPoint(gemm);
      auto shape = cast<RankedTensorType>(byColumns.getType()).getShape();
      auto flat = b.create<ReshapeOp>(
          gemm.getLoc(),
          RankedTensorType::get(shape, cast<RankedTensorType>(source.getType()).getElementType()),
          source);
      copyPhase(gemm, flat);
      gemm.getLhsMutable().assign(flat);
      gemm.setRoundLhs(true);
    }
    if (dbias) {
      b.setInsertionPoint(weightGrad);
      auto withSums = b.create<stepk::GemmOp>(
          weightGrad.getLoc(), weightGrad.getResult().getType(), dbias.getType(),
          weightGrad.getLhs(), weightGrad.getRhs(), Value(), Value(),
          weightGrad.getTransposeA(), weightGrad.getTransposeB(), weightGrad.getSharedRhs(),
          stepk::Epilogue::bgrad, weightGrad.getFp8Attr(), /*round_lhs=*/true);
      copyPhase(weightGrad, withSums);
      weightGrad.getResult().replaceAllUsesWith(withSums.getResult());
      dbias.replaceAllUsesWith(withSums.getBiasGrad());
      weightGrad.erase();
    }
    pair.erase();
  }
}
