//===- Passes.h - stepc passes ----------------------------------*- C++ -*-===//

#ifndef STEPC_TRANSFORMS_PASSES_H
#define STEPC_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace stepc {

/// The device mesh the sharding passes create and the optimizer's `mesh`
/// option names: `mesh.mesh @world`.
constexpr llvm::StringLiteral kWorldMeshName = "world";

#define GEN_PASS_DECL
#include "stepc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "stepc/Transforms/Passes.h.inc"

} // namespace stepc

#endif // STEPC_TRANSFORMS_PASSES_H
