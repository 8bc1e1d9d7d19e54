//===- OutlineBlocks.cpp - block runs and their functions, in the IR -----===//
//
// step-outline-blocks (OutlineBlocks.h): each planned step's ops grouped
// into block runs, outlined into functions shared by runs of equal
// structure; step-inline-blocks, its inverse. The emitters print what it
// decided (SourceEmitter.cpp).
//
//===----------------------------------------------------------------------===//

#include "stepc/Compiler/OutlineBlocks.h"
#include "stepc/Compiler/BlockCalls.h"
#include "LoweringUtils.h"
#include "StepInOrder.h"

#include "stepc/Analysis/StepStructure.h"
#include "stepc/Compiler/ArenaPlan.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

namespace stepc {
#define GEN_PASS_DEF_STEPOUTLINEBLOCKS
#define GEN_PASS_DEF_STEPINLINEBLOCKS
#include "stepc/Compiler/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

/// Adds to `gradients` the values each was communicated from: a sharded
/// step's gradient is a reduce-scatter's or all-reduce's result (scaled by
/// a constant, reshaped), and ddp's bucket concatenates every gradient
/// into one all-reduce whose slices are the gradients.
static void addCommunicatedFrom(DenseMap<Value, std::string> &gradients) {
  SmallVector<std::pair<Value, std::string>> work(gradients.begin(), gradients.end());
  auto add = [&](Value v, const std::string &block) {
    if (gradients.try_emplace(v, block).second)
      work.push_back({v, block});
  };
  while (!work.empty()) {
    auto [value, block] = work.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def)
      continue;
    if (isa<ReshapeOp, mesh::ReduceScatterOp, mesh::AllReduceOp>(def)) {
      add(def->getOperand(0), block);
    } else if (isa<MulOp>(def)) {
      // An average: the communicated sum times a constant.
      for (unsigned i = 0; i < 2; ++i)
        if (def->getOperand(1 - i).getDefiningOp<ConstantOp>())
          add(def->getOperand(i), block);
    } else if (auto slice = dyn_cast<SliceOp>(def)) {
      // A bucket's part: the concatenated input it was (same offset).
      Value whole = slice.getInput();
      while (Operation *through = whole.getDefiningOp()) {
        if (isa<mesh::AllReduceOp, ReshapeOp>(through))
          whole = through->getOperand(0);
        else if (isa<MulOp>(through) && through->getOperand(1).getDefiningOp<ConstantOp>())
          whole = through->getOperand(0);
        else
          break;
      }
      auto concat = whole.getDefiningOp<ConcatOp>();
      if (!concat || concat.getDim() != 0 || slice.getOffsets().size() != 1)
        continue;
      int64_t at = 0;
      for (Value part : concat.getInputs()) {
        int64_t size = cast<ShapedType>(part.getType()).getDimSize(0);
        if (slice.getOffsets()[0] >= at && slice.getOffsets()[0] < at + size) {
          add(part, block);
          break;
        }
        at += size;
      }
    }
  }
}

DenseMap<Value, std::string> stepc::computedForBlocks(func::FuncOp step) {
  DenseMap<Value, std::string> blockOf = attributeBlocks(step);
  // Walking back from the loss's gradient to the first block's.
  DenseMap<Value, std::string> gradients = parameterBlocks(step);
  addCommunicatedFrom(gradients);
  std::string next;
  for (Operation &o : llvm::reverse(step.getBody().front())) {
    std::optional<Phase> phase = getPhase(&o);
    if (phase != Phase::Backward && phase != Phase::Recompute)
      continue;
    for (Value r : o.getResults())
      if (auto it = gradients.find(r); it != gradients.end())
        next = it->second == "#" ? "" : it->second;
    for (Value r : o.getResults())
      blockOf[r] = next;
  }
  return blockOf;
}

DenseMap<Value, std::string> stepc::parameterBlocks(func::FuncOp step) {
  DenseMap<Value, std::string> blockOf;
  FailureOr<StepInOrder> view = StepInOrder::of(step);
  if (failed(view))
    return blockOf;
  // (A flat step's instances are its values.)
  for (auto &[instance, block] : parameterBlocks(step, *view))
    blockOf[instance.first] = block;
  return blockOf;
}

