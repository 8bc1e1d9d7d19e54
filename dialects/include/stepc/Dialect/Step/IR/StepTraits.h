//===- StepTraits.h - traits of step ops ------------------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEP_IR_STEPTRAITS_H
#define STEPC_DIALECT_STEP_IR_STEPTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace stepc {

/// An op that computes no matrix product. The FLOP convention (6·P·T and
/// its per-op form, passes/lib/FlopCount.cpp) counts products only, so such
/// an op counts zero model and executed FLOPs; declaring it with the op
/// keeps a new op's FLOP rule where the op is defined.
template <typename ConcreteType>
class NoProductFlops : public mlir::OpTrait::TraitBase<ConcreteType, NoProductFlops> {};

/// An op whose result's row i (all dims but the last) depends only on row i
/// of its first operand and on its other operands whole (per-feature
/// weights). Under sequence parallelism (passes/lib/ShardTensor.cpp) it runs
/// on a rank's positions, its weights entering the parallel region (their
/// gradients summed over the ranks); declaring it with the op keeps a new
/// norm's sharding rule where the op is defined.
template <typename ConcreteType>
class RowWise : public mlir::OpTrait::TraitBase<ConcreteType, RowWise> {};

/// An op computed line by line along its `dim` attribute (Step_LineOp):
/// step-lower-library-calls calls the kernel library once for it,
/// `stepc_<target>_<mnemonic>(operands..., outer, n, inner, result)`, so a
/// new line op needs no entry in that pass's table.
template <typename ConcreteType>
class LineKernel : public mlir::OpTrait::TraitBase<ConcreteType, LineKernel> {};

} // namespace stepc

#endif // STEPC_DIALECT_STEP_IR_STEPTRAITS_H
