//===- PlaceElementwise.cpp - elementwise ops placed for their fusion -----===//
//
// step-fuse-elementwise fuses runs of elementwise ops in program order, so
// where an op sits decides which values travel through memory between
// kernels. Before it finds its runs, three exact moves:
//
// - Recompute at a far user. An elementwise value all of whose users are
//   elementwise is computed again just before each user that a kernel of
//   another kind separates from its first one (a backward op reading a
//   forward value), when what it reads is live there anyway or holds no
//   more bytes than the value. Llama's SwiGLU stored silu(g) in f32 for the
//   backward; the backward recomputes it from g, which silu's gradient
//   keeps anyway.
// - Sink to the first user. An elementwise op moves down to just before
//   its first user, an elementwise op of the same phase that a kernel of
//   another kind separates it from, with the producers only it reads,
//   when the operands that would live longer hold no more bytes than its
//   result would between the two: silu(g) then sits beside the mul with u,
//   after u's GEMM, and the forward's SwiGLU is one kernel reading g and u;
//   in the backward, dh*u (f32) joins silu's gradient after the GEMMs that
//   came between.
// - Join a sibling. The ops ending a run (nothing elementwise reads the
//   last), with the producers only they read, rise to just after the
//   closest run above them that a kernel of another kind separates them
//   from, when that run reads one of the values they read (the pass the
//   join saves), everything they read exists there, and the bytes held in
//   between do not grow (their results live longer, what only they read
//   dies sooner): Llama's backward computes u's and g's gradients in one
//   kernel reading dh, g and u once, where two kernels read dh and g each.
//
// The ops moved and cloned are pure (ScalarMathOpInterface ops and
// converts), so every value is the one the step computed before.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

using namespace mlir;
using namespace stepc;

namespace {

/// The bytes `v` holds as stored (none for a value that is not a tensor).
int64_t bytesOf(Value v) {
  return isa<RankedTensorType>(v.getType()) ? step::tensorBytes(v.getType()) : 0;
}

/// An op the placement may move or clone: fusable, one result, no regions.
bool placeable(Operation *op) {
  return op->getNumResults() == 1 && op->getNumRegions() == 0 && isFusableElementwise(op) &&
         isa<RankedTensorType>(op->getResult(0).getType());
}

/// Whether an op outside `moving` reads `v` at `at` or after it. The
/// step's arguments live through it.
bool liveAt(Value v, Operation *at, ArrayRef<Operation *> moving, Block &block) {
  if (isa<BlockArgument>(v))
    return true;
  for (Operation *user : v.getUsers()) {
    Operation *top = block.findAncestorOpInBlock(*user);
    if (!top || llvm::is_contained(moving, top))
      continue;
    if (top == at || at->isBeforeInBlock(top))
      return true;
  }
  return false;
}

/// The bytes the operands of `moving` (from outside it) would hold on until
/// `at` if those ops were computed there instead of where they are.
int64_t extraBytesAt(ArrayRef<Operation *> moving, Operation *at, Block &block) {
  int64_t extra = 0;
  SmallPtrSet<Value, 8> seen;
  for (Operation *op : moving)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if ((def && llvm::is_contained(moving, def)) || !seen.insert(operand).second)
        continue;
      if (!liveAt(operand, at, moving, block))
        extra += bytesOf(operand);
    }
  return extra;
}

/// Whether an op strictly between `from` and `to` ends a run of
/// elementwise ops (reshapes do not).
bool runBreakBetween(Operation *from, Operation *to) {
  for (Operation *op = from->getNextNode(); op && op != to; op = op->getNextNode())
    if (!isa<step::ReshapeOp>(op) && !isFusableElementwise(op))
      return true;
  return false;
}

SmallVector<Operation *> placeableOps(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    if (placeable(&op))
      ops.push_back(&op);
  return ops;
}

