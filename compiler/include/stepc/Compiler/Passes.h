//===- Passes.h - target lowering passes of stepc ---------------*- C++ -*-===//

#ifndef STEPC_COMPILER_PASSES_H
#define STEPC_COMPILER_PASSES_H

#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace stepc {

#define GEN_PASS_DECL
#include "stepc/Compiler/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "stepc/Compiler/Passes.h.inc"

} // namespace stepc

#endif // STEPC_COMPILER_PASSES_H
