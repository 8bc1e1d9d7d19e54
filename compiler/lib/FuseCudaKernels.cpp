//===- FuseCudaKernels.cpp - the CUDA kernels' fusions, into the IR ------===//
//
// What the CUDA back end computes inside a library kernel is decided here
// and written into the IR, so that the memory plan and the emitter read
// ops, not side tables: a GEMM with its bias, GELU or DGELU epilogue and
// its widening becomes one stepk.gemm; an attention (or its gradient) with
// its widening becomes a stepk.attention (stepk.attention_grad), and a
// backward that can read its forward's output and log-sum-exp takes them as
// operands (the forward returns its log-sum-exp as a value). An attention
// on slices of the packed QKV projection reads the projection in place, and
// its gradient writes the three parts into one packed result instead of
// three pads and two adds (`packed` offsets; PackedAttention.h); the
// projection's GEMM then writes the bf16 copy the kernels read, bias added.
// A weight gradient's GEMM also sums the bias's gradient from the output
// gradient it reads (cuBLASLt's BGRADB): no column-sum kernel.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "PackedAttention.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/AdamwGroup.h"

#include "runtime/kernels/cuda/launch_config.h"

#include "mlir/IR/IRMapping.h"

namespace stepc {
#define GEN_PASS_DEF_STEPFUSECUDAKERNELS
#include "stepc/Compiler/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The decisions, made on the IR before any rewrite: a bf16 GEMM or
/// attention whose results only feed converts to f32 writes f32 directly
/// (not an attention cuDNN may run: cuDNN writes bf16 alone);
/// add(GEMM, broadcast(bias[N])) is cuBLASLt's BIAS epilogue; a tanh GELU of
/// a GEMM's result is its GELU_AUX epilogue (the pre-activation kept for the
/// backward), gelu_grad(GEMM, x) its DGELU; the bias gradient beside a
/// weight-gradient GEMM its BGRADB; an attention_grad reads the attention
/// of the same q, k, v before it.
struct Fusions {
  /// Fused op -> the kernel op that computes it.
  DenseMap<Operation *, Operation *> computedBy;
  /// A kernel result -> the value the kernel writes instead (the convert's,
  /// the add's).
  DenseMap<Value, Value> writesTo;
  /// The bias of a GEMM with the BIAS epilogue.
  DenseMap<Operation *, Value> biasOf;
  /// A GEMM's GELU epilogue and its aux value (the pre-activation: written
  /// by GELU, read by DGELU).
  DenseMap<Operation *, std::pair<stepk::Epilogue, Value>> epilogueOf;
  /// A weight-gradient GEMM's bgrad epilogue: the sum it computes.
  DenseMap<Operation *, ReduceSumOp> biasGradOf;
  /// attention_grad -> the attention whose output and log-sum-exp it reads.
  DenseMap<Operation *, AttentionOp> savedForwardOf;
  DenseSet<Operation *> savedForwards;

