//===- PipelineStages.cpp - one pipeline rank's share of the gradient ------===//
//
// Pipeline parallelism cuts the model's layers into P stages, one per rank
// of the `pp` axis. This pass turns the micro-batched gradient function
// (step-micro-batch with `pipeline`: every op marked with its micro-batch
// and, for autodiff's ops, the forward op it copies or differentiates) into
// one gradient function per stage, each in its own module nested in the
// model's (`module @stage<r> attributes {step.pp_stage = r}`), so that one
// module holds the whole pipeline and the passes after run on each stage:
//
// 1. Each parameter has a home stage: a block's parameters the stage of
//    their block (contiguous blocks per stage, cut to balance the blocks'
//    predicted time unless given; interleaved:V cuts P·V chunks, chunk c
//    on rank c mod P), the others the first stage if the forward uses them
//    before the first block (embeddings), else the last (final norm, head).
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
//    forward of micro-batch m, B(m) its backward, or BI(m)/BW(m) when the
//    schedule splits it), which the schedule checker has proven free of
//    deadlock; the loss, computed by the last stage, is summed over the
//    pipeline axis so every rank reports it. Each parameter's place in the
//    model (step.pp_index) lets step-optimizer sum the clipping norm's
//    squares in one rank's order.
//
// The loss function stays, whole, for the report's model FLOPs.
//
//===----------------------------------------------------------------------===//

#include "stepc/Transforms/PipelineSchedule.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/LossFunctions.h"
#include "stepc/Transforms/Passes.h"
#include "stepc/Analysis/FlopCount.h"
#include "stepc/Analysis/StepStructure.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <tuple>

namespace stepc {
#define GEN_PASS_DEF_STEPPIPELINESTAGES
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

constexpr int kFree = -1;

/// A value computed on rank `from` and read on rank `to`.
struct Transfer {
  Value value;
  int from, to;
};

/// Stages are the schedule's chunks: P·v of them, chunk c on rank c mod P
/// (v > 1: interleaved); "stage" below is a chunk.
struct Partition {
  int stages = 1, ranks = 1;
  /// The world mesh's axis along which the stages lie (after the data
  /// axes, before tp).
  mesh::MeshAxis axis = 0;
  int rankOf(int chunk) const { return chunk % ranks; }
  DenseMap<Value, int> homeOf;         // parameter argument -> home stage
  DenseMap<Operation *, int> stageOf;  // op -> stage, or kFree
  DenseMap<Operation *, int64_t> position;
  // Per rank: the ops it runs, the parameters it holds, what it receives.
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
    auto origin = op.getAttrOfType<IntegerAttr>(StepDialect::kOriginAttrName);
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

/// A parameter used on several stages (a tied embedding and head) has its
/// uses' cotangents summed over the micro-batches by each use's stage and
/// added after the last one (step-micro-batch): those joins, and the mean
/// after them, run at the parameter's home, which ends the step there
/// without waiting for its sum to go and come back.
void joinGradientsAtHome(func::FuncOp grad, Partition &p) {
  Block &body = grad.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  unsigned result = 1;
  for (BlockArgument arg : body.getArguments()) {
    if (!getTrainedParam(grad, arg.getArgNumber()))
      continue;
    Value gradient = ret.getOperand(result++);
    if (!p.homeOf.count(arg))
      continue;
    SmallVector<Operation *> joins;
    std::function<void(Value)> collect = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def || !def->hasOneUse() || def->hasAttr(StepDialect::kMicroBatchAttrName) ||
          !isa<AddOp, MulOp>(def))
        return;
      joins.push_back(def);
      if (isa<AddOp>(def))
        collect(def->getOperand(0)), collect(def->getOperand(1));
      else
        collect(def->getOperand(0));
    };
    collect(gradient);
    int home = p.homeOf.lookup(arg);
    bool crosses = llvm::any_of(joins, [&](Operation *join) {
      return llvm::any_of(join->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        int stage = def ? p.stageOf.lookup(def) : kFree;
        return stage != kFree && p.rankOf(stage) != p.rankOf(home);
      });
    });
    if (crosses)
      for (Operation *join : joins)
        p.stageOf[join] = home;
  }
}

/// Whether result `i` of `grad` is one of the loss function's metrics.
bool isMetric(func::FuncOp grad, unsigned i) { return hasResultRole(grad, i, Role::Metric); }

