//===- AdamwGroup.h - which AdamW updates share a launch --------*- C++ -*-===//
//
// One rule for stepk.adamw_group: its verifier checks it, and
// step-fuse-cuda-kernels groups by it.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_DIALECT_STEPK_IR_ADAMWGROUP_H
#define STEPC_DIALECT_STEPK_IR_ADAMWGROUP_H

#include "stepc/Dialect/Step/IR/StepOps.h"

namespace stepc::stepk {

/// Whether two updates read the same learning rate, step and gradient scale.
bool sameAdamwScalars(step::AdamwOp a, step::AdamwOp b);
/// Whether two updates have the same betas, epsilon, weight decay and
/// decoupling.
bool sameAdamwHyperparameters(step::AdamwOp a, step::AdamwOp b);

} // namespace stepc::stepk

#endif // STEPC_DIALECT_STEPK_IR_ADAMWGROUP_H