  /// What `v`'s kernel writes for it.
  Value written(Value v) const {
    Value to = writesTo.lookup(v);
    return to ? to : v;
  }
};

/// The single user of `v`, if it has exactly one use.
Operation *soleUserOf(Value v) { return v.hasOneUse() ? *v.getUsers().begin() : nullptr; }

/// Whether the only reader of a widening takes the bf16 value itself once
/// step-lower-library-calls folds the widening into its call.
bool readsBf16Itself(ConvertOp widening) {
  Operation *user = soleUserOf(widening.getResult());
  if (isa_and_nonnull<RotaryOp>(user))
    return true;
  return isa_and_nonnull<LayerNormGradOp, RmsNormGradOp>(user) &&
         user->getOperand(0) == widening.getResult() &&
         llvm::count(user->getOperands(), widening.getResult()) == 1;
}

/// Whether `op` is an attention cuDNN may run (bf16, no mask, a head dim its
/// kernels cover; kernels/cuda/cudnn_attention.h): cuDNN writes bf16 alone,
/// so an f32 output would send the forward, and the backward that reads it,
/// to our own kernels. Such an attention keeps its bf16 output and its
/// widening stays for the f32 readers (an fp8 packing pass of the output,
/// the projection's input under --precision=fp8, reads the bf16 itself).
bool cudnnMayRun(Operation *op) {
  auto a = dyn_cast<AttentionOp>(op);
  return a && !a.getMask() && a.getQuery().getType().getElementType().isBF16() &&
         cuda::CudnnAttentionHeadDim(a.getHeadDim());
}

/// Whether `later` may be computed by the kernel of `first`: everything it
/// reads exists when that kernel runs (block arguments, values defined
/// before `first`, and values of `first`'s own group).
bool canFuseInto(Operation *first, Operation *later, const Fusions &f) {
  if (first->getBlock() != later->getBlock() || !first->isBeforeInBlock(later))
    return false;
  for (Value operand : later->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (!def || def == first || def->isBeforeInBlock(first))
      continue;
    auto kernel = f.computedBy.find(def);
    if (kernel == f.computedBy.end() || kernel->second != first)
      return false;
  }
  return true;
}

/// The bias gradient a weight-gradient GEMM (`op(lhs)` = dyᵀ, lhs [K, M])
/// can sum in its BGRADB epilogue: a reduce_sum over every leading dim of
/// the output gradient dy the lhs reshapes, of the same values or their
/// widening, or of the f32 values the GEMM reads rounded to bf16 (summed
/// from the rounding then, as autocast sums them and sumBesideRoundings
/// does where nothing else reads the f32 values); every user of the sum
/// must come after the GEMM, which computes it.
ReduceSumOp biasGradSum(MatmulOp gemm) {
  auto lhs = cast<RankedTensorType>(gemm.getLhs().getType());
  if (!gemm.getTransposeA() || lhs.getRank() != 2)
    return {};
  Value grad = gemm.getLhs();
  while (auto reshape = grad.getDefiningOp<ReshapeOp>())
    grad = reshape.getInput();
  auto gradType = cast<RankedTensorType>(grad.getType());
  if (gradType.getShape().back() != lhs.getDimSize(1))
    return {};
  SmallVector<Value> summed{grad};
  for (Operation *user : grad.getUsers())
    if (auto widen = dyn_cast<ConvertOp>(user); widen && widen.getType().getElementType().isF32())
      summed.push_back(widen.getResult());
  if (auto narrow = grad.getDefiningOp<ConvertOp>(); narrow && gradType.getElementType().isBF16())
    summed.push_back(narrow.getInput());
  Block *block = gemm->getBlock();
  auto afterGemm = [&](Operation *user) {
    Operation *at = block->findAncestorOpInBlock(*user);
    return at && gemm->isBeforeInBlock(at);
  };
  auto leading = llvm::to_vector(llvm::seq<int64_t>(0, gradType.getRank() - 1));
  for (Value v : summed)
    for (Operation *user : v.getUsers()) {
      auto sum = dyn_cast<ReduceSumOp>(user);
      if (sum && sum->getBlock() == block && !sum.getKeepDims() &&
          sum.getDims() == ArrayRef<int64_t>(leading) &&
          sum.getType().getElementType().isF32() && llvm::all_of(sum->getUsers(), afterGemm))
        return sum;
    }
  return {};
}

Fusions planFusions(func::FuncOp step, const DenseSet<Operation *> &packed) {
  Fusions f;
  for (Operation &op : step.getBody().front()) {
    if (!isa<MatmulOp, BatchMatmulOp, AttentionOp, AttentionGradOp>(op))
      continue;
    // A packed gradient's widening is its own (Folder::foldPackedGrad).
    if (isa<AttentionGradOp>(op) && packed.contains(&op))
      continue;
    // Widen every bf16 result in the kernel, or none (one output type).
    SmallVector<ConvertOp> converts;
    for (Value r : op.getResults()) {
      auto convert = dyn_cast_or_null<ConvertOp>(soleUserOf(r));
      // A rotation, or a norm's gradient as its dy, reads the bf16 value
      // itself (step-lower-library-calls' rotary_of_bf16,
      // layer_norm_grad_of_bf16): no f32 copy of Llama's query and key, or
      // of the input gradient a norm's backward reads. An attention cuDNN
      // may run writes bf16 whoever reads it.
      if (convert && (readsBf16Itself(convert) || cudnnMayRun(&op)))
        convert = nullptr;
      if (convert && cast<RankedTensorType>(r.getType()).getElementType().isBF16() &&
          convert.getType().getElementType().isF32() && canFuseInto(&op, convert, f))
        converts.push_back(convert);
    }
    if (!converts.empty() && converts.size() == op.getNumResults())
      for (auto [r, c] : llvm::zip(op.getResults(), converts)) {
        f.computedBy[c] = &op;
        f.writesTo[r] = c.getResult();
      }
    if (!isa<MatmulOp>(op))
      continue;
    // add(GEMM, broadcast(bias)) with an f32 bias [N] along the last dim.
    Value out = f.written(op.getResult(0));
    auto add = dyn_cast_or_null<AddOp>(soleUserOf(out));
    auto outType = cast<RankedTensorType>(out.getType());
    if (!add || !outType.getElementType().isF32())
      continue;
    Value other = add.getLhs() == out ? add.getRhs() : add.getLhs();
    auto broadcast = other.getDefiningOp<BroadcastOp>();
    if (!broadcast || !other.hasOneUse())
      continue;
    // The bias must exist where the GEMM runs (the epilogue reads it there).
    if (Operation *def = broadcast.getInput().getDefiningOp(); def && !def->isBeforeInBlock(&op))
      continue;
    RankedTensorType biasType = broadcast.getInput().getType();
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != outType.getShape().back() ||
        !biasType.getElementType().isF32())
      continue;
    f.computedBy[broadcast] = &op;
    if (!canFuseInto(&op, add, f)) {
      f.computedBy.erase(broadcast);
      continue;
    }
    f.computedBy[add] = &op;
    f.biasOf[&op] = broadcast.getInput();
    // A biased sum only rounded to bf16 (the packed projection attention
    // reads) is written bf16: one rounding of the f32 sum plus the bias.
    Value sum = add.getResult();
    auto narrow = dyn_cast_or_null<ConvertOp>(soleUserOf(sum));
    if (narrow && narrow.getType().getElementType().isBF16() && canFuseInto(&op, narrow, f)) {
      f.computedBy[narrow] = &op;
      sum = narrow.getResult();
    }
    f.writesTo[out] = sum;
    if (out != op.getResult(0))
      f.writesTo[op.getResult(0)] = sum;
  }
  // The backward of an attention reads its forward's output and log-sum-exp
  // instead of recomputing them: the latest forward of the same operands
  // before it (under remat, the one recomputed in the backward, so the
  // first forward's output need not live across the step).
  SmallVector<AttentionOp> forwards;
  for (Operation &op : step.getBody().front()) {
    if (auto fwd = dyn_cast<AttentionOp>(op)) {
      forwards.push_back(fwd);
      continue;
    }
    auto grad = dyn_cast<AttentionGradOp>(op);
    if (!grad)
      continue;
    for (AttentionOp fwd : llvm::reverse(forwards)) {
      if (fwd.getQuery() != grad.getQuery() || fwd.getKey() != grad.getKey() ||
          fwd.getValue() != grad.getValue() || fwd.getNumHeads() != grad.getNumHeads() ||
          fwd.getNumKvHeads() != grad.getNumKvHeads() || fwd.getHeadDim() != grad.getHeadDim() ||
          fwd.getCausal() != grad.getCausal() || fwd.getMask() != grad.getMask() ||
          fwd.getEffectiveScale() != grad.getEffectiveScale())
        continue;
      f.savedForwardOf[grad] = fwd;
      f.savedForwards.insert(fwd);
      break;
    }
  }
  // Second sweep: GELU epilogues on what each GEMM now writes.
  for (Operation &op : step.getBody().front()) {
    if (!isa<MatmulOp>(op))
      continue;
    Value out = f.written(op.getResult(0));
    auto type = cast<RankedTensorType>(out.getType());
    if (!type.getElementType().isF32() || type.getShape().back() % 8 != 0)
      continue;
    for (Operation *user : out.getUsers()) {
      auto gelu = dyn_cast<GeluOp>(user);
      if (gelu && gelu.isTanhApproximation() && canFuseInto(&op, gelu, f)) {
        f.computedBy[gelu] = &op;
        f.writesTo[op.getResult(0)] = gelu.getResult();
        f.epilogueOf[&op] = {stepk::Epilogue::gelu, out};
        break;
      }
    }
    if (f.epilogueOf.count(&op))
      continue;
    auto grad = dyn_cast_or_null<GeluGradOp>(soleUserOf(out));
    if (grad && grad.isTanhApproximation() && grad.getGrad() == out && !f.biasOf.count(&op) &&
        canFuseInto(&op, grad, f)) {
      f.computedBy[grad] = &op;
      f.writesTo[op.getResult(0)] = grad.getResult();
      f.epilogueOf[&op] = {stepk::Epilogue::dgelu, grad.getInput()};
    }
  }
  // Third sweep: bias gradients into their weight gradients' GEMMs.
  for (Operation &op : step.getBody().front()) {
    auto gemm = dyn_cast<MatmulOp>(op);
    if (!gemm || f.biasOf.count(&op) || f.epilogueOf.count(&op))
      continue;
    ReduceSumOp sum = biasGradSum(gemm);
    if (!sum || f.computedBy.count(sum))
      continue;
    f.computedBy[sum] = &op;
    f.biasGradOf[&op] = sum;
  }
  return f;
}

