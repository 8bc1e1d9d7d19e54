//===- StepKTraits.h - traits of kernel-level ops ---------------*- C++ -*-===//

#ifndef STEPC_DIALECT_STEPK_IR_STEPKTRAITS_H
#define STEPC_DIALECT_STEPK_IR_STEPKTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace stepc {

/// A kernel whose result element i depends only on element i of its
/// operands, all of one element count, and which reads element i of every
/// operand before it writes element i of any result: a result may take
/// over the buffer of an operand of its type that dies there (planMemory).
template <typename ConcreteType>
class ElementByElement : public mlir::OpTrait::TraitBase<ConcreteType, ElementByElement> {};

} // namespace stepc

#endif // STEPC_DIALECT_STEPK_IR_STEPKTRAITS_H
