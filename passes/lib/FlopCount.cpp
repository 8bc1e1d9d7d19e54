//===- FlopCount.cpp - per-op FLOP rules ----------------------------------===//
//
// One table: ops with a rule, in alphabetical order; then the explicit list
// of ops the model-FLOPs convention does not count; anything else is an
// error, so a new op cannot be silently left out of the report.
//
//===----------------------------------------------------------------------===//

#include "stepc/Analysis/FlopCount.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

/// Forward FLOPs of a (batched) product of [M, K] and [K, N] matrices.
static int64_t productFlops(int64_t batch, int64_t m, int64_t n, int64_t k) {
  return 2 * batch * m * n * k;
}

/// Forward plus a backward of twice the forward.
static OpFlops withBackward(int64_t forward) { return {forward, 2 * forward}; }

/// The product of the dimensions before the last two.
static int64_t batchSize(RankedTensorType type) {
  int64_t batch = 1;
  for (int64_t dim : type.getShape().drop_back(2))
    batch *= dim;
  return batch;
}

/// M, N, K of a product whose result is `result` and whose lhs is `lhs`.
template <typename OpT>
static OpFlops productRule(OpT op) {
  RankedTensorType lhs = op.getLhs().getType(), result = op.getType();
  int64_t k = lhs.getDimSize(lhs.getRank() - (op.getTransposeA() ? 2 : 1));
  int64_t m = result.getDimSize(result.getRank() - 2);
  int64_t n = result.getDimSize(result.getRank() - 1);
  return withBackward(productFlops(batchSize(result), m, n, k));
}

namespace stepc {
static OpFlops operator+(OpFlops a, OpFlops b) {
  return {a.forward + b.forward, a.backward + b.backward};
}
} // namespace stepc

/// The sum of `rule` over the ops of `op`'s regions (a kernel such as
/// stepk.fused computes exactly its body).
template <typename T, typename Rule>
static FailureOr<T> sumOverBody(Operation *op, T zero, Rule rule) {
  T sum = zero;
  for (Region &region : op->getRegions())
    for (Operation &inner : region.getOps()) {
      FailureOr<T> flops = rule(&inner);
      if (failed(flops))
        return failure();
      sum = sum + *flops;
    }
  return sum;
}

/// M, N, K and batch of a stepk.gemm: 2·batch·M·N·K (its epilogue is free).
static int64_t gemmFlops(stepk::GemmOp gemm) {
  auto lhs = cast<RankedTensorType>(gemm.getLhs().getType());
  auto result = cast<RankedTensorType>(gemm.getResult().getType());
  int64_t k = lhs.getDimSize(lhs.getRank() - (gemm.getTransposeA() ? 2 : 1));
  return productFlops(batchSize(result), result.getDimSize(result.getRank() - 2),
                      result.getShape().back(), k);
}