/// The attentions (unmasked) that read their query, key and value as
/// columns of one packed projection, and the gradients among them that
/// write theirs into one packed result (the three tile the projection's
/// last dim and are padded back and summed).
DenseSet<Operation *> packedAttention(func::FuncOp step) {
  DenseSet<Operation *> packed;
  for (Operation &op : step.getBody().front()) {
    if (auto fwd = dyn_cast<AttentionOp>(op)) {
      if (!fwd.getMask() && packedQkv(fwd.getQuery(), fwd.getKey(), fwd.getValue()))
        packed.insert(&op);
    } else if (auto grad = dyn_cast<AttentionGradOp>(op); grad && !grad.getMask()) {
      std::optional<PackedQkv> p = packedQkv(grad.getQuery(), grad.getKey(), grad.getValue());
      if (p && p->tilesLastDim() && packedGradSum(grad, *p))
        packed.insert(&op);
    }
  }
  return packed;
}

/// Rewrites the kernel ops `fusions` decided on, in block order, each as one
/// stepk op at the kernel's position (its folded ops read only what exists
/// there: the verifier after the pass would catch a violation). `replaced`
/// maps the values earlier folds replaced (a forward GELU's pre-activation,
/// which a backward DGELU reads) to their new values. Folded ops and kernels
/// go to `dead`, erased once every fold is done (so no value in `replaced`
/// is freed and reused meanwhile).
class Folder {
public:
  Folder(const Fusions &fusions, const DenseSet<Operation *> &packed)
      : fusions(fusions), packed(packed) {}

