//===- StepOps.h - step dialect operations ----------------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPOPS_H
#define STEPC_DIALECT_STEP_IR_STEPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "stepc/Dialect/Step/IR/StepAttrs.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepInterfaces.h.inc"

#define GET_OP_CLASSES
#include "stepc/Dialect/Step/IR/StepOps.h.inc"

#endif // STEPC_DIALECT_STEP_IR_STEPOPS_H
