//===- MemoryPlan.cpp - static buffer assignment of a training step -------===//
//
// 1. Aliases: a reshape shares its operand's storage; an optimizer update
//    (step.adamw, sgd, lion, and each update of a stepk.adamw_group) writes
//    its results over its parameter and state arguments (in place).
// 2. Buffers: every other result gets a buffer, except that an elementwise
//    op or kernel (stepk.fused) takes over an operand's buffer when that
//    buffer is not an argument,
//    has the result's size, and is last used by this op (out[i] = f(a[i])
//    reads a[i] before writing out[i]).
// 3. Liveness: a buffer lives from its first definition to the last use of
//    any value in it (returned values live to the end); the operand of a
//    collective is in use until the collective is waited for, at the first
//    use of its result.
// 4. Placement (planMemory; planLiveness stops at 3): buffers by decreasing
//    size, each at the lowest 64-byte aligned offset that overlaps no placed
//    buffer whose lifetime overlaps (TFLite's greedy-by-size). Offsets are
//    fixed at compile time.
//
//===----------------------------------------------------------------------===//

#include "stepc/Analysis/MemoryPlan.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

static int64_t bytesOf(Value value) { return tensorBytes(value.getType()); }

static int64_t alignUp(int64_t x) {
  return (x + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// Each returned parameter or state value of `function` and the argument
/// it replaces (by its role: #step.result<param, "p"> replaces
/// #step.param<"p">).
static DenseMap<Value, BlockArgument> replacedArguments(func::FuncOp function) {
  Block &body = function.getBody().front();
  DenseMap<Value, BlockArgument> replaces;
  llvm::StringMap<BlockArgument> byName;
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (auto p = function.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName))
      byName[p.getName()] = arg;
    else if (auto s = function.getArgAttrOfType<StateAttr>(i, StepDialect::kStateAttrName))
      byName[s.getQualifiedName()] = arg;
  }
  for (auto [i, v] : llvm::enumerate(body.getTerminator()->getOperands())) {
    ResultAttr role = getResultRole(function, i);
    if (!role || (role.getRole() != Role::Param && role.getRole() != Role::Moment))
      continue;
    auto it = byName.find(role.getRole() == Role::Param ? role.getName().str()
                                                         : role.getQualifiedName());
    if (it != byName.end() && it->second.getType() == v.getType())
      replaces[v] = it->second;
  }
  return replaces;
}

/// What an optimizer update writes its results over: the parameter and its
/// state (operands 0 and 2.., in the results' order); none for other ops.
static SmallVector<Value, 3> updateTargets(Operation &op) {
  SmallVector<Value, 3> targets;
  if (auto adamw = dyn_cast<AdamwOp>(op))
    targets = {adamw.getParam(), adamw.getM(), adamw.getV()};
  else if (auto group = dyn_cast<stepk::AdamwGroupOp>(op))
    // Each update's, through the body: it yields their results in order.
    for (AdamwOp update : group.getUpdates())
      for (Value v : {update.getParam(), update.getM(), update.getV()})
        targets.push_back(group.inputOf(v));
  else if (auto sgd = dyn_cast<SgdOp>(op))
    targets = {sgd.getParam(), sgd.getBuf()};
  else if (auto lion = dyn_cast<LionOp>(op))
    targets = {lion.getParam(), lion.getM()};
  return targets;
}

/// The live-set peak (no placement is below it): a sweep over the buffers'
/// [firstDef, lastUse] intervals.
static void findLivePeak(MemoryPlan &plan) {
  SmallVector<std::pair<int64_t, int64_t>> events; // (op index, +bytes | -bytes)
  for (const MemoryPlan::Buffer &b : plan.buffers) {
    events.push_back({b.firstDef, b.bytes});
    events.push_back({b.lastUse + 1, -b.bytes});
  }
  llvm::sort(events);
  int64_t live = 0;
  for (auto [at, delta] : events) {
    live += delta;
    if (live > plan.liveBytesPeak) {
      plan.liveBytesPeak = live;
      plan.liveBytesPeakAt = at;
    }
  }
}

