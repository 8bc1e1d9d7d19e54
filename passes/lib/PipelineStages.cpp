//===- PipelineStages.cpp - one pipeline rank's share of the gradient ------===//
//
// Pipeline parallelism cuts the model's layers into P stages, one per rank
// of the `pp` axis. This pass turns the micro-batched gradient function
// (step-micro-batch with `pipeline`: every op marked with its micro-batch
// and, for autodiff's ops, the forward op it copies or differentiates) into
// the gradient function of one stage:
//
// 1. Each parameter has a home stage: a block's parameters the stage of
//    their block (contiguous blocks per stage), the others the first stage
//    if the forward uses them before the first block (embeddings), else
//    the last (final norm, head).
// 2. Each op gets a stage. A forward op runs on the latest stage among
//    what it reads (a parameter at its home); an op reading no activation
//    (index and mask arithmetic, input slices, a view of a parameter) is
//    free: every stage that needs it computes it. A backward op runs where
//    the forward op it differentiates ran (a cotangent sum where the op
//    whose VJP made it ran), so gradients flow back through the stages.
// 3. This stage keeps its ops and the free ops they read. A value another
//    stage computes is received; a value of this stage another one reads is
//    sent right after it is computed (mesh.send / mesh.recv on the world
//    mesh's pipeline axis, each transfer tagged with its place in one
//    global order all stages compute alike, so any order of posting
//    matches). A parameter used on several stages (tied embedding and
//    head) is held by each: its gradient is summed at its home and sent to
//    the others, which are marked step.pp_replica so the clipping norm
//    counts it once.
// 4. The ops run in the order of the schedule's passes for this rank (F(m)
//    forward of micro-batch m, B(m) its backward), which the schedule
//    checker has proven free of deadlock; the loss, computed by the last
//    stage, is summed over the pipeline axis so every rank reports it.
//
// The loss function stays, whole, for the report's model FLOPs.
//
//===----------------------------------------------------------------------===//

#include "stepc/Compiler/PipelineSchedule.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/LossFunctions.h"
#include "stepc/Transforms/Passes.h"
#include "stepc/Analysis/StepStructure.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace stepc {
#define GEN_PASS_DEF_STEPPIPELINESTAGES
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

constexpr int kFree = -1;
constexpr llvm::StringLiteral kReplicaAttrName = "step.pp_replica";

/// A value computed on stage `from` and read on stage `to`.
struct Transfer {
  Value value;
  int from, to;
};

struct Partition {
  int stages = 1;
  DenseMap<Value, int> homeOf;         // parameter argument -> home stage
  DenseMap<Operation *, int> stageOf;  // op -> stage, or kFree
  DenseMap<Operation *, int64_t> position;
  // Per stage: the ops it runs, the parameters it holds, what it receives.
  std::vector<DenseSet<Operation *>> kept;
  std::vector<llvm::SetVector<Value>> held;
  std::vector<llvm::SetVector<Value>> received;
  std::vector<Transfer> transfers; // in tag order
};

bool isView(Operation *op) { return isa<ReshapeOp, ConvertOp, SliceOp, TransposeOp, BroadcastOp>(op); }