/// The rank that computes metric `v`: its op's stage (the last stage's
/// for a value no stage owns).
int metricRank(const Partition &p, Value v) {
  Operation *def = v.getDefiningOp();
  int stage = def ? p.stageOf.lookup(def) : kFree;
  return p.rankOf(stage == kFree ? p.stages - 1 : stage);
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
    if (getTrainedParam(grad, arg.getArgNumber()))
      gradientOf[arg] = ret.getOperand(result++);
  p.kept.assign(p.ranks, {});
  p.held.assign(p.ranks, {});
  p.received.assign(p.ranks, {});
  for (int q = 0; q < p.ranks; ++q) {
    SmallVector<Operation *> work;
    auto keep = [&](Operation *op) {
      if (p.kept[q].insert(op).second)
        work.push_back(op);
    };
    std::function<void(Value)> need = [&](Value v) {
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        if (p.homeOf.count(arg) && p.held[q].insert(arg))
          if (Value gradient = gradientOf.lookup(arg)) // none if frozen
            need(gradient);
        return;
      }
      Operation *def = v.getDefiningOp();
      int stage = p.stageOf.lookup(def);
      if (stage == kFree || p.rankOf(stage) == q)
        keep(def);
      else
        p.received[q].insert(v);
    };
    for (Operation &op : body.without_terminator())
      if (p.stageOf[&op] != kFree && p.rankOf(p.stageOf[&op]) == q)
        keep(&op);
    if (q == p.rankOf(p.stages - 1))
      need(ret.getOperand(0));
    for (unsigned i = 1, e = ret.getNumOperands(); i < e; ++i)
      if (isMetric(grad, i) && metricRank(p, ret.getOperand(i)) == q)
        need(ret.getOperand(i));
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value v : op->getOperands())
        need(v);
    }
  }
  for (int q = 0; q < p.ranks; ++q)
    for (Value v : p.received[q])
      p.transfers.push_back({v, p.rankOf(p.stageOf.lookup(v.getDefiningOp())), q});
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

/// The pass each backward op of a split schedule (zero-bubble) belongs to:
/// the input gradient (BI) is what the previous stage waits for, every op
/// of (micro-batch, stage) from which a value another stage reads is
/// computed; the rest, the weight gradient (BW), waits.
DenseSet<Operation *> inputGradientOps(Block &body, const Partition &p) {
  DenseSet<Operation *> input;
  SmallVector<Operation *> work;
  auto group = [&](Operation *op) {
    auto m = op->getAttrOfType<IntegerAttr>(StepDialect::kMicroBatchAttrName);
    return std::make_pair(m ? m.getInt() : -1, p.stageOf.lookup(op));
  };
  for (Operation &op : body.without_terminator()) {
    if (getPhase(&op) != Phase::Backward || p.stageOf.lookup(&op) == kFree)
      continue;
    bool leaves = llvm::any_of(op.getUsers(), [&](Operation *user) {
      int s = p.stageOf.lookup(user);
      return !isa<func::ReturnOp>(user) && s != kFree && s != p.stageOf.lookup(&op);
    });
    if (leaves && input.insert(&op).second)
      work.push_back(&op);
  }
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && getPhase(def) == Phase::Backward && group(def) == group(op) &&
          input.insert(def).second)
        work.push_back(def);
  }
  return input;
}

