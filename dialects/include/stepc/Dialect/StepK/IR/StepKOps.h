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

#include "stepc/Dialect/StepK/IR/StepKTraits.h"

namespace stepc::step {
class AdamwOp;  // a body op of stepk.adamw_group
} // namespace stepc::step

#include "stepc/Dialect/StepK/IR/StepKDialect.h.inc"
#include "stepc/Dialect/StepK/IR/StepKEnums.h.inc"

#define GET_OP_CLASSES
#include "stepc/Dialect/StepK/IR/StepKOps.h.inc"

#endif // STEPC_DIALECT_STEPK_IR_STEPKOPS_H
