//===- Interpreter.h - reference interpreter for the step dialect -*- C++ -*-===//
//
// Plain, obviously correct loops over every step op: the numerical oracle for
// autodiff (finite differences) and for the code emitters. Values are held
// in double; unless the interpreter runs in exact f64 mode, every result is
// rounded to its element type (f32, bf16, f16) after each op.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEP_INTERPRETER_INTERPRETER_H
#define STEPC_DIALECT_STEP_INTERPRETER_INTERPRETER_H

#include "stepc/Dialect/Step/Interpreter/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stepc::interp {

/// Evaluates step functions.
class Interpreter {
public:
  /// With `exactF64`, nothing is rounded: every op is evaluated in double.
  explicit Interpreter(bool exactF64) : exactF64(exactF64) {}

  /// Evaluates `function` on `args` (one per argument, shaped like it).
  /// Runtime errors (an id out of range) are diagnostics at the op.
  mlir::FailureOr<std::vector<Tensor>> run(mlir::func::FuncOp function,
                                           llvm::ArrayRef<Tensor> args) const;

  /// Rounds `tensor` in place to `elementType` (no-op in exact f64 mode).
  void round(Tensor &tensor, mlir::Type elementType) const;

private:
  bool exactF64;
};

/// Reads a .npy file (little-endian f4/f8/i4/i8/u2/u4, C order).
mlir::FailureOr<Tensor> readNpy(const std::string &path, std::string &error);
/// Writes `tensor` as .npy with dtype `<f8` (`asDouble`), `<f4`, or `<i8`
/// for integer element types.
mlir::LogicalResult writeNpy(const std::string &path, const Tensor &tensor,
                             mlir::Type elementType, bool asDouble,
                             std::string &error);

} // namespace stepc::interp

#endif // STEPC_DIALECT_STEP_INTERPRETER_INTERPRETER_H