std::string stepc::blockOfOp(Operation *op, const DenseMap<Value, std::string> &parameterBlock) {
  // A multi-tensor kernel reads every block's.
  if (isa<stepk::AdamwGroupOp>(op) || isMultiTensorCall(op))
    return "";
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  for (Value v : values)
    if (auto it = parameterBlock.find(v); it != parameterBlock.end())
      return it->second;
  return "";
}

namespace {

/// The runs of `step`: consecutive ops computing for one block. An op
/// belongs to the block of the first value it reads or makes that is a
/// parameter's (its moments', its gradient's); an op of none joins the run
/// before it, unless it reads the step's arguments and nothing the run
/// made (the next micro-batch's input slices: inside, they made each
/// micro-batch's run a function of its own), and then so do the ops after
/// it only if an op of the run's block follows them. A multi-tensor update
/// reads every block's and joins too.
std::vector<std::vector<Operation *>> blockRuns(func::FuncOp step) {
  DenseMap<Value, std::string> parameterBlock = parameterBlocks(step);
  std::vector<std::vector<Operation *>> runs;
  DenseSet<Operation *> inRun;
  std::vector<Operation *> pending;
  std::string current;
  auto join = [&](Operation *op) {
    llvm::append_range(runs.back(), pending);
    inRun.insert(pending.begin(), pending.end());
    pending.clear();
    runs.back().push_back(op);
    inRun.insert(op);
  };
  for (Operation &op : step.getBody().front().without_terminator()) {
    std::string block = blockOfOp(&op, parameterBlock);
    if (block.empty()) {
      if (current.empty() || current == "#")
        continue;
      bool readsRun = llvm::any_of(
          op.getOperands(), [&](Value v) { return inRun.contains(v.getDefiningOp()); });
      bool readsArguments = llvm::any_of(op.getOperands(), [](Value v) {
        return isa<BlockArgument>(v);
      });
      if (pending.empty() && (readsRun || !readsArguments))
        join(&op);
      else
        pending.push_back(&op);
      continue;
    }
    if (block != current) {
      current = block;
      pending.clear();
      inRun.clear();
      if (block != "#")
        runs.emplace_back();
    }
    if (block != "#")
      join(&op);
  }
  return runs;
}

/// The structure of one run as text: equal text, equal code.
class RunStructure {
public:
  RunStructure(const MemoryPlan &plan, const DenseMap<Operation *, int64_t> &position)
      : plan(plan), position(position) {}

