//===- FoldWideningGemms.cpp - bf16 GEMMs that write f32, with their bias -===//
//
// Under --precision=bf16 every GEMM's bf16 result is widened for its f32
// consumers (step-mixed-precision). The CPU's bf16 GEMM accumulates in f32
// and can write that sum directly: a GEMM whose every user widens it
// becomes a stepk.gemm with an f32 result, and the widening loops go. That
// GEMM also adds a bias broadcast along its rows (oneDNN's bias, added to
// the f32 sum), and where the biased sum is only narrowed back to bf16 (a
// projection feeding attention, say), writes bf16: one pass over the
// activations instead of three. A GEMM whose f32 result only elementwise
// loops read (a pre-activation, a residual branch, the gradient into a
// GELU) writes bf16 too, each loop widening it as it reads: the rounding
// the step's bf16 GEMM has (for a biased one, autocast's: the f32 sum plus
// bias, rounded), half the bytes written, saved and read again. And an
// f32 gradient that exists only to be summed beside its bf16 rounding (a
// bias's gradient beside the weight's GEMM operand) is summed from the
// bf16 values, as autocast does: the loop that makes it writes bf16 alone.
// An f32 GEMM (fp32 steps) takes its bias the same way: the sum plus the
// bias rounded once, as the separate add rounds it, without the add's pass
// over the output (and a GELU after it reads one operand, not two).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"

