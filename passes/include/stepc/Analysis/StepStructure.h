//===- StepStructure.h - which repeated block each value belongs to -*- C++ -*-===//

#ifndef STEPC_ANALYSIS_STEPSTRUCTURE_H
#define STEPC_ANALYSIS_STEPSTRUCTURE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace stepc {

/// The label of repeated block `block` ("block 3"); "" for -1 (outside the
/// blocks). Blocks are the `block N` markers of `#step.param`.
std::string blockLabel(int64_t block);

/// The parameter arguments of `function` in the order the forward first
/// computes with them (through collectives, converts, reshapes and slices,
/// so a gathered or narrowed parameter counts where it is consumed).
llvm::SmallVector<mlir::BlockArgument> parametersInUseOrder(mlir::func::FuncOp function);

/// The block label of every value of `function` (arguments and the results
/// of its top-level ops): the block of the latest parameter it depends on,
/// with parameters in use order. Embeddings come before the blocks, the
/// head after them; "" means outside every block.
llvm::DenseMap<mlir::Value, std::string> attributeBlocks(mlir::func::FuncOp function);

/// " on pipeline stage N" when `op` is inside stage N's module (the
/// step.pp_stage step-pipeline-stages puts on each), else "": a per-rank
/// error of a pipeline names the stage it is about.
std::string onPipelineStage(mlir::Operation *op);

} // namespace stepc

#endif // STEPC_ANALYSIS_STEPSTRUCTURE_H