  std::string of(ArrayRef<Operation *> ops) {
    for (Operation *op : ops)
      print(op, /*topLevel=*/true);
    // Which stored values' storage overlaps (distinct addresses only: one
    // address is one slot already).
    for (size_t i = 0; i < stored.size(); ++i)
      for (size_t j = i + 1; j < stored.size(); ++j)
        if (slotOf[stored[i]] != slotOf[stored[j]] && overlaps(stored[i], stored[j]))
          os << " overlap(" << i << "," << j << ")";
    return text;
  }

private:
  /// Where a value is stored: "a<argument>" or "@<arena offset>"; none for
  /// a value no kernel writes (a fused op's inside, a folded broadcast).
  std::optional<std::string> address(Value v) {
    if (auto arg = plan.argumentOf.find(v); arg != plan.argumentOf.end())
      return "a" + std::to_string(arg->second);
    if (auto buffer = plan.bufferOf.find(v); buffer != plan.bufferOf.end())
      return "@" + std::to_string(plan.buffers[buffer->second].offset);
    return std::nullopt;
  }
  bool overlaps(Value a, Value b) {
    auto argA = plan.argumentOf.find(a), argB = plan.argumentOf.find(b);
    bool inArgA = argA != plan.argumentOf.end(), inArgB = argB != plan.argumentOf.end();
    if (inArgA || inArgB)
      return inArgA && inArgB && argA->second == argB->second;
    const MemoryPlan::Buffer &x = plan.buffers[plan.bufferOf.lookup(a)];
    const MemoryPlan::Buffer &y = plan.buffers[plan.bufferOf.lookup(b)];
    return !(x.offset + x.bytes <= y.offset || y.offset + y.bytes <= x.offset);
  }
  /// A value as the run sees it: made inside (i<k>) or the k-th from
  /// outside (x<k>), with its storage slot (s<k>, by address).
  void reference(Value v, bool topLevel) {
    if (auto it = internal.find(v); it != internal.end()) {
      os << "i" << it->second;
    } else {
      // The type too: it is the outlined function's argument's.
      auto [ext, inserted] = external.try_emplace(v, external.size());
      os << "x" << ext->second;
      if (inserted)
        os << ":" << v.getType();
    }
    if (topLevel)
      storage(v);
  }
  void storage(Value v) {
    std::optional<std::string> at = address(v);
    if (!at)
      return;
    auto [it, inserted] = slots.try_emplace(*at, slots.size());
    if (!slotOf.count(v)) {
      slotOf[v] = it->second;
      stored.push_back(v);
    }
    os << "s" << it->second;
  }
  void print(Operation *op, bool topLevel) {
    os << op->getName() << "(";
    for (Value operand : op->getOperands()) {
      reference(operand, topLevel);
      // A collective's result is waited for by its first reader.
      if (topLevel)
        if (Operation *def = operand.getDefiningOp(); def && communicates(def))
          os << (firstReader(operand) == op ? "w" : "");
      os << ",";
    }
    os << "){";
    for (NamedAttribute a : op->getAttrs()) {
      StringRef name = a.getName().getValue();
      if (name == StepDialect::kBufferAttrName || name == StepDialect::kInArgAttrName ||
          name == StepDialect::kBlockRunAttrName || name == StepDialect::kComputedForAttrName)
        continue;
      // A request slot is storage too: each run's its own, passed in.
      if (name == StepDialect::kRequestAttrName) {
        os << "request;";
        continue;
      }
      // So is a pipeline transfer's tag (each micro-batch's its own).
      if (name == StepDialect::kTransferAttrName) {
        os << "transfer;";
        continue;
      }
      os << name << "=" << a.getValue() << ";";
    }
    os << "}->(";
    for (Value r : op->getResults()) {
      internal.try_emplace(r, internal.size());
      os << r.getType() << " ";
      if (topLevel)
        storage(r);
      os << ",";
    }
    os << ")";
    for (Region &region : op->getRegions())
      for (Block &block : region) {
        os << "{";
        for (BlockArgument arg : block.getArguments()) {
          internal.try_emplace(arg, internal.size());
          os << arg.getType() << ",";
        }
        for (Operation &inner : block)
          print(&inner, /*topLevel=*/false);
        os << "}";
      }
    os << ";\n";
  }
  Operation *firstReader(Value v) {
    Operation *first = nullptr;
    for (Operation *user : v.getUsers())
      if (position.count(user) &&
          (!first || position.lookup(user) < position.lookup(first)))
        first = user;
    return first;
  }