/// This rank's ops in the order of its schedule (step 4): a stage's op in
/// its pass (F, B, or BI/BW when split), a free op with its first reader.
FailureOr<SmallVector<Operation *>> scheduleOps(func::FuncOp grad, const Partition &p, int stage,
                                                const pipeline::Schedule &schedule) {
  // (kind, micro-batch, chunk) -> position in this rank's list.
  std::map<std::tuple<int, int, int>, int64_t> passAt;
  bool split = false;
  for (auto [i, pass] : llvm::enumerate(schedule.passes[stage])) {
    passAt[{int(pass.kind), pass.microBatch, pass.chunk}] = int64_t(i);
    split |= pass.kind == pipeline::PassKind::BackwardInput;
  }
  Block &body = grad.getBody().front();
  DenseSet<Operation *> inputGradient;
  if (split)
    inputGradient = inputGradientOps(body, p);
  int64_t firstMarked = -1;
  for (Operation &op : body.without_terminator())
    if (op.hasAttr(StepDialect::kMicroBatchAttrName)) {
      firstMarked = p.position.lookup(&op);
      break;
    }
  int64_t end = int64_t(schedule.passes[stage].size());
  DenseMap<Operation *, int64_t> keyOf;
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (p.kept[stage].contains(&op))
      ops.push_back(&op);
  // Users before the ops they read: a free op takes its first reader's key.
  for (Operation *op : llvm::reverse(ops)) {
    int64_t at = p.position.lookup(op), key;
    int chunk = p.stageOf.lookup(op);
    auto m = op->getAttrOfType<IntegerAttr>(StepDialect::kMicroBatchAttrName);
    if (chunk == kFree) {
      key = end + 1;
      for (Operation *user : op->getUsers())
        if (auto it = keyOf.find(user); it != keyOf.end())
          key = std::min(key, it->second);
      if (key == end + 1)
        key = firstMarked >= 0 && at > firstMarked ? end : -1;
    } else if (m) {
      pipeline::PassKind kind = getPhase(op) != Phase::Backward ? pipeline::PassKind::Forward
                                : !split                       ? pipeline::PassKind::Backward
                                : inputGradient.contains(op)   ? pipeline::PassKind::BackwardInput
                                                        : pipeline::PassKind::BackwardWeight;
      auto it = passAt.find({int(kind), int(m.getInt()), chunk});
      if (it == passAt.end())
        return op->emitOpError() << "micro-batch " << m.getInt() << " of stage " << chunk
                                 << " has no pass on pipeline rank " << stage
                                 << " in schedule '" << schedule.name << "'";
      key = it->second;
    } else {
      key = firstMarked >= 0 && at > firstMarked ? end : -1;
    }
    keyOf[op] = key;
  }
  SmallVector<std::pair<std::pair<int64_t, int64_t>, Operation *>> keyed;
  for (Operation *op : ops)
    keyed.push_back({{keyOf.lookup(op), p.position.lookup(op)}, op});
  llvm::stable_sort(keyed, [](auto &a, auto &b) { return a.first < b.first; });
  return llvm::to_vector(llvm::map_range(keyed, [](auto &k) { return k.second; }));
}

/// The order in which rank `rank` receives the values it receives: by its
/// first read in the rank's schedule (buildStage places each receive
/// there), the values it returns (gradients summed at their home) after
/// them in result order.
FailureOr<DenseMap<Value, int64_t>> receiveOrder(func::FuncOp grad, const Partition &p, int rank,
                                                 const pipeline::Schedule &schedule) {
  FailureOr<SmallVector<Operation *>> order = scheduleOps(grad, p, rank, schedule);
  if (failed(order))
    return failure();
  DenseMap<Value, int64_t> at;
  int64_t next = 0;
  for (Operation *op : *order)
    for (Value v : op->getOperands())
      if (p.received[rank].contains(v))
        at.try_emplace(v, next++);
  auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
  for (Value v : ret.getOperands())
    if (p.received[rank].contains(v))
      at.try_emplace(v, next++);
  return at;
}

/// Rebuilds a gradient function as one pipeline stage's: its arguments
/// (every non-parameter one and the parameters the stage holds), its ops in
/// the schedule's order with the transfers between stages, and its results
/// (the loss and metrics summed over the stages, its parameters' gradients).
class StageBuilder {
public:
  StageBuilder(func::FuncOp grad, Partition &p, int stage, const pipeline::Schedule &schedule)
      : grad(grad), p(p), stage(stage), schedule(schedule), body(grad.getBody().front()),
        ret(cast<func::ReturnOp>(body.getTerminator())), b(grad), loc(grad.getLoc()),
        axisStorage{p.axis} {}

