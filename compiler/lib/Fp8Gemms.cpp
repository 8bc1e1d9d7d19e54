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
    int64_t k = a.getDimSize(a.getRank() - (ta ? 2 : 1));
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
