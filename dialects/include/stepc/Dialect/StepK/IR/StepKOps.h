//===- StepKOps.h - the stepk kernel-level dialect --------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEPK_IR_STEPKOPS_H
#define STEPC_DIALECT_STEPK_IR_STEPKOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "stepc/Dialect/Step/IR/StepTraits.h"
#include "stepc/Dialect/StepK/IR/StepKTraits.h"

namespace stepc::step {
class AdamwOp;  // a body op of stepk.adamw_group
} // namespace stepc::step

namespace stepc::stepk {
/// An fp8 GEMM operand's bytes (stepk.pack_fp8): e4m3 (format 0) or e5m2 (1).
inline bool isFp8Bytes(mlir::Type element) {
  return element.isFloat8E4M3FN() || element.isFloat8E5M2();
}
inline int32_t fp8FormatOf(mlir::Type element) { return element.isFloat8E5M2() ? 1 : 0; }
/// The columns of a 128x128-block scale table over `k` (K-blocks padded to
/// a multiple of 4, as cuBLASLt reads them; launch_config.h's PlanFp8Gemm).
inline int64_t fp8BlockScaleColumns(int64_t k) { return ((k + 127) / 128 + 3) / 4 * 4; }
inline mlir::Type fp8BytesType(mlir::MLIRContext *ctx, int32_t format) {
  return format == 1 ? mlir::Type(mlir::FloatType::getFloat8E5M2(ctx))
                     : mlir::Type(mlir::FloatType::getFloat8E4M3FN(ctx));
}
} // namespace stepc::stepk

#include "stepc/Dialect/StepK/IR/StepKDialect.h.inc"
#include "stepc/Dialect/StepK/IR/StepKEnums.h.inc"

#define GET_OP_CLASSES
#include "stepc/Dialect/StepK/IR/StepKOps.h.inc"

#endif // STEPC_DIALECT_STEPK_IR_STEPKOPS_H
