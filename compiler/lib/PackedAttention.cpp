//===- PackedAttention.cpp - attention reading its packed QKV -------------===//
//
// A GPT projects the input once into [B, T, 3C] and slices query, key and
// value out of it; the gradient comes back as three zero-pads summed into
// [B, T, 3C]. On the CPU the slices are three copies (and three saved
// buffers), the pads and adds five passes over [B, T, 3C]. The kernels read
// the slices in place (a row stride) and write the three gradients into
// their columns of one [B, T, 3C] result, so:
//
//   attention(slice(x, 0), slice(x, C), slice(x, 2C))
//     -> stepk.call "attention_packed"(x)
//   pad(dq) + pad(dk) + pad(dv)  with  dq, dk, dv = attention_grad(dO, slices of x)
//     -> stepk.call "attention_grad_packed"(dO, x)
//
// The calls' bodies keep the slices, the op and the pads and adds: what the
// kernel computes, for the interpreter and the FLOP rules. The gradient is
// rewritten only when the three slices tile the last dim, so every element
// of its result is written.
//
// Under --precision=bf16 the mixed-precision pass rounds each slice
// (convert(slice(x)) to bf16) and widens each gradient before its pad.
// Rounding commutes with slicing and padding, so the three become slices of
// one rounded x ("attention_packed_bf16" reads it in place) and the gradient
// is packed in bf16 ("attention_grad_packed_bf16") and widened once.
//
// The CUDA target's kernels take the same forms as stepk.attention and
// stepk.attention_grad with `packed` offsets (step-fuse-cuda-kernels), from
// the matchers here (PackedAttention.h).
//
//===----------------------------------------------------------------------===//

#include "PackedAttention.h"

#include "LoweringUtils.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

std::optional<PackedQkv> stepc::packedQkv(Value q, Value k, Value v) {
  PackedQkv packed;
  std::array<Value, 3> operands = {q, k, v};
  for (int i = 0; i < 3; ++i) {
    auto slice = operands[i].getDefiningOp<SliceOp>();
    if (!slice)
      return std::nullopt;
    auto source = cast<RankedTensorType>(slice.getInput().getType());
    ArrayRef<int64_t> offsets = slice.getOffsets(), sizes = slice.getSizes();
    Type element = source.getElementType();
    if (source.getRank() != 3 || !(element.isF32() || element.isBF16()) || offsets[0] != 0 ||
        offsets[1] != 0 || sizes[0] != source.getDimSize(0) || sizes[1] != source.getDimSize(1))
      return std::nullopt;
    if (i && slice.getInput() != packed.source)
      return std::nullopt;
    packed.source = slice.getInput();
    packed.slices[i] = slice;
    packed.offsets[i] = offsets[2];
    packed.widths[i] = sizes[2];
  }
  return packed;
}

bool PackedQkv::tilesLastDim() const {
  int64_t width = cast<RankedTensorType>(source.getType()).getDimSize(2), covered = 0;
  for (int i = 0; i < 3; ++i) {
    covered += widths[i];
    for (int j = 0; j < i; ++j)
      if (offsets[i] < offsets[j] + widths[j] && offsets[j] < offsets[i] + widths[i])
        return false;
  }
  return covered == width;
}

