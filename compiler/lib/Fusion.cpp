//===- Fusion.cpp - elementwise fusion groups ------------------------------===//
//
// A run is extended op by op in program order; it ends at an op that cannot
// join (not fusable, another element count, fused elsewhere, the run full).
// Every value of a closed group with a use outside it becomes an output; the
// rest never reach memory. planMemory treats the group as one op spanning
// the run (its outputs defined at the start, its inputs live to the end).
//
//===----------------------------------------------------------------------===//

#include "stepc/Compiler/Fusion.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

using namespace mlir;
using namespace stepc;

static int64_t numElements(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

Value stepc::throughReshapes(Value v) {
  while (auto reshape = v.getDefiningOp<step::ReshapeOp>())
    v = reshape.getInput();
  return v;
}

/// Whether `v` (or a reshape of it) is used by an op outside `members`.
static bool usedOutside(Value v, const DenseSet<Operation *> &members) {
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

ElementwiseFusion stepc::planElementwiseFusion(func::FuncOp step, ComputedBy &computedBy,
                                               function_ref<bool(Operation *)> fusable,
                                               unsigned maxOps, unsigned maxInputs) {
  ElementwiseFusion fusion;
  ElementwiseGroup open;
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
      unsigned index = fusion.groups.size();
      for (Operation *op : open.ops) {
        fusion.groupOf[op] = index;
        if (op != open.ops.front())
          computedBy[op] = open.ops.front();
        for (Value r : op->getResults()) {
          if (usedOutside(r, members))
            open.outputs.push_back(r);
          else
            fusion.interior.insert(r);
        }
      }
      fusion.groups.push_back(std::move(open));
    }
    open = ElementwiseGroup();
    members.clear();
  };
  for (Operation &op : step.getBody().front()) {
    if (isa<step::ReshapeOp>(op))
      continue;
    bool joins = !computedBy.count(&op) && op.getNumResults() == 1 && fusable(&op);
    if (!joins) {
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
  return fusion;
}