MemoryPlan stepc::planLiveness(func::FuncOp function) {
  MemoryPlan plan;
  Block &body = function.getBody().front();
  DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : body)
    index[&op] = n++;
  // In place only inside elementwise kernels (they read element i before
  // writing it); a GEMM epilogue must not write over what it reads.
  auto mayWriteInPlace = [&](Operation &op) {
    return op.hasTrait<OpTrait::Elementwise>() || op.hasTrait<ElementByElement>() ||
           isa<ConvertOp>(op);
  };

  for (BlockArgument arg : body.getArguments())
    plan.argumentOf[arg] = arg.getArgNumber();
  const DenseMap<Value, BlockArgument> replaces = replacedArguments(function);

  // A collective runs asynchronously from its op to the first use of its
  // result (where step.so waits for it): its operand is in use until then.
  auto waitIndex = [&](Operation *collective) {
    int64_t wait = n;
    for (Operation *user : collective->getResult(0).getUsers())
      wait = std::min(wait, isa<func::ReturnOp>(user) ? n : index[user]);
    return wait;
  };
  auto lastUseOf = [&](Value v) {
    // A collective's result nothing reads is written until step.so waits for
    // it at the end.
    if (v.use_empty() && v.getDefiningOp() && communicates(v.getDefiningOp()))
      return n;
    int64_t last = -1;
    for (Operation *user : v.getUsers()) {
      int64_t at = isa<func::ReturnOp>(user) ? n : index[user];
      if (communicates(user))
        at = std::max(at, waitIndex(user));
      last = std::max(last, at);
    }
    return last;
  };
  auto newBuffer = [&](Value v, int64_t def) {
    plan.buffers.push_back({alignUp(bytesOf(v)), 0, def, std::max(def, lastUseOf(v))});
    plan.bufferOf[v] = plan.buffers.size() - 1;
  };
  auto extend = [&](int64_t buffer, Value v) {
    plan.buffers[buffer].lastUse = std::max(plan.buffers[buffer].lastUse, lastUseOf(v));
    plan.bufferOf[v] = buffer;
  };

  for (Operation &op : body) {
    int64_t at = index[&op];
    // A pipeline send's result is its input, read until the step's end
    // (where step.so waits for it).
    if (isa<ReshapeOp, mesh::SendOp>(op)) {
      Value in = op.getOperand(0);
      if (plan.argumentOf.count(in))
        plan.argumentOf[op.getResult(0)] = plan.argumentOf[in];
      else if (plan.bufferOf.count(in))
        extend(plan.bufferOf[in], op.getResult(0));
      continue;
    }
    SmallVector<Value, 3> targets = updateTargets(op);
    if (!targets.empty()) {
      for (auto [result, target] : llvm::zip(op.getResults(), targets)) {
        if (plan.argumentOf.count(target))
          plan.argumentOf[result] = plan.argumentOf[target];
        else
          newBuffer(result, at);
      }
      continue;
    }
    for (Value result : op.getResults()) {
      // An update written as step ops (Muon's) goes over the argument it
      // replaces when no later op reads that argument: element i is read
      // before it is written, as above.
      if (auto target = replaces.find(result);
          target != replaces.end() && mayWriteInPlace(op) &&
          lastUseOf(target->second) <= at) {
        plan.argumentOf[result] = plan.argumentOf[target->second];
        continue;
      }
      int64_t reused = -1;
      if ((op.hasTrait<OpTrait::Elementwise>() || op.hasTrait<ElementByElement>()) &&
          mayWriteInPlace(op)) {
        for (Value operand : op.getOperands()) {
          auto it = plan.bufferOf.find(operand);
          if (it == plan.bufferOf.end() || plan.argumentOf.count(operand))
            continue;
          MemoryPlan::Buffer &b = plan.buffers[it->second];
          // Same type, so element i of the result overwrites exactly element
          // i of the operand (a GPU thread reads it before writing it); a
          // narrowing convert would overwrite its neighbours.
          if (b.lastUse == at && operand.getType() == result.getType()) {
            reused = it->second;
            break;
          }
        }
      }
      if (reused >= 0) {
        extend(reused, result);
        ++plan.inPlaceCount;
      } else {
        newBuffer(result, at);
      }
    }
  }

  findLivePeak(plan);
  return plan;
}

MemoryPlan stepc::planMemory(func::FuncOp function) {
  MemoryPlan plan = planLiveness(function);
  // Greedy by size.
  SmallVector<int64_t> order(plan.buffers.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::stable_sort(order, [&](int64_t a, int64_t b) {
    return plan.buffers[a].bytes > plan.buffers[b].bytes;
  });
  // Placed buffers in increasing offset, so the first gap is found in one
  // pass over those whose lifetimes overlap (no sort per buffer).
  SmallVector<int64_t> placed;
  for (int64_t id : order) {
    MemoryPlan::Buffer &b = plan.buffers[id];
    int64_t offset = 0;
    for (int64_t other : placed) {
      const MemoryPlan::Buffer &o = plan.buffers[other];
      if (o.firstDef > b.lastUse || b.firstDef > o.lastUse)
        continue;
      if (offset + b.bytes <= o.offset)
        break;
      offset = std::max(offset, o.offset + o.bytes);
    }
    b.offset = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + b.bytes);
    auto at = llvm::upper_bound(placed, offset, [&](int64_t value, int64_t other) {
      return value < plan.buffers[other].offset;
    });
    placed.insert(at, id);
  }
  return plan;
}

std::vector<int64_t> stepc::liveBytesByOp(const MemoryPlan &plan, int64_t ops) {
  // Differences at the buffers' ends, then one running sum.
  std::vector<int64_t> live(std::max<int64_t>(ops, 1) + 1, 0);
  const int64_t last = int64_t(live.size()) - 2;
  for (const MemoryPlan::Buffer &b : plan.buffers) {
    const int64_t from = std::max<int64_t>(b.firstDef, 0), to = std::min(b.lastUse, last);
    if (from > to)
      continue;
    live[from] += b.bytes;
    live[to + 1] -= b.bytes;
  }
  for (size_t i = 1; i < live.size(); ++i)
    live[i] += live[i - 1];
  live.pop_back();
  return live;
}
