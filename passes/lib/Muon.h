//===- Muon.h - Muon's update of the blocks' matrices ---------*- C++ -*-===//
//
// Built by step-optimizer for --optimizer=muon; kept apart because its
// Newton-Schulz iterations are shared out between the ranks of a sharded
// mesh.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_PASSES_MUON_H
#define STEPC_PASSES_MUON_H

#include "mlir/IR/Builders.h"

#include <string>

namespace stepc {

struct MuonConfig {
  double momentum;
  bool nesterov;
  int64_t nsSteps;
  /// "original" or "match-rms-adamw".
  std::string adjustLr;
  /// The mesh and axis over which parameters are sharded by rows (fsdp,
  /// hsdp; "" if none), and its ranks.
  std::string mesh;
  int64_t meshAxis = 0, shardRanks = 1;
  /// The tensor-parallel axis (-1: none) and its ranks.
  int64_t tpAxis = -1, tpRanks = 1;
  /// The world mesh's axis whose ranks each hold every parameter whole and
  /// equal (ddp; -1: none), and its ranks.
  int64_t replicaAxis = -1, replicaRanks = 1;
};

/// One matrix Muon updates, as this rank holds it.
struct MuonMatrix {
  mlir::Value param, grad, momentum;
  /// Rows of the whole matrix when `param` is this rank's row shard of it
  /// (zero-padded to ranks · shard rows); 0 if not sharded by rows.
  int64_t globalRows = 0;
  /// The dimension split over the tp axis (-1: none).
  int64_t tpDim = -1;
  double decay = 0;
  /// Scalars of the parameter's element type.
  mlir::Value lr, gradScale;
};

/// Σ x² over every element of `x`, as a scalar of `scalarType` (also the
/// clipping norm's, in Optimizer.cpp).
mlir::Value sumOfSquares(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                         mlir::RankedTensorType scalarType);

/// The updated parameter and momentum of each matrix, in order. Row-sharded
/// matrices of one shape are orthogonalised once each, by an owner rank
/// (balanced: every rank owns the same number of each shape), with an
/// all-to-all to gather each owner's whole matrices and one to return the
/// rows; whole matrices on the ranks of a replica axis are dealt out the
/// same way, each owner's results all-gathered; the others are
/// orthogonalised where they are (tp parts gathered).
llvm::SmallVector<std::pair<mlir::Value, mlir::Value>>
buildMuonUpdates(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<MuonMatrix> matrices,
                 const MuonConfig &config);

} // namespace stepc

#endif // STEPC_PASSES_MUON_H
