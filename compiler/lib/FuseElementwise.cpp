//===- FuseElementwise.cpp - runs of elementwise ops as stepk.fused -------===//
//
// A run is extended op by op in program order; it ends at an op that cannot
// join (not elementwise, another element count, the run full), except that
// a convert of the run's value right after that op moves before it and
// joins. A closed run of two or more ops becomes one stepk.fused op at the
// position of its last member: its inputs are the values the run
// reads from outside (in first-use order), its results the members' values
// used after it (in definition order); reshapes between members that the
// run reads are cloned into the body, those read after it move behind it.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/IRMapping.h"

namespace stepc {
#define GEN_PASS_DEF_STEPFUSEELEMENTWISE
#include "stepc/Compiler/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;

bool stepc::isFusableElementwise(Operation *op) {
  return isa<step::ConvertOp, step::ScalarMathOpInterface>(op);
}

namespace {

/// A run of elementwise ops to fuse.
struct Run {
  SmallVector<Operation *> ops;
  /// Operands from outside the run, in first-use order.
  SmallVector<Value> inputs;
  /// Results with a use outside the run, in definition order.
  SmallVector<Value> outputs;
  int64_t numElements = 0;
};

int64_t numElements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

/// `v` with reshapes looked through (a reshape is the same elements).
Value throughReshapes(Value v) {
  while (auto reshape = v.getDefiningOp<step::ReshapeOp>())
    v = reshape.getInput();
  return v;
}

/// Whether `v` (or a reshape of it) is used by an op outside `members`.
bool usedOutside(Value v, const DenseSet<Operation *> &members) {
  for (Operation *user : v.getUsers()) {
    if (auto reshape = dyn_cast<step::ReshapeOp>(user)) {
      if (usedOutside(reshape.getResult(), members))
        return true;
    } else if (!members.count(user)) {
      return true;
    }
  }
  return false;
}

/// The runs of `step`.
SmallVector<Run> findRuns(func::FuncOp step, unsigned maxOps,
                          unsigned maxInputs) {
  SmallVector<Run> runs;
  Run open;
  DenseSet<Operation *> members;
  auto inputsWith = [&](Operation *op) {
    SmallVector<Value> inputs(open.inputs);
    for (Value operand : op->getOperands()) {
      Value v = throughReshapes(operand);
      if ((!v.getDefiningOp() || !members.count(v.getDefiningOp())) &&
          !llvm::is_contained(inputs, operand))
        inputs.push_back(operand);
    }
    return inputs;
  };
  auto close = [&]() {
    if (open.ops.size() >= 2) {
      for (Operation *op : open.ops)
        for (Value r : op->getResults())
          if (usedOutside(r, members))
            open.outputs.push_back(r);
      runs.push_back(std::move(open));
    }
    open = Run();
    members.clear();
  };
  for (Operation &op : step.getBody().front()) {
    if (isa<step::ReshapeOp>(op))
      continue;
    bool joins = op.getNumResults() == 1 && isFusableElementwise(&op);
    if (!joins) {
      // A convert of the run's value right after this op moves before it
      // and joins the run (a gradient rounded for its next GEMM beside the
      // reduction of its f32 sum): one pass over the value, not two.
      while (!open.ops.empty()) {
        auto convert = dyn_cast_or_null<step::ConvertOp>(op.getNextNode());
        if (!convert)
          break;
        Operation *def = convert.getInput().getDefiningOp();
        if (!def || !members.count(def) || numElements(convert.getResult()) != open.numElements ||
            open.ops.size() >= maxOps || inputsWith(convert).size() > maxInputs)
          break;
        convert->moveBefore(&op);
        open.inputs = inputsWith(convert);
        open.ops.push_back(convert);
        members.insert(convert);
      }
      close();
      continue;
    }
    int64_t n = numElements(op.getResult(0));
    if (!open.ops.empty() &&
        (n != open.numElements || open.ops.size() >= maxOps || inputsWith(&op).size() > maxInputs))
      close();
    open.inputs = inputsWith(&op);
    open.ops.push_back(&op);
    members.insert(&op);
    open.numElements = n;
  }
  close();
  return runs;
}

/// Replaces `run` by one stepk.fused op; `replaced` maps the outputs of
/// runs fused before (inputs of later runs) to the fused results.
void fuse(Run run, DenseMap<Value, Value> &replaced) {
  for (Value &in : run.inputs)
    if (Value now = replaced.lookup(in))
      in = now;
  Operation *first = run.ops.front(), *last = run.ops.back();
  DenseSet<Operation *> members(run.ops.begin(), run.ops.end());
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  SmallVector<Type> types;
  for (Value out : run.outputs)
    types.push_back(out.getType());
  auto fused = b.create<stepk::FusedOp>(first->getLoc(), types, run.inputs);
  // A run may span phases (a recomputed op and the backward op reading it):
  // the kernel starts in its first member's.
  step::copyPhase(first, fused);
  Block *body = new Block();
  fused.getBody().push_back(body);
  IRMapping map;
  for (Value in : run.inputs)
    map.map(in, body->addArgument(in.getType(), in.getLoc()));
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  // A member's operand is an input, a member's result, or a reshape chain
  // of one (cloned into the body).
  std::function<void(Value)> mapOperand = [&](Value v) {
    if (map.contains(v))
      return;
    auto reshape = v.getDefiningOp<step::ReshapeOp>();
    mapOperand(reshape.getInput());
    inner.clone(*reshape, map);
  };
  for (Operation *op : run.ops) {
    for (Value operand : op->getOperands())
      mapOperand(operand);
    inner.clone(*op, map);
  }
  SmallVector<Value> yielded;
  for (Value out : run.outputs)
    yielded.push_back(map.lookup(out));
  inner.create<stepk::YieldOp>(last->getLoc(), yielded);

  for (auto [output, result] : llvm::zip(run.outputs, fused.getResults())) {
    Value out = output;
    replaced[out] = result;
    out.replaceUsesWithIf(result, [&](OpOperand &use) { return !members.count(use.getOwner()); });
  }
  // Reshapes of the run's results read later move behind the fused op, in
  // order; then the members and the reshapes only they read go.
  SmallVector<Operation *> between;
  for (Operation *op = first; op != fused.getOperation(); op = op->getNextNode())
    between.push_back(op);
  DenseSet<Operation *> moving{fused};
  SmallVector<Operation *> moved;
  for (Operation *op : between)
    if (auto reshape = dyn_cast<step::ReshapeOp>(op))
      if (Operation *def = reshape.getInput().getDefiningOp(); def && moving.count(def)) {
        moving.insert(op);
        moved.push_back(op);
      }
  Operation *after = fused;
  for (Operation *op : moved) {
    op->moveAfter(after);
    after = op;
  }
  for (Operation *op : llvm::reverse(between))
    if (members.count(op) || (!moving.count(op) && isa<step::ReshapeOp>(op) && op->use_empty()))
      op->erase();
  for (Operation *op : llvm::reverse(moved))
    if (op->use_empty())
      op->erase();
}

struct StepFuseElementwisePass
    : public stepc::impl::StepFuseElementwiseBase<StepFuseElementwisePass> {
  using StepFuseElementwiseBase::StepFuseElementwiseBase;
  void runOnOperation() override {
    for (func::FuncOp step : trainingSteps(getOperation())) {
      // On CUDA, the library kernels took their ops first
      // (step-fuse-cuda-kernels).
      placeElementwiseForFusion(step);
      DenseMap<Value, Value> replaced;
      for (Run &run : findRuns(step, maxOps, maxInputs))
        // A run nothing reads afterwards (dead code) stays as it is: a
        // kernel storing nothing is not one.
        if (!run.outputs.empty())
          fuse(std::move(run), replaced);
    }
  }
};

} // namespace
