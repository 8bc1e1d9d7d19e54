//===- Report.cpp - what the compiler knows before anything runs ----------===//

#include "stepc/Compiler/Report.h"
#include "StepInOrder.h"
#include "stepc/Compiler/OutlineBlocks.h"
#include "stepc/Analysis/FlopCount.h"
#include "stepc/Analysis/ModelReport.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"

#include "runtime/kernels/cuda/launch_config.h"


#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <map>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

int64_t bytesOf(Type type) { return tensorBytes(type); }

/// What an fp8 GEMM's packing moves before the tensor cores run (CUDA): each
/// operand read as stored, written as fp8 bytes and a float scale per block
/// into the scratch PlanFp8Gemm lays out.
int64_t fp8PackingBytes(stepk::GemmOp gemm) {
  auto out = cast<RankedTensorType>(gemm.getResult().getType());
  const int64_t n = out.getShape().back(), rows = out.getNumElements() / n, k = gemm.getK();
  const bool vector = (*gemm.getFp8())[2] != 0;
  const cuda::Fp8GemmLayout layout = cuda::PlanFp8Gemm(rows, n, k, vector);
  // An operand packed already (stepk.pack_fp8) is read by the GEMM itself.
  int64_t bytes = 0;
  if (!gemm.getLhsScales())
    bytes += tensorBytes(gemm.getLhs().getType()) + layout.b_bytes;  // its bytes and scales
  if (!gemm.getRhsScales())
    bytes += tensorBytes(gemm.getRhs().getType()) + layout.total - layout.b_bytes;
  return bytes;
}
/// Packing launches of an fp8 GEMM: one per operand it packs itself.
int64_t fp8PackingKernels(stepk::GemmOp gemm) {
  return (gemm.getLhsScales() ? 0 : 1) + (gemm.getRhsScales() ? 0 : 1);
}

} // namespace

/// Ranks a collective spans: the product of its mesh axes' sizes.
static int64_t ranksOf(Operation *collective) {
  auto meshName = collective->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = collective->getAttrOfType<DenseI16ArrayAttr>("mesh_axes");
  auto mesh = meshName ? SymbolTable::lookupNearestSymbolFrom<mesh::MeshOp>(collective, meshName)
                       : mesh::MeshOp();
  if (!mesh || !axes)
    return 1;
  int64_t n = 1;
  for (int16_t axis : axes.asArrayRef())
    n *= mesh.getShape()[axis];
  return n;
}

/// The mesh axes a collective spans, as a key: "axis0", "axis0+axis1".
static std::string axesKey(Operation *collective) {
  auto axes = collective->getAttrOfType<DenseI16ArrayAttr>("mesh_axes");
  if (!axes)
    return "none";
  return llvm::join(llvm::map_range(axes.asArrayRef(),
                                    [](int16_t a) { return "axis" + std::to_string(a); }),
                    "+");
}

/// The floats per rank a runtime's collective call takes (the ABI's
/// count): a gather's shard, a scatter's result, an all-reduce's tensor,
/// an all-to-all's block per pair of ranks.
static int64_t abiCount(Operation *op) {
  auto numel = [](Value v) { return cast<ShapedType>(v.getType()).getNumElements(); };
  if (isa<mesh::AllGatherOp>(op))
    return numel(op->getOperand(0));
  if (isa<mesh::AllToAllOp>(op))
    return numel(op->getOperand(0)) / std::max<int64_t>(1, ranksOf(op));
  return numel(op->getResult(0));
}

/// The collectives in flight together where their operands' and results'
/// bytes peak: each runs from its op to the first reader of its result (its
/// wait), or to the step's end.
static std::vector<StepReport::CollectiveCall> collectivesInFlightPeak(const StepInOrder &view) {
  const std::vector<StepInOrder::Op> &ops = view.ops();
  struct Window {
    size_t start, end;
    Operation *op;
    int64_t bytes;
  };
  SmallVector<Window> windows;
  for (auto [k, o] : llvm::enumerate(ops)) {
    if (!communicates(o.op))
      continue;
    size_t end = ops.size();
    StepInOrder::Instance result{o.op->getResult(0), o.call};
    for (int64_t reader : view.readers(result))
      end = std::min(end, size_t(reader));
    for (int64_t reader : view.nestedReaders(result))
      end = std::min(end, size_t(reader));
    windows.push_back({k, end, o.op,
                       bytesOf(o.op->getOperand(0).getType()) +
                           bytesOf(o.op->getResult(0).getType())});
  }
  // The set only grows where one starts: the peak is at a start.
  int64_t best = -1;
  std::vector<StepReport::CollectiveCall> peak;
  for (const Window &w : windows) {
    int64_t bytes = 0;
    std::vector<StepReport::CollectiveCall> set;
    for (const Window &o : windows)
      if (o.start <= w.start && w.start < o.end) {
        bytes += o.bytes;
        set.push_back({o.op->getName().stripDialect().str(), axesKey(o.op), abiCount(o.op)});
      }
    if (bytes > best) {
      best = bytes;
      peak = std::move(set);
    }
  }
  return peak;
}