/// The home stage of each parameter: blocks cut into `stages` contiguous
/// runs (`firsts`: the first block of each stage after the first; empty:
/// as even as the count allows).
LogicalResult assignHomes(func::FuncOp grad, int stages, ArrayRef<int64_t> firsts, Partition &p) {
  SmallVector<BlockArgument> order = parametersInUseOrder(grad);
  int64_t blocks = 0, firstBlockUse = -1;
  for (auto [i, arg] : llvm::enumerate(order)) {
    auto param = grad.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), StepDialect::kParamAttrName);
    if (param.getBlock() >= 0) {
      blocks = std::max<int64_t>(blocks, param.getBlock() + 1);
      if (firstBlockUse < 0)
        firstBlockUse = i;
    }
  }
  if (blocks < stages)
    return grad.emitOpError() << "has " << blocks << " repeated block(s): a pipeline of "
                              << stages << " stages needs at least one block per stage";
  SmallVector<int64_t> starts{0};
  if (!firsts.empty()) {
    if (int64_t(firsts.size()) != stages - 1)
      return grad.emitOpError() << "--pp-stages names " << firsts.size()
                                << " stage starts; " << stages - 1 << " expected (the first "
                                << "block of each stage after the first)";
    for (int64_t f : firsts) {
      if (f <= starts.back() || f >= blocks)
        return grad.emitOpError() << "--pp-stages: stage starts must increase within blocks 1.."
                                  << blocks - 1 << ", got " << f;
      starts.push_back(f);
    }
  } else {
    for (int s = 1; s < stages; ++s)
      starts.push_back(s * blocks / stages);
  }
  auto stageOfBlock = [&](int64_t block) {
    int s = 0;
    while (s + 1 < stages && starts[s + 1] <= block)
      ++s;
    return s;
  };
  for (auto [i, arg] : llvm::enumerate(order)) {
    auto param = grad.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), StepDialect::kParamAttrName);
    p.homeOf[arg] = param.getBlock() >= 0             ? stageOfBlock(param.getBlock())
                    : int64_t(i) < firstBlockUse ? 0
                                                      : stages - 1;
  }
  return success();
}

/// The stage of every op of `body` (step 2 of the file comment).
void assignStages(Block &body, Partition &p) {
  DenseMap<int64_t, int> originStage;
  // A free op's parameters' latest home (a view or broadcast of a bias):
  // its VJP, the parameter's gradient, is computed there.
  DenseMap<Operation *, int> freeHome;
  DenseMap<int64_t, int> originFreeHome;
  auto stageOfValue = [&](Value v, bool countParams) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto it = p.homeOf.find(arg);
      return countParams && it != p.homeOf.end() ? it->second : kFree;
    }
    auto it = p.stageOf.find(v.getDefiningOp());
    return it != p.stageOf.end() ? it->second : kFree;
  };
  auto latest = [&](Operation *op, bool countParams) {
    int stage = kFree;
    for (Value v : op->getOperands())
      stage = std::max(stage, stageOfValue(v, countParams));
    return stage;
  };
  for (Operation &op : body.without_terminator()) {
    p.position[&op] = static_cast<int64_t>(p.position.size());
    auto origin = op.getAttrOfType<IntegerAttr>(kOriginAttrName);
    int stage;
    if (origin && getPhase(&op) == Phase::Backward) {
      auto it = originStage.find(origin.getInt());
      auto found = originFreeHome.find(origin.getInt());
      int home = found != originFreeHome.end() ? found->second : kFree;
      stage = it != originStage.end() && it->second != kFree ? it->second
              : home != kFree                                ? home
                                                             : latest(&op, false);
    } else {
      // A view of parameters alone (a transposed tied embedding) is free.
      bool readsActivation = llvm::any_of(op.getOperands(), [&](Value v) {
        return stageOfValue(v, false) != kFree;
      });
      stage = isView(&op) && !readsActivation ? kFree : latest(&op, true);
      if (stage == kFree) {
        int home = kFree;
        for (Value v : op.getOperands()) {
          if (auto arg = dyn_cast<BlockArgument>(v))
            home = std::max(home, p.homeOf.count(arg) ? p.homeOf.lookup(arg) : kFree);
          else if (auto it = freeHome.find(v.getDefiningOp()); it != freeHome.end())
            home = std::max(home, it->second);
        }
        freeHome[&op] = home;
      }
      if (origin) {
        originStage.try_emplace(origin.getInt(), stage);
        originFreeHome.try_emplace(origin.getInt(), stage == kFree ? freeHome[&op] : kFree);
      }
    }
    p.stageOf[&op] = stage;
  }
}

