//===- StepStructure.h - which repeated block each value belongs to -*- C++ -*-===//

#ifndef STEPC_ANALYSIS_STEPSTRUCTURE_H
#define STEPC_ANALYSIS_STEPSTRUCTURE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace stepc {

/// "h.3" for "h.3.attn.c_attn.weight", "layers.2" for "layers.2.ffn_norm";
/// empty for parameters outside the repeated blocks.
std::string blockOfParameter(llvm::StringRef name);

/// The block of every value of `function` (arguments and the results of its
/// top-level ops): the block of the latest parameter it depends on, with
/// parameters ordered by their first computing use (through collectives,
/// converts, reshapes and slices, so a gathered or narrowed parameter counts
/// where it is consumed). Embeddings come before the blocks, the head after
/// them; "" means outside every block.
llvm::DenseMap<mlir::Value, std::string> attributeBlocks(mlir::func::FuncOp function);

} // namespace stepc

#endif // STEPC_ANALYSIS_STEPSTRUCTURE_H
