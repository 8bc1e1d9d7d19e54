//===- Pareto.h - memory budget vs recompute, over a sweep -------*- C++ -*-===//

#ifndef STEPC_COMPILER_PARETO_H
#define STEPC_COMPILER_PARETO_H

#include "stepc/Compiler/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace stepc {

/// Compiles the training step of `model` (left unchanged) once per budget of
/// a sweep, from 25% to 100% of its planned peak without remat, with
/// `options` (until=train-step, remat=auto) and records for each budget
/// whether it is feasible, the planned peak and the executed / model FLOPs.
/// Returns the table as JSON in `json` and as an SVG chart in `svg`; an
/// infeasible budget is a row, not an error.
mlir::LogicalResult sweepMemoryBudgets(mlir::ModuleOp model, const StepcPipelineOptions &options,
                                       std::string &json, std::string &svg);

} // namespace stepc

#endif // STEPC_COMPILER_PARETO_H
