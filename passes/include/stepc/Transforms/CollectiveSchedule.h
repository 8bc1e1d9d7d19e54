//===- CollectiveSchedule.h - where collectives are issued -------*- C++ -*-===//

#ifndef STEPC_TRANSFORMS_COLLECTIVESCHEDULE_H
#define STEPC_TRANSFORMS_COLLECTIVESCHEDULE_H

#include "mlir/Dialect/Mesh/IR/MeshOps.h"

namespace stepc {

/// A collective that moves data between ranks, started by step.so and
/// waited for before its result's first use (all_slice moves nothing).
inline bool communicates(mlir::Operation *op) {
  return llvm::isa<mlir::mesh::AllGatherOp, mlir::mesh::AllReduceOp, mlir::mesh::ReduceScatterOp,
                   mlir::mesh::AllToAllOp, mlir::mesh::SendOp, mlir::mesh::RecvOp>(op);
}

/// Prefetches parameter gathers one ahead: taken in the order of their
/// first uses, gather k is issued before the first use of gather k - 1
/// (gather 0 before `start`, or where it is if `start` is null), so each
/// overlaps the compute of the one before.
/// step-schedule-collectives does this for the forward's gathers,
/// step-remat for the backward's re-gathers.
void prefetchOneAhead(llvm::ArrayRef<mlir::mesh::AllGatherOp> gathers, mlir::Operation *start);

} // namespace stepc

#endif // STEPC_TRANSFORMS_COLLECTIVESCHEDULE_H