FailureOr<OpFlops> stepc::getModelFlops(Operation *op) {
  if (auto gemm = dyn_cast<stepk::GemmOp>(op))
    return withBackward(gemmFlops(gemm));
  // Elementwise math is not counted by the convention; terminators compute
  // nothing; a kernel with a body counts its body.
  if (isa<ScalarMathOpInterface>(op) || op->hasTrait<OpTrait::IsTerminator>())
    return OpFlops{};
  if (op->getNumRegions())
    return sumOverBody(op, OpFlops{}, getModelFlops);
  return llvm::TypeSwitch<Operation *, FailureOr<OpFlops>>(op)
      // attention: QKᵀ is [Tq, Dh]·[Dh, Tk] and AV is [Tq, Tk]·[Tk, Dh] per
      // batch and query head, over the full score matrix (causal or not).
      .Case([](AttentionOp attention) {
        RankedTensorType q = attention.getQuery().getType();
        RankedTensorType k = attention.getKey().getType();
        int64_t batch = q.getDimSize(0) * attention.getNumHeads();
        int64_t tq = q.getDimSize(1), tk = k.getDimSize(1);
        int64_t headDim = attention.getHeadDim();
        int64_t scores = productFlops(batch, tq, tk, headDim);
        int64_t weighted = productFlops(batch, tq, headDim, tk);
        return FailureOr<OpFlops>(withBackward(scores + weighted));
      })
      // batch_matmul: 2·batch·M·N·K.
      .Case([](BatchMatmulOp matmul) {
        return FailureOr<OpFlops>(productRule(matmul));
      })
      // matmul: 2·batch·M·N·K, the leading lhs dims sharing one rhs.
      .Case([](MatmulOp matmul) {
        return FailureOr<OpFlops>(productRule(matmul));
      })
      // Not counted by the convention: norms, softmax, loss, gathers and
      // shape ops.
      .Case<BroadcastOp, ConcatOp, ConstantOp, ConvertOp, CrossEntropyOp,
            EmbeddingOp, LayerNormOp, PadOp, ReduceMaxOp, ReduceMeanOp,
            ReduceSumOp, ReshapeOp, RmsNormOp, RotaryOp, SliceOp, SoftmaxOp,
            TransposeOp, func::ReturnOp>(
          [](Operation *) { return FailureOr<OpFlops>(OpFlops{}); })
      .Default([](Operation *unknown) -> FailureOr<OpFlops> {
        return unknown->emitOpError() << "has no FLOP rule";
      });
}

/// (batch·heads, Tq, Tk, Dh) of an attention op or its gradient.
template <typename OpT>
static int64_t attentionProduct(OpT op) {
  RankedTensorType q = op.getQuery().getType(), k = op.getKey().getType();
  return productFlops(q.getDimSize(0) * op.getNumHeads(), q.getDimSize(1),
                      k.getDimSize(1), op.getHeadDim());
}

FailureOr<int64_t> stepc::getExecutedFlops(Operation *op) {
  if (auto gemm = dyn_cast<stepk::GemmOp>(op))
    return gemmFlops(gemm);
  // Only products are counted; elementwise math is not.
  if (isa<ScalarMathOpInterface>(op) || op->hasTrait<OpTrait::IsTerminator>())
    return 0;
  if (op->getNumRegions())
    return sumOverBody(op, int64_t{0}, getExecutedFlops);
  return llvm::TypeSwitch<Operation *, FailureOr<int64_t>>(op)
      // attention: QKᵀ and AV.
      .Case([](AttentionOp a) { return FailureOr<int64_t>(2 * attentionProduct(a)); })
      // attention_grad: QKᵀ again, dV = PᵀdO, dP = dO Vᵀ, dQ = dS K, dK = dSᵀ Q.
      .Case([](AttentionGradOp a) { return FailureOr<int64_t>(5 * attentionProduct(a)); })
      .Case([](BatchMatmulOp m) { return FailureOr<int64_t>(productRule(m).forward); })
      .Case([](MatmulOp m) { return FailureOr<int64_t>(productRule(m).forward); })
      .Case<AdamwOp, BroadcastOp, ConcatOp, ConstantOp, ConvertOp,
            CrossEntropyGradOp, CrossEntropyOp, EmbeddingGradOp, EmbeddingOp,
            LayerNormGradOp, LayerNormOp, PadOp, ReduceMaxGradOp, ReduceMaxOp,
            ReduceMeanOp, ReduceSumOp, ReshapeOp, RmsNormGradOp, RmsNormOp,
            RotaryOp, SliceOp, SoftmaxGradOp, SoftmaxOp, TransposeOp,
            func::ReturnOp, mesh::AllGatherOp, mesh::AllReduceOp, mesh::ReduceScatterOp>(
          [](Operation *) { return FailureOr<int64_t>(0); })
      .Default([](Operation *unknown) -> FailureOr<int64_t> {
        return unknown->emitOpError() << "has no FLOP rule";
      });
}