/// What each stage runs, holds and receives, and the transfers in tag
/// order (step 3).
void collectNeeds(func::FuncOp grad, Partition &p) {
  Block &body = grad.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // The gradient result of each parameter argument.
  DenseMap<Value, Value> gradientOf;
  unsigned result = 1;
  for (BlockArgument arg : body.getArguments())
    if (grad.getArgAttr(arg.getArgNumber(), StepDialect::kParamAttrName))
      gradientOf[arg] = ret.getOperand(result++);
  p.kept.assign(p.stages, {});
  p.held.assign(p.stages, {});
  p.received.assign(p.stages, {});
  for (int q = 0; q < p.stages; ++q) {
    SmallVector<Operation *> work;
    auto keep = [&](Operation *op) {
      if (p.kept[q].insert(op).second)
        work.push_back(op);
    };
    std::function<void(Value)> need = [&](Value v) {
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        if (p.homeOf.count(arg) && p.held[q].insert(arg))
          need(gradientOf.lookup(arg));
        return;
      }
      Operation *def = v.getDefiningOp();
      int stage = p.stageOf.lookup(def);
      if (stage == kFree || stage == q)
        keep(def);
      else
        p.received[q].insert(v);
    };
    for (Operation &op : body.without_terminator())
      if (p.stageOf[&op] == q)
        keep(&op);
    if (q == p.stages - 1)
      need(ret.getOperand(0));
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value v : op->getOperands())
        need(v);
    }
  }
  for (int q = 0; q < p.stages; ++q)
    for (Value v : p.received[q])
      p.transfers.push_back({v, p.stageOf.lookup(v.getDefiningOp()), q});
  llvm::stable_sort(p.transfers, [&](const Transfer &a, const Transfer &b) {
    int64_t pa = p.position.lookup(a.value.getDefiningOp()),
            pb = p.position.lookup(b.value.getDefiningOp());
    if (pa != pb)
      return pa < pb;
    unsigned ra = cast<OpResult>(a.value).getResultNumber(),
             rb = cast<OpResult>(b.value).getResultNumber();
    return ra != rb ? ra < rb : a.to < b.to;
  });
}

/// This rank's ops in the order of its schedule (step 4).
FailureOr<SmallVector<Operation *>> scheduleOps(func::FuncOp grad, const Partition &p, int stage,
                                                const pipeline::Schedule &schedule) {
  DenseMap<std::pair<int, int>, int64_t> passAt; // (backward?, micro-batch) -> position
  for (auto [i, pass] : llvm::enumerate(schedule.passes[stage]))
    passAt[{pass.kind != pipeline::PassKind::Forward, pass.microBatch}] = int64_t(i);
  Block &body = grad.getBody().front();
  int64_t firstMarked = -1;
  for (Operation &op : body.without_terminator())
    if (op.hasAttr(kMicroBatchAttrName)) {
      firstMarked = p.position.lookup(&op);
      break;
    }
  int64_t end = int64_t(schedule.passes[stage].size());
  SmallVector<std::pair<std::pair<int64_t, int64_t>, Operation *>> keyed;
  for (Operation &op : body.without_terminator()) {
    if (!p.kept[stage].contains(&op))
      continue;
    int64_t at = p.position.lookup(&op), key;
    if (auto m = op.getAttrOfType<IntegerAttr>(kMicroBatchAttrName)) {
      auto it = passAt.find({getPhase(&op) == Phase::Backward, int(m.getInt())});
      if (it == passAt.end())
        return op.emitOpError() << "micro-batch " << m.getInt()
                                << " has no pass on pipeline rank " << stage << " in schedule '"
                                << schedule.name << "'";
      key = it->second;
    } else {
      key = firstMarked >= 0 && at > firstMarked ? end : -1;
    }
    keyed.push_back({{key, at}, &op});
  }
  llvm::stable_sort(keyed, [](auto &a, auto &b) { return a.first < b.first; });
  return llvm::to_vector(llvm::map_range(keyed, [](auto &k) { return k.second; }));
}

