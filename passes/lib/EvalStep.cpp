//===- EvalStep.cpp - the forward-only step (step-eval-step) --------------===//
//
// eval_step(args...) = loss(train_step(args...)): a copy of the training
// step that keeps only the ops its loss depends on. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

#include <map>

namespace stepc {
#define GEN_PASS_DEF_STEPEVALSTEP
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The index of the training step's loss result.
std::optional<unsigned> lossResult(func::FuncOp step) { return findResult(step, Role::Loss); }

/// The ops `loss` depends on.
llvm::SetVector<Operation *> sliceOf(Value loss) {
  llvm::SetVector<Operation *> seen;
  SmallVector<Value> work{loss};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def))
      continue;
    llvm::append_range(work, def->getOperands());
  }
  return seen;
}

/// Under step-micro-batch, one cross-entropy per micro-batch, each of the
/// rows [k·r, (k+1)·r) of one input's targets (a slice of it): their logits
/// joined along the rows in that order, the batch's logits (built before
/// `at`). Null unless the slices cover the input's rows once each.
Value joinedLogits(ArrayRef<CrossEntropyOp> found, Operation *at) {
  Value whole;
  int64_t rows = 0;
  std::map<int64_t, Value> parts; // by first row
  for (CrossEntropyOp ce : found) {
    auto slice = ce.getTargets().getDefiningOp<SliceOp>();
    if (!slice || !isa<BlockArgument>(slice.getInput()) ||
        (whole && slice.getInput() != whole))
      return Value();
    whole = slice.getInput();
    auto type = cast<RankedTensorType>(whole.getType());
    ArrayRef<int64_t> offsets = slice.getOffsets(), sizes = slice.getSizes();
    for (int64_t d = 1; d < type.getRank(); ++d)
      if (offsets[d] != 0 || sizes[d] != type.getDimSize(d))
        return Value();
    if ((rows && sizes[0] != rows) || !parts.emplace(offsets[0], ce.getLogits()).second)
      return Value();
    rows = sizes[0];
  }
  auto type = cast<RankedTensorType>(whole.getType());
  if (rows * int64_t(parts.size()) != type.getDimSize(0) ||
      parts.rbegin()->first != rows * (int64_t(parts.size()) - 1))
    return Value();
  SmallVector<Value> inOrder;
  for (auto &[first, logits] : parts)
    inOrder.push_back(logits);
  OpBuilder b(at);
  auto joined = b.create<ConcatOp>(at->getLoc(), inOrder, b.getI64IntegerAttr(0));
  setPhase(joined, Phase::Forward);
  return joined;
}

/// The logits of the loss's cross-entropy, if they are f32: the one
/// cross-entropy's, or the micro-batches' joined (joinedLogits, built
/// before `at`); null if there is none, or several of another kind.
Value lossLogits(Value loss, Operation *at) {
  SmallVector<CrossEntropyOp> found;
  for (Operation *op : sliceOf(loss))
    if (auto ce = dyn_cast<CrossEntropyOp>(op))
      found.push_back(ce);
  if (found.empty() || llvm::any_of(found, [](CrossEntropyOp ce) {
        return !ce.getLogits().getType().getElementType().isF32();
      }))
    return Value();
  return found.size() == 1 ? found[0].getLogits() : joinedLogits(found, at);
}

/// The logits of a vocabulary-parallel cross-entropy (step-shard-tensor):
/// this rank's part, split along the last dimension; null if none.
Operation *vocabLogits(Value loss) {
  SmallVector<Operation *> found;
  for (Operation *op : sliceOf(loss))
    if (op->hasAttr(StepDialect::kVocabLogitsAttrName))
      found.push_back(op);
  return found.size() == 1 ? found[0] : nullptr;
}

/// Every rank's part of split logits [..., V/M], gathered into [..., V]:
/// the vocabulary moved outermost (the collectives concatenate along
/// dimension 0), gathered, moved back. In f32: a bf16 part (a GEMM's
/// result under step-mixed-precision) is widened first, so the eval step's
/// logits are f32 whatever the precision.
Value gatherVocabulary(OpBuilder &b, Location loc, Operation *part) {
  Value local = part->getResult(0);
  auto type = cast<RankedTensorType>(local.getType());
  if (!type.getElementType().isF32()) {
    type = type.clone(b.getF32Type());
    local = b.create<ConvertOp>(loc, type, local);
  }
  auto axis = static_cast<mesh::MeshAxis>(
      part->getAttrOfType<IntegerAttr>(StepDialect::kVocabLogitsAttrName).getInt());
  auto mesh = SymbolTable::lookupNearestSymbolFrom<mesh::MeshOp>(
      part, FlatSymbolRefAttr::get(b.getContext(), kWorldMeshName));
  int64_t rank = type.getRank(), ranks = mesh ? mesh.getShape()[axis] : 1;
  SmallVector<int64_t> out{rank - 1}, back;
  for (int64_t d = 0; d + 1 < rank; ++d)
    out.push_back(d);
  for (int64_t d = 1; d < rank; ++d)
    back.push_back(d);
  back.push_back(0);
  Value outer = b.create<TransposeOp>(loc, local, b.getDenseI64ArrayAttr(out));
  auto outerType = cast<RankedTensorType>(outer.getType());
  SmallVector<int64_t> whole(outerType.getShape());
  whole[0] *= ranks;
  Value all = b.create<mesh::AllGatherOp>(
      loc, RankedTensorType::get(whole, type.getElementType()), kWorldMeshName,
      ArrayRef<mesh::MeshAxis>{axis}, outer, APInt(64, 0));
  return b.create<TransposeOp>(loc, all, b.getDenseI64ArrayAttr(back));
}

