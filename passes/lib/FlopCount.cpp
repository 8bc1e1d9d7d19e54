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

#include <limits>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

/// FLOPs are counted in 128 bits and checked against int64 once per op
/// (getModelFlops, getExecutedFlops): tensors hold at most 2^40 elements, so
/// no product of an op's dims overflows here, but its FLOPs may exceed
/// int64, which is an error at the op, never a negative count.
using Wide = __int128;
struct WideFlops {
  Wide forward = 0, backward = 0;
};
static WideFlops operator+(WideFlops a, WideFlops b) {
  return {a.forward + b.forward, a.backward + b.backward};
}

/// Forward FLOPs of a (batched) product of [M, K] and [K, N] matrices.
static Wide productFlops(int64_t batch, int64_t m, int64_t n, int64_t k) {
  return Wide{2} * batch * m * n * k;
}

/// Forward plus a backward of twice the forward.
static WideFlops withBackward(Wide forward) { return {forward, 2 * forward}; }

/// The product of the dimensions before the last two.
static int64_t batchSize(RankedTensorType type) {
  int64_t batch = 1;
  for (int64_t dim : type.getShape().drop_back(2))
    batch *= dim;
  return batch;
}

/// M, N, K of a product whose result is `result` and whose lhs is `lhs`.
template <typename OpT>
static WideFlops productRule(OpT op) {
  RankedTensorType lhs = op.getLhs().getType(), result = op.getType();
  int64_t k = lhs.getDimSize(lhs.getRank() - (op.getTransposeA() ? 2 : 1));
  int64_t m = result.getDimSize(result.getRank() - 2);
  int64_t n = result.getDimSize(result.getRank() - 1);
  return withBackward(productFlops(batchSize(result), m, n, k));
}

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
static Wide gemmFlops(stepk::GemmOp gemm) {
  auto lhs = cast<RankedTensorType>(gemm.getLhs().getType());
  auto result = cast<RankedTensorType>(gemm.getResult().getType());
  int64_t k = lhs.getDimSize(lhs.getRank() - (gemm.getTransposeA() ? 2 : 1));
  return productFlops(batchSize(result), result.getDimSize(result.getRank() - 2),
                      result.getShape().back(), k);
}

/// (batch·heads, Tq, Tk, Dh) of an attention op, its gradient or their
/// kernels: one [Tq, Dh]·[Dh, Tk] product per batch and query head (QKᵀ and
/// AV are the same size), over the full score matrix (causal or not).
template <typename OpT>
static Wide attentionProductOf(OpT op) {
  auto q = cast<RankedTensorType>(op.getQuery().getType());
  auto k = cast<RankedTensorType>(op.getKey().getType());
  return productFlops(q.getDimSize(0) * op.getNumHeads(), q.getDimSize(1), k.getDimSize(1),
                      op.getHeadDim());
}
/// 2·M·N·K of a grouped product or its weight gradient: every one of the M
/// dispatched rows meets a [K, N] expert matrix, however they split.
/// A grouped product over `counts`' blocks of rows (one per expert-parallel
/// source rank; each rank's rows are filled on average one block's worth,
/// as the ranks' dispatched rows sum to one block per rank).
static Wide groupedProduct(Value lhs, Value out, Value counts) {
  auto x = cast<RankedTensorType>(lhs.getType());
  auto y = cast<RankedTensorType>(out.getType());
  auto c = cast<RankedTensorType>(counts.getType());
  int64_t blocks = c.getRank() == 2 ? c.getDimSize(0) : 1;
  return productFlops(1, x.getDimSize(0) / blocks, y.getShape().back(), x.getDimSize(1));
}
static Wide attentionProduct(Operation *op) {
  if (auto a = dyn_cast<AttentionOp>(op))
    return attentionProductOf(a);
  if (auto a = dyn_cast<AttentionGradOp>(op))
    return attentionProductOf(a);
  if (auto a = dyn_cast<stepk::AttentionOp>(op))
    return attentionProductOf(a);
  return attentionProductOf(cast<stepk::AttentionGradOp>(op));
}

