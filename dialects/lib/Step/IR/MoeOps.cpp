//===- MoeOps.cpp - shape rules of the mixture-of-experts ops -------------===//
//
// top_k, moe_dispatch, moe_combine, grouped_matmul and their gradients. The
// routing is data (i32 tensors); every shape is static: N tokens with K
// experts each make N·K dispatched rows however they split.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"

#include "ShapeRules.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace stepc::step;

namespace {

/// [N, D] tokens and their [N, K] experts (moe_dispatch, moe_combine's
/// result and gates): both rank 2 with one N.
template <typename OpT>
LogicalResult checkRouting(std::optional<Location> loc, RankedTensorType tokens,
                           RankedTensorType experts) {
  if (!tokens || !experts)
    return opError<OpT>(loc, "expects ranked tensor operands");
  if (tokens.getRank() != 2 || experts.getRank() != 2 ||
      tokens.getDimSize(0) != experts.getDimSize(0))
    return opError<OpT>(loc, "expects tokens [N, D] and experts [N, K], got ", Type(tokens),
                        " and ", Type(experts));
  return success();
}

/// E experts in `groups` equal groups.
template <typename OpT>
LogicalResult checkGroups(std::optional<Location> loc, int64_t numExperts, int64_t groups) {
  if (numExperts % groups != 0)
    return opError<OpT>(loc, "expects the ", numExperts, " experts to divide into ", groups,
                        " groups");
  return success();
}

/// One group's block of dispatched rows for N tokens with K experts each:
/// every pair, or with a capacity C per S tokens at most C rows for each of
/// the group's experts in each run of S tokens. Fails when S does not
/// divide N (or only one of C, S is set).
template <typename OpT>
FailureOr<int64_t> blockRows(std::optional<Location> loc, int64_t tokens, int64_t k,
                             int64_t numExperts, int64_t groups, int64_t capacity,
                             int64_t segment) {
  int64_t pairs = tokens * k;
  if (capacity == 0 && segment == 0)
    return pairs;
  if (capacity == 0 || segment == 0 || tokens % segment != 0)
    return opError<OpT>(loc, "expects a capacity of C > 0 pairs per S > 0 tokens with S dividing ",
                        "the ", tokens, " tokens, got ", capacity, " per ", segment);
  // (A capacity past every pair is every pair; a product past int64 is
  // more rows than there are pairs.)
  int64_t rows;
  if (llvm::MulOverflow(tokens / segment, numExperts / groups, rows) ||
      llvm::MulOverflow(rows, std::min(capacity, pairs), rows))
    return pairs;
  return std::min(pairs, rows);
}

/// Rows [G·block, D] in dispatch order for experts [N, K] (moe_combine's and
/// its gradient's `rows`), gates [N, K].
template <typename OpT, typename AdaptorT>
LogicalResult checkCombine(std::optional<Location> loc, RankedTensorType rows,
                           RankedTensorType gates, RankedTensorType experts,
                           AdaptorT adaptor) {
  int64_t groups = adaptor.getGroups();
  if (!rows || !gates || !experts)
    return opError<OpT>(loc, "expects ranked tensor operands");
  if (experts.getRank() != 2 || gates.getShape() != experts.getShape())
    return opError<OpT>(loc, "expects gates and experts of one shape [N, K], got ", Type(gates),
                        " and ", Type(experts));
  FailureOr<int64_t> block =
      blockRows<OpT>(loc, experts.getDimSize(0), experts.getDimSize(1), adaptor.getNumExperts(),
                     groups, adaptor.getCapacity(), adaptor.getSegment());
  if (failed(block))
    return failure();
  if (rows.getRank() != 2 || rows.getDimSize(0) != groups * *block)
    return opError<OpT>(loc, "expects rows [", groups > 1 ? "G·" : "",
                        adaptor.getCapacity() ? "block" : "N·K", ", D] = [", groups * *block,
                        ", D], got ", Type(rows));
  if (gates.getElementType() != rows.getElementType())
    return opError<OpT>(loc, "expects gates of the rows' element type, got ", Type(gates));
  return success();
}

/// Counts [E], or [B, E] with the M rows in B equal blocks.
template <typename OpT>
LogicalResult checkCounts(std::optional<Location> loc, RankedTensorType counts, int64_t rows) {
  if (counts.getRank() == 2 && rows % counts.getDimSize(0) != 0)
    return opError<OpT>(loc, "expects the ", rows, " rows to divide into counts' ",
                        counts.getDimSize(0), " blocks");
  return success();
}

/// grouped_matmul's lhs [M, K] and rhs [E, K, N] ([E, N, K] with
/// transpose_b), counts [E] or [B, E]: returns N.
template <typename OpT>
FailureOr<int64_t> checkGrouped(std::optional<Location> loc, RankedTensorType lhs,
                                RankedTensorType rhs, RankedTensorType counts, bool transposeB) {
  if (!lhs || !rhs || !counts)
    return opError<OpT>(loc, "expects ranked tensor operands");
  if (lhs.getRank() != 2 || rhs.getRank() != 3 ||
      (counts.getRank() != 1 && counts.getRank() != 2) ||
      counts.getShape().back() != rhs.getDimSize(0))
    return opError<OpT>(loc, "expects lhs [M, K], rhs [E, ", transposeB ? "N, K" : "K, N",
                        "] and counts [E] or [B, E], got ", Type(lhs), ", ", Type(rhs), " and ",
                        Type(counts));
  if (failed(checkCounts<OpT>(loc, counts, lhs.getDimSize(0))))
    return failure();
  int64_t k = rhs.getDimSize(transposeB ? 2 : 1);
  if (lhs.getDimSize(1) != k)
    return opError<OpT>(loc, "expects lhs's ", lhs.getDimSize(1), " columns to equal rhs's K ", k);
  if (lhs.getElementType() != rhs.getElementType())
    return opError<OpT>(loc, "expects lhs and rhs of one element type, got ",
                        lhs.getElementType(), " and ", rhs.getElementType());
  return rhs.getDimSize(transposeB ? 1 : 2);
}

} // namespace

