//===- Tensor.h - the reference interpreter's values ----------*- C++ -*-===//
//
// What the interpreter computes with: the op evaluators (Eval*.cpp) read
// and write these, and the Interpreter runs functions over them.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEP_INTERPRETER_TENSOR_H
#define STEPC_DIALECT_STEP_INTERPRETER_TENSOR_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <vector>

namespace stepc::interp {

/// A dense row-major tensor of doubles (integers are stored exactly).
struct Tensor {
  llvm::SmallVector<int64_t> shape;
  std::vector<double> data;

  /// Zeros of `shape`.
  static Tensor zeros(llvm::ArrayRef<int64_t> shape);
  /// Zeros shaped like the ranked tensor type `type`.
  static Tensor zerosLike(mlir::Type type);
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Row-major strides.
  llvm::SmallVector<int64_t> strides() const;
};

} // namespace stepc::interp

#endif // STEPC_DIALECT_STEP_INTERPRETER_TENSOR_H