  void fold(Operation *op) {
    OpBuilder b(op);
    Operation *kernel = nullptr;
    if (isa<MatmulOp, BatchMatmulOp>(op))
      kernel = foldGemm(b, op);
    else if (auto fwd = dyn_cast<AttentionOp>(op))
      kernel = foldAttention(b, fwd);
    else if (packed.contains(op))
      kernel = foldPackedGrad(b, cast<AttentionGradOp>(op));
    else
      kernel = foldAttentionGrad(b, cast<AttentionGradOp>(op));
    step::copyPhase(op, kernel);
    for (auto [member, by] : fusions.computedBy)
      if (by == op)
        dead.push_back(member);
    dead.push_back(op);
  }

  /// Erases the folded ops: users before what they use.
  void eraseDead() {
    llvm::sort(dead, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
    for (Operation *op : dead)
      op->erase();
  }

private:
  Value current(Value v) const {
    Value now = v ? replaced.lookup(v) : Value();
    return now ? now : v;
  }
  /// `op`'s results are now `values` (what its kernel writes for each).
  void replaceResults(Operation *op, ValueRange values) {
    for (auto [r, now] : llvm::zip(op->getResults(), values)) {
      Value written = fusions.written(r);
      written.replaceAllUsesWith(now);
      replaced[written] = now;
    }
  }

  Operation *foldGemm(OpBuilder &b, Operation *op) {
    Value written = fusions.written(op->getResult(0));
    Value bias = current(fusions.biasOf.lookup(op));
    auto [epilogue, stale] = fusions.epilogueOf.lookup(op);
    Value aux = current(stale);
    ReduceSumOp biasGrad = fusions.biasGradOf.lookup(op);
    if (biasGrad)
      epilogue = stepk::Epilogue::bgrad;
    bool shared = isa<MatmulOp>(op);
    bool ta = shared ? cast<MatmulOp>(op).getTransposeA() : cast<BatchMatmulOp>(op).getTransposeA();
    bool tb = shared ? cast<MatmulOp>(op).getTransposeB() : cast<BatchMatmulOp>(op).getTransposeB();
    // GELU also writes its aux (the pre-activation); DGELU reads it; BGRAD
    // writes the bias gradient.
    bool gelu = epilogue == stepk::Epilogue::gelu;
    Type second = gelu ? aux.getType() : biasGrad ? biasGrad.getType() : Type();
    auto gemm = b.create<stepk::GemmOp>(
        op->getLoc(), written.getType(), second, op->getOperand(0),
        op->getOperand(1), bias, epilogue == stepk::Epilogue::dgelu ? aux : Value(), ta, tb,
        shared, epilogue, /*fp8=*/nullptr, Value(), Value());
    replaceResults(op, gemm.getResult());
    if (gelu) {
      aux.replaceAllUsesWith(gemm.getPreActivation());
      replaced[aux] = gemm.getPreActivation();
    }
    if (biasGrad)
      biasGrad.getResult().replaceAllUsesWith(gemm.getBiasGrad());
    return gemm;
  }

  Operation *foldAttention(OpBuilder &b, AttentionOp fwd) {
    Type lse;
    if (fusions.savedForwards.contains(fwd)) {
      RankedTensorType q = fwd.getQuery().getType();
      lse = RankedTensorType::get(
          {q.getDimSize(0), static_cast<int64_t>(fwd.getNumHeads()), q.getDimSize(1)},
          b.getF32Type());
    }
    Value q = fwd.getQuery(), k = fwd.getKey(), v = fwd.getValue();
    DenseI64ArrayAttr offsets;
    if (packed.contains(fwd)) {
      PackedQkv p = *packedQkv(q, k, v);
      q = k = v = p.source;
      offsets = b.getDenseI64ArrayAttr(p.offsets);
    }
    auto kernel = b.create<stepk::AttentionOp>(
        fwd.getLoc(), fusions.written(fwd.getResult()).getType(), lse, q, k, v, fwd.getMask(),
        offsets, fwd.getNumHeads(), fwd.getNumKvHeads(), fwd.getHeadDim(), fwd.getCausal(),
        llvm::APFloat(fwd.getEffectiveScale()));
    kernelOf[fwd] = kernel;
    replaceResults(fwd, kernel.getResult());
    return kernel;
  }

  /// The forward's output and log-sum-exp `grad` reads, if saved.
  std::pair<Value, Value> savedForward(AttentionGradOp grad) const {
    AttentionOp fwd = fusions.savedForwardOf.lookup(grad);
    if (!fwd)
      return {};
    stepk::AttentionOp kernel = kernelOf.lookup(fwd);
    return {kernel.getResult(), kernel.getLse()};
  }

  Operation *foldAttentionGrad(OpBuilder &b, AttentionGradOp grad) {
    auto [out, lse] = savedForward(grad);
    SmallVector<Type> types;
    for (Value r : grad.getResults())
      types.push_back(fusions.written(r).getType());
    auto kernel = b.create<stepk::AttentionGradOp>(
        grad.getLoc(), types, grad.getGrad(), grad.getQuery(), grad.getKey(), grad.getValue(),
        out, lse, grad.getMask(), DenseI64ArrayAttr(), grad.getNumHeads(),
        grad.getNumKvHeads(), grad.getHeadDim(), grad.getCausal(),
        llvm::APFloat(grad.getEffectiveScale()));
    replaceResults(grad, kernel.getResults());
    return kernel;
  }

  /// The gradient written into the packed projection's shape (its element
  /// type): the pads and adds that summed the three parts go, and a bf16
  /// sum is widened once after the kernel (rounding commutes with padding);
  /// a rounding of that widened sum is the kernel's own result.
  Operation *foldPackedGrad(OpBuilder &b, AttentionGradOp grad) {
    auto [out, lse] = savedForward(grad);
    PackedQkv p = *packedQkv(grad.getQuery(), grad.getKey(), grad.getValue());
    PackedGradSum sum = *packedGradSum(grad, p);
    auto kernel = b.create<stepk::AttentionGradOp>(
        grad.getLoc(), TypeRange{p.source.getType()}, grad.getGrad(), p.source, p.source,
        p.source, out, lse, Value(), b.getDenseI64ArrayAttr(p.offsets), grad.getNumHeads(),
        grad.getNumKvHeads(), grad.getHeadDim(), grad.getCausal(),
        llvm::APFloat(grad.getEffectiveScale()));
    Value result = kernel.getPackedGrad();
    for (int i = 0; i < 3; ++i) {
      dead.push_back(sum.pads[i]);
      if (sum.widens[i])
        dead.push_back(sum.widens[i]);
    }
    dead.append({sum.first, sum.second});
    Value total = sum.second.getResult();
    if (total.getType() == result.getType()) {
      total.replaceAllUsesWith(result);
      return kernel;
    }
    b.setInsertionPointAfter(kernel);
    auto widen = b.create<ConvertOp>(grad.getLoc(), total.getType(), result);
    step::copyPhase(sum.second, widen);
    total.replaceAllUsesWith(widen.getResult());
    for (Operation *user : llvm::make_early_inc_range(widen->getUsers()))
      if (auto narrow = dyn_cast<ConvertOp>(user); narrow && narrow.getType() == result.getType()) {
        narrow.getResult().replaceAllUsesWith(result);
        dead.push_back(narrow);
      }
    return kernel;
  }

  const Fusions &fusions;
  const DenseSet<Operation *> &packed;
  DenseMap<Value, Value> replaced;
  DenseMap<Operation *, stepk::AttentionOp> kernelOf;
  SmallVector<Operation *> dead;
};

/// A multi-tensor stepk.call of `callee` on `inputs` (results `types`,
/// `scratchBytes` of scratch) at `at`, with `at`'s phase, and its body's
/// builder: the body's arguments stand for the inputs, in order (the
/// emitter passes the inputs as a table, not as arguments).
std::pair<stepk::CallOp, OpBuilder> multiTensorCall(Operation *at, StringRef callee,
                                                   ValueRange inputs, TypeRange types,
                                                   IntegerAttr scratchBytes = {}) {
  OpBuilder b(at);
  auto call = b.create<stepk::CallOp>(at->getLoc(), types, b.getStringAttr(callee), inputs,
                                      b.getArrayAttr({}), scratchBytes, StringAttr(),
                                      IntegerAttr(), IntegerAttr());
  step::copyPhase(at, call);
  Block *body = new Block();
  call.getBody().push_back(body);
  for (Value in : inputs)
    body->addArgument(in.getType(), at->getLoc());
  return {call, OpBuilder::atBlockEnd(body)};
}

/// The tensor a link of the gradient clipping's chain squares: `v` is
/// reduce_sum(mul(g, g)) over every dim of an f32 g, read once.
Value squaredTerm(Value v) {
  auto sum = v.getDefiningOp<ReduceSumOp>();
  if (!sum || !v.hasOneUse() || sum.getKeepDims())
    return {};
  auto mul = sum.getInput().getDefiningOp<MulOp>();
  if (!mul || !mul->hasOneUse() || mul.getLhs() != mul.getRhs())
    return {};
  auto type = cast<RankedTensorType>(mul.getLhs().getType());
  auto every = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  if (!type.getElementType().isF32() || sum.getDims() != ArrayRef<int64_t>(every))
    return {};
  return mul.getLhs();
}

/// Whether `v` is a 0-d f32 zero constant read once.
bool isZeroScalar(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto value = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  return value && v.hasOneUse() && value.isSplat() && value.getType().getRank() == 0 &&
         value.getElementType().isF32() && value.getSplatValue<APFloat>().isPosZero();
}

/// The gradient clipping's squared norm, ((0 + Σ g0²) + Σ g1²) + ..., one
/// reduction and one add per gradient, becomes one
/// stepk.call "squared_norms" over every gradient (its body the chain,
/// without the 0 + which is exact for a sum of squares): a few launches of
/// a multi-tensor kernel instead of two per parameter.
void groupSquaredNorms(func::FuncOp step) {
  SmallVector<AddOp> starts;
  for (Operation &op : step.getBody().front())
    if (auto add = dyn_cast<AddOp>(op); add && isZeroScalar(add.getLhs()) && squaredTerm(add.getRhs()))
      starts.push_back(add);
  for (AddOp start : starts) {
    SmallVector<AddOp> links{start};
    while (links.back()->hasOneUse()) {
      auto next = dyn_cast<AddOp>(*links.back()->getUsers().begin());
      if (!next || next.getLhs() != links.back().getResult() || !squaredTerm(next.getRhs()))
        break;
      links.push_back(next);
    }
    if (links.size() < 2)
      continue;
    SmallVector<Value> tensors;
    SmallVector<int64_t> sizes;
    for (AddOp link : links) {
      tensors.push_back(squaredTerm(link.getRhs()));
      sizes.push_back(cast<RankedTensorType>(tensors.back().getType()).getNumElements());
    }
    AddOp last = links.back();
    int64_t floats = cuda::SquaredNormsScratchFloats(sizes.data(), sizes.size());
    auto [call, inner] =
        multiTensorCall(last, kSquaredNormsCall, tensors, last.getType(),
                        OpBuilder(last).getI64IntegerAttr(floats * 4));
    Value total;
    for (auto [link, arg] : llvm::zip(links, call.getBody().front().getArguments())) {
      auto sum = link.getRhs().getDefiningOp<ReduceSumOp>();
      IRMapping map;
      map.map(squaredTerm(link.getRhs()), arg);
      Operation *mul = inner.clone(*sum.getInput().getDefiningOp(), map);
      map.map(sum.getInput(), mul->getResult(0));
      Value term = inner.clone(*sum, map)->getResult(0);
      if (total) {
        auto add = inner.create<AddOp>(link.getLoc(), total, term);
        step::copyPhase(link, add);
        term = add.getResult();
      }
      total = term;
    }
    inner.create<stepk::YieldOp>(last.getLoc(), total);
    last.getResult().replaceAllUsesWith(call.getResult(0));
    // Erase the chain: adds last to first, then each term and the zero.
    Value zero = start.getLhs();
    for (AddOp link : llvm::reverse(links)) {
      auto sum = link.getRhs().getDefiningOp<ReduceSumOp>();
      Operation *mul = sum.getInput().getDefiningOp();
      link->erase();
      sum->erase();
      mul->erase();
    }
    zero.getDefiningOp()->erase();
  }
}

/// The forward's bf16 copies of the parameters (a convert of a step
/// argument each, one kernel per parameter) become one
/// stepk.call "bf16_copies" at the first of them: a multi-tensor kernel.
/// Every parameter exists when the step starts, and the backward keeps each
/// copy for its input-gradient GEMM, so the copies' lifetimes reach the
/// same peak; a parameter's second copy is its first.
void groupParameterCopies(func::FuncOp step) {
  SmallVector<ConvertOp> copies;
  DenseMap<Value, ConvertOp> firstOf;
  for (Operation &op : llvm::make_early_inc_range(step.getBody().front())) {
    auto convert = dyn_cast<ConvertOp>(op);
    auto arg = convert ? dyn_cast<BlockArgument>(convert.getInput()) : BlockArgument();
    if (!arg || !step.getArgAttr(arg.getArgNumber(), StepDialect::kParamAttrName) ||
        getPhase(convert) != Phase::Forward ||
        !cast<RankedTensorType>(convert.getInput().getType()).getElementType().isF32() ||
        !convert.getType().getElementType().isBF16())
      continue;
    ConvertOp &first = firstOf[convert.getInput()];
    if (first) {
      convert.getResult().replaceAllUsesWith(first.getResult());
      convert->erase();
      continue;
    }
    first = convert;
    copies.push_back(convert);
  }
  if (copies.size() < 2)
    return;
  SmallVector<Value> params;
  SmallVector<Type> types;
  for (ConvertOp c : copies) {
    params.push_back(c.getInput());
    types.push_back(c.getType());
  }
  auto [call, inner] = multiTensorCall(copies.front(), kBf16CopiesCall, params, types);
  SmallVector<Value> yielded;
  for (auto [c, arg] : llvm::zip(copies, call.getBody().front().getArguments())) {
    IRMapping map;
    map.map(c.getInput(), arg);
    yielded.push_back(inner.clone(*c, map)->getResult(0));
  }
  inner.create<stepk::YieldOp>(copies.front().getLoc(), yielded);
  for (auto [c, copy] : llvm::zip(copies, call.getResults())) {
    c.getResult().replaceAllUsesWith(copy);
    c->erase();
  }
}

/// One stepk.adamw_group computing `updates` (in order), before `at`.
void groupUpdates(ArrayRef<AdamwOp> updates, Operation *at) {
  AdamwOp first = updates.front();
  SmallVector<Value> inputs;
  SmallVector<Type> types;
  for (AdamwOp u : updates) {
    // Each update's tensors, then the shared scalars once (at the end).
    llvm::append_range(inputs, u->getOperands().take_front(4));
    llvm::append_range(types, u->getResultTypes());
  }
  inputs.append({first.getLr(), first.getStep(), first.getGradScale()});
  OpBuilder b(at);
  auto group = b.create<stepk::AdamwGroupOp>(first.getLoc(), types, inputs);
  step::copyPhase(first, group);
  Block *body = new Block();
  group.getBody().push_back(body);
  IRMapping map;
  for (Value in : inputs)
    map.map(in, body->addArgument(in.getType(), in.getLoc()));
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  SmallVector<Value> yielded;
  for (AdamwOp u : updates)
    llvm::append_range(yielded, inner.clone(*u, map)->getResults());
  inner.create<stepk::YieldOp>(first.getLoc(), yielded);
  unsigned next = 0;
  for (AdamwOp u : updates)
    for (Value r : u->getResults())
      r.replaceAllUsesWith(group.getResult(next++));
  for (AdamwOp u : updates)
    u->erase();
}

/// Each run of consecutive updates (reshapes between them are free) touches
/// disjoint tensors, so it may be regrouped: one multi-tensor launch per set
/// of hyperparameters (decayed matrices and undecayed biases and norms
/// interleave in the step).
void groupAdamwUpdates(func::FuncOp step) {
  SmallVector<SmallVector<AdamwOp>> runs(1);
  for (Operation &op : step.getBody().front()) {
    auto update = dyn_cast<AdamwOp>(op);
    bool readsRun = llvm::any_of(op.getOperands(), [&](Value v) {
      return v.getDefiningOp<AdamwOp>() &&
             llvm::is_contained(runs.back(), v.getDefiningOp<AdamwOp>());
    });
    // An update reading the run's results starts the next run.
    if (readsRun || (!update && !isa<ReshapeOp>(op)))
      if (!runs.back().empty())
        runs.emplace_back();
    if (update)
      runs.back().push_back(update);
  }
  for (ArrayRef<AdamwOp> run : runs) {
    if (run.empty())
      continue;
    Operation *end = run.back()->getNextNode();
    auto shareLaunch = [](AdamwOp a, AdamwOp b) {
      return stepk::sameAdamwScalars(a, b) && stepk::sameAdamwHyperparameters(a, b);
    };
    SmallVector<AdamwOp> rest(run);
    while (!rest.empty()) {
      SmallVector<AdamwOp> group, others;
      for (AdamwOp u : rest)
        (shareLaunch(rest.front(), u) ? group : others).push_back(u);
      // All at the run's end: no op between its updates reads them.
      groupUpdates(group, end);
      rest = std::move(others);
    }
  }
}

struct StepFuseCudaKernelsPass
    : public stepc::impl::StepFuseCudaKernelsBase<StepFuseCudaKernelsPass> {
  using StepFuseCudaKernelsBase::StepFuseCudaKernelsBase;
  void runOnOperation() override {
    for (func::FuncOp step : trainingSteps(getOperation())) {
      // What the attention kernels cannot take is the user's op's error.
      WalkResult tooWide = step.walk([](Operation *op) {
        int64_t headDim = 0;
        if (auto a = dyn_cast<AttentionOp>(op))
          headDim = a.getHeadDim();
        else if (auto a = dyn_cast<AttentionGradOp>(op))
          headDim = a.getHeadDim();
        if (headDim <= cuda::kAttentionMaxHeadDim)
          return WalkResult::advance();
        op->emitOpError() << "head_dim " << headDim << " is above the CUDA attention kernels' "
                          << cuda::kAttentionMaxHeadDim;
        return WalkResult::interrupt();
      });
      if (tooWide.wasInterrupted())
        return signalPassFailure();
      // The loss and its gradient in one kernel, reading the classifier's
      // bf16 GEMM result (decided before the GEMMs' widenings fold).
      explicitLossCounts(step);
      lowerFusedCrossEntropy(step, /*cuda=*/true);
      // Attention on the packed projection (decided first: the projection's
      // GEMM writes what those kernels read).
      DenseMap<Value, Value> rounded = roundBeforeSlicing(step);
      DenseSet<Operation *> packed = packedAttention(step);
      unroundLeftovers(rounded, [&](OpOperand &use) { return packed.contains(use.getOwner()); });
      sumBesideRoundings(step);
      Fusions fusions = planFusions(step, packed);
      // A GEMM with nothing to fold stays a step.matmul (the emitter calls
      // cuBLASLt alike); every attention becomes its kernel.
      SmallVector<Operation *> kernels;
      for (Operation &op : step.getBody().front())
        if (isa<AttentionOp, AttentionGradOp>(op) ||
            (isa<MatmulOp, BatchMatmulOp>(op) &&
             (fusions.writesTo.count(op.getResult(0)) || fusions.biasOf.count(&op) ||
              fusions.epilogueOf.count(&op) || fusions.biasGradOf.count(&op))))
          kernels.push_back(&op);
      Folder folder(fusions, packed);
      for (Operation *op : kernels)
        folder.fold(op);
      folder.eraseDead();
      narrowGemmsForLoops(step);
      // The slices (and their roundings) the packed kernels no longer read.
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(step.getBody().front())))
        if (isa<SliceOp, ConvertOp>(op) && op.use_empty())
          op.erase();
      groupAdamwUpdates(step);
      groupSquaredNorms(step);
      groupParameterCopies(step);
    }
  }
};

} // namespace