namespace stepc {
#define GEN_PASS_DEF_STEPFOLDWIDENINGGEMMS
#include "stepc/Compiler/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The converts to f32 that are all of `v`'s users, or none if another op
/// reads it.
SmallVector<ConvertOp> wideningUsers(Value v) {
  SmallVector<ConvertOp> converts;
  for (Operation *user : v.getUsers()) {
    auto convert = dyn_cast<ConvertOp>(user);
    if (!convert || !convert.getType().getElementType().isF32())
      return {};
    converts.push_back(convert);
  }
  return converts;
}

template <typename OpT>
void foldWidening(OpT op, bool sharedRhs) {
  RankedTensorType lhs = op.getLhs().getType();
  if (!lhs.getElementType().isBF16())
    return;
  SmallVector<ConvertOp> converts = wideningUsers(op.getResult());
  if (converts.empty())
    return;
  OpBuilder b(op);
  auto gemm = b.create<stepk::GemmOp>(op.getLoc(), converts.front().getType(), Type(),
                                      op.getLhs(), op.getRhs(), Value(), Value(),
                                      op.getTransposeA(), op.getTransposeB(), sharedRhs,
                                      stepk::Epilogue::none, /*fp8=*/nullptr,
                                      Value(), Value());
  copyPhase(op, gemm);
  for (ConvertOp convert : converts) {
    convert.getResult().replaceAllUsesWith(gemm.getResult());
    convert.erase();
  }
  op.erase();
}

/// The single user of `v`, if it has exactly one use.
Operation *soleUserOf(Value v) { return v.hasOneUse() ? *v.getUsers().begin() : nullptr; }

/// The bias of `gemm`'s result: its only user adds a broadcast of an f32
/// [N] (N its last dim) made before `gemm` and read by that add alone, and
/// no collective is issued between the GEMM and the add (the bias's first
/// use moves to the GEMM: under fsdp a gathered bias is waited for there,
/// and a gather step-schedule-collectives issued ahead of that wait would
/// come after it). Null otherwise.
Value biasAdded(Operation *gemm) {
  Value result = gemm->getResult(0);
  auto outType = cast<RankedTensorType>(result.getType());
  auto add = dyn_cast_or_null<AddOp>(soleUserOf(result));
  if (!add || add.getType() != outType)
    return Value();
  Value other = add.getLhs() == result ? add.getRhs() : add.getLhs();
  auto broadcast = other.getDefiningOp<BroadcastOp>();
  if (!broadcast || !other.hasOneUse())
    return Value();
  Value bias = broadcast.getInput();
  auto biasType = cast<RankedTensorType>(bias.getType());
  if (biasType.getRank() != 1 || biasType.getDimSize(0) != outType.getShape().back() ||
      !biasType.getElementType().isF32())
    return Value();
  if (Operation *def = bias.getDefiningOp(); def && !def->isBeforeInBlock(gemm))
    return Value();
  for (Operation *op = gemm->getNextNode(); op && op != add.getOperation(); op = op->getNextNode())
    if (communicates(op))
      return Value();
  return bias;
}

/// An f32 matmul (an fp32 step's) whose bias biasAdded finds: a stepk.gemm
/// of its own (f32 in, f32 out), for foldBias to give the bias; others stay
/// step.matmul (step-lower-library-calls' GEMMs).
void gemmForBias(MatmulOp op) {
  if (!op.getLhs().getType().getElementType().isF32() || !biasAdded(op))
    return;
  const bool sharedRhs = true; // step.matmul's form
  OpBuilder b(op);
  auto gemm = b.create<stepk::GemmOp>(op.getLoc(), op.getType(), Type(), op.getLhs(),
                                      op.getRhs(), Value(), Value(), op.getTransposeA(),
                                      op.getTransposeB(), sharedRhs, stepk::Epilogue::none,
                                      /*fp8=*/nullptr, Value(), Value());
  copyPhase(op, gemm);
  op.getResult().replaceAllUsesWith(gemm.getResult());
  op.erase();
}

/// add(gemm, broadcast(bias[N])) with an f32 bias along the last dim, the
/// add the GEMM's only user: the GEMM adds the bias. Then, if every user of
/// the sum narrows it to bf16, the GEMM writes bf16 (the same rounding of
/// the same f32 sum).
void foldBias(stepk::GemmOp gemm) {
  auto outType = cast<RankedTensorType>(gemm.getResult().getType());
  if (gemm.getBias() || !outType.getElementType().isF32())
    return;
  Value bias = biasAdded(gemm);
  if (!bias)
    return;
  auto add = cast<AddOp>(soleUserOf(gemm.getResult()));
  Operation *broadcast =
      (add.getLhs() == gemm.getResult() ? add.getRhs() : add.getLhs()).getDefiningOp();
  // Every use narrows the sum to bf16, directly or through slices (the
  // packed projection's q, k and v, read in place by a packed attention:
  // one without a mask, as the CPU target copies no bf16 slice).
  SmallVector<ConvertOp> narrowing;
  SmallVector<SliceOp> slices;
  auto packable = [](Operation *user) {
    if (auto a = dyn_cast<AttentionOp>(user))
      return !a.getMask();
    auto g = dyn_cast<AttentionGradOp>(user);
    return g && !g.getMask();
  };
  auto narrowsAll = [&](Value v) {
    for (Operation *user : v.getUsers()) {
      auto convert = dyn_cast<ConvertOp>(user);
      if (!convert || !convert.getType().getElementType().isBF16() ||
          !llvm::all_of(convert->getUsers(), packable))
        return false;
    }
    return true;
  };
  bool narrowed = true;
  for (Operation *user : add.getResult().getUsers()) {
    if (auto convert = dyn_cast<ConvertOp>(user);
        convert && convert.getType().getElementType().isBF16())
      narrowing.push_back(convert);
    else if (auto slice = dyn_cast<SliceOp>(user); slice && narrowsAll(slice.getResult()))
      slices.push_back(slice);
    else
      narrowed = false;
  }
  if (!narrowed) {
    narrowing.clear();
    slices.clear();
  }
  Type bf16 = BFloat16Type::get(gemm.getContext());
  Type resultType = narrowed ? Type(outType.clone(bf16)) : Type(outType);
  OpBuilder b(gemm);
  auto biased = b.create<stepk::GemmOp>(gemm.getLoc(), resultType, Type(), gemm.getLhs(),
                                        gemm.getRhs(), bias, Value(), gemm.getTransposeA(),
                                        gemm.getTransposeB(), gemm.getSharedRhs(),
                                        stepk::Epilogue::none, gemm.getFp8Attr(), Value(),
                                        Value());
  copyPhase(gemm, biased);
  for (ConvertOp convert : narrowing) {
    convert.getResult().replaceAllUsesWith(biased.getResult());
    convert.erase();
  }
  for (SliceOp slice : slices) {
    // The same slice of the bf16 sum replaces each of its narrowings.
    b.setInsertionPoint(slice);
    Operation *narrowSlice = b.clone(*slice);
    narrowSlice->setOperand(0, biased.getResult());
    narrowSlice->getResult(0).setType(slice.getType().clone(bf16));
    for (Operation *user : llvm::make_early_inc_range(slice.getResult().getUsers())) {
      user->getResult(0).replaceAllUsesWith(narrowSlice->getResult(0));
      user->erase();
    }
    slice.erase();
  }
  add.getResult().replaceAllUsesWith(biased.getResult());
  add.erase();
  broadcast->erase();
  gemm.erase();
}

/// A bf16 GEMM's f32 result that only elementwise ops read: the GEMM writes
/// bf16 and each reader widens it (step-fuse-elementwise joins the widening
/// to the reader's loop); a reader that narrows it reads the GEMM directly.
void narrowForLoops(stepk::GemmOp gemm) {
  auto outType = cast<RankedTensorType>(gemm.getResult().getType());
  if (!outType.getElementType().isF32() || gemm.getAux() || gemm.getEpilogueResult() ||
      !gemm.getLhs().getType().getElementType().isBF16() || gemm.getResult().use_empty())
    return;
  for (Operation *user : gemm.getResult().getUsers())
    if (!isFusableElementwise(user))
      return;
  RankedTensorType narrowType = outType.clone(BFloat16Type::get(gemm.getContext()));
  Value result = gemm.getResult();
  result.setType(narrowType);
  OpBuilder b(gemm);
  for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
    Operation *user = use.getOwner();
    if (auto convert = dyn_cast<ConvertOp>(user); convert && convert.getType() == narrowType) {
      convert.getResult().replaceAllUsesWith(result);
      convert.erase();
      continue;
    }
    b.setInsertionPoint(user);
    auto widen = b.create<ConvertOp>(user->getLoc(), outType, result);
    copyPhase(user, widen);
    use.set(widen);
  }
}

