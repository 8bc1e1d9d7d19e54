//===- OutlineBlocks.h - block runs and their functions, in the IR -*- C++ -*-===//
//
// step-outline-blocks groups a planned step's ops into runs, one per stretch
// of consecutive ops computing for one transformer block, and outlines them:
// runs of equal structure (ops, attributes, types, how their values
// connect, which of their storage coincides or overlaps in the plan, which
// collectives they wait for) call one private func.func, each call with its
// own plan (step.run_plan). The emitters print one function per block
// function and a call per call, reading the callee's ops with that call's
// plan on them (BlockCalls.h); step-inline-blocks (inlineBlockFunctions)
// puts the calls back, for tests that follow values through a step.
// Structure comes from the parameters' block markers (#step.param's
// block), never from their names.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_OUTLINEBLOCKS_H
#define STEPC_COMPILER_OUTLINEBLOCKS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>
#include <vector>

namespace stepc {

/// The block of each parameter-derived value: "block 3" for a parameter
/// marked `block 3` (#step.param), its optimizer moments or its gradient
/// (through reshapes, converts, slices and collectives), "#" for one
/// outside the blocks.
llvm::DenseMap<mlir::Value, std::string> parameterBlocks(mlir::func::FuncOp step);

/// The block each value of the step is computed for: a forward value its
/// block's (attributeBlocks), a backward or recomputed one the block whose
/// parameter gradient the backward makes next ("" for the head's and the
/// embedding's, and for values of no block).
llvm::DenseMap<mlir::Value, std::string> computedForBlocks(mlir::func::FuncOp step);

/// The block an op works for: that of the first value it reads or makes
/// that `parameterBlock` (parameterBlocks) knows, "" for none; a
/// multi-tensor update reads every block's and belongs to none.
std::string blockOfOp(mlir::Operation *op,
                      const llvm::DenseMap<mlir::Value, std::string> &parameterBlock);

/// Puts every call of a block function back in its step, with that call's
/// plan and locations on its ops, each marked with its run
/// (step.block_run), and the step's step.block_functions: the flat step
/// (the pass step-inline-blocks). The block functions are erased.
mlir::LogicalResult inlineBlockFunctions(mlir::ModuleOp module);

} // namespace stepc

#endif // STEPC_COMPILER_OUTLINEBLOCKS_H