namespace {

/// The kernel for `callee` on the packed source's element type.
std::string packedCallee(StringRef callee, const PackedQkv &p) {
  bool bf16 = cast<RankedTensorType>(p.source.getType()).getElementType().isBF16();
  return (callee + (bf16 ? "_bf16" : "")).str();
}

/// Operands `indices` of `op` that are each convert(slice(x)) to bf16 of one
/// f32 x become slices of one convert(x) (made once per x, in `rounded`,
/// right after x). Left unchanged unless all three match.
void roundSlicesOnce(Operation *op, std::array<unsigned, 3> indices,
                     DenseMap<Value, Value> &rounded, SmallVectorImpl<Operation *> &dead) {
  std::array<ConvertOp, 3> converts;
  std::array<SliceOp, 3> slices;
  for (int i = 0; i < 3; ++i) {
    converts[i] = op->getOperand(indices[i]).getDefiningOp<ConvertOp>();
    if (!converts[i] || !converts[i].getType().getElementType().isBF16())
      return;
    slices[i] = converts[i].getInput().getDefiningOp<SliceOp>();
    if (!slices[i] || !slices[i].getType().getElementType().isF32() ||
        slices[i].getInput() != slices[0].getInput())
      return;
  }
  Value source = slices[0].getInput();
  Value &whole = rounded[source];
  if (!whole) {
    OpBuilder b(op->getContext());
    if (Operation *def = source.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(source).getOwner());
    auto convert = b.create<ConvertOp>(converts[0].getLoc(), asBF16Type(source.getType()), source);
    copyPhase(converts[0], convert);
    whole = convert;
  }
  OpBuilder b(op);
  for (int i = 0; i < 3; ++i) {
    // The same slice of `whole` made for an earlier op (the forward, for its
    // gradient), or a new one: the two then read the same q, k and v.
    SliceOp slice;
    for (Operation *user : whole.getUsers()) {
      auto earlier = dyn_cast<SliceOp>(user);
      if (earlier && earlier->getBlock() == op->getBlock() && earlier->isBeforeInBlock(op) &&
          earlier.getOffsets() == slices[i].getOffsets() &&
          earlier.getSizes() == slices[i].getSizes())
        slice = earlier;
    }
    if (!slice) {
      slice = b.create<SliceOp>(slices[i].getLoc(), whole, slices[i].getOffsetsAttr(),
                                slices[i].getSizesAttr());
      copyPhase(slices[i], slice);
    }
    op->setOperand(indices[i], slice);
    dead.append({converts[i], slices[i]});
  }
}

/// The kernels' scalars: batch, length, heads, kv_heads, head_dim, causal,
/// scale, the source's row width, then the three offsets.
template <typename OpT>
ArrayAttr packedScalars(OpT op, const PackedQkv &p) {
  Builder b(op->getContext());
  auto source = cast<RankedTensorType>(p.source.getType());
  auto i64 = [&](int64_t v) -> Attribute { return b.getI64IntegerAttr(v); };
  return b.getArrayAttr({i64(source.getDimSize(0)), i64(source.getDimSize(1)),
                         i64(op.getNumHeads()), i64(op.getNumKvHeads()), i64(op.getHeadDim()),
                         b.getI32IntegerAttr(op.getCausal() ? 1 : 0),
                         b.getF64FloatAttr(op.getEffectiveScale()),
                         i64(source.getDimSize(2)), i64(p.offsets[0]), i64(p.offsets[1]),
                         i64(p.offsets[2])});
}

/// A stepk.call of `callee` on `inputs` (the last one the packed source)
/// whose body clones the slices and then `ops` in order, yielding `yields`.
stepk::CallOp packedCall(OpBuilder &b, Location loc, StringRef callee, ValueRange inputs,
                         ArrayAttr scalars, const PackedQkv &p,
                         ArrayRef<Operation *> ops, ValueRange yields) {
  auto call = b.create<stepk::CallOp>(loc, yields.getTypes(), b.getStringAttr(callee), inputs,
                                      scalars, IntegerAttr(), StringAttr(), IntegerAttr(),
                                      IntegerAttr());
  SmallVector<Operation *> body;
  for (SliceOp slice : p.slices)
    if (!llvm::is_contained(body, slice.getOperation()))
      body.push_back(slice);
  llvm::append_range(body, ops);
  fillCallBody(call, body, yields);
  return call;
}

// A masked attention keeps its separate operands (its kernels take a mask;
// the packed ones do not).
void packForward(AttentionOp a) {
  if (a.getMask())
    return;
  std::optional<PackedQkv> p = packedQkv(a.getQuery(), a.getKey(), a.getValue());
  if (!p)
    return;
  OpBuilder b(a);
  stepk::CallOp call = packedCall(b, a.getLoc(), packedCallee("attention_packed", *p), p->source,
                                  packedScalars(a, *p), *p, {a}, a->getResults());
  copyPhase(a, call);
  a->replaceAllUsesWith(call.getResults());
  a->erase();
}

void packGradient(AttentionGradOp g) {
  if (g.getMask())
    return;
  std::optional<PackedQkv> p = packedQkv(g.getQuery(), g.getKey(), g.getValue());
  if (!p || !p->tilesLastDim())
    return;
  std::optional<PackedGradSum> matched = packedGradSum(g, *p);
  if (!matched)
    return;
  auto sourceType = cast<RankedTensorType>(p->source.getType());
  bool bf16 = sourceType.getElementType().isBF16();
  auto padded = bf16 ? RankedTensorType::get(sourceType.getShape(),
                                             Builder(g.getContext()).getF32Type())
                     : sourceType;
  auto [pads, widens, first, second] = *matched;
  SmallVector<Operation *> ops = {g, pads[0], pads[1], pads[2], first, second};
  SmallVector<Operation *> erased(ops);
  Value sum = second;
  if (bf16) {
    // The body pads and adds in bf16 (exact: the parts are disjoint), and
    // the sum is widened after the call.
    IRMapping map;
    for (int i = 0; i < 3; ++i)
      map.map(widens[i].getResult(), g->getResult(i));
    OpBuilder b(second);
    for (Operation *op : ArrayRef<Operation *>(ops).drop_front()) {
      Operation *narrow = b.clone(*op, map);
      narrow->getResult(0).setType(sourceType);
      map.map(op->getResult(0), narrow->getResult(0));
    }
    for (int i = 1; i < 6; ++i)
      ops[i] = map.lookup(ops[i]->getResult(0)).getDefiningOp();
    sum = ops.back()->getResult(0);
    erased.append(widens.begin(), widens.end());
  }
  OpBuilder b(g);
  // In body order: the adds after the pads they read.
  stepk::CallOp call = packedCall(b, g.getLoc(), packedCallee("attention_grad_packed", *p),
                                  {g.getGrad(), p->source}, packedScalars(g, *p), *p, ops, sum);
  copyPhase(g, call);
  Value result = call.getResult(0);
  if (bf16) {
    b.setInsertionPointAfter(call);
    auto widen = b.create<ConvertOp>(g.getLoc(), padded, result);
    copyPhase(second, widen);
    result = widen;
    for (Operation *op : llvm::reverse(ArrayRef<Operation *>(ops).drop_front()))
      op->erase();
  }
  second->replaceAllUsesWith(ValueRange{result});
  // Users before producers.
  llvm::sort(erased, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
  for (Operation *op : erased)
    op->erase();
}

/// The attentions and gradients of `step`'s own block, in order.
void collectAttention(func::FuncOp step, SmallVectorImpl<AttentionOp> &forwards,
                      SmallVectorImpl<AttentionGradOp> &grads) {
  for (Operation &op : step.getBody().front()) {
    if (auto g = dyn_cast<AttentionGradOp>(op))
      grads.push_back(g);
    if (auto a = dyn_cast<AttentionOp>(op))
      forwards.push_back(a);
  }
}

/// The add that is `value`'s only use, if it is one.
AddOp onlyAdd(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  return dyn_cast<AddOp>(*value.getUsers().begin());
}

} // namespace

void stepc::unroundLeftovers(const DenseMap<Value, Value> &rounded,
                             function_ref<bool(OpOperand &)> staysPacked) {
  for (auto [source, whole] : rounded)
    for (Operation *user : llvm::make_early_inc_range(whole.getUsers())) {
      auto slice = dyn_cast<SliceOp>(user);
      if (!slice || isa<stepk::CallOp>(slice->getParentOp()))
        continue;
      if (llvm::all_of(slice->getUses(), [&](OpOperand &use) { return staysPacked(use); })) {
        if (slice->use_empty())
          slice->erase();
        continue;
      }
      OpBuilder b(slice);
      auto f32 = b.create<SliceOp>(slice.getLoc(), source, slice.getOffsetsAttr(),
                                   slice.getSizesAttr());
      auto convert = b.create<ConvertOp>(slice.getLoc(), slice.getType(), f32);
      copyPhase(slice, f32);
      copyPhase(slice, convert);
      slice.getResult().replaceUsesWithIf(convert.getResult(),
                                          [&](OpOperand &use) { return !staysPacked(use); });
      if (slice->use_empty())
        slice->erase();
    }
  for (auto [source, whole] : rounded)
    if (whole.use_empty())
      whole.getDefiningOp()->erase();
}

std::optional<PackedGradSum> stepc::packedGradSum(AttentionGradOp g, const PackedQkv &p) {
  // Each gradient zero-padded back to the source's shape at its slice; in
  // bf16, widened to f32 first.
  auto sourceType = cast<RankedTensorType>(p.source.getType());
  bool bf16 = sourceType.getElementType().isBF16();
  auto padded = bf16 ? RankedTensorType::get(sourceType.getShape(),
                                             Builder(g.getContext()).getF32Type())
                     : sourceType;
  PackedGradSum sum;
  for (int i = 0; i < 3; ++i) {
    Value grad = g->getResult(i);
    if (bf16) {
      auto widen = grad.hasOneUse() ? dyn_cast<ConvertOp>(*grad.getUsers().begin()) : nullptr;
      if (!widen || !widen.getType().getElementType().isF32())
        return std::nullopt;
      sum.widens[i] = widen;
      grad = widen;
    }
    auto pad = grad.hasOneUse() ? dyn_cast<PadOp>(*grad.getUsers().begin()) : nullptr;
    if (!pad || pad.getType() != padded || pad.getLow()[0] || pad.getLow()[1] ||
        pad.getLow()[2] != p.offsets[i])
      return std::nullopt;
    sum.pads[i] = pad;
  }
  // Summed by two adds in any order: two pads meet in `first`, whose only
  // use is `second` with the third.
  std::array<AddOp, 3> adds;
  for (int i = 0; i < 3; ++i)
    if (!(adds[i] = onlyAdd(sum.pads[i])))
      return std::nullopt;
  int last = adds[0] == adds[1] ? 2 : adds[0] == adds[2] ? 1 : adds[1] == adds[2] ? 0 : -1;
  if (last < 0)
    return std::nullopt;
  sum.first = adds[(last + 1) % 3];
  sum.second = onlyAdd(sum.first);
  if (!sum.second || sum.second != adds[last] || sum.first == sum.second)
    return std::nullopt;
  return sum;
}

DenseMap<Value, Value> stepc::roundBeforeSlicing(func::FuncOp step) {
  SmallVector<AttentionOp> forwards;
  SmallVector<AttentionGradOp> grads;
  collectAttention(step, forwards, grads);
  DenseMap<Value, Value> rounded;
  SmallVector<Operation *> unrounded;
  for (AttentionOp a : forwards)
    if (!a.getMask())
      roundSlicesOnce(a, {0, 1, 2}, rounded, unrounded);
  for (AttentionGradOp g : grads)
    if (!g.getMask())
      roundSlicesOnce(g, {1, 2, 3}, rounded, unrounded);
  // Users before producers; what still has a use stays.
  llvm::sort(unrounded, [](Operation *x, Operation *y) { return y->isBeforeInBlock(x); });
  unrounded.erase(std::unique(unrounded.begin(), unrounded.end()), unrounded.end());
  for (Operation *op : unrounded)
    if (op->use_empty())
      op->erase();
  return rounded;
}

void stepc::lowerPackedAttention(func::FuncOp step) {
  DenseMap<Value, Value> rounded = roundBeforeSlicing(step);
  SmallVector<AttentionOp> forwards;
  SmallVector<AttentionGradOp> grads;
  collectAttention(step, forwards, grads);
  // Gradients first: they read the same slices as their forwards.
  for (AttentionGradOp g : grads)
    packGradient(g);
  for (AttentionOp a : forwards)
    packForward(a);
  // (Packed calls read the source, not the slices.)
  unroundLeftovers(rounded, [](OpOperand &) { return false; });
  // Slices nothing reads any more.
  SmallVector<SliceOp> dead;
  step.walk([&](SliceOp s) {
    if (s->use_empty() && s->getParentOp() == step)
      dead.push_back(s);
  });
  for (SliceOp s : dead)
    s->erase();
}
