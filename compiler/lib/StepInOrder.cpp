//===- StepInOrder.cpp - a planned step as it runs, calls included --------===//

#include "StepInOrder.h"

#include "stepc/Compiler/OutlineBlocks.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

FailureOr<StepInOrder> StepInOrder::of(func::FuncOp step) {
  StepInOrder view;
  Block &body = step.getBody().front();
  for (BlockArgument argument : body.getArguments())
    view.stored[{argument, -1}] = {argument.getArgNumber(), -1};
  for (Operation &op : body) {
    auto call = dyn_cast<func::CallOp>(op);
    func::FuncOp callee = call ? blockFunctionOf(call) : func::FuncOp();
    if (!callee) {
      view.add(&op, -1);
      continue;
    }
    int64_t index = view.callOps.size();
    view.callOps.push_back(call);
    view.callIndex[call] = index;
    FailureOr<std::unique_ptr<RunPlanScope>> scope = RunPlanScope::apply(call, callee);
    if (failed(scope))
      return failure();
    for (Operation &inner : callee.getBody().front().without_terminator())
      view.add(&inner, index);
  }
  // Readers, once every instance's maker is known.
  for (auto [k, o] : llvm::enumerate(view.order)) {
    for (Value v : o.op->getOperands())
      view.direct[view.instance(v, o.call)].push_back(k);
    Operation *top = o.op;
    int64_t call = o.call;
    size_t position = k;
    top->walk([&](Operation *inner) {
      if (inner != top)
        for (Value v : inner->getOperands())
          view.nested[view.instance(v, call)].push_back(position);
    });
  }
  return view;
}

void StepInOrder::add(Operation *op, int64_t call) {
  auto label = op->getAttrOfType<StringAttr>(StepDialect::kComputedForAttrName);
  order.push_back({op, call, label ? label.str() : std::string()});
  auto ids = op->getAttrOfType<DenseI64ArrayAttr>(StepDialect::kBufferAttrName);
  auto args = op->getAttrOfType<DenseI64ArrayAttr>(StepDialect::kInArgAttrName);
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    int64_t arg = args ? args[i] : -1, id = ids ? ids[i] : -1;
    if (arg >= 0 || id >= 0)
      stored[{r, call}] = {arg, id};
  }
}

StepInOrder::Instance StepInOrder::instance(Value v, int64_t call) const {
  if (call >= 0)
    if (auto argument = dyn_cast<BlockArgument>(v);
        argument && isa<func::FuncOp>(argument.getOwner()->getParentOp())) {
      func::CallOp site = callOps[call];
      return instance(site.getOperand(argument.getArgNumber()), -1);
    }
  if (auto result = dyn_cast<OpResult>(v); result && call < 0)
    if (auto it = callIndex.find(result.getOwner()); it != callIndex.end()) {
      func::CallOp site = callOps[it->second];
      func::FuncOp callee = blockFunctionOf(site);
      return instance(
          callee.getBody().front().getTerminator()->getOperand(result.getResultNumber()),
          it->second);
    }
  return {v, call};
}

std::optional<StepInOrder::Storage> StepInOrder::storage(Instance i) const {
  if (auto it = stored.find(i); it != stored.end())
    return it->second;
  return std::nullopt;
}

ArrayRef<int64_t> StepInOrder::readers(Instance i) const {
  auto it = direct.find(i);
  return it == direct.end() ? ArrayRef<int64_t>() : ArrayRef<int64_t>(it->second);
}

ArrayRef<int64_t> StepInOrder::nestedReaders(Instance i) const {
  auto it = nested.find(i);
  return it == nested.end() ? ArrayRef<int64_t>() : ArrayRef<int64_t>(it->second);
}