  LogicalResult build() {
    FailureOr<SmallVector<Operation *>> order = scheduleOps(grad, p, stage, schedule);
    if (failed(order) || failed(selectSignature()))
      return failure();
    declare();
    if (failed(orderSends()))
      return failure();
    for (Operation *op : *order) {
      for (Value v : op->getOperands())
        receive(v);
      Operation *copy = b.clone(*op, map);
      copy->removeAttr(StepDialect::kOriginAttrName);
      copy->removeAttr(StepDialect::kMicroBatchAttrName);
      for (Value v : op->getResults())
        for (int to : sendsOf.lookup(v))
          sendReady(to);
    }
    for (auto &[to, values] : sendOrder)
      if (sentUpTo[to] != values.size())
        return grad.emitOpError() << "pipeline rank " << stage << " never computes a value it "
                                  << "sends to rank " << to;
    returnResults();
    grad.erase();
    return success();
  }

private:
  /// Arguments: every non-parameter one, and the parameters this stage
  /// holds. Results: the loss, then the held trained parameters'
  /// gradients, then the loss function's metrics: each rank returns them
  /// (zero where another stage computes one) and the pipeline axis sums
  /// them.
  LogicalResult selectSignature() {
    for (BlockArgument arg : body.getArguments())
      if (!p.homeOf.count(arg) || p.held[stage].contains(arg))
        args.push_back(arg.getArgNumber());
    results.push_back(0);
    unsigned r = 1;
    for (BlockArgument arg : body.getArguments())
      if (p.homeOf.count(arg) && getTrainedParam(grad, arg.getArgNumber())) {
        if (p.held[stage].contains(arg))
          results.push_back(r);
        ++r;
      }
    for (unsigned i = r; i < ret.getNumOperands(); ++i) {
      if (!isMetric(grad, i))
        return grad.emitOpError() << "returns outputs besides the loss: a pipeline cannot "
                                     "split them yet";
      results.push_back(i);
    }
    return success();
  }

  /// The stage's function, its attributes, and each parameter's place
  /// among the model's (step-optimizer sums the clipping norm's squares in
  /// that order).
  void declare() {
    SmallVector<Type> argTypes, resultTypes;
    for (unsigned i : args)
      argTypes.push_back(body.getArgument(i).getType());
    for (unsigned i : results)
      resultTypes.push_back(ret.getOperand(i).getType());
    auto staged = b.create<func::FuncOp>(loc, grad.getSymName(),
                                         b.getFunctionType(argTypes, resultTypes));
    for (NamedAttribute attr : grad->getDiscardableAttrs())
      staged->setAttr(attr.getName(), attr.getValue());
    DenseMap<Value, int64_t> paramIndex;
    for (BlockArgument arg : body.getArguments())
      if (p.homeOf.count(arg))
        paramIndex[arg] = int64_t(paramIndex.size());
    staged->setAttr(StepDialect::kPpParamsAttrName,
                    b.getI64IntegerAttr(int64_t(paramIndex.size())));
    for (auto [k, i] : llvm::enumerate(args)) {
      staged.setArgAttrs(k, grad.getArgAttrDict(i));
      BlockArgument arg = body.getArgument(i);
      if (!p.homeOf.count(arg))
        continue;
      staged.setArgAttr(k, StepDialect::kPpIndexAttrName,
                        b.getI64IntegerAttr(paramIndex.lookup(arg)));
      if (p.rankOf(p.homeOf.lookup(arg)) != stage)
        staged.setArgAttr(k, StepDialect::kPpReplicaAttrName, b.getUnitAttr());
    }
    for (auto [k, i] : llvm::enumerate(results))
      staged.setResultAttrs(k, grad.getResultAttrDict(i));
    Block *entry = staged.addEntryBlock();
    for (auto [k, i] : llvm::enumerate(args))
      map.map(body.getArgument(i), entry->getArgument(k));
    b.setInsertionPointToEnd(entry);
    // Tags: a transfer's place in the global order.
    for (auto [t, transfer] : llvm::enumerate(p.transfers)) {
      tagOf[{transfer.value, transfer.to}] = int64_t(t);
      if (transfer.from == stage)
        sendsOf[transfer.value].push_back(transfer.to);
    }
  }

  /// Each peer's sends go in the order the peer receives them (NCCL, and
  /// MPI under STEPC_MPI_P2P_ORDERED, match a pair's transfers by order,
  /// not tag): a value computed before one its peer reads first waits for
  /// it. Only ever later than its value: no receive waits on a send it
  /// needs.
  LogicalResult orderSends() {
    for (int to = 0; to < p.ranks; ++to) {
      SmallVector<Value> values;
      for (const Transfer &t : p.transfers)
        if (t.from == stage && t.to == to)
          values.push_back(t.value);
      if (values.empty())
        continue;
      FailureOr<DenseMap<Value, int64_t>> at = receiveOrder(grad, p, to, schedule);
      if (failed(at))
        return failure();
      llvm::stable_sort(values, [&](Value x, Value y) { return at->lookup(x) < at->lookup(y); });
      sendOrder[to] = std::move(values);
    }
    return success();
  }

  void mark(Operation *op, Value v, int to) {
    setPhase(op, Phase::Collective);
    op->setAttr(StepDialect::kTransferAttrName, b.getI64IntegerAttr(tagOf.lookup({v, to})));
  }