  const MemoryPlan &plan;
  const DenseMap<Operation *, int64_t> &position;
  std::string text;
  llvm::raw_string_ostream os{text};
  DenseMap<Value, int64_t> internal, external;
  std::map<std::string, int64_t> slots;
  DenseMap<Value, int64_t> slotOf;
  SmallVector<Value> stored;
};

/// Whether `op` (or the op of `body` it is nested in) is outside `run`.
bool outside(Block &body, Operation *op, const DenseSet<Operation *> &run) {
  Operation *top = body.findAncestorOpInBlock(*op);
  return !top || !run.contains(top);
}

/// One run about to become a call: its ops, its function and the block it
/// computes for.
struct Run {
  std::vector<Operation *> ops;
  int64_t function;
  std::string block;
};

/// Marks each op of the flat step with the block its result is computed
/// for (step.computed_for), which only the flat step can tell.
void markComputedFor(func::FuncOp step) {
  DenseMap<Value, std::string> computedFor = computedForBlocks(step);
  Builder b(step.getContext());
  for (Operation &op : step.getBody().front()) {
    op.removeAttr(StepDialect::kComputedForAttrName);
    if (op.getNumResults() == 0)
      continue;
    std::string block = computedFor.lookup(op.getResult(0));
    if (!block.empty())
      op.setAttr(StepDialect::kComputedForAttrName, b.getStringAttr(block));
  }
}

/// The values `ops` read from outside them, in the order RunStructure
/// numbers them (x0, x1, ...): the call's operands.
SmallVector<Value> externalValues(Block &body, ArrayRef<Operation *> ops) {
  DenseSet<Operation *> inside(ops.begin(), ops.end());
  SmallVector<Value> externals;
  DenseSet<Value> seen;
  for (Operation *op : ops)
    op->walk<WalkOrder::PreOrder>([&](Operation *inner) {
      for (Value v : inner->getOperands()) {
        Operation *at = v.getDefiningOp() ? v.getDefiningOp() : v.getParentBlock()->getParentOp();
        if (outside(body, at, inside) && seen.insert(v).second)
          externals.push_back(v);
      }
    });
  return externals;
}

/// Whether `v` is read by an op outside `run`.
bool readOutside(Block &body, Value v, const DenseSet<Operation *> &run) {
  return llvm::any_of(v.getUsers(), [&](Operation *user) { return outside(body, user, run); });
}

/// The run's per-call attributes and locations, one dictionary per op.
ArrayAttr runPlan(Builder &b, ArrayRef<Operation *> ops) {
  SmallVector<Attribute> plan;
  for (Operation *op : ops) {
    SmallVector<NamedAttribute> fields;
    for (NamedAttribute a : op->getAttrs())
      if (isPerCallAttribute(a.getName().getValue()))
        fields.push_back(a);
    SmallVector<Attribute> locations;
    op->walk<WalkOrder::PreOrder>([&](Operation *inner) { locations.push_back(inner->getLoc()); });
    fields.push_back(b.getNamedAttr("loc", b.getArrayAttr(locations)));
    plan.push_back(b.getDictionaryAttr(fields));
  }
  return b.getArrayAttr(plan);
}

LogicalResult outlineBlocks(func::FuncOp step, SymbolTable &symbols) {
  for (auto call : step.getOps<func::CallOp>())
    if (auto callee = symbols.lookup<func::FuncOp>(call.getCallee()))
      if (callee->hasAttr(StepDialect::kBlockFunctionAttrName))
        return call.emitOpError() << "calls a block function: the step is outlined already "
                                     "(step-inline-blocks puts its calls back)";
  FailureOr<MemoryPlan> plan = readMemoryPlan(step);
  if (failed(plan))
    return failure();
  Block &body = step.getBody().front();
  DenseMap<Operation *, int64_t> position;
  for (Operation &op : body) {
    position[&op] = position.size();
    op.removeAttr(StepDialect::kBlockRunAttrName);
  }
  step->removeAttr(StepDialect::kBlockFunctionsAttrName);
  markComputedFor(step);
  DenseMap<Value, std::string> parameterBlock = parameterBlocks(step);
  std::map<std::string, int64_t> functionOf;
  std::vector<Run> runs;
  for (std::vector<Operation *> &ops : blockRuns(step)) {
    std::string structure = RunStructure(*plan, position).of(ops);
    int64_t function = functionOf.try_emplace(structure, functionOf.size()).first->second;
    std::string block = blockOfOp(ops.front(), parameterBlock);
    runs.push_back({std::move(ops), function, std::move(block)});
  }
  // A function returns each result some run of it has read after it.
  std::vector<std::set<std::pair<size_t, unsigned>>> returned(functionOf.size());
  for (const Run &run : runs) {
    DenseSet<Operation *> inside(run.ops.begin(), run.ops.end());
    for (auto [j, op] : llvm::enumerate(run.ops))
      for (OpResult r : op->getResults())
        if (readOutside(body, r, inside))
          returned[run.function].insert({j, r.getResultNumber()});
  }
  MLIRContext *context = step.getContext();
  OpBuilder b(context);
  std::vector<func::FuncOp> callees(functionOf.size());
  Operation *after = step;
  for (Run &run : runs) {
    auto results = [&](const std::vector<Operation *> &ops) {
      SmallVector<Value> values;
      for (auto [j, k] : returned[run.function])
        values.push_back(ops[j]->getResult(k));
      return values;
    };
    SmallVector<Value> outputs = results(run.ops);
    // Read now: an earlier run's call may have replaced what this one reads.
    SmallVector<Value> externals = externalValues(body, run.ops);
    func::FuncOp &callee = callees[run.function];
    if (!callee) {
      // The first run of a function is its body (the others equal it).
      auto type = FunctionType::get(context, ValueRange(externals).getTypes(),
                                    ValueRange(outputs).getTypes());
      b.setInsertionPointAfter(after);
      callee = b.create<func::FuncOp>(
          run.ops.front()->getLoc(),
          (step.getSymName() + "_block" + Twine(run.function)).str(), type);
      callee.setPrivate();
      callee->setAttr(StepDialect::kBlockFunctionAttrName, b.getI64IntegerAttr(run.function));
      symbols.insert(callee);
      after = callee;
      Block *entry = callee.addEntryBlock();
      IRMapping map;
      map.map(externals, entry->getArguments());
      b.setInsertionPointToEnd(entry);
      std::vector<Operation *> copies;
      for (Operation *op : run.ops) {
        Operation *copy = b.clone(*op, map);
        for (NamedAttribute a : op->getAttrs())
          if (isPerCallAttribute(a.getName().getValue()))
            copy->removeAttr(a.getName());
        copies.push_back(copy);
      }
      b.create<func::ReturnOp>(run.ops.back()->getLoc(), results(copies));
    }
    b.setInsertionPoint(run.ops.front());
    auto call = b.create<func::CallOp>(run.ops.front()->getLoc(), callee, externals);
    call->setAttr(StepDialect::kRunPlanAttrName, runPlan(b, run.ops));
    call->setAttr(StepDialect::kRunBlockAttrName, b.getStringAttr(run.block));
    DenseSet<Operation *> inside(run.ops.begin(), run.ops.end());
    for (auto [value, result] : llvm::zip_equal(outputs, call.getResults()))
      value.replaceUsesWithIf(
          result, [&](OpOperand &use) { return outside(body, use.getOwner(), inside); });
    for (Operation *op : llvm::reverse(run.ops))
      op->erase();
  }
  return success();
}

struct StepOutlineBlocksPass
    : public stepc::impl::StepOutlineBlocksBase<StepOutlineBlocksPass> {
  void runOnOperation() override {
    SymbolTable symbols(getOperation());
    SmallVector<func::FuncOp> steps;
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f->hasAttr(StepDialect::kTrainStepAttrName) ||
          f->hasAttr(StepDialect::kEvalStepAttrName) ||
          f->hasAttr(StepDialect::kSampleStepAttrName))
        steps.push_back(f);
    for (func::FuncOp step : steps)
      if (failed(outlineBlocks(step, symbols)))
        return signalPassFailure();
  }
};

} // namespace

