//===- StepStructure.cpp - which repeated block each value belongs to ----===//

#include "stepc/Analysis/StepStructure.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

std::string stepc::onPipelineStage(Operation *op) {
  for (auto module = op ? op->getParentOfType<ModuleOp>() : ModuleOp(); module;
       module = module->getParentOfType<ModuleOp>())
    if (auto stage = module->getAttrOfType<IntegerAttr>(StepDialect::kPpStageAttrName))
      return " on pipeline stage " + std::to_string(stage.getInt());
  return "";
}

std::string stepc::blockLabel(int64_t block) {
  return block < 0 ? std::string() : "block " + std::to_string(block);
}

/// The position of each op of `body`, and of the first op that computes
/// with each value (looking through collectives and views).
namespace {
struct UseOrder {
  explicit UseOrder(Block &body) {
    for (Operation &op : body)
      index[&op] = end++;
  }
  int64_t firstComputingUse(Value v) {
    int64_t first = end;
    for (Operation *user : v.getUsers()) {
      if (getPhase(user) == Phase::Collective || isa<ConvertOp, ReshapeOp, SliceOp>(user))
        for (Value r : user->getResults())
          first = std::min(first, firstComputingUse(r));
      else if (!isa<func::ReturnOp>(user))
        first = std::min(first, index[user]);
    }
    return first;
  }
  DenseMap<Operation *, int64_t> index;
  int64_t end = 0;
};
} // namespace

SmallVector<BlockArgument> stepc::parametersInUseOrder(func::FuncOp function) {
  Block &body = function.getBody().front();
  UseOrder order(body);
  SmallVector<std::pair<int64_t, BlockArgument>> ranked;
  for (BlockArgument arg : body.getArguments())
    if (function.getArgAttr(arg.getArgNumber(), StepDialect::kParamAttrName))
      ranked.push_back({order.firstComputingUse(arg), arg});
  llvm::stable_sort(ranked, [](auto &a, auto &b) { return a.first < b.first; });
  return llvm::to_vector(llvm::map_range(ranked, [](auto &p) { return p.second; }));
}

DenseMap<Value, std::string> stepc::attributeBlocks(func::FuncOp function) {
  Block &body = function.getBody().front();
  UseOrder order(body);
  // (rank of the latest parameter, its block) of each value.
  DenseMap<Value, std::pair<int64_t, std::string>> origin;
  for (BlockArgument arg : body.getArguments()) {
    auto param =
        function.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), StepDialect::kParamAttrName);
    origin[arg] = param ? std::make_pair(order.firstComputingUse(arg), blockLabel(param.getBlock()))
                        : std::make_pair(int64_t(-1), std::string());
  }
  for (Operation &op : body) {
    std::pair<int64_t, std::string> from{-1, ""};
    for (Value operand : op.getOperands())
      if (auto it = origin.find(operand); it != origin.end() && it->second.first > from.first)
        from = it->second;
    for (Value result : op.getResults())
      origin[result] = from;
  }
  DenseMap<Value, std::string> blocks;
  for (auto &[value, from] : origin)
    blocks[value] = from.second;
  return blocks;
}