  /// A scalar (an auxiliary loss term) travels as one element: mesh.send
  /// and mesh.recv take ranked tensors of rank >= 1.
  static RankedTensorType wireType(RankedTensorType type) {
    return type.getRank() ? type : RankedTensorType::get({1}, type.getElementType());
  }

  void receive(Value v) {
    if (map.contains(v) || !p.received[stage].contains(v))
      return;
    auto type = cast<RankedTensorType>(v.getType());
    RankedTensorType wire = wireType(type);
    // mesh.recv names the buffer it receives into: a zero of the type.
    auto into = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(wire, b.getZeroAttr(wire.getElementType())));
    setPhase(into, Phase::Collective);
    int from = p.rankOf(p.stageOf.lookup(v.getDefiningOp()));
    auto recv = b.create<mesh::RecvOp>(loc, wire, kWorldMeshName, axis(), into.getResult(),
                                       b.getDenseI64ArrayAttr({from}), ValueRange{});
    mark(recv, v, stage);
    Value got = recv.getResult();
    if (wire != type) {
      got = b.create<ReshapeOp>(loc, type, got);
      setPhase(got.getDefiningOp(), Phase::Collective);
    }
    map.map(v, got);
  }

  void send(Value v, int to) {
    auto type = cast<RankedTensorType>(v.getType());
    Value sent = map.lookup(v);
    if (wireType(type) != type) {
      sent = b.create<ReshapeOp>(loc, wireType(type), sent);
      setPhase(sent.getDefiningOp(), Phase::Collective);
    }
    auto op = b.create<mesh::SendOp>(loc, sent.getType(), kWorldMeshName, axis(), sent,
                                     b.getDenseI64ArrayAttr({to}), ValueRange{});
    mark(op, v, to);
  }

  /// Sends to `to` every value, in its order, that is computed by now.
  void sendReady(int to) {
    SmallVector<Value> &values = sendOrder[to];
    size_t &i = sentUpTo[to];
    for (; i < values.size() && map.contains(values[i]); ++i)
      send(values[i], to);
  }

  Value sumOverStages(Value v) {
    auto total = b.create<mesh::AllReduceOp>(loc, v.getType(), kWorldMeshName, axis(), v,
                                             mesh::ReductionKind::Sum);
    setPhase(total, Phase::Collective);
    return total.getResult();
  }

  /// Only the last stage has the loss (a metric's stage, the metric): the
  /// others return zero. One sum over the pipeline axis for the loss and
  /// the metrics together: each stage has its own of them ready at its own
  /// time, and separate all-reduces would start in a different order on
  /// each.
  void returnResults() {
    SmallVector<Value> returned;
    for (unsigned i : results) {
      Value v = ret.getOperand(i);
      if ((i == 0 && stage != p.rankOf(p.stages - 1)) ||
          (isMetric(grad, i) && stage != metricRank(p, v))) {
        auto type = cast<RankedTensorType>(v.getType());
        auto zero = b.create<ConstantOp>(
            loc, DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
        setPhase(zero, Phase::Backward);
        returned.push_back(zero);
        continue;
      }
      receive(v);
      returned.push_back(map.lookupOrDefault(v));
    }
    SmallVector<unsigned> summed;
    for (auto [k, i] : llvm::enumerate(results))
      if (i == 0 || isMetric(grad, i))
        summed.push_back(k);
    if (summed.size() == 1) {
      returned[0] = sumOverStages(returned[0]);
    } else {
      SmallVector<Value> flats;
      for (unsigned k : summed) {
        auto type = cast<RankedTensorType>(returned[k].getType());
        auto flat = RankedTensorType::get({type.getNumElements()}, type.getElementType());
        flats.push_back(b.create<ReshapeOp>(loc, flat, returned[k]));
        setPhase(flats.back().getDefiningOp(), Phase::Collective);
      }
      auto concat = b.create<ConcatOp>(loc, flats, b.getI64IntegerAttr(0));
      setPhase(concat, Phase::Collective);
      Value total = sumOverStages(concat);
      int64_t offset = 0;
      for (unsigned k : summed) {
        auto type = cast<RankedTensorType>(returned[k].getType());
        auto part = b.create<SliceOp>(loc, total, b.getDenseI64ArrayAttr({offset}),
                                      b.getDenseI64ArrayAttr({type.getNumElements()}));
        auto shaped = b.create<ReshapeOp>(loc, type, part);
        setPhase(part, Phase::Collective);
        setPhase(shaped, Phase::Collective);
        returned[k] = shaped;
        offset += type.getNumElements();
      }
    }
    b.create<func::ReturnOp>(loc, returned);
  }

  ArrayRef<mesh::MeshAxis> axis() const { return axisStorage; }

  func::FuncOp grad;
  Partition &p;
  const int stage;
  const pipeline::Schedule &schedule;
  Block &body;
  func::ReturnOp ret;
  OpBuilder b;
  Location loc;
  SmallVector<mesh::MeshAxis> axisStorage;
  /// The gradient function's arguments and results the stage keeps.
  SmallVector<unsigned> args, results;
  IRMapping map;
  DenseMap<std::pair<Value, int>, int64_t> tagOf;
  DenseMap<Value, SmallVector<int>> sendsOf;
  DenseMap<int, SmallVector<Value>> sendOrder;
  DenseMap<int, size_t> sentUpTo;
};

