//===- StepDialect.h - the step dialect -------------------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPDIALECT_H
#define STEPC_DIALECT_STEP_IR_STEPDIALECT_H

#include "mlir/IR/Dialect.h"

#include "stepc/Dialect/Step/IR/StepDialect.h.inc"

namespace stepc::step {

/// The most elements a tensor may hold (2^40): byte counts and the FLOPs of
/// a product of such tensors' dims stay far inside int64.
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

/// Whether `type` is a tensor shape stepc compiles: ranked, static, every
/// dim >= 1 (no empty tensors) and at most kMaxTensorElements elements
/// (checked without overflow).
bool isSupportedShape(mlir::Type type);

/// Bytes a ranked tensor of `type` occupies as stored: a mask (i1) element
/// is a 32-bit word.
int64_t tensorBytes(mlir::Type type);

/// Whether `name` (a parameter's, input's or output's) can be a file name:
/// the runtime writes and reads <name>.npy. At most 200 characters, no '/',
/// '\', control characters, and not "." or "..".
bool isPlainName(llvm::StringRef name);

} // namespace stepc::step

#endif // STEPC_DIALECT_STEP_IR_STEPDIALECT_H