/// Bytes each rank sends with ring algorithms: all-reduce 2(n-1)/n of the
/// tensor, all-gather and reduce-scatter (n-1) shards; all-to-all its n - 1
/// blocks for the others, (n-1)/n of its input.
static double wireBytes(Operation *op, int64_t n) {
  // A pipeline transfer: the sender's tensor, once.
  if (isa<mesh::SendOp>(op))
    return bytesOf(op->getOperand(0).getType());
  if (isa<mesh::RecvOp>(op))
    return 0;
  if (isa<mesh::AllReduceOp>(op))
    return 2.0 * (n - 1) / n * bytesOf(op->getOperand(0).getType());
  if (isa<mesh::AllToAllOp>(op))
    return double(n - 1) / n * bytesOf(op->getOperand(0).getType());
  if (isa<mesh::AllGatherOp>(op))
    return double(n - 1) * bytesOf(op->getOperand(0).getType());
  return double(n - 1) * bytesOf(op->getResult(0).getType());
}

namespace {

/// The block names an op's work and a parameter's bytes are reported under.
struct Blocks {
  const StepInOrder &view;
  DenseMap<StepInOrder::Instance, std::string> parameterBlock;

  Blocks(func::FuncOp step, const StepInOrder &view)
      : view(view), parameterBlock(parameterBlocks(step, view)) {}

