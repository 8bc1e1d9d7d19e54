//===- StepDialect.h - the step dialect -------------------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPDIALECT_H
#define STEPC_DIALECT_STEP_IR_STEPDIALECT_H

#include "mlir/IR/Dialect.h"

#include "stepc/Dialect/Step/IR/StepDialect.h.inc"

#endif // STEPC_DIALECT_STEP_IR_STEPDIALECT_H
