//===- StepAttrs.h - step dialect attributes --------------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPATTRS_H
#define STEPC_DIALECT_STEP_IR_STEPATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"

#include "stepc/Dialect/Step/IR/StepEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "stepc/Dialect/Step/IR/StepAttrs.h.inc"

namespace mlir {
class FunctionOpInterface;
} // namespace mlir

namespace stepc::step {
/// The `#step.param` of argument `i` of `function` when the step trains it
/// (marked and not `frozen`); null otherwise. A gradient function returns
/// one gradient per such argument, in argument order.
ParamAttr getTrainedParam(mlir::FunctionOpInterface function, unsigned i);
} // namespace stepc::step

#endif // STEPC_DIALECT_STEP_IR_STEPATTRS_H