  static std::string label(const std::string &block) {
    return block.empty() || block == "#" ? std::string("outside blocks") : block;
  }
  /// The block an op's work is for: the forward's, backward's and
  /// recomputation's by computedForBlocks (step.computed_for); an update
  /// by its parameter's.
  std::string workBlock(const StepInOrder::Op &o) const {
    std::optional<Phase> phase = getPhase(o.op);
    if (o.op->getNumResults() &&
        (phase == Phase::Forward || phase == Phase::Backward || phase == Phase::Recompute))
      return label(o.computedFor);
    if (isa<stepk::AdamwGroupOp>(o.op))
      return "outside blocks"; // every block's updates in one launch
    if (o.op->getNumOperands())
      if (auto it = parameterBlock.find(view.instance(o.op->getOperand(0), o.call));
          it != parameterBlock.end())
        return label(it->second);
    return "outside blocks";
  }
};

/// A collective's bytes per rank, by kind and by the axes it spans.
void countCollective(StepReport &report, Operation &op) {
  ++report.collectivesPerStep;
  // Bytes each rank contributes.
  int64_t bytes = bytesOf(isa<mesh::AllGatherOp>(op) ? op.getOperand(0).getType()
                                                     : op.getResult(0).getType());
  report.collectiveBytesPerStep[op.getName().stripDialect().str()] += bytes;
  // A pipeline stage's transfers are its own (the stages differ); the
  // per-axes figures, which every rank's runtime probes alike, are the
  // collectives'.
  if (isa<mesh::SendOp, mesh::RecvOp>(op))
    return;
  report.collectiveBytesByAxes[axesKey(&op)] += bytes;
  report.collectivesByAxes[axesKey(&op)] += 1;
  report.collectiveWireBytesByAxes[axesKey(&op)] +=
      static_cast<int64_t>(std::llround(wireBytes(&op, ranksOf(&op))));
  if (getPhase(&op) == Phase::Optimizer)
    report.optimizerCollectiveBytesPerStep[op.getName().stripDialect().str()] += bytes;
}

/// An fp8 product's operand: rounded by step.quantize_fp8 (then only
/// widened, narrowed or reshaped).
bool roundedToFp8(const StepInOrder &view, StepInOrder::Instance v) {
  while (Operation *def = v.first.getDefiningOp()) {
    if (auto call = dyn_cast<stepk::CallOp>(def)) {
      // The op in its body that made this result, through the body's
      // converts: a quantize_fp8 (its bf16 forms, both roundings of one
      // value, a GELU's), or another kernel.
      Value made = call.getYield()->getOperand(cast<OpResult>(v.first).getResultNumber());
      while (isa_and_nonnull<ConvertOp>(made.getDefiningOp()))
        made = made.getDefiningOp()->getOperand(0);
      // (Or its fp8 bytes, packed: stepk.pack_fp8.)
      return isa_and_nonnull<QuantizeFp8Op, stepk::PackFp8Op>(made.getDefiningOp());
    }
    if (isa<QuantizeFp8Op>(def))
      return true;
    if (auto fused = dyn_cast<stepk::FusedOp>(def)) {
      // A fused kernel that only converts (or reshapes) one of its inputs
      // into this result: that input.
      Value inner = fused.getYield()->getOperand(cast<OpResult>(v.first).getResultNumber());
      while (isa_and_nonnull<ConvertOp, ReshapeOp>(inner.getDefiningOp()))
        inner = inner.getDefiningOp()->getOperand(0);
      auto arg = dyn_cast<BlockArgument>(inner);
      if (!arg)
        return false;
      v = view.instance(fused.getInputs()[arg.getArgNumber()], v.second);
      continue;
    }
    if (!isa<ConvertOp, ReshapeOp, TransposeOp>(def))
      return false;
    v = view.instance(def->getOperand(0), v.second);
  }
  return false;
}

/// The library calls by shape (GEMMs, attention, grouped products) and
/// the fp8 products, which the runtime probes and the profile times.
void countLibraryShapes(StepReport &report, const StepInOrder &view, const StepInOrder::Op &o,
                        int64_t flops) {
  Operation &op = *o.op;
  auto countGemm = [&](auto mm, bool sharedRhs) {
    auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
    auto out = cast<RankedTensorType>(mm->getResult(0).getType());
    const bool ta = mm.getTransposeA(), tb = mm.getTransposeB();
    const int64_t m = out.getDimSize(out.getRank() - 2), n = out.getShape().back();
    const int64_t k = lhs.getDimSize(lhs.getRank() - (ta ? 2 : 1));
    report.gemmCallsByShape[llvm::formatv("{0} {1} {2} {3} {4} {5} {6}",
                                          out.getNumElements() / (m * n), m, n, k, int(ta),
                                          int(tb), int(sharedRhs))
                                .str()] += 1;
  };
  auto countAttention = [&](auto a, StringRef callee) {
    auto q = cast<RankedTensorType>(a.getQuery().getType());
    auto k = cast<RankedTensorType>(a.getKey().getType());
    std::string shape =
        llvm::formatv("{0} {1} {2} {3} {4} {5} {6} {7}", callee, q.getDimSize(0),
                      q.getDimSize(1), k.getDimSize(1), a.getNumHeads(), a.getNumKvHeads(),
                      a.getHeadDim(), int(a.getCausal()))
            .str();
    report.attentionCallsByShape[shape] += 1;
    report.attentionFlopsByShape[shape] = flops;
  };
  Operation *kernel = isa<stepk::CallOp>(op) ? cast<stepk::CallOp>(op).getKernelOp() : &op;
  StringRef callee = isa<stepk::CallOp>(op) ? cast<stepk::CallOp>(op).getCallee() : "";
  if (auto a = dyn_cast_or_null<AttentionOp>(kernel))
    countAttention(a, callee.empty() ? "attention" : callee);
  if (callee == "grouped_matmul" || callee == "grouped_matmul_weight_grad") {
    std::string shape = callee.str();
    for (Attribute scalar : cast<stepk::CallOp>(op).getScalars())
      if (auto i = dyn_cast<IntegerAttr>(scalar))
        shape += " " + std::to_string(i.getInt());
    report.groupedCallsByShape[shape] += 1;
  }
  if (auto a = dyn_cast_or_null<AttentionGradOp>(kernel))
    countAttention(a, callee.empty() ? "attention_grad" : callee);
  if (auto mm = dyn_cast<MatmulOp>(op))
    countGemm(mm, true);
  if (auto bm = dyn_cast<BatchMatmulOp>(op))
    countGemm(bm, false);
  if (auto gemm = dyn_cast<stepk::GemmOp>(op)) {
    countGemm(gemm, gemm.getSharedRhs());
    if (roundedToFp8(view, view.instance(gemm.getLhs(), o.call)) &&
        roundedToFp8(view, view.instance(gemm.getRhs(), o.call))) {
      report.fp8GemmsPerStep += 1;
      report.fp8FlopsPerStep += flops;
    }
    if (gemm.getFp8()) {
      report.fp8TensorCoreGemmsPerStep += 1;
      report.fp8TensorCoreFlopsPerStep += flops;
    }
  }
}

/// Every op of the step: collectives, FLOPs (executed, by block, the
/// optimizer's), kernels, library shapes and the memory-bound kernels'
/// bytes.
LogicalResult countOps(StepReport &report, const Blocks &blocks) {
  int64_t executed = 0, kernels = 0;
  for (const StepInOrder::Op &o : blocks.view.ops()) {
    Operation &op = *o.op;
    if (communicates(&op)) {
      countCollective(report, op);
      // (A pipeline transfer is not one of the step's kernels.)
      if (isa<mesh::SendOp, mesh::RecvOp>(op))
        continue;
    }
    FailureOr<int64_t> flops = getExecutedFlops(&op);
    if (failed(flops))
      return failure();
    if (getPhase(&op) == Phase::Optimizer)
      report.optimizerFlopsPerStep += *flops;
    if (std::optional<Phase> phase = getPhase(&op);
        *flops > 0 && op.getNumResults() &&
        (phase == Phase::Forward || phase == Phase::Backward || phase == Phase::Recompute)) {
      report.executedFlopsByBlock[o.computedFor.empty() ? "outside blocks" : o.computedFor] +=
          *flops;
    }
    if (llvm::AddOverflow(executed, *flops, executed))
      return op.emitOpError() << "brings the step's executed FLOPs beyond 2^63 - 1";
    kernels += !isa<ReshapeOp, func::ReturnOp>(op); // a stepk.fused op is one kernel
    countLibraryShapes(report, blocks.view, o, *flops);
    // An fp8 GEMM's two packing kernels (CUDA's launches, not the step's
    // library calls): memory-bound bytes of their own kind.
    if (auto gemm = dyn_cast<stepk::GemmOp>(op); gemm && gemm.getFp8()) {
      const int64_t bytes = fp8PackingBytes(gemm);
      report.memoryBoundBytesPerStep += bytes;
      report.memoryBoundKernelsPerStep += fp8PackingKernels(gemm);
      report.memoryBoundBytesByBlock[blocks.workBlock(o)] += bytes;
      report.memoryBoundBytesByKind["fp8 packing"] += bytes;
    }
    if (*flops == 0 && !isa<ReshapeOp, func::ReturnOp, mesh::AllSliceOp>(op) &&
        !communicates(&op)) {
      int64_t bytes = 0;
      for (Value v : op.getOperands())
        bytes += bytesOf(v.getType());
      for (Value v : op.getResults())
        bytes += bytesOf(v.getType());
      report.memoryBoundBytesPerStep += bytes;
      ++report.memoryBoundKernelsPerStep;
      report.memoryBoundBytesByBlock[blocks.workBlock(o)] += bytes;
      report.memoryBoundBytesByKind[kernelKind(&op)] += bytes;
    }
  }
  report.executedFlopsPerStep = executed;
  report.kernelsPerStep = kernels;
  return success();
}

/// The step's arguments: parameters (trained, frozen, tp-split), optimizer
/// state and inputs, their bytes by block.
void countArguments(StepReport &report, func::FuncOp step, const Blocks &blocks) {
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
    int64_t bytes = bytesOf(step.getArgumentTypes()[i]);
    auto block = blocks.parameterBlock.find({step.getArgument(i), -1});
    std::string byBlock =
        Blocks::label(block == blocks.parameterBlock.end() ? "" : block->second);
    if (step.getArgAttr(i, StepDialect::kParamAttrName)) {
      int64_t elements = cast<RankedTensorType>(step.getArgumentTypes()[i]).getNumElements();
      report.params += elements;
      if (!getTrainedParam(step, i))
        report.frozenParams += elements;
      report.paramBytes += bytes;
      report.paramBytesByBlock[byBlock] += bytes;
      (step.getArgAttr(i, StepDialect::kTpShardAttrName) ? report.tpSplitParamBytes
                                                          : report.replicatedParamBytes) += bytes;
    } else if (step.getArgAttr(i, StepDialect::kStateAttrName)) {
      report.optimizerStateBytes += bytes;
      report.optimizerStateBytesByBlock[byBlock] += bytes;
    } else {
      report.inputBytes += bytes;
    }
  }
}