/// Rebuilds `grad` as stage `stage`'s gradient function.
LogicalResult buildStage(func::FuncOp grad, Partition &p, int stage,
                         const pipeline::Schedule &schedule) {
  FailureOr<SmallVector<Operation *>> order = scheduleOps(grad, p, stage, schedule);
  if (failed(order))
    return failure();
  Block &body = grad.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  MLIRContext *context = grad.getContext();
  OpBuilder b(grad);
  Location loc = grad.getLoc();

  // Arguments: every non-parameter one, and the parameters this stage holds.
  SmallVector<unsigned> args;
  SmallVector<Type> argTypes;
  for (BlockArgument arg : body.getArguments())
    if (!p.homeOf.count(arg) || p.held[stage].contains(arg)) {
      args.push_back(arg.getArgNumber());
      argTypes.push_back(arg.getType());
    }
  // Results: the loss, then the held parameters' gradients.
  SmallVector<unsigned> results{0};
  unsigned r = 1;
  for (BlockArgument arg : body.getArguments())
    if (p.homeOf.count(arg)) {
      if (p.held[stage].contains(arg))
        results.push_back(r);
      ++r;
    }
  if (ret.getNumOperands() != r)
    return grad.emitOpError() << "returns outputs besides the loss: a pipeline cannot split "
                                 "them yet";
  SmallVector<Type> resultTypes;
  for (unsigned i : results)
    resultTypes.push_back(ret.getOperand(i).getType());

  auto staged = b.create<func::FuncOp>(loc, grad.getSymName(),
                                       b.getFunctionType(argTypes, resultTypes));
  for (NamedAttribute attr : grad->getDiscardableAttrs())
    staged->setAttr(attr.getName(), attr.getValue());
  // Each parameter's place among the model's (step-optimizer sums the
  // clipping norm's squares in that order).
  DenseMap<Value, int64_t> paramIndex;
  for (BlockArgument arg : body.getArguments())
    if (p.homeOf.count(arg))
      paramIndex[arg] = int64_t(paramIndex.size());
  staged->setAttr("step.pp_params", b.getI64IntegerAttr(int64_t(paramIndex.size())));
  for (auto [k, i] : llvm::enumerate(args)) {
    staged.setArgAttrs(k, grad.getArgAttrDict(i));
    BlockArgument arg = body.getArgument(i);
    if (!p.homeOf.count(arg))
      continue;
    staged.setArgAttr(k, "step.pp_index", b.getI64IntegerAttr(paramIndex.lookup(arg)));
    if (p.homeOf.lookup(arg) != stage)
      staged.setArgAttr(k, kReplicaAttrName, b.getUnitAttr());
  }
  for (auto [k, i] : llvm::enumerate(results))
    staged.setResultAttrs(k, grad.getResultAttrDict(i));
  Block *entry = staged.addEntryBlock();
  IRMapping map;
  for (auto [k, i] : llvm::enumerate(args))
    map.map(body.getArgument(i), entry->getArgument(k));
  b.setInsertionPointToEnd(entry);

  // Tags: a transfer's place in the global order.
  DenseMap<std::pair<Value, int>, int64_t> tagOf;
  DenseMap<Value, SmallVector<int>> sendsOf;
  for (auto [t, transfer] : llvm::enumerate(p.transfers)) {
    tagOf[{transfer.value, transfer.to}] = int64_t(t);
    if (transfer.from == stage)
      sendsOf[transfer.value].push_back(transfer.to);
  }
  SmallVector<mesh::MeshAxis> axisStorage{0};
  ArrayRef<mesh::MeshAxis> axis = axisStorage;
  auto mark = [&](Operation *op, Value v, int to) {
    setPhase(op, Phase::Collective);
    op->setAttr("step.transfer", b.getI64IntegerAttr(tagOf.lookup({v, to})));
  };
  auto receive = [&](Value v) {
    if (map.contains(v) || !p.received[stage].contains(v))
      return;
    auto type = cast<RankedTensorType>(v.getType());
    // mesh.recv names the buffer it receives into: a zero of the type.
    auto into = b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
    setPhase(into, Phase::Collective);
    int from = p.stageOf.lookup(v.getDefiningOp());
    auto recv = b.create<mesh::RecvOp>(loc, type, kWorldMeshName, axis, into.getResult(),
                                       b.getDenseI64ArrayAttr({from}), ValueRange{});
    mark(recv, v, stage);
    map.map(v, recv.getResult());
  };
  for (Operation *op : *order) {
    for (Value v : op->getOperands())
      receive(v);
    Operation *copy = b.clone(*op, map);
    copy->removeAttr(kOriginAttrName);
    copy->removeAttr(kMicroBatchAttrName);
    for (Value v : op->getResults())
      for (int to : sendsOf.lookup(v)) {
        auto send = b.create<mesh::SendOp>(loc, v.getType(), kWorldMeshName, axis, map.lookup(v),
                                           b.getDenseI64ArrayAttr({to}), ValueRange{});
        mark(send, v, to);
      }
  }
  SmallVector<Value> returned;
  for (unsigned i : results) {
    Value v = ret.getOperand(i);
    if (i == 0 && stage != p.stages - 1) {
      // Only the last stage has the loss: the others add zero.
      auto type = cast<RankedTensorType>(v.getType());
      auto zero = b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
      setPhase(zero, Phase::Backward);
      returned.push_back(zero);
      continue;
    }
    receive(v);
    returned.push_back(map.lookupOrDefault(v));
  }
  auto total = b.create<mesh::AllReduceOp>(loc, returned[0].getType(), kWorldMeshName, axis,
                                           returned[0], mesh::ReductionKind::Sum);
  setPhase(total, Phase::Collective);
  returned[0] = total.getResult();
  b.create<func::ReturnOp>(loc, returned);
  (void)context;
  grad.erase();
  return success();
}

