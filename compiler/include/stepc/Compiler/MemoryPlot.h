//===- MemoryPlot.h - the memory plan as a picture ---------------*- C++ -*-===//
//
// `stepc --memory-plot FILE.svg`: a step's bytes across its program order,
// drawn from the plan step-plan-memory records in the IR.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_MEMORYPLOT_H
#define STEPC_COMPILER_MEMORYPLOT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>

namespace stepc {

/// An SVG of `step`'s live bytes at each op it runs (a block function's
/// once per call; arguments, then the arena buffers live there), with the
/// planned peak (arguments + arena), the memory budget if one is given, the
/// first op of the backward and of the optimizer, and the largest buffers
/// labelled at their definition. Its title states the figures it draws.
/// Fails at the function if it has no memory plan.
mlir::FailureOr<std::string> memoryPlotSvg(mlir::func::FuncOp step,
                                           std::optional<int64_t> budgetBytes);

} // namespace stepc

#endif // STEPC_COMPILER_MEMORYPLOT_H