/// Saved activations: arena buffers holding values of forward ops that a
/// backward (or recomputing) op reads, each attributed to its block; and
/// the dropout masks, drawn again in the backward, never saved.
LogicalResult countSavedActivations(StepReport &report, const StepInOrder &view) {
  for (const StepInOrder::Op &o : view.ops())
    if (!isa<func::ReturnOp>(o.op) && !getPhase(o.op))
      return o.op->emitOpError() << "has no step.phase (a pass dropped it)";
  auto readBackward = [&](ArrayRef<int64_t> readers) {
    return llvm::any_of(readers, [&](int64_t k) {
      std::optional<Phase> phase = getPhase(view.ops()[k].op);
      return phase == Phase::Backward || phase == Phase::Recompute;
    });
  };
  DenseSet<int64_t> counted;
  for (const StepInOrder::Op &o : view.ops()) {
    if (getPhase(o.op) != Phase::Forward)
      continue;
    for (Value result : o.op->getResults()) {
      StepInOrder::Instance saved{result, o.call};
      bool readLater = readBackward(view.readers(saved)) || readBackward(view.nestedReaders(saved));
      std::optional<StepInOrder::Storage> storage = view.storage(saved);
      if (!readLater || !storage || storage->second < 0 || !counted.insert(storage->second).second)
        continue;
      int64_t bytes = bytesOf(result.getType());
      report.savedActivationBytes += bytes;
      // A forward op's block (attributeBlocks), as step-outline-blocks
      // marked it.
      report.savedActivationBytesByBlock[o.computedFor.empty() ? "outside blocks"
                                                               : o.computedFor] += bytes;
    }
  }
  for (const StepInOrder::Op &o : view.ops())
    o.op->walk([&](DropoutOp d) {
      Operation *kernel = isa<stepk::CallOp>(d->getParentOp()) ? d->getParentOp() : d;
      if (getPhase(kernel) != Phase::Forward)
        return;
      ++report.dropoutsPerStep;
      report.dropoutMaskBytesNotSaved += d.getType().getNumElements();
    });
  int64_t blockTotal = 0, blocks = 0;
  for (auto &[name, bytes] : report.savedActivationBytesByBlock)
    if (name != "outside blocks") {
      blockTotal += bytes;
      ++blocks;
    }
  report.savedActivationBytesPerBlock = blocks ? blockTotal / blocks : 0;
  return success();
}

