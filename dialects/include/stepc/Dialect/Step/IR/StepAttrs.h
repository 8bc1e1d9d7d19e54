//===- StepAttrs.h - step dialect attributes --------------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPATTRS_H
#define STEPC_DIALECT_STEP_IR_STEPATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"

#include "stepc/Dialect/Step/IR/StepEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "stepc/Dialect/Step/IR/StepAttrs.h.inc"

#endif // STEPC_DIALECT_STEP_IR_STEPATTRS_H