static FailureOr<WideFlops> modelFlops(Operation *op) {
  if (auto gemm = dyn_cast<stepk::GemmOp>(op))
    return withBackward(gemmFlops(gemm));
  // Elementwise math, norms, losses, shape and optimizer ops are not
  // counted by the convention (products only); terminators compute
  // nothing; a kernel with a body counts its body.
  if (isa<ScalarMathOpInterface>(op) || op->hasTrait<NoProductFlops>() ||
      op->hasTrait<OpTrait::IsTerminator>())
    return WideFlops{};
  if (op->getNumRegions())
    return sumOverBody(op, WideFlops{}, modelFlops);
  return llvm::TypeSwitch<Operation *, FailureOr<WideFlops>>(op)
      // attention: QKᵀ is [Tq, Dh]·[Dh, Tk] and AV is [Tq, Tk]·[Tk, Dh] per
      // batch and query head, over the full score matrix (causal or not).
      .Case<AttentionOp, stepk::AttentionOp>([](Operation *attention) {
        return FailureOr<WideFlops>(withBackward(2 * attentionProduct(attention)));
      })
      // batch_matmul: 2·batch·M·N·K.
      .Case([](BatchMatmulOp matmul) {
        return FailureOr<WideFlops>(productRule(matmul));
      })
      // grouped_matmul: 2·M·N·K over the dispatched rows.
      .Case([](GroupedMatmulOp g) {
        return FailureOr<WideFlops>(withBackward(groupedProduct(g.getLhs(), g.getResult(), g.getCounts())));
      })
      // matmul: 2·batch·M·N·K, the leading lhs dims sharing one rhs.
      .Case([](MatmulOp matmul) {
        return FailureOr<WideFlops>(productRule(matmul));
      })
      // Not counted by the convention: a step op without products says so
      // (NoProductFlops, above); collectives move data.
      .Case<mesh::AllGatherOp, mesh::AllReduceOp, mesh::AllSliceOp, mesh::AllToAllOp,
            mesh::ReduceScatterOp, mesh::SendOp, mesh::RecvOp>(
          [](Operation *) { return FailureOr<WideFlops>(WideFlops{}); })
      .Default([](Operation *unknown) -> FailureOr<WideFlops> {
        return unknown->emitOpError() << "has no FLOP rule";
      });
}

static FailureOr<Wide> executedFlops(Operation *op) {
  if (auto gemm = dyn_cast<stepk::GemmOp>(op))
    return gemmFlops(gemm);
  // Only products are counted; elementwise math is not.
  if (isa<ScalarMathOpInterface>(op) || op->hasTrait<NoProductFlops>() ||
      op->hasTrait<OpTrait::IsTerminator>())
    return Wide{0};
  if (op->getNumRegions())
    return sumOverBody(op, Wide{0}, executedFlops);
  return llvm::TypeSwitch<Operation *, FailureOr<Wide>>(op)
      // attention: QKᵀ and AV.
      .Case<AttentionOp, stepk::AttentionOp>(
          [](Operation *a) { return FailureOr<Wide>(2 * attentionProduct(a)); })
      // attention_grad: QKᵀ again, dV = PᵀdO, dP = dO Vᵀ, dQ = dS K, dK = dSᵀ Q.
      .Case<AttentionGradOp, stepk::AttentionGradOp>(
          [](Operation *a) { return FailureOr<Wide>(5 * attentionProduct(a)); })
      .Case([](BatchMatmulOp m) { return FailureOr<Wide>(productRule(m).forward); })
      .Case([](GroupedMatmulOp g) {
        return FailureOr<Wide>(groupedProduct(g.getLhs(), g.getResult(), g.getCounts()));
      })
      .Case([](GroupedMatmulWeightGradOp g) {
        return FailureOr<Wide>(groupedProduct(g.getLhs(), g.getGrad(), g.getCounts()));
      })
      .Case([](MatmulOp m) { return FailureOr<Wide>(productRule(m).forward); })
      .Case<mesh::AllGatherOp, mesh::AllReduceOp, mesh::AllSliceOp, mesh::AllToAllOp,
            mesh::ReduceScatterOp, mesh::SendOp, mesh::RecvOp>([](Operation *) { return FailureOr<Wide>(0); })
      .Default([](Operation *unknown) -> FailureOr<Wide> {
        return unknown->emitOpError() << "has no FLOP rule";
      });
}

/// `flops` as an int64, or an error at `op` when it does not fit.
static FailureOr<int64_t> narrow(Operation *op, Wide flops) {
  if (flops > std::numeric_limits<int64_t>::max())
    return op->emitOpError() << "has a FLOP count beyond 2^63 - 1 (stepc counts in int64)";
  return static_cast<int64_t>(flops);
}

FailureOr<OpFlops> stepc::getModelFlops(Operation *op) {
  FailureOr<WideFlops> flops = modelFlops(op);
  if (failed(flops))
    return failure();
  // The sum must fit too: the report adds forward and backward.
  if (failed(narrow(op, flops->forward + flops->backward)))
    return failure();
  return OpFlops{static_cast<int64_t>(flops->forward), static_cast<int64_t>(flops->backward)};
}

FailureOr<int64_t> stepc::getExecutedFlops(Operation *op) {
  FailureOr<Wide> flops = executedFlops(op);
  if (failed(flops))
    return failure();
  return narrow(op, *flops);
}