void recomputeAtFarUsers(Block &block) {
  // Last first: a value's clones are users of its operands' producers when
  // those come up.
  SmallVector<Operation *> ops = placeableOps(block);
  for (Operation *op : llvm::reverse(ops)) {
    Value result = op->getResult(0);
    SmallVector<Operation *> users;
    bool elementwise = true;
    for (Operation *user : result.getUsers()) {
      if (user->getBlock() != &block || !isFusableElementwise(user)) {
        elementwise = false;
        break;
      }
      if (!llvm::is_contained(users, user))
        users.push_back(user);
    }
    if (!elementwise || users.size() < 2)
      continue;
    llvm::sort(users, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    for (Operation *user : ArrayRef(users).drop_front()) {
      if (!runBreakBetween(users.front(), user) ||
          extraBytesAt({op}, user, block) > bytesOf(result))
        continue;
      OpBuilder builder(user);
      Operation *clone = builder.clone(*op);
      step::copyPhase(user, clone);
      user->replaceUsesOfWith(result, clone->getResult(0));
    }
  }
}

/// `op` and, producers first, the placeable ops of its phase whose result
/// only it (or another of them) reads: what moves when `op` does.
SmallVector<Operation *> withSoleProducers(Operation *op) {
  SmallVector<Operation *> moving{op};
  for (size_t i = 0; i < moving.size(); ++i)
    for (Value operand : moving[i]->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || def->getBlock() != op->getBlock() || !placeable(def) ||
          llvm::is_contained(moving, def) || step::getPhase(def) != step::getPhase(op) ||
          !llvm::all_of(def->getResult(0).getUsers(),
                        [&](Operation *user) { return llvm::is_contained(moving, user); }))
        continue;
      moving.push_back(def);
    }
  llvm::sort(moving, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return moving;
}

void sinkToFirstUsers(Block &block) {
  SmallVector<Operation *> ops = placeableOps(block);
  for (Operation *op : llvm::reverse(ops)) {
    Operation *first = nullptr;
    for (Operation *user : op->getResult(0).getUsers()) {
      Operation *top = block.findAncestorOpInBlock(*user);
      if (top && (!first || top->isBeforeInBlock(first)))
        first = top;
    }
    // Only to join an elementwise user's run that a kernel of another kind
    // keeps it from.
    if (!first || !isFusableElementwise(first) || !runBreakBetween(op, first) ||
        step::getPhase(op) != step::getPhase(first))
      continue;
    // The value no longer waits in memory for its user; what the moved ops
    // read from outside may wait instead, if it is no bigger.
    SmallVector<Operation *> moving = withSoleProducers(op);
    if (extraBytesAt(moving, first, block) > bytesOf(op->getResult(0)))
      continue;
    for (Operation *member : moving)
      member->moveBefore(first);
  }
}

/// The values `ops` read from outside them.
SmallVector<Value> externalOperands(ArrayRef<Operation *> ops) {
  SmallVector<Value> inputs;
  for (Operation *op : ops)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if ((!def || !llvm::is_contained(ops, def)) && !llvm::is_contained(inputs, operand))
        inputs.push_back(operand);
    }
  return inputs;
}

/// Whether `v` (or a reshape of it) is read by an op after `at` that is not
/// in `moving`.
bool readAfter(Value v, Operation *at, ArrayRef<Operation *> moving, Block &block) {
  for (Operation *user : v.getUsers()) {
    Operation *top = block.findAncestorOpInBlock(*user);
    if (!top || llvm::is_contained(moving, top) || !at->isBeforeInBlock(top))
      continue;
    if (!isa<step::ReshapeOp>(top) || readAfter(top->getResult(0), at, moving, block))
      return true;
  }
  return false;
}

void joinSiblingRuns(Block &block) {
  for (Operation *last : placeableOps(block)) {
    // The end of a run: nothing elementwise reads it.
    if (llvm::any_of(last->getResult(0).getUsers(), isFusableElementwise))
      continue;
    SmallVector<Operation *> moving = withSoleProducers(last);
    // The run before it: the placeable op closest above its first op with
    // a kernel of another kind between them.
    Operation *anchor = nullptr;
    bool kernelBetween = false;
    for (Operation *op = moving.front()->getPrevNode(); op; op = op->getPrevNode()) {
      if (isa<step::ReshapeOp>(op))
        continue;
      if (placeable(op) && !llvm::is_contained(moving, op)) {
        anchor = op;
        break;
      }
      if (!isFusableElementwise(op))
        kernelBetween = true;
    }
    if (!anchor || !kernelBetween || step::getPhase(anchor) != step::getPhase(last) ||
        cast<RankedTensorType>(anchor->getResult(0).getType()).getNumElements() !=
            cast<RankedTensorType>(last->getResult(0).getType()).getNumElements())
      continue;
    // Everything the moving ops read must exist there, and one value the
    // run there reads must be read again (the pass the join saves).
    SmallVector<Value> inputs = externalOperands(moving);
    if (!llvm::all_of(inputs, [&](Value v) {
          Operation *def = v.getDefiningOp();
          return !def || def == anchor || def->isBeforeInBlock(anchor);
        }))
      continue;
    SmallVector<Operation *> run;
    for (Operation *op = anchor; op && (isFusableElementwise(op) || isa<step::ReshapeOp>(op));
         op = op->getPrevNode())
      if (!isa<step::ReshapeOp>(op))
        run.push_back(op);
    SmallVector<Value> runInputs = externalOperands(run);
    if (llvm::none_of(inputs, [&](Value v) { return llvm::is_contained(runInputs, v); }))
      continue;
    // No more bytes held between the two places: the moved results live
    // longer, what only they read dies sooner.
    int64_t extra = 0;
    for (Operation *op : moving)
      if (readAfter(op->getResult(0), anchor, moving, block))
        extra += bytesOf(op->getResult(0));
    for (Value v : inputs)
      if (!readAfter(v, anchor, moving, block) && !isa<BlockArgument>(v))
        extra -= bytesOf(v);
    if (extra > 0)
      continue;
    Operation *after = anchor;
    for (Operation *op : moving) {
      op->moveAfter(after);
      after = op;
    }
  }
}

} // namespace

void stepc::placeElementwiseForFusion(func::FuncOp step) {
  Block &block = step.getBody().front();
  recomputeAtFarUsers(block);
  sinkToFirstUsers(block);
  joinSiblingRuns(block);
}
