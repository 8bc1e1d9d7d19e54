//===- StepStructure.cpp - which repeated block each value belongs to ----===//

#include "stepc/Analysis/StepStructure.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "llvm/ADT/StringExtras.h"

#include <functional>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

std::string stepc::blockOfParameter(StringRef name) {
  for (StringRef prefix : {"h.", "layers."}) {
    if (!name.starts_with(prefix))
      continue;
    StringRef rest = name.drop_front(prefix.size());
    StringRef index = rest.take_front(rest.find('.'));
    if (!index.empty() && llvm::all_of(index, [](char c) { return llvm::isDigit(c); }))
      return (prefix + index).str();
  }
  return "";
}

DenseMap<Value, std::string> stepc::attributeBlocks(func::FuncOp function) {
  Block &body = function.getBody().front();
  DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : body)
    index[&op] = n++;
  std::function<int64_t(Value)> firstComputingUse = [&](Value v) {
    int64_t first = n;
    for (Operation *user : v.getUsers()) {
      if (getPhase(user) == Phase::Collective || isa<ConvertOp, ReshapeOp, SliceOp>(user))
        for (Value r : user->getResults())
          first = std::min(first, firstComputingUse(r));
      else if (!isa<func::ReturnOp>(user))
        first = std::min(first, index[user]);
    }
    return first;
  };
  // (rank of the latest parameter, its block) of each value.
  DenseMap<Value, std::pair<int64_t, std::string>> origin;
  for (BlockArgument arg : body.getArguments()) {
    auto param =
        function.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), StepDialect::kParamAttrName);
    origin[arg] = param ? std::make_pair(firstComputingUse(arg), blockOfParameter(param.getName()))
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
