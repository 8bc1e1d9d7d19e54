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

#include "stepc/Compiler/Emitter.h"
#include "LoweringUtils.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

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

/// Whether `call` is a column sum: its body an optional widening of its
/// one operand, then a step.reduce_sum of it over leading dims into f32 (a
/// bias gradient), yielded.
bool isColumnSum(stepk::CallOp call) {
  if (call.getInputs().size() != 1 || call.getNumResults() != 1)
    return false;
  Block &body = call.getBody().front();
  step::ReduceSumOp sum;
  for (Operation &op : body.without_terminator()) {
    if (auto reduce = dyn_cast<step::ReduceSumOp>(op)) {
      if (sum)
        return false;
      sum = reduce;
      continue;
    }
    auto widen = dyn_cast<step::ConvertOp>(op);
    if (sum || !widen || widen.getInput() != body.getArgument(0))
      return false;
  }
  if (!sum || call.getYield().getValues() != ValueRange{sum.getResult()})
    return false;
  auto input = cast<RankedTensorType>(sum.getInput().getType());
  ArrayRef<int64_t> dims = sum.getDims();
  for (auto [k, d] : llvm::enumerate(dims))
    if (d != static_cast<int64_t>(k))
      return false;
  return !dims.empty() && static_cast<int64_t>(dims.size()) < input.getRank() &&
         cast<RankedTensorType>(sum.getType()).getElementType().isF32();
}

/// The next (previous) op after (before) `op`, reshapes skipped.
Operation *neighbour(Operation *op, bool after) {
  do
    op = after ? op->getNextNode() : op->getPrevNode();
  while (op && isa<step::ReshapeOp>(op));
  return op;
}

/// The body value of `fused` holding the elements of `v` (an input's
/// argument or a result's yielded value), or null.
Value bodyValueOf(stepk::FusedOp fused, Value v) {
  Value elements = throughReshapes(v);
  for (auto [k, in] : llvm::enumerate(fused.getInputs()))
    if (throughReshapes(in) == elements)
      return fused.getBody().front().getArgument(k);
  for (auto [k, result] : llvm::enumerate(fused.getResults()))
    if (!fused.isColumnSum(k) && result == elements)
      return fused.getYield().getValues()[k];
  return {};
}

/// `fused` with `call`'s sum of `bodyValue` in its body, yielded as its
/// last result, which replaces `call`'s.
void joinColumnSum(stepk::FusedOp fused, Value bodyValue, stepk::CallOp call) {
  stepk::YieldOp yield = fused.getYield();
  OpBuilder inner(yield);
  Value operand = call.getInputs()[0];
  if (bodyValue.getType() != operand.getType()) {
    auto reshape = inner.create<step::ReshapeOp>(call.getLoc(), operand.getType(), bodyValue);
    step::copyPhase(call, reshape);
    bodyValue = reshape.getResult();
  }
  IRMapping map;
  map.map(call.getBody().front().getArgument(0), bodyValue);
  for (Operation &op : call.getBody().front().without_terminator())
    inner.clone(op, map);
  SmallVector<Value> yielded(yield.getValues());
  yielded.push_back(map.lookup(call.getYield().getValues()[0]));
  inner.create<stepk::YieldOp>(yield.getLoc(), yielded);
  yield.erase();

  SmallVector<Type> types(fused.getResultTypes());
  types.push_back(call.getResult(0).getType());
  OpBuilder b(fused);
  auto joined = b.create<stepk::FusedOp>(fused.getLoc(), types, fused.getInputs());
  joined->setAttrs(fused->getAttrs());
  joined.getBody().takeBody(fused.getBody());
  for (auto [old, now] : llvm::zip(fused.getResults(), joined.getResults()))
    old.replaceAllUsesWith(now);
  call.getResult(0).replaceAllUsesWith(joined.getResults().back());
  fused.erase();
  call.erase();
}

/// Each column sum of `step` joins the loop right before it that makes or
/// reads its operand, else the loop (or lone elementwise op) right after it
/// that reads it, if nothing reads the sum in between.
void fuseColumnSums(func::FuncOp step) {
  SmallVector<stepk::CallOp> sums;
  for (Operation &op : step.getBody().front())
    if (auto call = dyn_cast<stepk::CallOp>(op); call && isColumnSum(call))
      sums.push_back(call);
  for (stepk::CallOp call : sums) {
    Value operand = call.getInputs()[0];
    int64_t n = numElements(operand);
    auto loopOf = [&](Operation *op) -> std::pair<stepk::FusedOp, Value> {
      auto fused = dyn_cast_or_null<stepk::FusedOp>(op);
      if (!fused || fused.getNumElements() != n ||
          step::getPhase(fused) != step::getPhase(call))
        return {};
      return {fused, bodyValueOf(fused, operand)};
    };
    if (auto [fused, value] = loopOf(neighbour(call, /*after=*/false)); value) {
      joinColumnSum(fused, value, call);
      continue;
    }
    Operation *next = neighbour(call, /*after=*/true);
    if (!next || llvm::any_of(call.getResult(0).getUsers(), [&](Operation *user) {
          return user == next || !next->isBeforeInBlock(user);
        }))
      continue;
    // A lone elementwise op reading the operand: a loop of one op.
    if (isFusableElementwise(next) && next->getNumResults() == 1 &&
        numElements(next->getResult(0)) == n && step::getPhase(next) == step::getPhase(call) &&
        llvm::any_of(next->getOperands(),
                     [&](Value v) { return throughReshapes(v) == throughReshapes(operand); })) {
      Run run;
      run.ops.push_back(next);
      for (Value v : next->getOperands())
        if (!llvm::is_contained(run.inputs, v))
          run.inputs.push_back(v);
      run.outputs.push_back(next->getResult(0));
      run.numElements = n;
      Operation *before = next->getPrevNode();
      DenseMap<Value, Value> replaced;
      fuse(std::move(run), replaced);
      next = before->getNextNode();
    }
    if (auto [fused, value] = loopOf(next); value)
      joinColumnSum(fused, value, call);
  }
}

struct StepFuseElementwisePass
    : public stepc::impl::StepFuseElementwiseBase<StepFuseElementwisePass> {
  using StepFuseElementwiseBase::StepFuseElementwiseBase;
  void runOnOperation() override {
    for (func::FuncOp step : trainingSteps(getOperation())) {
      // On CUDA, the library kernels took their ops first
      // (step-fuse-cuda-kernels).
      DenseMap<Value, Value> replaced;
      for (Run &run : findRuns(step, maxOps, maxInputs))
        // A run nothing reads afterwards (dead code) stays as it is: a
        // kernel storing nothing is not one.
        if (!run.outputs.empty())
          fuse(std::move(run), replaced);
      if (columnSums)
        fuseColumnSums(step);
    }
  }
};

} // namespace