struct StepEvalStepPass : public stepc::impl::StepEvalStepBase<StepEvalStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> steps;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(StepDialect::kTrainStepAttrName))
        steps.push_back(f);
    for (func::FuncOp step : steps) {
      std::optional<unsigned> loss = lossResult(step);
      if (!loss) {
        step.emitOpError() << "has no result named 'loss' to evaluate";
        return signalPassFailure();
      }
      auto eval = cast<func::FuncOp>(step->clone());
      StringRef base = step.getSymName();
      base.consume_back("_train_step");
      eval.setSymName((base + "_eval_step").str());
      eval->removeAttr(StepDialect::kTrainStepAttrName);
      eval->removeAttr(StepDialect::kRematAttrName);
      eval->setAttr(StepDialect::kEvalStepAttrName, UnitAttr::get(&getContext()));
      symbols.insert(eval, std::next(Block::iterator(step)));

      // Evaluation drops nothing: each dropout is its input (and falls
      // out of the slice below).
      eval.walk([](DropoutOp d) { d.getResult().replaceAllUsesWith(d.getInput()); });

      // The new return: the loss, and the logits when the loss is one f32
      // cross-entropy's (what a sampler reads).
      Block &body = eval.getBody().front();
      auto ret = cast<func::ReturnOp>(body.getTerminator());
      Value lossValue = ret.getOperand(*loss);
      OpBuilder b(ret);
      SmallVector<Value> results{lossValue};
      SmallVector<DictionaryAttr> resultAttrs{
          resultRoleDict(ResultAttr::get(b.getContext(), Role::Loss))};
      Value logits = lossLogits(lossValue, ret);
      // Under tensor parallelism, every rank's part of them, gathered.
      if (Operation *part = logits ? nullptr : vocabLogits(lossValue)) {
        logits = gatherVocabulary(b, part->getLoc(), part);
        setMissingPhases(body, Phase::Forward);
      }
      if (logits) {
        results.push_back(logits);
        resultAttrs.push_back(resultRoleDict(ResultAttr::get(b.getContext(), Role::Logits)));
      }
      // The loss function's own outputs, as they are.
      for (unsigned i = 0, e = step.getNumResults(); i < e; ++i)
        if (ResultAttr role = getResultRole(step, i); role && role.getRole() == Role::Output) {
          results.push_back(ret.getOperand(i));
          resultAttrs.push_back(resultRoleDict(role));
        }
      b.create<func::ReturnOp>(ret.getLoc(), results);
      ret.erase();
      eval.setFunctionType(FunctionType::get(&getContext(), eval.getArgumentTypes(),
                                             ValueRange(results).getTypes()));
      eval.setAllResultAttrs(resultAttrs);

      // The backward slice of the results; everything else goes, users first.
      llvm::SetVector<Operation *> slice;
      SmallVector<Value> work(results);
      // A pipeline stage's forward sends feed the later stages' loss.
      for (auto send : body.getOps<mesh::SendOp>())
        if (Operation *def = send.getInput().getDefiningOp();
            def && getPhase(def) == Phase::Forward)
          work.push_back(send.getResult());
      while (!work.empty()) {
        Operation *def = work.pop_back_val().getDefiningOp();
        if (!def || !slice.insert(def))
          continue;
        llvm::append_range(work, def->getOperands());
      }
      SmallVector<Operation *> dead;
      for (Operation &op : body.without_terminator())
        if (!slice.contains(&op))
          dead.push_back(&op);
      for (Operation *op : llvm::reverse(dead)) {
        if (!op->use_empty()) {
          op->emitOpError() << "is outside the loss's slice but still used (step-eval-step)";
          return signalPassFailure();
        }
        op->erase();
      }
    }
  }
};

} // namespace
