//===- ArenaPlan.cpp - the memory plan, as the IR carries it -------------===//

#include "stepc/Compiler/ArenaPlan.h"
#include "stepc/Compiler/BlockCalls.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"

#include "runtime/kernels/cuda/launch_config.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;
namespace lc = stepc::cuda;

CudaArenaLayout stepc::layoutCudaArena(int64_t planBytes, int64_t scratchBytes) {
  CudaArenaLayout l;
  l.statusOffset = lc::AlignUp(planBytes, lc::kScratchAlignment);
  l.workspaceOffset = l.statusOffset + lc::kScratchAlignment;
  l.scratchOffset = l.workspaceOffset + lc::kGemmWorkspaceBytes;
  l.scratchBytes = scratchBytes;
  l.bytes =
      l.scratchOffset + lc::AlignUp(std::max<int64_t>(scratchBytes, 1), lc::kScratchAlignment);
  return l;
}

int64_t stepc::cudaArenaOverheadBytes() {
  return lc::kScratchAlignment + lc::kGemmWorkspaceBytes;
}

int64_t stepc::argumentBytes(func::FuncOp function) {
  int64_t bytes = 0;
  for (Type type : function.getArgumentTypes())
    bytes += tensorBytes(type);
  return bytes;
}

void stepc::writeMemoryPlan(func::FuncOp function, const MemoryPlan &plan,
                            const std::optional<CudaArenaLayout> &cuda) {
  Builder b(function.getContext());
  SmallVector<int64_t> buffers;
  for (const MemoryPlan::Buffer &buffer : plan.buffers)
    buffers.append({buffer.offset, buffer.bytes, buffer.firstDef, buffer.lastUse});
  int64_t arena = cuda ? cuda->bytes : plan.arenaBytes;
  SmallVector<NamedAttribute> fields{
      b.getNamedAttr("arena_bytes", b.getI64IntegerAttr(plan.arenaBytes)),
      b.getNamedAttr("live_bytes_peak", b.getI64IntegerAttr(plan.liveBytesPeak)),
      b.getNamedAttr("live_bytes_peak_at", b.getI64IntegerAttr(plan.liveBytesPeakAt)),
      b.getNamedAttr("in_place_buffers", b.getI64IntegerAttr(plan.inPlaceCount)),
      b.getNamedAttr("planned_peak_bytes", b.getI64IntegerAttr(argumentBytes(function) + arena)),
      b.getNamedAttr("buffers", b.getDenseI64ArrayAttr(buffers))};
  if (cuda)
    fields.push_back(b.getNamedAttr(
        "cuda", b.getDictionaryAttr({
                    b.getNamedAttr("status_offset", b.getI64IntegerAttr(cuda->statusOffset)),
                    b.getNamedAttr("workspace_offset", b.getI64IntegerAttr(cuda->workspaceOffset)),
                    b.getNamedAttr("scratch_offset", b.getI64IntegerAttr(cuda->scratchOffset)),
                    b.getNamedAttr("scratch_bytes", b.getI64IntegerAttr(cuda->scratchBytes)),
                    b.getNamedAttr("arena_bytes", b.getI64IntegerAttr(cuda->bytes)),
                })));
  function->setAttr(StepDialect::kMemoryPlanAttrName, b.getDictionaryAttr(fields));

  for (Operation &op : function.getBody().front()) {
    op.removeAttr(StepDialect::kBufferAttrName);
    op.removeAttr(StepDialect::kInArgAttrName);
    if (op.getNumResults() == 0)
      continue;
    SmallVector<int64_t> ids, args;
    bool inArg = false;
    for (Value result : op.getResults()) {
      auto buffer = plan.bufferOf.find(result);
      ids.push_back(buffer == plan.bufferOf.end() ? -1 : buffer->second);
      auto arg = plan.argumentOf.find(result);
      args.push_back(arg == plan.argumentOf.end() ? -1 : int64_t(arg->second));
      inArg |= arg != plan.argumentOf.end();
    }
    op.setAttr(StepDialect::kBufferAttrName, b.getDenseI64ArrayAttr(ids));
    if (inArg)
      op.setAttr(StepDialect::kInArgAttrName, b.getDenseI64ArrayAttr(args));
  }
}

static int64_t field(DictionaryAttr dict, StringRef name) {
  auto value = dict ? dyn_cast_or_null<IntegerAttr>(dict.get(name)) : IntegerAttr();
  return value ? value.getInt() : -1;
}

