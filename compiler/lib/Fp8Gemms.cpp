//===- Fp8Gemms.cpp - the GEMMs that may run on fp8 tensor cores ----------===//
//
// step-fp8 rounds a linear layer's operands to fp8 values by tiles, and
// the GEMMs then multiply those values in bf16. On CUDA a GEMM whose
// operands' tiles contain cuBLASLt's scaling blocks (1x128 of the lhs along
// K, 128x128 of the rhs) can multiply them on the fp8 tensor cores instead:
// each block's values are one format's, scaled by a power of two, so the
// packing into bytes and block scales is exact and the product the same.
// The forward and input-gradient products qualify (their tiles lie along
// K); the weight gradient's do not (its K is the tokens, across the row
// tiles) and stays a bf16 GEMM.
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
    if (auto call = dyn_cast<stepk::CallOp>(def))
      def = call.getKernelOp();  // quantize_fp8, its bf16 forms, or another
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
    if (!lhs || !rhs || gemm.getTransposeA())
      return;
    auto a = cast<RankedTensorType>(gemm.getLhs().getType());
    auto b = cast<RankedTensorType>(gemm.getRhs().getType());
    auto out = cast<RankedTensorType>(gemm.getResult().getType());
    Type elem = a.getElementType();
    if (elem != b.getElementType() || !(elem.isBF16() || elem.isF32()))
      return;
    // lhs [.., M, K]: its tiles hold 1x128 blocks along K; rhs: 128x128.
    int64_t k = a.getShape().back();
    ArrayRef<int64_t> bShape = b.getShape().take_back(2);
    if (!holdsBlocks(lhs->second[1], k, block) ||
        !holdsBlocks(rhs->second[0], bShape[0], block) ||
        !holdsBlocks(rhs->second[1], bShape[1], block))
      return;
    int64_t m = out.getDimSize(out.getRank() - 2), n = out.getShape().back();
    int64_t batch = out.getNumElements() / (m * n);
    if (!cuda::Fp8GemmRunsInFp8(batch, m, n, k, /*transpose_a=*/0, gemm.getSharedRhs(),
                                lhs->first, rhs->first))
      return;
    gemm.setFp8(ArrayRef<int32_t>{lhs->first, rhs->first});
  });
}
