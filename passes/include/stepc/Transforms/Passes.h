//===- Passes.h - stepc passes ----------------------------------*- C++ -*-===//

#ifndef STEPC_TRANSFORMS_PASSES_H
#define STEPC_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace stepc {

#define GEN_PASS_DECL
#include "stepc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "stepc/Transforms/Passes.h.inc"

} // namespace stepc

#endif // STEPC_TRANSFORMS_PASSES_H