/// Recomputation (step-remat): the copies' kinds and FLOPs.
void countRecomputation(StepReport &report, const StepInOrder &view) {
  for (const StepInOrder::Op &o : view.ops()) {
    Operation &op = *o.op;
    if (getPhase(&op) != Phase::Recompute)
      continue;
    report.recomputeFlopsPerStep += *getExecutedFlops(&op);
    std::string kind = op.getName().getStringRef().str();
    if (auto call = op.getAttrOfType<StringAttr>("callee"))
      kind = call.getValue().str();
    ++report.recomputedOpsByKind[kind];
  }
}

/// Each collective runs from its op to the first use of its result; the
/// compute in between hides it. Exposed = Σ max(0, comm − hidden), one
/// link, collectives not contending.
void predictCommunication(StepReport &report, const StepInOrder &view, const CommModel &comm) {
  if (comm.linkGBps <= 0)
    return;
  const std::vector<StepInOrder::Op> &ops = view.ops();
  SmallVector<int64_t> flops;
  for (const StepInOrder::Op &o : ops)
    flops.push_back(*getExecutedFlops(o.op));
  double total = 0, exposed = 0;
  for (auto [i, o] : llvm::enumerate(ops)) {
    Operation *op = o.op;
    if (!communicates(op))
      continue;
    double seconds = wireBytes(op, ranksOf(op)) / (comm.linkGBps * 1e9);
    // Its wait: the first op that reads it (one nested in a kernel's body:
    // at once).
    StepInOrder::Instance result{op->getResult(0), o.call};
    size_t wait = view.nestedReaders(result).empty() ? ops.size() : 0;
    for (int64_t reader : view.readers(result))
      wait = std::min(wait, size_t(reader));
    double hidden = 0;
    for (size_t j = i + 1; j < wait; ++j)
      hidden += flops[j] / (comm.computeGflops * 1e9);
    total += seconds;
    exposed += std::max(0.0, seconds - hidden);
    report.predictedCommSecondsByAxes[axesKey(op)] += seconds;
    report.predictedExposedCommSecondsByAxes[axesKey(op)] += std::max(0.0, seconds - hidden);
  }
  report.linkGbps = comm.linkGBps;
  report.computeGflops = comm.computeGflops;
  report.predictedCommSeconds = total;
  report.predictedExposedCommSeconds = exposed;
}

} // namespace

