//===- MemoryPlan.h - static buffer assignment of a training step -*- C++ -*-===//

#ifndef STEPC_ANALYSIS_MEMORYPLAN_H
#define STEPC_ANALYSIS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <vector>

namespace stepc {

/// Where each value of a function lives: a function argument (persistent
/// state or an input the runtime provides), or an arena buffer at an offset
/// fixed at compile time.
struct MemoryPlan {
  /// One arena buffer: several values may share it (reshape aliases,
  /// elementwise results written over a dying operand).
  struct Buffer {
    int64_t bytes = 0;
    int64_t offset = 0;
    /// Op indices (in the function's order) of the first definition and the
    /// last use of any value in the buffer.
    int64_t firstDef = 0, lastUse = 0;
  };
  llvm::SmallVector<Buffer> buffers;
  /// Buffer index of each value in the arena.
  llvm::DenseMap<mlir::Value, int64_t> bufferOf;
  /// Function argument a value aliases (reshape of an argument, adamw results
  /// written in place over their parameter and moments).
  llvm::DenseMap<mlir::Value, unsigned> argumentOf;
  /// Bytes of the arena (the planned peak of transient memory).
  int64_t arenaBytes = 0;
  /// The largest sum of live buffer sizes at any op: a lower bound no
  /// placement can beat; arenaBytes >= liveBytesPeak.
  int64_t liveBytesPeak = 0;
  /// The op index at which the live buffers first sum to liveBytesPeak.
  int64_t liveBytesPeakAt = 0;
  /// Values whose buffer took over an operand's (in-place).
  int64_t inPlaceCount = 0;
};

/// The bytes of the plan's buffers live at each of `ops` op indices (a
/// buffer from its first definition to its last use): the plan's live-set
/// curve, which the memory plot draws and a profiled step's trace counts.
std::vector<int64_t> liveBytesByOp(const MemoryPlan &plan, int64_t ops);

/// Alignment of every arena buffer.
constexpr int64_t kArenaAlignment = 64;

/// Plans `function` (a single block): liveness over the op order, aliasing,
/// in-place reuse for elementwise ops whose operand dies there, then
/// greedy-by-size placement of the buffers. Everything a kernel reads or
/// writes is an operand or result of its op (a fused kernel is one op), so
/// the plan needs nothing but the IR.
MemoryPlan planMemory(mlir::func::FuncOp function);

/// Steps 1-3 of planMemory without the placement: the buffers, their
/// lifetimes and the live-set peak, in time linear in the ops (offsets and
/// arenaBytes stay 0). The placement almost always reaches the live peak, so
/// a search trying many variants of a step (step-remat) ranks them by it and
/// places only what it keeps.
MemoryPlan planLiveness(mlir::func::FuncOp function);

} // namespace stepc

#endif // STEPC_ANALYSIS_MEMORYPLAN_H
