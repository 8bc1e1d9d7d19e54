//===- MatmulGrad.cpp - VJPs of matmul and batch_matmul -------------------===//
//
// With A' = op_a(A) ([M, K]) and B' = op_b(B) ([K, N]), C = A' @ B':
//   dA' = dC @ B'ᵀ ;  dB' = A'ᵀ @ dC   (summed over batch dims sharing B)
// and dA, dB are dA', dB' transposed back where the op transposed.
//
//===----------------------------------------------------------------------===//

#include "GradBuilder.h"

using namespace mlir;
using namespace stepc::step;

// matmul: dA' = dC @ B'ᵀ (B'ᵀ is B itself when transpose_b); with transpose_a
// dA = dA'ᵀ. dB' sums over the batch: flatten A' and dC to [P·M, K] and
// [P·M, N], then dB' = A'ᵀ @ dC = matmul(A', dC, transpose_a), and
// dB = dB'ᵀ = matmul(dC, A', transpose_a) with transpose_b.
LogicalResult MatmulOp::buildVjp(OpBuilder &b, ValueRange dC, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value a = getLhs(), bMat = getRhs(), dc = dC[0];
  bool ta = getTransposeA(), tb = getTransposeB();

  Value dAPrime = g.matmul(dc, bMat, /*transposeA=*/false, /*transposeB=*/!tb);
  grads.push_back(ta ? g.transposeLast2(dAPrime) : dAPrime);

  Value aPrime = ta ? g.transposeLast2(a) : a;
  RankedTensorType aType = tensorType(aPrime), cType = tensorType(dc);
  int64_t rows = aType.getNumElements() / aType.getDimSize(aType.getRank() - 1);
  Type elem = aType.getElementType();
  Value aFlat = g.reshape(aPrime, RankedTensorType::get(
                                      {rows, aType.getDimSize(aType.getRank() - 1)}, elem));
  Value dcFlat = g.reshape(dc, RankedTensorType::get(
                                   {rows, cType.getDimSize(cType.getRank() - 1)}, elem));
  grads.push_back(tb ? g.matmul(dcFlat, aFlat, /*transposeA=*/true, false)
                     : g.matmul(aFlat, dcFlat, /*transposeA=*/true, false));
  return success();
}

// batch_matmul: per batch, dA' = dC @ B'ᵀ and dB' = A'ᵀ @ dC; written with
// the flags so that no transpose is materialised:
//   dA = ta ? B' @ dCᵀ : dC @ B'ᵀ ,  dB = tb ? dCᵀ @ A' : A'ᵀ @ dC.
LogicalResult BatchMatmulOp::buildVjp(OpBuilder &b, ValueRange dC, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value a = getLhs(), bm = getRhs(), dc = dC[0];
  bool ta = getTransposeA(), tb = getTransposeB();
  // dA (no ta) = dC @ B'ᵀ, B'ᵀ = tb ? B : Bᵀ.      dA (ta) = B' @ dCᵀ.
  Value dA = ta ? g.batchMatmul(bm, dc, /*transposeA=*/tb, /*transposeB=*/true)
                : g.batchMatmul(dc, bm, false, /*transposeB=*/!tb);
  // dB (no tb) = A'ᵀ @ dC, A'ᵀ = ta ? A : Aᵀ.      dB (tb) = dCᵀ @ A'.
  Value dB = tb ? g.batchMatmul(dc, a, /*transposeA=*/true, /*transposeB=*/ta)
                : g.batchMatmul(a, dc, /*transposeA=*/!ta, false);
  grads.append({dA, dB});
  return success();
}