/// Rebuilds `grad` as stage `stage`'s gradient function.
LogicalResult buildStage(func::FuncOp grad, Partition &p, int stage,
                         const pipeline::Schedule &schedule) {
  return StageBuilder(grad, p, stage, schedule).build();
}

/// Seconds of `op` on a machine of 100 GFLOP/s and 10 GB/s (the bubble
/// depends on the ratios alone): its products, or the bytes it moves.
/// An op's cost: its products (FLOPs) when it has any, else the bytes it
/// reads and writes (a memory-bound op).
struct OpCost {
  double flops = 0, bytes = 0;
  double seconds() const { return flops / 1e11 + bytes / 1e10; }
};

OpCost opCost(Operation *op) {
  if (isa<mesh::SendOp, mesh::RecvOp>(op))
    return {};
  FailureOr<int64_t> flops = getExecutedFlops(op);
  if (succeeded(flops) && *flops > 0)
    return {double(*flops), 0};
  OpCost cost;
  for (TypeRange types : {TypeRange(op->getOperandTypes()), TypeRange(op->getResultTypes())})
    for (Type t : types)
      if (auto type = dyn_cast<RankedTensorType>(t))
        cost.bytes += double(type.getNumElements()) * type.getElementTypeBitWidth() / 8;
  return cost;
}

double opSeconds(Operation *op) { return opCost(op).seconds(); }

/// Each stage's (chunk's) FLOPs and memory-bound bytes per step.
std::pair<SmallVector<int64_t>, SmallVector<int64_t>> chunkWork(Block &body, const Partition &p) {
  SmallVector<int64_t> flops(p.stages, 0), bytes(p.stages, 0);
  for (Operation &op : body.without_terminator())
    if (int chunk = p.stageOf.lookup(&op); chunk != kFree) {
      OpCost c = opCost(&op);
      flops[chunk] += int64_t(c.flops);
      bytes[chunk] += int64_t(c.bytes);
    }
  return {flops, bytes};
}

/// Each stage's (chunk's) forward, input-gradient and weight-gradient
/// seconds per micro-batch; free ops are counted where they are needed
/// only approximately (not at all: they are index arithmetic).
std::vector<pipeline::ChunkCost> chunkCosts(Block &body, const Partition &p, int64_t micro) {
  std::vector<pipeline::ChunkCost> costs(p.stages, pipeline::ChunkCost{0, 0, 0});
  DenseSet<Operation *> input = inputGradientOps(body, p);
  for (Operation &op : body.without_terminator()) {
    int chunk = p.stageOf.lookup(&op);
    if (chunk == kFree)
      continue;
    double seconds = opSeconds(&op) / double(micro);
    pipeline::ChunkCost &c = costs[chunk];
    (getPhase(&op) != Phase::Backward ? c.forward
     : input.contains(&op)            ? c.backwardInput
                                      : c.backwardWeight) += seconds;
  }
  return costs;
}