FailureOr<MemoryPlan> stepc::readMemoryPlan(func::FuncOp function) {
  auto dict = function->getAttrOfType<DictionaryAttr>(StepDialect::kMemoryPlanAttrName);
  auto buffers = dict ? dyn_cast_or_null<DenseI64ArrayAttr>(dict.get("buffers"))
                      : DenseI64ArrayAttr();
  if (!buffers || buffers.size() % 4 != 0 || field(dict, "arena_bytes") < 0)
    return function.emitOpError() << "has no memory plan (step-plan-memory did not run)";
  MemoryPlan plan;
  plan.arenaBytes = field(dict, "arena_bytes");
  plan.liveBytesPeak = std::max<int64_t>(0, field(dict, "live_bytes_peak"));
  plan.liveBytesPeakAt = std::max<int64_t>(0, field(dict, "live_bytes_peak_at"));
  plan.inPlaceCount = std::max<int64_t>(0, field(dict, "in_place_buffers"));
  ArrayRef<int64_t> flat = buffers.asArrayRef();
  for (size_t i = 0; i < flat.size(); i += 4) {
    if (flat[i] < 0 || flat[i + 1] < 0 || flat[i] + flat[i + 1] > plan.arenaBytes)
      return function.emitOpError() << "has a memory plan whose buffer #" << i / 4
                                    << " lies outside its arena";
    plan.buffers.push_back({flat[i + 1], flat[i], flat[i + 2], flat[i + 3]});
  }
  Block &body = function.getBody().front();
  for (BlockArgument arg : body.getArguments())
    plan.argumentOf[arg] = arg.getArgNumber();
  for (Operation &op : body) {
    if (op.getNumResults() == 0)
      continue;
    // A block function's call: its results are where the callee's ops put
    // them in this call (its step.run_plan), or its operands'.
    auto call = dyn_cast<func::CallOp>(op);
    if (func::FuncOp callee = call ? blockFunctionOf(call) : func::FuncOp()) {
      FailureOr<std::unique_ptr<RunPlanScope>> scope = RunPlanScope::apply(call, callee);
      if (failed(scope))
        return failure();
      Operation *ret = callee.getBody().front().getTerminator();
      for (auto [result, returned] : llvm::zip_equal(call.getResults(), ret->getOperands())) {
        if (auto arg = dyn_cast<BlockArgument>(returned)) {
          Value operand = call.getOperand(arg.getArgNumber());
          std::optional<int64_t> buffer, index;
          if (auto it = plan.bufferOf.find(operand); it != plan.bufferOf.end())
            buffer = it->second;
          if (auto it = plan.argumentOf.find(operand); it != plan.argumentOf.end())
            index = it->second;
          if (buffer)
            plan.bufferOf[result] = *buffer;
          if (index)
            plan.argumentOf[result] = unsigned(*index);
          continue;
        }
        Operation *def = returned.getDefiningOp();
        SmallVector<Value> as(def->getNumResults(), Value());
        as[cast<OpResult>(returned).getResultNumber()] = result;
        if (failed(placeValues(def, as, plan, function.getNumArguments())))
          return failure();
      }
      continue;
    }
    if (failed(placeValues(&op, op.getResults(), plan, function.getNumArguments())))
      return failure();
  }
  return plan;
}

LogicalResult stepc::placeValues(Operation *op, ValueRange values, MemoryPlan &plan,
                                 unsigned arguments) {
  auto ids = op->getAttrOfType<DenseI64ArrayAttr>(StepDialect::kBufferAttrName);
  auto args = op->getAttrOfType<DenseI64ArrayAttr>(StepDialect::kInArgAttrName);
  if (!ids)
    return op->emitOpError() << "has no place in the memory plan (a pass after "
                                "step-plan-memory added it)";
  for (auto [i, value] : llvm::enumerate(values)) {
    if (!value)
      continue;
    plan.bufferOf.erase(value);
    plan.argumentOf.erase(value);
    int64_t id = ids[i];
    if (id >= int64_t(plan.buffers.size()))
      return op->emitOpError() << "names buffer " << id << " of a plan with "
                               << plan.buffers.size();
    if (id >= 0)
      plan.bufferOf[value] = id;
    if (args && args[i] >= int64_t(arguments))
      return op->emitOpError() << "lives in argument " << args[i] << " of a function with "
                               << arguments;
    if (args && args[i] >= 0)
      plan.argumentOf[value] = unsigned(args[i]);
  }
  return success();
}

std::optional<CudaArenaLayout> stepc::readCudaArena(func::FuncOp function) {
  auto dict = function->getAttrOfType<DictionaryAttr>(StepDialect::kMemoryPlanAttrName);
  auto cuda = dict ? dyn_cast_or_null<DictionaryAttr>(dict.get("cuda")) : DictionaryAttr();
  if (!cuda)
    return std::nullopt;
  CudaArenaLayout l;
  l.statusOffset = field(cuda, "status_offset");
  l.workspaceOffset = field(cuda, "workspace_offset");
  l.scratchOffset = field(cuda, "scratch_offset");
  l.scratchBytes = field(cuda, "scratch_bytes");
  l.bytes = field(cuda, "arena_bytes");
  return l;
}

int64_t stepc::targetArenaBytes(func::FuncOp function) {
  if (std::optional<CudaArenaLayout> cuda = readCudaArena(function))
    return cuda->bytes;
  auto dict = function->getAttrOfType<DictionaryAttr>(StepDialect::kMemoryPlanAttrName);
  return std::max<int64_t>(0, field(dict, "arena_bytes"));
}

std::optional<int64_t> stepc::plannedPeakBytes(func::FuncOp function) {
  auto dict = function->getAttrOfType<DictionaryAttr>(StepDialect::kMemoryPlanAttrName);
  int64_t peak = field(dict, "planned_peak_bytes");
  return peak < 0 ? std::nullopt : std::optional<int64_t>(peak);
}
