//===- ScheduleCollectives.cpp - overlap communication with compute -------===//

#include "stepc/Transforms/CollectiveSchedule.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"

namespace stepc {
#define GEN_PASS_DEF_STEPSCHEDULECOLLECTIVES
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The first op (in block order) using `v`, looking through a padding slice.
Operation *firstUser(Value v) {
  Operation *first = nullptr;
  for (Operation *user : v.getUsers()) {
    Operation *at = user;
    if (isa<SliceOp>(user))
      for (Operation *u : user->getResult(0).getUsers())
        at = at == user || u->isBeforeInBlock(at) ? u : at;
    if (!first || at->isBeforeInBlock(first))
      first = at;
  }
  return first;
}

// gather(p_k) issued before the first use of gather(p_{k-1}).
void prefetchGathers(Block &body) {
  SmallVector<mesh::AllGatherOp> gathers;
  for (auto gather : body.getOps<mesh::AllGatherOp>())
    if (isa<BlockArgument>(gather.getInput()) && firstUser(gather.getResult()))
      gathers.push_back(gather);
  // The padding slices move down to their first user, so that the wait sits
  // at the real use.
  for (mesh::AllGatherOp gather : gathers)
    for (Operation *user : llvm::make_early_inc_range(gather.getResult().getUsers()))
      if (auto slice = dyn_cast<SliceOp>(user))
        if (Operation *first = firstUser(slice.getResult()))
          slice->moveBefore(first);
  prefetchOneAhead(gathers, &body.front());
}

/// The op after which all of `op`'s operands are defined (null: the block
/// start).
Operation *latestDefinition(Operation *op) {
  Operation *latest = nullptr;
  for (Value operand : op->getOperands())
    if (Operation *def = operand.getDefiningOp())
      if (!latest || latest->isBeforeInBlock(def))
        latest = def;
  return latest;
}

/// A collective of computed values: a reduction, or (tensor and sequence
/// parallelism) a gather of an activation or a gradient.
bool collectsComputedValue(Operation *op) {
  if (isa<mesh::AllReduceOp, mesh::ReduceScatterOp, mesh::AllToAllOp>(op))
    return true;
  auto gather = dyn_cast<mesh::AllGatherOp>(op);
  return gather && !isa<BlockArgument>(gather.getInput());
}

// Collectives of computed values (and the pad/reshape/concat/transpose
// feeding them) right after their operands are final: a tp gradient's
// reduction then overlaps the weight-gradient GEMM after it.
void issueReductionsEarly(Block &body) {
  SmallVector<Operation *> early;
  for (Operation &op : body) {
    bool feedsReduction = llvm::any_of(op.getUsers(), [](Operation *u) {
      return collectsComputedValue(u) ||
             (isa<ConcatOp, ReshapeOp>(u) &&
              llvm::any_of(u->getUsers(), [](Operation *w) {
                return isa<mesh::AllReduceOp>(w) ||
                       (isa<ConcatOp>(w) &&
                        llvm::any_of(w->getUsers(),
                                     [](Operation *x) { return isa<mesh::AllReduceOp>(x); }));
              }));
    });
    bool reduction = collectsComputedValue(&op) &&
                     !llvm::any_of(op.getOperands(), [](Value v) {
                       return v.getDefiningOp() && communicates(v.getDefiningOp());
                     });
    if (reduction || (isa<PadOp, ReshapeOp, ConcatOp, TransposeOp>(op) && feedsReduction))
      early.push_back(&op);
  }
  for (Operation *op : early) {
    Operation *latest = latestDefinition(op);
    if (!latest)
      op->moveBefore(&body.front());
    else if (latest->getNextNode() != op)
      op->moveAfter(latest);
  }
}

// Work that an all-to-all does not wait for, moved between its start and
// its first use: the all-to-alls of expert parallelism then overlap what
// the model computed before them and needs only later (a shared expert's
// MLP beside the routed experts, in the forward and in the backward). An
// op before the all-to-all moves when the all-to-all does not depend on it,
// it neither communicates nor is one of the step's arguments' updates, and
// each of its users is after the first use or moves too (decided from the
// last op back, so that users are decided first). Order among the moved
// ops is kept, and an op placed beside one all-to-all stays there (the
// first exchange of a layer gets the work, not the last).
void overlapAllToAlls(Block &body) {
  SmallVector<mesh::AllToAllOp> exchanges(body.getOps<mesh::AllToAllOp>());
  llvm::DenseSet<Operation *> placed;
  for (mesh::AllToAllOp exchange : exchanges) {
    Operation *use = firstUser(exchange.getResult());
    if (!use)
      continue;
    // What the all-to-all depends on, within the block.
    llvm::DenseSet<Operation *> needed;
    SmallVector<Operation *> work{exchange};
    while (!work.empty())
      for (Value operand : work.pop_back_val()->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (def->getBlock() == &body && needed.insert(def).second)
            work.push_back(def);
    llvm::DenseSet<Operation *> moving;
    SmallVector<Operation *> moved;
    for (Operation *op = exchange->getPrevNode(); op; op = op->getPrevNode()) {
      if (needed.contains(op) || communicates(op) || op->getNumResults() == 0 ||
          placed.contains(op))
        continue;
      bool later = llvm::all_of(op->getUsers(), [&](Operation *user) {
        return moving.contains(user) || use->isBeforeInBlock(user) || user == use;
      });
      // (A user that is the first use itself stays after the moved op.)
      if (!later)
        continue;
      moving.insert(op);
      moved.push_back(op);
    }
    for (Operation *op : llvm::reverse(moved)) {
      op->moveBefore(use);
      placed.insert(op);
    }
  }
}

struct StepScheduleCollectivesPass
    : public stepc::impl::StepScheduleCollectivesBase<StepScheduleCollectivesPass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      Block &body = function.getBody().front();
      if (llvm::none_of(body, [](Operation &op) { return communicates(&op); }))
        continue;
      prefetchGathers(body);
      issueReductionsEarly(body);
      overlapAllToAlls(body);
    }
  }
};

} // namespace

void stepc::prefetchOneAhead(ArrayRef<mesh::AllGatherOp> gathers, Operation *start) {
  SmallVector<std::pair<Operation *, mesh::AllGatherOp>> ordered;
  for (mesh::AllGatherOp gather : gathers)
    if (Operation *use = firstUser(gather.getResult()))
      ordered.push_back({use, gather});
  llvm::stable_sort(ordered, [](auto &a, auto &b) { return a.first->isBeforeInBlock(b.first); });
  for (size_t k = 0; k < ordered.size(); ++k) {
    Operation *at = k == 0 ? start : ordered[k - 1].first;
    if (!at)
      continue;
    // Never after one of its own users (a slice sunk before the same op).
    for (Operation *user : ordered[k].second->getUsers())
      if (user->isBeforeInBlock(at))
        at = user;
    if (at != ordered[k].second.getOperation())
      ordered[k].second->moveBefore(at);
  }
}
