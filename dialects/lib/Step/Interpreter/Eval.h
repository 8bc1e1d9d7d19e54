//===- Eval.h - per-family evaluation of step ops ---------------*- C++ -*-===//
//
// Private to the interpreter. Each family file evaluates its ops: operands
// in, results out (pre-shaped by the result types), exact in double. A
// family names its ops only in its own file: it returns nullopt for an op
// that is not its own, and the interpreter asks each family in turn.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEP_INTERPRETER_EVAL_H
#define STEPC_DIALECT_STEP_INTERPRETER_EVAL_H

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/Step/Interpreter/Tensor.h"

#include <optional>

namespace stepc::interp {

using Operands = llvm::ArrayRef<const Tensor *>;
using Results = llvm::MutableArrayRef<Tensor>;
/// The evaluation of an op, or nullopt if it is not the family's.
using Evaluated = std::optional<mlir::LogicalResult>;

/// Elementwise unary/binary ops and their activation gradients.
Evaluated evalElementwise(mlir::Operation *op, Operands in, Results out);
/// Constants, convert, broadcast, reshape, transpose, slice, pad, concat,
/// reductions and reduce_max_grad.
Evaluated evalShape(mlir::Operation *op, Operands in, Results out);
/// matmul, batch_matmul.
Evaluated evalMatmul(mlir::Operation *op, Operands in, Results out);
/// layer_norm, rms_norm, the line ops (Step_LineOp) and their gradients.
Evaluated evalNorm(mlir::Operation *op, Operands in, Results out);
/// attention, rotary and attention_grad.
Evaluated evalAttention(mlir::Operation *op, Operands in, Results out);
/// top_k, moe_dispatch, moe_combine, grouped_matmul and their gradients.
Evaluated evalMoe(mlir::Operation *op, Operands in, Results out);
/// quantize_fp8, quantize_grad_fp8, stepk.pack_fp8.
Evaluated evalFp8(mlir::Operation *op, Operands in, Results out);
/// x's values rounded as step.quantize_fp8 with [tr, tc] tiles of its last
/// two dims rounds them.
void quantizeFp8Tiles(const Tensor &x, int64_t tr, int64_t tc, int format,
                      std::vector<double> &out);

/// Rounds to bfloat16 through f32, nearest even (NaN stays NaN): what a
/// kernel's bf16 store does.
double roundToBF16(double value);
/// cross_entropy, embedding and their gradients; adamw, sgd, lion.
Evaluated evalLoss(mlir::Operation *op, Operands in, Results out);

/// dropout.
Evaluated evalRandom(mlir::Operation *op, Operands in, Results out);

/// Product of `shape[begin, end)`.
inline int64_t product(llvm::ArrayRef<int64_t> shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}

} // namespace stepc::interp

#endif // STEPC_DIALECT_STEP_INTERPRETER_EVAL_H
