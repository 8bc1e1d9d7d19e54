//===- DeriveBlocks.cpp - mark a model's repeated blocks from its IR ------===//
//
// A front end that knows a model's layers marks their parameters with
// `block N` (#step.param). When none did (a hand-written model), the blocks
// are read off the IR: parameters, in the order the forward first computes
// with them, get a signature (type, and how each user reads them); the
// longest stretch of that sequence made of one pattern repeated at least
// twice is the layer stack, one block per repetition. Names never matter.
//
//===----------------------------------------------------------------------===//

#include "stepc/Analysis/StepStructure.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

namespace stepc {
#define GEN_PASS_DEF_STEPDERIVEBLOCKS
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// How `param` is read: its type and, per user (through views), the user's
/// op name, operand position, attributes and result types.
std::string signatureOf(Value param) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << param.getType();
  SmallVector<std::string> uses;
  for (OpOperand &use : param.getUses()) {
    Operation *user = use.getOwner();
    std::string u;
    llvm::raw_string_ostream us(u);
    us << user->getName() << "#" << use.getOperandNumber();
    for (NamedAttribute a : user->getAttrs())
      if (a.getName() != StepDialect::kPhaseAttrName)
        us << " " << a.getName().getValue() << "=" << a.getValue();
    for (Type t : user->getResultTypes())
      us << ":" << t;
    if (isa<ConvertOp, ReshapeOp, SliceOp>(user))
      us << "(" << signatureOf(user->getResult(0)) << ")";
    uses.push_back(u);
  }
  llvm::sort(uses);
  for (const std::string &u : uses)
    os << "|" << u;
  return text;
}

/// The repeated stretch of `ids`: (start, period, count) with count >= 2
/// covering the most elements (then the shortest period, then the
/// earliest start); count 0 when nothing repeats. O(n²) over n parameters.
struct Repetition {
  size_t start = 0, period = 0, count = 0;
};
Repetition longestRepetition(ArrayRef<unsigned> ids) {
  Repetition best;
  size_t n = ids.size();
  for (size_t p = 1; 2 * p <= n; ++p) {
    // Runs where ids[i] == ids[i + p]: a run of length r from s is
    // 1 + r / p repetitions of ids[s, s + p).
    size_t run = 0;
    for (size_t i = 0; i + p <= n; ++i) {
      bool same = i + p < n && ids[i] == ids[i + p];
      if (same) {
        ++run;
        continue;
      }
      size_t count = 1 + run / p;
      if (count >= 2 && count * p > best.count * best.period)
        best = {i - run, p, count};
      run = 0;
    }
  }
  return best;
}

struct StepDeriveBlocksPass : public stepc::impl::StepDeriveBlocksBase<StepDeriveBlocksPass> {
  void runOnOperation() override {
    for (auto loss : getOperation().getOps<func::FuncOp>()) {
      if (!loss->hasAttr(StepDialect::kLossAttrName) || loss.isExternal())
        continue;
      auto paramOf = [&](BlockArgument arg) {
        return loss.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), StepDialect::kParamAttrName);
      };
      SmallVector<BlockArgument> params = parametersInUseOrder(loss);
      if (llvm::any_of(params, [&](BlockArgument a) { return paramOf(a).hasBlock(); }))
        continue;  // the front end's markers stand
      llvm::StringMap<unsigned> interned;
      SmallVector<unsigned> ids;
      for (BlockArgument arg : params)
        ids.push_back(interned.try_emplace(signatureOf(arg), interned.size()).first->second);
      Repetition r = longestRepetition(ids);
      for (size_t k = 0; k < r.count; ++k)
        for (size_t j = 0; j < r.period; ++j) {
          BlockArgument arg = params[r.start + k * r.period + j];
          loss.setArgAttr(arg.getArgNumber(), StepDialect::kParamAttrName,
                          paramOf(arg).withBlock(int64_t(k)));
        }
    }
  }
};

} // namespace