/// The first block of each stage after the first that balances the
/// blocks' predicted time (the embedding counted with the first, the head
/// with the last), exactly (pipeline::balanceStages).
FailureOr<SmallVector<int64_t>> balancedStarts(func::FuncOp grad, int stages) {
  int64_t blocks = 0;
  for (BlockArgument arg : grad.getBody().front().getArguments())
    if (auto param = grad.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                                      StepDialect::kParamAttrName))
      blocks = std::max<int64_t>(blocks, param.getBlock() + 1);
  if (blocks < stages)
    return SmallVector<int64_t>{}; // assignHomes reports it
  Partition perBlock;
  perBlock.ranks = perBlock.stages = int(blocks);
  if (failed(assignHomes(grad, perBlock.stages, {}, perBlock)))
    return failure();
  assignStages(grad.getBody().front(), perBlock);
  std::vector<double> layers(blocks, 0.0);
  for (Operation &op : grad.getBody().front().without_terminator())
    if (int block = perBlock.stageOf.lookup(&op); block != kFree)
      layers[block] += opSeconds(&op);
  std::vector<int> firsts = pipeline::balanceStages(layers, stages);
  return SmallVector<int64_t>(firsts.begin() + 1, firsts.end());
}

/// The pipeline's layout and prediction, for the report.
DictionaryAttr describe(OpBuilder &b, const pipeline::Schedule &schedule,
                        ArrayRef<int64_t> starts, ArrayRef<pipeline::ChunkCost> costs,
                        const pipeline::Timing &timing, int64_t micro,
                        const std::pair<SmallVector<int64_t>, SmallVector<int64_t>> &work) {
  SmallVector<double> stageSeconds, idle(timing.idleFraction.begin(), timing.idleFraction.end());
  double slowest = 0, total = 0;
  for (const pipeline::ChunkCost &c : costs) {
    stageSeconds.push_back(c.forward + c.backward());
    slowest = std::max(slowest, stageSeconds.back());
    total += stageSeconds.back();
  }
  SmallVector<int64_t> firstBlocks{0};
  llvm::append_range(firstBlocks, starts);
  SmallVector<int64_t> stash(timing.peakStash.begin(), timing.peakStash.end());
  return b.getDictionaryAttr({
      b.getNamedAttr("schedule", b.getStringAttr(schedule.name)),
      b.getNamedAttr("micro_batches", b.getI64IntegerAttr(micro)),
      b.getNamedAttr("first_blocks", b.getDenseI64ArrayAttr(firstBlocks)),
      b.getNamedAttr("stage_seconds", b.getDenseF64ArrayAttr(stageSeconds)),
      b.getNamedAttr("stage_flops", b.getDenseI64ArrayAttr(work.first)),
      b.getNamedAttr("stage_memory_bound_bytes", b.getDenseI64ArrayAttr(work.second)),
      b.getNamedAttr("predicted_idle_fraction", b.getDenseF64ArrayAttr(idle)),
      b.getNamedAttr("predicted_bubble", b.getF64FloatAttr(timing.bubbleFraction)),
      b.getNamedAttr("peak_stash", b.getDenseI64ArrayAttr(stash)),
      b.getNamedAttr("transfers_per_step", b.getI64IntegerAttr(timing.transfers)),
      // The slowest stage over the mean: what the cut leaves unbalanced.
      b.getNamedAttr("imbalance",
                     b.getF64FloatAttr(total > 0 ? slowest * double(costs.size()) / total : 1.0)),
  });
}