LogicalResult stepc::inlineBlockFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> steps, callees;
  for (auto f : module.getOps<func::FuncOp>())
    (f->hasAttr(StepDialect::kBlockFunctionAttrName) ? callees : steps).push_back(f);
  Builder attrs(module.getContext());
  for (func::FuncOp step : steps) {
    if (step.isExternal())
      continue;
    Block &body = step.getBody().front();
    SmallVector<int64_t> functions;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      auto call = dyn_cast<func::CallOp>(op);
      func::FuncOp callee = call ? blockFunctionOf(call) : func::FuncOp();
      if (!callee)
        continue;
      // The callee's ops as this call runs them, cloned into the step.
      FailureOr<std::unique_ptr<RunPlanScope>> scope = RunPlanScope::apply(call, callee);
      if (failed(scope))
        return failure();
      Block &entry = callee.getBody().front();
      int64_t run = functions.size();
      IRMapping map;
      map.map(entry.getArguments(), call.getOperands());
      OpBuilder b(call);
      for (Operation &inner : entry.without_terminator())
        b.clone(inner, map)->setAttr(StepDialect::kBlockRunAttrName, attrs.getI64IntegerAttr(run));
      for (auto [result, returned] :
           llvm::zip_equal(call.getResults(), entry.getTerminator()->getOperands()))
        result.replaceAllUsesWith(map.lookup(returned));
      functions.push_back(
          callee->getAttrOfType<IntegerAttr>(StepDialect::kBlockFunctionAttrName).getInt());
      call.erase();
    }
    if (!functions.empty())
      step->setAttr(StepDialect::kBlockFunctionsAttrName, attrs.getDenseI64ArrayAttr(functions));
  }
  for (func::FuncOp callee : callees)
    callee.erase();
  return success();
}

namespace {
struct StepInlineBlocksPass : public stepc::impl::StepInlineBlocksBase<StepInlineBlocksPass> {
  void runOnOperation() override {
    if (failed(inlineBlockFunctions(getOperation())))
      signalPassFailure();
  }
};
} // namespace