struct StepPipelineStagesPass
    : public stepc::impl::StepPipelineStagesBase<StepPipelineStagesPass> {
  using StepPipelineStagesBase::StepPipelineStagesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages < 2 || stage < 0 || stage >= stages) {
      emitError(module.getLoc()) << "step-pipeline-stages needs stages >= 2 and 0 <= stage < "
                                    "stages, got stages="
                                 << stages.getValue() << " stage=" << stage.getValue();
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> grads, losses;
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f->hasAttr(StepDialect::kGradientAttrName))
        grads.push_back(f);
      if (f->hasAttr(StepDialect::kLossAttrName))
        losses.push_back(f);
    }
    if (grads.size() != 1) {
      emitError(module.getLoc()) << "step-pipeline-stages expects one gradient function, found "
                                 << grads.size();
      return signalPassFailure();
    }
    func::FuncOp grad = grads.front();
    int64_t micro = 0;
    grad.walk([&](Operation *op) {
      if (auto m = op->getAttrOfType<IntegerAttr>(kMicroBatchAttrName))
        micro = std::max(micro, m.getInt() + 1);
    });
    if (micro == 0) {
      grad.emitOpError() << "has no micro-batch marks: step-pipeline-stages runs after "
                            "step-micro-batch{pipeline=true}";
      return signalPassFailure();
    }
    pipeline::Schedule schedule;
    std::string error;
    std::vector<pipeline::ChunkCost> costs(stages);
    if (!pipeline::buildSchedule(scheduleName, stages, int(micro), costs, schedule, error)) {
      grad.emitOpError() << "pipeline schedule: " << error;
      return signalPassFailure();
    }
    bool split = llvm::any_of(schedule.passes, [](auto &passes) {
      return llvm::any_of(passes, [](const pipeline::Pass &pass) {
        return pass.kind == pipeline::PassKind::BackwardInput ||
               pass.kind == pipeline::PassKind::BackwardWeight;
      });
    });
    if (schedule.chunksPerRank != 1 || split) {
      grad.emitOpError() << "schedule '" << scheduleName.getValue()
                         << "' is built and checked (stepc-pipeline) but not yet executed: "
                            "gpipe and 1f1b run";
      return signalPassFailure();
    }
    pipeline::Timing timing;
    if (!pipeline::checkAndTime(schedule, costs, 0.0, timing, error)) {
      grad.emitOpError() << "pipeline schedule: " << error;
      return signalPassFailure();
    }
    Partition p;
    p.stages = int(stages);
    if (failed(assignHomes(grad, p.stages, firsts, p)))
      return signalPassFailure();
    assignStages(grad.getBody().front(), p);
    collectNeeds(grad, p);
    if (failed(buildStage(grad, p, int(stage), schedule)))
      return signalPassFailure();
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToStart(module.getBody());
    if (!module.lookupSymbol(kWorldMeshName)) {
      auto mesh = b.create<mesh::MeshOp>(module.getLoc(), kWorldMeshName,
                                         ArrayRef<int64_t>{stages.getValue()});
      // The runtime reads the stage count off the mesh.
      mesh->setAttr("step.pp_axis", b.getI64IntegerAttr(0));
    }
  }
};

} // namespace
