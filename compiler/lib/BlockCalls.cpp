//===- BlockCalls.cpp - a block function's calls as the step runs them ----===//

#include "stepc/Compiler/BlockCalls.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

bool stepc::isPerCallAttribute(StringRef name) {
  return name == StepDialect::kBufferAttrName || name == StepDialect::kInArgAttrName ||
         name == StepDialect::kRequestAttrName || name == StepDialect::kTransferAttrName ||
         name == StepDialect::kComputedForAttrName;
}

func::FuncOp stepc::blockFunctionOf(func::CallOp call) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
  return callee && callee->hasAttr(StepDialect::kBlockFunctionAttrName) ? callee : func::FuncOp();
}

FailureOr<std::unique_ptr<RunPlanScope>> RunPlanScope::apply(func::CallOp call,
                                                             func::FuncOp callee) {
  if (callee.isExternal() || !callee.getOps<func::CallOp>().empty())
    return call.emitOpError() << "calls " << callee.getSymName()
                              << ", a block function without a body of ops and no calls";
  Block &entry = callee.getBody().front();
  auto plan = call->getAttrOfType<ArrayAttr>(StepDialect::kRunPlanAttrName);
  if (!plan || plan.size() != entry.getOperations().size() - 1)
    return call.emitOpError() << "has no step.run_plan entry per op of " << callee.getSymName();
  for (auto [op, entryPlan] : llvm::zip(entry.without_terminator(), plan))
    for (NamedAttribute a : cast<DictionaryAttr>(entryPlan))
      if (a.getName() != "loc" && !isPerCallAttribute(a.getName().getValue()))
        return call.emitOpError() << "has '" << a.getName().getValue()
                                  << "' in its step.run_plan, not a per-call attribute";
  std::unique_ptr<RunPlanScope> scope(new RunPlanScope());
  for (auto [op, entryPlan] : llvm::zip(entry.without_terminator(), plan)) {
    auto fields = cast<DictionaryAttr>(entryPlan);
    op.walk<WalkOrder::PreOrder>([&](Operation *inner) {
      scope->saved.push_back({inner, inner->getLoc(), inner->getAttrDictionary()});
    });
    for (NamedAttribute a : op.getAttrs())
      if (isPerCallAttribute(a.getName().getValue()))
        op.removeAttr(a.getName());
    for (NamedAttribute a : fields)
      if (a.getName() != "loc")
        op.setAttr(a.getName(), a.getValue());
    auto locations = dyn_cast_or_null<ArrayAttr>(fields.get("loc"));
    size_t k = 0;
    op.walk<WalkOrder::PreOrder>([&](Operation *inner) {
      if (locations && k < locations.size())
        if (auto loc = dyn_cast<LocationAttr>(locations[k++]))
          inner->setLoc(loc);
    });
  }
  return scope;
}

RunPlanScope::~RunPlanScope() {
  for (const Saved &s : saved) {
    s.op->setAttrs(s.attributes);
    s.op->setLoc(s.loc);
  }
}