/// Whether every use of `v` rounds it to bf16, directly or through reshapes
/// (the GEMM operands step-fold-conversions makes one rounding).
bool onlyRounded(Value v) {
  for (Operation *user : v.getUsers()) {
    auto convert = dyn_cast<ConvertOp>(user);
    auto reshape = dyn_cast<ReshapeOp>(user);
    if (!(convert && convert.getType().getElementType().isBF16()) &&
        !(reshape && onlyRounded(reshape.getResult())))
      return false;
  }
  return true;
}

/// An f32 value that is otherwise only rounded to bf16 (`narrow` one of
/// those roundings) and summed: each sum reads the widened bf16 value
/// instead (step-lower-library-calls' reduce_of_bf16), `narrow` moved
/// before the first sum.
void sumNarrowed(ConvertOp narrow) {
  Value wide = narrow.getInput();
  if (!narrow.getType().getElementType().isBF16() ||
      !cast<RankedTensorType>(wide.getType()).getElementType().isF32())
    return;
  SmallVector<ReduceSumOp> sums;
  for (OpOperand &use : wide.getUses()) {
    Operation *user = use.getOwner();
    auto sum = dyn_cast<ReduceSumOp>(user);
    auto convert = dyn_cast<ConvertOp>(user);
    auto reshape = dyn_cast<ReshapeOp>(user);
    if (sum && sum->getBlock() == narrow->getBlock())
      sums.push_back(sum);
    else if (!(convert && convert.getType().getElementType().isBF16()) &&
             !(reshape && onlyRounded(reshape.getResult())))
      return;
  }
  if (sums.empty())
    return;
  for (ReduceSumOp sum : sums)
    if (sum->isBeforeInBlock(narrow))
      narrow->moveBefore(sum);
  OpBuilder b(narrow);
  for (ReduceSumOp sum : sums) {
    b.setInsertionPoint(sum);
    auto widen = b.create<ConvertOp>(sum.getLoc(), wide.getType(), narrow.getResult());
    copyPhase(sum, widen);
    sum->setOperand(0, widen);
  }
}

} // namespace

void stepc::narrowGemmsForLoops(func::FuncOp step) {
  SmallVector<stepk::GemmOp> gemms(step.getBody().front().getOps<stepk::GemmOp>());
  for (stepk::GemmOp gemm : gemms)
    narrowForLoops(gemm);
}

void stepc::sumBesideRoundings(func::FuncOp step) {
  SmallVector<ConvertOp> converts(step.getBody().front().getOps<ConvertOp>());
  for (ConvertOp convert : converts)
    sumNarrowed(convert);
}

namespace {

struct StepFoldWideningGemmsPass
    : public stepc::impl::StepFoldWideningGemmsBase<StepFoldWideningGemmsPass> {
  void runOnOperation() override {
    for (func::FuncOp step : trainingSteps(getOperation())) {
      sumBesideRoundings(step);
      SmallVector<Operation *> gemms;
      for (Operation &op : step.getBody().front())
        if (isa<MatmulOp, BatchMatmulOp>(op))
          gemms.push_back(&op);
      for (Operation *op : gemms) {
        if (auto m = dyn_cast<MatmulOp>(op))
          foldWidening(m, /*sharedRhs=*/true);
        else
          foldWidening(cast<BatchMatmulOp>(op), /*sharedRhs=*/false);
      }
      // f32 GEMMs with a bias (fp32 steps): gemmForBias then foldBias.
      SmallVector<MatmulOp> f32(step.getBody().front().getOps<MatmulOp>());
      for (MatmulOp m : f32)
        gemmForBias(m);
      SmallVector<stepk::GemmOp> folded(step.getBody().front().getOps<stepk::GemmOp>());
      for (stepk::GemmOp gemm : folded)
        foldBias(gemm);
      narrowGemmsForLoops(step);
    }
  }
};

} // namespace