FailureOr<StepReport> stepc::buildReport(func::FuncOp loss, func::FuncOp step,
                                         const MemoryPlan &plan, StringRef target,
                                         const CommModel &comm) {
  StepReport report;
  FailureOr<ModelReport> model = analyzeModel(loss);
  if (failed(model))
    return failure();
  // The step as it runs: a block function's ops once per call.
  FailureOr<StepInOrder> view = StepInOrder::of(step);
  if (failed(view))
    return failure();
  const Blocks blocks(step, *view);
  if (failed(countOps(report, blocks)))
    return failure();
  countArguments(report, step, blocks);
  if (failed(countSavedActivations(report, *view)))
    return failure();

  report.function = step.getSymName().str();
  report.target = target.str();
  report.paramTensors = model->paramTensors;
  report.matmulParams = model->matmulParams;
  report.forwardFlops = model->forwardFlops;
  report.modelFlopsPerStep = model->modelFlops;
  report.tokensPerStep = model->tokens;
  report.arenaBytes = plan.arenaBytes;
  report.liveBytesPeak = plan.liveBytesPeak;
  report.plannedPeakBytes =
      plan.arenaBytes + report.paramBytes + report.optimizerStateBytes + report.inputBytes;
  report.inPlaceBuffers = plan.inPlaceCount;
  countRecomputation(report, *view);
  report.collectivesInFlightPeak = collectivesInFlightPeak(*view);
  predictCommunication(report, *view, comm);
  return report;
}

static llvm::json::Object toJsonObject(const std::map<std::string, int64_t> &counts) {
  llvm::json::Object object;
  for (auto &[key, count] : counts)
    object[key] = count;
  return object;
}

