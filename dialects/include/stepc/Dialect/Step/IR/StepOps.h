//===- StepOps.h - step dialect operations ----------------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPOPS_H
#define STEPC_DIALECT_STEP_IR_STEPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "stepc/Dialect/Step/IR/StepAttrs.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepInterfaces.h.inc"
#include "stepc/Dialect/Step/IR/StepTraits.h"

#define GET_OP_CLASSES
#include "stepc/Dialect/Step/IR/StepOps.h.inc"

namespace stepc::step {

/// The phase of `op` (its `step.phase`), or none if it has none.
std::optional<Phase> getPhase(mlir::Operation *op);
void setPhase(mlir::Operation *op, Phase phase);
/// Gives `phase` to every op of `block` (not nested) that has none: how a
/// pass marks the ops it created.
void setMissingPhases(mlir::Block &block, Phase phase);
/// Gives `to` the phase of `from`, if `from` has one.
void copyPhase(mlir::Operation *from, mlir::Operation *to);

/// The role of `function`'s result `index` (its `step.result`), or null.
ResultAttr getResultRole(mlir::FunctionOpInterface function, unsigned index);
/// Whether `function`'s result `index` has `role`.
bool hasResultRole(mlir::FunctionOpInterface function, unsigned index, Role role);
/// The first result of `function` with `role`, if any.
std::optional<unsigned> findResult(mlir::FunctionOpInterface function, Role role);
/// A result dictionary holding just `step.result = role`.
mlir::DictionaryAttr resultRoleDict(ResultAttr role);

} // namespace stepc::step

#endif // STEPC_DIALECT_STEP_IR_STEPOPS_H