LogicalResult TopKOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  if (!input || input.getRank() < 1)
    return opError<TopKOp>(loc, "expects a ranked tensor of rank >= 1");
  // top_k_c1
  int64_t k = adaptor.getK();
  if (k > input.getShape().back())
    return opError<TopKOp>(loc, "expects k (", k, ") at most the last dimension (",
                           input.getShape().back(), ")");
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = k;
  types.push_back(tensor(shape, input.getElementType()));
  types.push_back(tensor(shape, IntegerType::get(context, 32)));
  return success();
}

LogicalResult MoeDispatchOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput()), experts = tensorOf(adaptor.getExperts());
  // moe_dispatch_c1
  if (failed(checkRouting<MoeDispatchOp>(loc, input, experts)))
    return failure();
  // moe_dispatch_c2
  int64_t groups = adaptor.getGroups();
  if (failed(checkGroups<MoeDispatchOp>(loc, adaptor.getNumExperts(), groups)))
    return failure();
  // moe_dispatch_c3
  FailureOr<int64_t> block = blockRows<MoeDispatchOp>(
      loc, input.getDimSize(0), experts.getDimSize(1), adaptor.getNumExperts(), groups,
      adaptor.getCapacity(), adaptor.getSegment());
  if (failed(block))
    return failure();
  types.push_back(tensor({groups * *block, input.getDimSize(1)}, input.getElementType()));
  types.push_back(tensor({static_cast<int64_t>(adaptor.getNumExperts())},
                         IntegerType::get(context, 32)));
  return success();
}

LogicalResult MoeCombineOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType rows = tensorOf(adaptor.getRows()), gates = tensorOf(adaptor.getGates()),
                   experts = tensorOf(adaptor.getExperts());
  // moe_combine_c1
  if (failed(checkGroups<MoeCombineOp>(loc, adaptor.getNumExperts(), adaptor.getGroups())) ||
      failed(checkCombine<MoeCombineOp>(loc, rows, gates, experts, adaptor)))
    return failure();
  types.push_back(tensor({experts.getDimSize(0), rows.getDimSize(1)}, rows.getElementType()));
  return success();
}

LogicalResult MoeCombineGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType grad = tensorOf(adaptor.getGrad()), rows = tensorOf(adaptor.getRows()),
                   gates = tensorOf(adaptor.getGates()), experts = tensorOf(adaptor.getExperts());
  if (failed(checkGroups<MoeCombineGradOp>(loc, adaptor.getNumExperts(), adaptor.getGroups())) ||
      failed(checkCombine<MoeCombineGradOp>(loc, rows, gates, experts, adaptor)))
    return failure();
  // moe_combine_grad_c1
  if (!grad || grad != tensor({experts.getDimSize(0), rows.getDimSize(1)}, rows.getElementType()))
    return opError<MoeCombineGradOp>(loc, "expects a gradient of the combined [N, D], got ",
                                     adaptor.getGrad().getType());
  types.append({rows, gates});
  return success();
}

LogicalResult GroupedMatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType lhs = tensorOf(adaptor.getLhs());
  // grouped_matmul_c1
  FailureOr<int64_t> n = checkGrouped<GroupedMatmulOp>(
      loc, lhs, tensorOf(adaptor.getRhs()), tensorOf(adaptor.getCounts()),
      static_cast<bool>(adaptor.getTransposeB()));
  if (failed(n))
    return failure();
  types.push_back(tensor({lhs.getDimSize(0), *n}, lhs.getElementType()));
  return success();
}

LogicalResult GroupedMatmulWeightGradOp::inferReturnTypes(MLIRContext *,
                                                          std::optional<Location> loc,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type> &types) {
  RankedTensorType lhs = tensorOf(adaptor.getLhs()), grad = tensorOf(adaptor.getGrad()),
                   counts = tensorOf(adaptor.getCounts());
  // grouped_matmul_weight_grad_c1
  if (!lhs || !grad || !counts || lhs.getRank() != 2 || grad.getRank() != 2 ||
      (counts.getRank() != 1 && counts.getRank() != 2) ||
      lhs.getDimSize(0) != grad.getDimSize(0) || lhs.getElementType() != grad.getElementType())
    return opError<GroupedMatmulWeightGradOp>(
        loc, "expects lhs [M, K], grad [M, N] of one element type and counts [E] or [B, E], got ",
        adaptor.getLhs().getType(), ", ", adaptor.getGrad().getType(), " and ",
        adaptor.getCounts().getType());
  if (failed(checkCounts<GroupedMatmulWeightGradOp>(loc, counts, lhs.getDimSize(0))))
    return failure();
  int64_t e = counts.getShape().back(), k = lhs.getDimSize(1), n = grad.getDimSize(1);
  types.push_back(adaptor.getTransposeB() ? tensor({e, n, k}, lhs.getElementType())
                                          : tensor({e, k, n}, lhs.getElementType()));
  return success();
}
