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
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include <array>
#include <optional>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// Query, key and value as last-dim slices [o, o + width) of one rank-3
/// source, whole in its first two dims.
struct PackedOperands {
  Value source;
  std::array<SliceOp, 3> slices;
  std::array<int64_t, 3> offsets, widths;
};

std::optional<PackedOperands> packedOperands(Value q, Value k, Value v) {
  PackedOperands packed;
  std::array<Value, 3> operands = {q, k, v};
  for (int i = 0; i < 3; ++i) {
    auto slice = operands[i].getDefiningOp<SliceOp>();
    if (!slice)
      return std::nullopt;
    auto source = cast<RankedTensorType>(slice.getInput().getType());
    ArrayRef<int64_t> offsets = slice.getOffsets(), sizes = slice.getSizes();
    if (source.getRank() != 3 || !source.getElementType().isF32() || offsets[0] != 0 ||
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

/// The slices cover the last dim exactly once.
bool tilesLastDim(const PackedOperands &p) {
  int64_t width = cast<RankedTensorType>(p.source.getType()).getDimSize(2), covered = 0;
  for (int i = 0; i < 3; ++i) {
    covered += p.widths[i];
    for (int j = 0; j < i; ++j)
      if (p.offsets[i] < p.offsets[j] + p.widths[j] && p.offsets[j] < p.offsets[i] + p.widths[i])
        return false;
  }
  return covered == width;
}

/// The kernels' scalars: batch, length, heads, kv_heads, head_dim, causal,
/// scale, the source's row width, then the three offsets.
template <typename OpT>
ArrayAttr packedScalars(OpT op, const PackedOperands &p) {
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
                         ArrayAttr scalars, const PackedOperands &p,
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

void packForward(AttentionOp a) {
  std::optional<PackedOperands> p = packedOperands(a.getQuery(), a.getKey(), a.getValue());
  if (!p)
    return;
  OpBuilder b(a);
  stepk::CallOp call = packedCall(b, a.getLoc(), "attention_packed", p->source,
                                  packedScalars(a, *p), *p, {a}, a->getResults());
  copyPhase(a, call);
  a->replaceAllUsesWith(call.getResults());
  a->erase();
}

/// The add that is `value`'s only use, if it is one.
AddOp onlyAdd(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  return dyn_cast<AddOp>(*value.getUsers().begin());
}

void packGradient(AttentionGradOp g) {
  std::optional<PackedOperands> p = packedOperands(g.getQuery(), g.getKey(), g.getValue());
  if (!p || !tilesLastDim(*p))
    return;
  // Each gradient zero-padded back to the source's shape at its slice.
  auto sourceType = cast<RankedTensorType>(p->source.getType());
  std::array<PadOp, 3> pads;
  for (int i = 0; i < 3; ++i) {
    Value grad = g->getResult(i);
    auto pad = grad.hasOneUse() ? dyn_cast<PadOp>(*grad.getUsers().begin()) : nullptr;
    if (!pad || pad.getType() != sourceType || pad.getLow()[0] || pad.getLow()[1] ||
        pad.getLow()[2] != p->offsets[i])
      return;
    pads[i] = pad;
  }
  // Summed by two adds in any order: two pads meet in `first`, whose only
  // use is `second` with the third.
  std::array<AddOp, 3> adds;
  for (int i = 0; i < 3; ++i)
    if (!(adds[i] = onlyAdd(pads[i])))
      return;
  int last = adds[0] == adds[1] ? 2 : adds[0] == adds[2] ? 1 : adds[1] == adds[2] ? 0 : -1;
  if (last < 0)
    return;
  AddOp first = adds[(last + 1) % 3], second = onlyAdd(first);
  if (!second || second != adds[last] || first == second)
    return;
  OpBuilder b(g);
  SmallVector<Operation *> ops = {g, pads[0], pads[1], pads[2], first, second};
  // In body order: the adds after the pads they read.
  stepk::CallOp call =
      packedCall(b, g.getLoc(), "attention_grad_packed", {g.getGrad(), p->source},
                 packedScalars(g, *p), *p, ops, second->getResults());
  copyPhase(g, call);
  second->replaceAllUsesWith(call.getResults());
  for (Operation *op : llvm::reverse(ops))
    op->erase();
}

} // namespace

void stepc::lowerPackedAttention(func::FuncOp step) {
  SmallVector<AttentionGradOp> grads;
  SmallVector<AttentionOp> forwards;
  step.walk([&](Operation *op) {
    if (op->getParentOp() != step)
      return;
    if (auto g = dyn_cast<AttentionGradOp>(op))
      grads.push_back(g);
    if (auto a = dyn_cast<AttentionOp>(op))
      forwards.push_back(a);
  });
  // Gradients first: they read the same slices as their forwards.
  for (AttentionGradOp g : grads)
    packGradient(g);
  for (AttentionOp a : forwards)
    packForward(a);
  // Slices nothing reads any more.
  SmallVector<SliceOp> dead;
  step.walk([&](SliceOp s) {
    if (s->use_empty() && s->getParentOp() == step)
      dead.push_back(s);
  });
  for (SliceOp s : dead)
    s->erase();
}
