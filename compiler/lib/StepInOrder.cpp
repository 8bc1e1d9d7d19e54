//===- StepInOrder.cpp - a planned step as it runs, calls included --------===//

#include "StepInOrder.h"

#include "stepc/Analysis/StepStructure.h"
#include "stepc/Compiler/BlockCalls.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"

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

DenseMap<StepInOrder::Instance, std::string>
stepc::parameterBlocks(func::FuncOp step, const StepInOrder &view) {
  using Instance = StepInOrder::Instance;
  // Each parameter's block marker, which its moments share.
  llvm::StringMap<int64_t> blockOfParam;
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
    if (auto p = step.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName))
      blockOfParam[p.getName()] = p.getBlock();
  DenseMap<Instance, std::string> blockOf;
  for (BlockArgument arg : step.getArguments()) {
    unsigned i = arg.getArgNumber();
    std::optional<int64_t> block;
    if (auto p = step.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName))
      block = p.getBlock();
    else if (auto s = step.getArgAttrOfType<StateAttr>(i, StepDialect::kStateAttrName))
      if (auto it = blockOfParam.find(s.getParam()); it != blockOfParam.end())
        block = it->second;
    if (!block)
      continue;
    std::string label = blockLabel(*block);
    blockOf[{arg, -1}] = label.empty() ? "#" : label;
  }
  // A parameter's gradient too (through the reshapes that made it, and
  // the micro-batches' sum: the mean's 1/M and each accumulating add), so
  // the clipping norm's terms and the accumulation run in their block's
  // code.
  auto gradientOf = [&](Instance param, Instance grad) {
    auto it = blockOf.find(param);
    if (it == blockOf.end())
      return;
    std::string block = it->second;
    SmallVector<Instance> work{grad};
    while (!work.empty()) {
      Instance g = work.pop_back_val();
      if (!blockOf.try_emplace(g, block).second)
        continue;
      Operation *def = g.first.getDefiningOp();
      auto read = [&](unsigned k) { return view.instance(def->getOperand(k), g.second); };
      if (isa_and_nonnull<ReshapeOp>(def)) {
        work.push_back(read(0));
      } else if (isa_and_nonnull<MulOp>(def) &&
                 read(1).first.getDefiningOp<ConstantOp>()) {
        work.push_back(read(0));
      } else if (isa_and_nonnull<AddOp>(def)) {
        work.append({read(0), read(1)});
      }
    }
  };
  for (const StepInOrder::Op &o : view.ops()) {
    // Every optimizer update reads (param, grad, ...); a multi-tensor group's
    // updates read its inputs through the body.
    Operation *update = o.op;
    if (isa<AdamwOp, SgdOp, LionOp>(update))
      gradientOf(view.instance(update->getOperand(0), o.call),
                 view.instance(update->getOperand(1), o.call));
    if (auto group = dyn_cast<stepk::AdamwGroupOp>(update))
      for (AdamwOp u : group.getUpdates())
        gradientOf(view.instance(group.inputOf(u.getParam()), o.call),
                   view.instance(group.inputOf(u.getGrad()), o.call));
  }
  for (const StepInOrder::Op &o : view.ops())
    if (isa<ReshapeOp, ConvertOp, SliceOp>(o.op) || getPhase(o.op) == Phase::Collective)
      if (o.op->getNumOperands() > 0)
        if (auto it = blockOf.find(view.instance(o.op->getOperand(0), o.call));
            it != blockOf.end()) {
          // A copy: inserting may move the map's entries.
          std::string block = it->second;
          for (Value r : o.op->getResults())
            blockOf[{r, o.call}] = block;
        }
  return blockOf;
}