llvm::json::Object StepReport::toJson() const {
  llvm::json::Object json{
      {"function", function},
      {"target", target},
      {"params", params},
      {"frozen_params", frozenParams},
      {"param_tensors", paramTensors},
      {"matmul_params", matmulParams},
      {"forward_flops", forwardFlops},
      {"param_bytes", paramBytes},
      {"optimizer_state_bytes", optimizerStateBytes},
      {"input_bytes", inputBytes},
      {"model_flops_per_step", modelFlopsPerStep},
      {"executed_flops_per_step", executedFlopsPerStep},
      {"executed_over_model_flops", executedOverModelFlops()},
      {"tokens_per_step", tokensPerStep},
      {"arena_bytes", arenaBytes},
      {"live_bytes_peak", liveBytesPeak},
      {"planned_peak_bytes", plannedPeakBytes},
      // Said plainly, so no one reads the plan as the process's footprint.
      {"planned_peak_covers",
       "the step's tensors on one rank: parameters, optimizer state, inputs and the arena "
       "(on CUDA with cuBLASLt's workspace, the kernels' scratch and saved statistics)"},
      {"planned_peak_excludes",
       "the process itself: code, libraries, thread stacks, the runtime's host copies of "
       "inputs and outputs, MPI/NCCL buffers and the CUDA context; stepc-run --metrics "
       "reports measured_peak_bytes - baseline_bytes to compare with the plan"},
      {"saved_activation_bytes", savedActivationBytes},
      {"saved_activation_bytes_per_block", savedActivationBytesPerBlock},
      {"saved_activation_bytes_by_block", toJsonObject(savedActivationBytesByBlock)},
      {"dropouts_per_step", dropoutsPerStep},
      {"dropout_mask_bytes_not_saved", dropoutMaskBytesNotSaved},
      {"kernels_per_step", kernelsPerStep},
      {"memory_bound_bytes_per_step", memoryBoundBytesPerStep},
      {"memory_bound_kernels_per_step", memoryBoundKernelsPerStep},
      {"gemm_calls_by_shape", toJsonObject(gemmCallsByShape)},
      {"fp8_gemms_per_step", fp8GemmsPerStep},
      {"fp8_flops_per_step", fp8FlopsPerStep},
      {"fp8_tensor_core_gemms_per_step", fp8TensorCoreGemmsPerStep},
      {"fp8_tensor_core_flops_per_step", fp8TensorCoreFlopsPerStep},
      {"attention_calls_by_shape", toJsonObject(attentionCallsByShape)},
      {"grouped_calls_by_shape", toJsonObject(groupedCallsByShape)},
      {"attention_flops_by_shape", toJsonObject(attentionFlopsByShape)},
      {"in_place_buffers", inPlaceBuffers},
      {"recomputed_ops_by_kind", toJsonObject(recomputedOpsByKind)},
      {"recompute_flops_per_step", recomputeFlopsPerStep},
      {"collectives_per_step", collectivesPerStep},
      {"collective_bytes_per_step", toJsonObject(collectiveBytesPerStep)},
      {"collective_bytes_by_axes", toJsonObject(collectiveBytesByAxes)},
      {"collectives_by_axes", toJsonObject(collectivesByAxes)},
      {"collective_wire_bytes_by_axes", toJsonObject(collectiveWireBytesByAxes)},
      {"collectives_in_flight_peak",
       llvm::json::Array(llvm::map_range(collectivesInFlightPeak,
                                         [](const CollectiveCall &c) -> llvm::json::Value {
                                           return llvm::json::Object{{"kind", c.kind},
                                                                     {"axes", c.axes},
                                                                     {"count", c.count}};
                                         }))},
      {"optimizer_flops_per_step", optimizerFlopsPerStep},
      {"executed_flops_by_block", toJsonObject(executedFlopsByBlock)},
      {"memory_bound_bytes_by_block", toJsonObject(memoryBoundBytesByBlock)},
      {"memory_bound_bytes_by_kind", toJsonObject(memoryBoundBytesByKind)},
      {"param_bytes_by_block", toJsonObject(paramBytesByBlock)},
      {"optimizer_state_bytes_by_block", toJsonObject(optimizerStateBytesByBlock)},
      {"optimizer_collective_bytes_per_step", toJsonObject(optimizerCollectiveBytesPerStep)},
      {"tp_split_param_bytes", tpSplitParamBytes},
      {"replicated_param_bytes", replicatedParamBytes},
  };
  if (tokensPerStep > 0)
    json["model_flops_per_token"] = modelFlopsPerStep / tokensPerStep;
  if (!pipeline.empty())
    json["pipeline"] = llvm::json::Object(pipeline);
  if (!predictedCommSecondsByAxes.empty()) {
    llvm::json::Object comm, exposed;
    for (auto &[axes, seconds] : predictedCommSecondsByAxes)
      comm[axes] = seconds;
    for (auto &[axes, seconds] : predictedExposedCommSecondsByAxes)
      exposed[axes] = seconds;
    json["predicted_comm_seconds_by_axes"] = std::move(comm);
    json["predicted_exposed_comm_seconds_by_axes"] = std::move(exposed);
  }
  if (!remat.empty())
    json["remat"] = remat;
  if (!compileOptions.empty())
    json["compile_options"] = compileOptions;
  auto optional = [&](llvm::StringRef key, const auto &value) {
    if (value)
      json[key] = *value;
  };
  optional("link_gbps", linkGbps);
  optional("compute_gflops", computeGflops);
  optional("predicted_comm_seconds", predictedCommSeconds);
  optional("predicted_exposed_comm_seconds", predictedExposedCommSeconds);
  optional("memory_budget_bytes", memoryBudgetBytes);
  optional("target_arena_bytes", targetArenaBytes);
  optional("target_planned_peak_bytes", targetPlannedPeakBytes);
  optional("target_launches_per_step", targetLaunchesPerStep);
  optional("eval_arena_bytes", evalArenaBytes);
  optional("sample_arena_bytes", sampleArenaBytes);
  return json;
}