/// Rank `stage`'s step, built in `module` (a copy of the model): the
/// partition and schedule every rank computes alike, then its share.
LogicalResult buildStageModule(ModuleOp module, int64_t stages, int64_t stage, int64_t axis,
                               StringRef scheduleName, ArrayRef<int64_t> firsts,
                               ArrayRef<int64_t> meshShape) {
  SmallVector<func::FuncOp> grads;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(StepDialect::kGradientAttrName))
      grads.push_back(f);
  if (grads.size() != 1)
    return emitError(module.getLoc())
           << "step-pipeline-stages expects one gradient function, found " << grads.size();
  func::FuncOp grad = grads.front();
  int64_t micro = 0;
  grad.walk([&](Operation *op) {
    if (auto m = op->getAttrOfType<IntegerAttr>(StepDialect::kMicroBatchAttrName))
      micro = std::max(micro, m.getInt() + 1);
  });
  if (micro == 0)
    return grad.emitOpError() << "has no micro-batch marks: step-pipeline-stages runs after "
                                 "step-micro-batch{pipeline=true}";
  pipeline::Schedule schedule;
  std::string error;
  // interleaved:V cuts the blocks into stages·V chunks (a bad V is
  // buildSchedule's error).
  int64_t chunksPerRank = 1;
  if (scheduleName.starts_with("interleaved:") &&
      (scheduleName.drop_front(12).getAsInteger(10, chunksPerRank) || chunksPerRank < 1 ||
       chunksPerRank > 64))
    chunksPerRank = 1;
  Block &body = grad.getBody().front();
  Partition p;
  p.ranks = int(stages);
  p.stages = int(stages * chunksPerRank);
  SmallVector<int64_t> shape(meshShape.begin(), meshShape.end());
  if (shape.empty())
    shape.push_back(stages);
  int64_t stageAxis = axis < 0 ? int64_t(shape.size()) - 1 : axis;
  if (stageAxis >= int64_t(shape.size()) || shape[stageAxis] != stages)
    return emitError(module.getLoc()) << "step-pipeline-stages: the mesh's axis " << stageAxis
                                      << " must be the " << stages << " stages";
  p.axis = static_cast<mesh::MeshAxis>(stageAxis);
  // Without a layout, the cut that balances the blocks' predicted time.
  SmallVector<int64_t> starts(firsts.begin(), firsts.end());
  if (starts.empty()) {
    FailureOr<SmallVector<int64_t>> balanced = balancedStarts(grad, p.stages);
    if (failed(balanced))
      return failure();
    starts = *balanced;
  }
  if (failed(assignHomes(grad, p.stages, starts, p)))
    return failure();
  assignStages(body, p);
  joinGradientsAtHome(grad, p);
  std::vector<pipeline::ChunkCost> costs = chunkCosts(body, p, micro);
  auto work = chunkWork(body, p); // (the body goes when the stage is built)
  if (!pipeline::buildSchedule(scheduleName.str(), stages, int(micro), costs, schedule, error))
    return grad.emitOpError() << "pipeline schedule: " << error;
  pipeline::Timing timing;
  if (!pipeline::checkAndTime(schedule, costs, 0.0, timing, error))
    return grad.emitOpError() << "pipeline schedule: " << error;
  collectNeeds(grad, p);
  if (failed(buildStage(grad, p, int(stage), schedule)))
    return failure();
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToStart(module.getBody());
  // tp's pass made the mesh already where tp runs beside pp.
  auto mesh = module.lookupSymbol<mesh::MeshOp>(kWorldMeshName);
  if (!mesh)
    mesh = b.create<mesh::MeshOp>(module.getLoc(), kWorldMeshName, shape);
  // The runtime reads the stage count off the mesh, the report the
  // pipeline's layout and predicted idle time.
  mesh->setAttr(StepDialect::kPpAxisAttrName, b.getI64IntegerAttr(p.axis));
  mesh->setAttr(StepDialect::kPipelineAttrName,
                describe(b, schedule, starts, costs, timing, int(micro), work));
  return success();
}

struct StepPipelineStagesPass
    : public stepc::impl::StepPipelineStagesBase<StepPipelineStagesPass> {
  using StepPipelineStagesBase::StepPipelineStagesBase;

  /// The model becomes `stages` nested modules, `@stage<r>` holding rank
  /// r's step (marked step.pp_stage): one module for the whole pipeline,
  /// whose later passes run on each stage.
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages < 2) {
      emitError(module.getLoc()) << "step-pipeline-stages needs stages >= 2, got "
                                 << stages.getValue();
      return signalPassFailure();
    }
    if (llvm::any_of(module.getOps<ModuleOp>(), [](ModuleOp nested) {
          return nested->hasAttr(StepDialect::kPpStageAttrName);
        })) {
      emitError(module.getLoc()) << "step-pipeline-stages: the module already holds stages";
      return signalPassFailure();
    }
    SmallVector<Operation *> model;
    for (Operation &op : module.getBody()->getOperations())
      model.push_back(&op);
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    for (int64_t stage = 0; stage < stages; ++stage) {
      auto nested = b.create<ModuleOp>(module.getLoc(), ("stage" + Twine(stage)).str());
      nested->setAttr(StepDialect::kPpStageAttrName, b.getI64IntegerAttr(stage));
      OpBuilder inside = OpBuilder::atBlockBegin(nested.getBody());
      for (Operation *op : model)
        inside.clone(*op);
      // Every rank's partition and schedule are the same: a model that
      // cannot be cut fails at the first stage, once.
      if (failed(buildStageModule(nested, stages, stage, axis, scheduleName, firsts,
                                  meshShape)))
        return signalPassFailure();
    }
    for (Operation *op : model)
      op->erase();
  }
};

} // namespace
