//===- GradBuilder.h - terse op construction for autodiff rules -*- C++ -*-===//
//
// Private to dialects/lib/Step/Autodiff: the rules read like their math when
// `g.mul(dy, y)` stands for `b.create<MulOp>(loc, dy, y)`.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEP_AUTODIFF_GRADBUILDER_H
#define STEPC_DIALECT_STEP_AUTODIFF_GRADBUILDER_H

#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace stepc::step {

/// Builds step ops at one location.
class GradBuilder {
public:
  GradBuilder(mlir::OpBuilder &builder, mlir::Location loc)
      : b(builder), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() { return loc; }

  mlir::Value add(mlir::Value x, mlir::Value y) { return b.create<AddOp>(loc, x, y); }
  mlir::Value sub(mlir::Value x, mlir::Value y) { return b.create<SubOp>(loc, x, y); }
  mlir::Value mul(mlir::Value x, mlir::Value y) { return b.create<MulOp>(loc, x, y); }
  mlir::Value div(mlir::Value x, mlir::Value y) { return b.create<DivOp>(loc, x, y); }
  mlir::Value neg(mlir::Value x) { return b.create<NegOp>(loc, x); }
  mlir::Value exp(mlir::Value x) { return b.create<ExpOp>(loc, x); }

  /// A constant of `like`'s type with every element `value`.
  mlir::Value splat(double value, mlir::Type like) {
    auto type = mlir::cast<mlir::RankedTensorType>(like);
    auto element = b.getFloatAttr(type.getElementType(), value);
    return b.create<ConstantOp>(loc, mlir::DenseElementsAttr::get(type, element));
  }
  /// `x · value` for a scalar `value`.
  mlir::Value scale(mlir::Value x, double value) {
    return mul(x, splat(value, x.getType()));
  }

  mlir::Value reshape(mlir::Value x, mlir::Type to) {
    return x.getType() == to ? x : b.create<ReshapeOp>(loc, to, x).getResult();
  }
  mlir::Value broadcast(mlir::Value x, mlir::Type to) {
    return x.getType() == to ? x : b.create<BroadcastOp>(loc, to, x).getResult();
  }
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> permutation) {
    return b.create<TransposeOp>(loc, x, b.getDenseI64ArrayAttr(permutation));
  }
  /// Swaps the last two dimensions.
  mlir::Value transposeLast2(mlir::Value x) {
    int64_t rank = mlir::cast<mlir::RankedTensorType>(x.getType()).getRank();
    llvm::SmallVector<int64_t> perm;
    for (int64_t i = 0; i < rank; ++i)
      perm.push_back(i);
    std::swap(perm[rank - 2], perm[rank - 1]);
    return transpose(x, perm);
  }
  mlir::Value reduceSum(mlir::Value x, llvm::ArrayRef<int64_t> dims,
                        bool keepDims = false) {
    if (dims.empty())
      return x;
    return b.create<ReduceSumOp>(loc, x, b.getDenseI64ArrayAttr(dims),
                                 keepDims ? b.getUnitAttr() : nullptr);
  }
  mlir::Value matmul(mlir::Value x, mlir::Value y, bool transposeA,
                     bool transposeB) {
    return b.create<MatmulOp>(loc, x, y, transposeA ? b.getUnitAttr() : nullptr,
                              transposeB ? b.getUnitAttr() : nullptr);
  }
  mlir::Value batchMatmul(mlir::Value x, mlir::Value y, bool transposeA,
                          bool transposeB) {
    return b.create<BatchMatmulOp>(loc, x, y,
                                   transposeA ? b.getUnitAttr() : nullptr,
                                   transposeB ? b.getUnitAttr() : nullptr);
  }
  mlir::Value slice(mlir::Value x, llvm::ArrayRef<int64_t> offsets,
                    llvm::ArrayRef<int64_t> sizes) {
    return b.create<SliceOp>(loc, x, b.getDenseI64ArrayAttr(offsets),
                             b.getDenseI64ArrayAttr(sizes));
  }
  mlir::Value pad(mlir::Value x, llvm::ArrayRef<int64_t> low,
                  llvm::ArrayRef<int64_t> high) {
    return b.create<PadOp>(loc, x, b.getDenseI64ArrayAttr(low),
                           b.getDenseI64ArrayAttr(high));
  }

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

/// The ranked tensor type of `value`.
inline mlir::RankedTensorType tensorType(mlir::Value value) {
  return mlir::cast<mlir::RankedTensorType>(value.getType());
}

} // namespace stepc::step

#endif // STEPC_DIALECT_STEP_AUTODIFF_GRADBUILDER_H
