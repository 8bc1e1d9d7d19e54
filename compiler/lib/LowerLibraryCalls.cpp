//===- LowerLibraryCalls.cpp - composite ops as stepk.call ----------------===//
//
// One table, in alphabetical order: for each op the kernel library computes
// in one call, the callee and the scalar arguments in the order both
// targets' signatures take them (`stepc_cpu_<callee>` and
// `stepc_cuda_<callee>` in runtime/kernels/{cpu,cuda}): inputs, scalars,
// [CUDA scratch], results. Ops not in the table are left to the emitters.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "runtime/kernels/cuda/launch_config.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

namespace stepc {
#define GEN_PASS_DEF_STEPLOWERLIBRARYCALLS
#include "stepc/Compiler/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// How one op is called.
struct LibraryCall {
  StringRef callee;
  /// Integer and float arguments, in signature order.
  SmallVector<Attribute> scalars;
  /// The CUDA kernel takes a scratch pointer (of this many bytes).
  std::optional<int64_t> scratchBytes;
  /// The kernel checks input `idOperand`'s ids below `idBound`, calling
  /// them `idCheck` in the error.
  StringRef idCheck = {};
  int64_t idOperand = 0, idBound = 0;
};

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
/// The last dim of `v`, and the rows before it.
int64_t lastDim(Value v) { return typeOf(v).getShape().back(); }
int64_t rows(Value v) { return typeOf(v).getNumElements() / lastDim(v); }

/// (rows, V, ignore, smoothing, z_loss) of a cross_entropy(_grad) with
/// options; an absent ignore_index is a value no i32 target equals.
template <typename OpT>
SmallVector<Attribute> lossScalars(Builder &b, int64_t rows, int64_t classes, OpT c) {
  auto value = [](std::optional<APFloat> v) { return v ? v->convertToDouble() : 0.0; };
  return {b.getI64IntegerAttr(rows), b.getI64IntegerAttr(classes),
          b.getI64IntegerAttr(c.getIgnoreIndex().value_or(kNoIgnoredTarget)),
          b.getF64FloatAttr(value(c.getLabelSmoothing())), b.getF64FloatAttr(value(c.getZLoss()))};
}

/// The scalars of a call, built for one op: an i64 scalar is an int64_t
/// parameter, an i32 one an int (a rank, a kind, a flag): the emitters
/// declare each kernel from these types.
class Scalars {
public:
  Scalars(MLIRContext *ctx, bool cuda) : b(ctx), cuda(cuda) {}

  Attribute i64(int64_t v) { return b.getI64IntegerAttr(v); }
  Attribute i32(int64_t v) { return b.getI32IntegerAttr(v); }
  Attribute f64(double v) { return b.getF64FloatAttr(v); }
  /// (rows, d, eps) of a norm and its gradient.
  SmallVector<Attribute> norm(Value x, APFloat eps) {
    return {i64(rows(x)), i64(lastDim(x)), f64(eps.convertToDouble())};
  }
  /// A norm gradient's scratch on CUDA (`bias`: a layer norm's, which also
  /// sums the bias gradient).
  std::optional<int64_t> normGradScratch(Value x, bool bias) {
    if (!cuda)
      return std::nullopt;
    return cuda::PlanNormGrad(rows(x), lastDim(x), bias).scratch_floats * 4;
  }
  // Static arrays (a shape, a permutation: int64; a mask of reduced dims:
  // int), printed as constant tables the call points to.
  Attribute shape(Value v) { return b.getDenseI64ArrayAttr(typeOf(v).getShape()); }
  Attribute mask(ArrayRef<int64_t> dims, int64_t rank) {
    SmallVector<int32_t> m(rank, 0);
    for (int64_t d : dims)
      m[d] = 1;
    return b.getDenseI32ArrayAttr(m);
  }
  /// (outer, length, inner) of a line op or an argmax along `dim`.
  SmallVector<Attribute> lines(RankedTensorType type, int64_t dim) {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d)
      outer *= type.getDimSize(d);
    for (int64_t d = dim + 1; d < type.getRank(); ++d)
      inner *= type.getDimSize(d);
    return {i64(outer), i64(type.getDimSize(dim)), i64(inner)};
  }
  /// (outer, n, inner, size) of a gather or its gradient: the index's
  /// [outer, n, inner] view, and the gathered tensor's size along dim.
  SmallVector<Attribute> gather(Value index, int64_t dim, int64_t size) {
    SmallVector<Attribute> s = lines(typeOf(index), dim);
    s.push_back(i64(size));
    return s;
  }

  Builder b;
  bool cuda;
};

/// Attention on the CPU (CUDA's is stepk.attention, made by
/// step-fuse-cuda-kernels): (batch, tq, tk, heads, kv_heads, head_dim,
/// causal, scale), bf16 operands the _bf16 kernels'; a mask's kernels
/// (_masked) also take the strides of its [Bm, Hm, Tqm, Tk] dims (0 where
/// it broadcasts).
std::optional<LibraryCall> attentionCall(Operation *op, Scalars &s) {
  return llvm::TypeSwitch<Operation *, std::optional<LibraryCall>>(op)
      .Case<AttentionOp, AttentionGradOp>([&](auto a) -> std::optional<LibraryCall> {
        if (s.cuda)
          return std::nullopt;
        RankedTensorType q = a.getQuery().getType(), k = a.getKey().getType();
        bool bf16 = q.getElementType().isBF16();
        std::string callee = (isa<AttentionOp>(op) ? "attention" : "attention_grad") +
                             std::string(a.getMask() ? "_masked" : "") + (bf16 ? "_bf16" : "");
        LibraryCall call{s.b.getStringAttr(callee).getValue(),
                         {s.i64(q.getDimSize(0)), s.i64(q.getDimSize(1)), s.i64(k.getDimSize(1)),
                          s.i64(a.getNumHeads()), s.i64(a.getNumKvHeads()),
                          s.i64(a.getHeadDim()), s.i32(a.getCausal() ? 1 : 0),
                          s.f64(a.getEffectiveScale())},
                         std::nullopt};
        if (Value mask = a.getMask()) {
          ArrayRef<int64_t> m = typeOf(mask).getShape();
          call.scalars.append({s.i64(m[0] == 1 ? 0 : m[1] * m[2] * m[3]),
                               s.i64(m[1] == 1 ? 0 : m[2] * m[3]), s.i64(m[2] == 1 ? 0 : m[3])});
        }
        return call;
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// cross_entropy(_grad): (rows, V); with options (count an operand, made
/// explicit by explicitLossCounts) cross_entropy_masked(_grad): (rows, V,
/// ignore, smoothing, z_loss); the targets' mask and count.
std::optional<LibraryCall> lossCall(Operation *op, Scalars &s) {
  return llvm::TypeSwitch<Operation *, std::optional<LibraryCall>>(op)
      .Case([&](CrossEntropyGradOp c) {
        Value logits = c.getLogits();
        if (c.hasOptions())
          return LibraryCall{"cross_entropy_masked_grad",
                             lossScalars(s.b, rows(logits), lastDim(logits), c), std::nullopt,
                             "target", 2, lastDim(logits)};
        return LibraryCall{"cross_entropy_grad", {s.i64(rows(logits)), s.i64(lastDim(logits))},
                           std::nullopt, "target", 2, lastDim(logits)};
      })
      .Case([&](CrossEntropyOp c) {
        Value logits = c.getLogits();
        std::optional<int64_t> scratch;
        if (s.cuda)
          scratch = cuda::CrossEntropyScratchFloats(rows(logits)) * 4;
        if (c.hasOptions())
          return LibraryCall{"cross_entropy_masked",
                             lossScalars(s.b, rows(logits), lastDim(logits), c), scratch,
                             "target", 1, lastDim(logits)};
        return LibraryCall{"cross_entropy", {s.i64(rows(logits)), s.i64(lastDim(logits))},
                           scratch, "target", 1, lastDim(logits)};
      })
      .Case([&](TargetMaskOp c) {
        return LibraryCall{"target_mask",
                           {s.i64(typeOf(c.getTargets()).getNumElements()),
                            s.i64(c.getIgnoreIndex())},
                           std::nullopt};
      })
      .Case([&](TokenCountOp c) {
        return LibraryCall{"token_count",
                           {s.i64(typeOf(c.getTargets()).getNumElements()),
                            s.i64(c.getIgnoreIndex())},
                           std::nullopt};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Ops that index: argmax (outer, n, inner) along dim; dropout(_rows) (n,
/// row size, rate, stream), only a keyed dropout (a training step's); the
/// embeddings, a vocabulary shard (operand 2 its first row) checking ids
/// against the whole table's rows (embedding_shard(_grad), with num_ids);
/// gather and its gradient.
std::optional<LibraryCall> indexCall(Operation *op, Scalars &s) {
  return llvm::TypeSwitch<Operation *, std::optional<LibraryCall>>(op)
      .Case([&](ArgmaxOp a) {
        return LibraryCall{"argmax", s.lines(a.getInput().getType(), a.getDim()), std::nullopt};
      })
      .Case([&](DropoutOp d) -> std::optional<LibraryCall> {
        if (!d.getSeed())
          return std::nullopt;
        RankedTensorType t = d.getType();
        int64_t rowSize = t.getRank() && t.getDimSize(0) ? t.getNumElements() / t.getDimSize(0) : 1;
        return LibraryCall{d.getFirstRow() ? "dropout_rows" : "dropout",
                           {s.i64(t.getNumElements()), s.i64(rowSize),
                            s.f64(d.getRate().convertToDouble()), s.i64(d.getStream())},
                           std::nullopt};
      })
      .Case([&](EmbeddingGradOp e) {
        int64_t ids = typeOf(e.getIds()).getNumElements();
        int64_t rows = e.getNumEmbeddings(); // (verified to be in [1, 2^40])
        if (e.getFirstRow())
          return LibraryCall{"embedding_shard_grad",
                             {s.i64(ids), s.i64(rows), s.i64(*e.getNumIds()), s.i64(lastDim(e))},
                             std::nullopt, "id", 1, static_cast<int64_t>(*e.getNumIds())};
        return LibraryCall{"embedding_grad", {s.i64(ids), s.i64(rows), s.i64(lastDim(e))},
                           std::nullopt, "id", 1, rows};
      })
      .Case([&](EmbeddingOp e) {
        int64_t ids = typeOf(e.getIds()).getNumElements();
        int64_t vocab = e.getTable().getType().getDimSize(0);
        if (e.getFirstRow())
          return LibraryCall{"embedding_shard",
                             {s.i64(ids), s.i64(vocab), s.i64(*e.getNumIds()), s.i64(lastDim(e))},
                             std::nullopt, "id", 1, static_cast<int64_t>(*e.getNumIds())};
        return LibraryCall{"embedding", {s.i64(ids), s.i64(vocab), s.i64(lastDim(e))},
                           std::nullopt, "id", 1, vocab};
      })
      .Case([&](GatherOp g) {
        return LibraryCall{"gather",
                           s.gather(g.getIndex(), g.getDim(),
                                    g.getInput().getType().getDimSize(g.getDim())),
                           std::nullopt};
      })
      .Case([&](GatherGradOp g) {
        return LibraryCall{"gather_grad", s.gather(g.getIndex(), g.getDim(), g.getSize()),
                           std::nullopt};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The mixture-of-experts ops (kernels/*/moe.*): top_k (rows, n, k);
/// dispatch, combine and its gradient (tokens, k, width, E, groups,
/// capacity, segment), on CUDA with scratch for the routing (3E + tokens·k
/// + groups i32); grouped_matmul and its weight gradient (m, k, n, E,
/// blocks, transpose_b).
std::optional<LibraryCall> expertCall(Operation *op, Scalars &s) {
  return llvm::TypeSwitch<Operation *, std::optional<LibraryCall>>(op)
      .Case([&](TopKOp t) {
        return LibraryCall{"top_k", {s.i64(rows(t.getInput())), s.i64(lastDim(t.getInput())),
                                     s.i64(t.getK())},
                           std::nullopt};
      })
      .Case<MoeDispatchOp, MoeCombineOp, MoeCombineGradOp>([&](auto m) {
        RankedTensorType experts = typeOf(m.getExperts());
        int64_t tokens = experts.getDimSize(0), k = experts.getDimSize(1);
        int64_t e = m.getNumExperts();
        Value wide = isa<MoeDispatchOp>(op) ? op->getOperand(0) : op->getResult(0);
        int64_t groups = m.getGroups();
        std::optional<int64_t> scratch;
        if (s.cuda)
          scratch = 4 * (3 * e + tokens * k + groups);
        return LibraryCall{op->getName().stripDialect(),
                           {s.i64(tokens), s.i64(k), s.i64(lastDim(wide)), s.i64(e),
                            s.i64(groups), s.i64(m.getCapacity()), s.i64(m.getSegment())},
                           scratch};
      })
      .Case<GroupedMatmulOp, GroupedMatmulWeightGradOp>([&](auto g) {
        RankedTensorType lhs = typeOf(g.getLhs());
        int64_t n = isa<GroupedMatmulOp>(op) ? lastDim(op->getResult(0)) : lastDim(op->getOperand(1));
        RankedTensorType counts = typeOf(g.getCounts());
        return LibraryCall{op->getName().stripDialect(),
                           {s.i64(lhs.getDimSize(0)), s.i64(lhs.getDimSize(1)), s.i64(n),
                            s.i64(counts.getShape().back()),
                            s.i64(counts.getNumElements() / counts.getShape().back()),
                            s.i32(g.getTransposeB() ? 1 : 0)},
                           std::nullopt};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Shape-driven kernels: layer_norm, rms_norm and their gradients (callee:
/// the op's name; (rows, d, eps), a gradient on CUDA also takes scratch);
/// the reductions; rotary; transpose; quantize_fp8 (kernels/*/fp8.*:
/// (matrices, rows, cols, tile rows, tile cols, format)).
std::optional<LibraryCall> shapeCall(Operation *op, Scalars &s) {
  return llvm::TypeSwitch<Operation *, std::optional<LibraryCall>>(op)
      .Case<LayerNormGradOp, LayerNormOp, RmsNormGradOp, RmsNormOp>([&](auto l) {
        bool grad = isa<LayerNormGradOp, RmsNormGradOp>(op);
        return LibraryCall{op->getName().stripDialect(), s.norm(l.getInput(), l.getEpsilon()),
                           grad ? s.normGradScratch(l.getInput(), isa<LayerNormGradOp>(op))
                                : std::nullopt};
      })
      .Case([&](ReduceMaxGradOp r) {
        int64_t rank = typeOf(r.getInput()).getRank();
        return LibraryCall{"reduce_max_grad",
                           {s.shape(r.getInput()), s.i32(rank), s.mask(r.getDims(), rank)},
                           std::nullopt};
      })
      .Case<ReduceMaxOp, ReduceMeanOp, ReduceSumOp>([&](auto r) {
        Value in = r.getInput();
        int64_t rank = typeOf(in).getRank();
        int64_t kind = isa<ReduceSumOp>(op) ? 0 : isa<ReduceMaxOp>(op) ? 1 : 2;
        std::optional<int64_t> scratch;
        if (s.cuda) {
          int64_t outputs = typeOf(r.getResult()).getNumElements();
          scratch = cuda::ReduceScratchFloats(
                        outputs, typeOf(in).getNumElements() / std::max<int64_t>(outputs, 1)) *
                    4;
        }
        return LibraryCall{"reduce",
                           {s.shape(in), s.i32(rank), s.mask(r.getDims(), rank), s.i32(kind)},
                           scratch};
      })
      .Case([&](RotaryOp r) {
        RankedTensorType t = r.getType();
        std::optional<int64_t> scratch;
        if (s.cuda)  // the angles' table
          scratch = cuda::RotaryScratchFloats(t.getDimSize(1), r.getHeadDim()) * 4;
        return LibraryCall{"rotary",
                           {s.i64(t.getDimSize(0)), s.i64(t.getDimSize(1)), s.i64(t.getDimSize(2)),
                            s.i64(r.getHeadDim()), s.f64(r.getTheta().convertToDouble()),
                            s.i32(r.getInverse() ? 1 : 0)},
                           scratch};
      })
      .Case([&](TransposeOp t) {
        return LibraryCall{"transpose",
                           {s.shape(t.getInput()), s.i32(typeOf(t.getInput()).getRank()),
                            s.b.getDenseI64ArrayAttr(t.getPermutation())},
                           std::nullopt};
      })
      .Case([&](QuantizeFp8Op q) {
        RankedTensorType x = typeOf(q.getInput());
        int64_t rows = x.getDimSize(x.getRank() - 2), cols = x.getShape().back();
        return LibraryCall{"quantize_fp8",
                           {s.i64(x.getNumElements() / (rows * cols)), s.i64(rows), s.i64(cols),
                            s.i64(q.getTile()[0]), s.i64(q.getTile()[1]),
                            s.i32(static_cast<int>(q.getFormat()))},
                           std::nullopt};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The table: how `op` is called, or none (not a library kernel here).
std::optional<LibraryCall> libraryCall(Operation *op, bool cuda) {
  Scalars s(op->getContext(), cuda);
  // A line op (Step_LineOp) declares its call.
  if (op->hasTrait<LineKernel>())
    return LibraryCall{op->getName().stripDialect(),
                       s.lines(typeOf(op->getOperand(0)),
                               op->getAttrOfType<IntegerAttr>("dim").getInt()),
                       std::nullopt};
  for (auto family : {attentionCall, lossCall, indexCall, expertCall, shapeCall})
    if (std::optional<LibraryCall> call = family(op, s))
      return call;
  return std::nullopt;
}

/// Every iota becomes the constant it is (the back ends print constants).
void foldIotas(func::FuncOp step) {
  step.walk([&](IotaOp iota) {
    RankedTensorType type = iota.getType();
    int64_t dim = iota.getDim(), n = type.getDimSize(dim);
    int64_t inner = 1;
    for (int64_t d = dim + 1; d < type.getRank(); ++d)
      inner *= type.getDimSize(d);
    // Element i's index along dim: (i / inner) mod n.
    SmallVector<Attribute> values;
    values.reserve(type.getNumElements());
    Builder b(iota.getContext());
    for (int64_t i = 0; i < type.getNumElements(); ++i) {
      int64_t k = (i / inner) % n;
      values.push_back(isa<FloatType>(type.getElementType())
                           ? Attribute(b.getFloatAttr(type.getElementType(), double(k)))
                           : Attribute(b.getIntegerAttr(type.getElementType(), k)));
    }
    OpBuilder at(iota);
    auto constant = at.create<ConstantOp>(iota.getLoc(), DenseElementsAttr::get(type, values));
    step::copyPhase(iota, constant);
    iota.replaceAllUsesWith(constant.getResult());
    iota.erase();
  });
}

/// Replaces `op` by a stepk.call of `call` whose body is `op`; with
/// `rounding` (a bf16 convert, the result's only use), the kernel's
/// "_bf16" variant writes the rounded result and the body ends with it;
/// with `widening` (an f32 convert of bf16, op's first operand, used by op
/// alone), the "_of_bf16" variant reads the bf16 values and the body starts
/// with it.
/// Replaces `body` (ops in order, each reading only earlier ones or values
/// that exist at `at`) by one stepk.call of `callee` on `operands` placed at
/// `at` (the kernel op: its phase), with `call`'s scalars, scratch and id
/// check; the call holds clones of `body` and yields what `yields` were.
stepk::CallOp replaceByCall(Operation *at, StringRef callee, ValueRange operands,
                            const LibraryCall &call, ArrayRef<Operation *> body,
                            ArrayRef<Value> yields) {
  OpBuilder b(at);
  bool ids = !call.idCheck.empty();
  auto kernel = b.create<stepk::CallOp>(
      at->getLoc(), ValueRange(yields).getTypes(), b.getStringAttr(callee), operands,
      b.getArrayAttr(call.scalars),
      call.scratchBytes ? b.getI64IntegerAttr(*call.scratchBytes) : IntegerAttr(),
      ids ? b.getStringAttr(call.idCheck) : StringAttr(),
      ids ? b.getI64IntegerAttr(call.idOperand) : IntegerAttr(),
      ids ? b.getI64IntegerAttr(call.idBound) : IntegerAttr());
  step::copyPhase(at, kernel);
  fillCallBody(kernel, body, yields);
  for (auto [from, to] : llvm::zip(yields, kernel.getResults()))
    Value(from).replaceAllUsesWith(to);
  for (Operation *op : llvm::reverse(body))
    op->erase();
  return kernel;
}

/// `op` as its call, with the widening of its first operand read as bf16
/// ("_of_bf16") and its result's only rounding written ("_bf16") folded in.
void lower(Operation *op, const LibraryCall &call, ConvertOp rounding = nullptr,
           ConvertOp widening = nullptr) {
  Operation *last = rounding ? rounding.getOperation() : op;
  std::string callee =
      (call.callee + (widening ? "_of_bf16" : "") + (rounding ? "_bf16" : "")).str();
  SmallVector<Value> operands(op->getOperands());
  if (widening)
    operands.front() = widening.getInput();
  SmallVector<Operation *> body;
  if (widening)
    body.push_back(widening);
  body.push_back(op);
  if (rounding)
    body.push_back(rounding);
  replaceByCall(op, callee, operands, call, body, SmallVector<Value>(last->getResults()));
}

/// `v` when it widens a bf16 value for its one reader, in `block`: a convert
/// that reader can take over by reading the bf16 value itself.
ConvertOp soleWideningOfBf16(Value v, Block *block) {
  auto convert = v.getDefiningOp<ConvertOp>();
  return convert && convert.getResult().hasOneUse() && convert->getBlock() == block &&
                 typeOf(convert.getInput()).getElementType().isBF16()
             ? convert
             : ConvertOp();
}

/// The bf16 values a norm gradient's dy is the f32 sum of, in the order
/// the step adds them ((t0 + t1) + t2), and the widenings and adds that
/// make it, in program order: each read by the next alone, all in the
/// norm's block. Empty unless dy is such a sum of two or three.
struct DyTerms {
  SmallVector<Value> terms;
  SmallVector<Operation *> ops;
};
DyTerms summedBf16Terms(Operation *norm) {
  auto widened = [&](Value v) { return soleWideningOfBf16(v, norm->getBlock()); };
  DyTerms sum;
  // A left-deep chain: add(add(t0, t1), t2), either side of each add.
  std::function<bool(Value)> collect = [&](Value v) {
    auto add = v.getDefiningOp<AddOp>();
    if (!add || !add.getResult().hasOneUse() || add->getBlock() != norm->getBlock() ||
        add.getLhs().getType() != add.getRhs().getType())
      return false;
    ConvertOp lhs = widened(add.getLhs()), rhs = widened(add.getRhs());
    if (lhs && rhs) {
      sum.terms = {lhs.getInput(), rhs.getInput()};
      sum.ops = {lhs, rhs};
    } else {
      // One side a term, the other the chain so far (its terms first).
      ConvertOp term = lhs ? lhs : rhs;
      if (!term || !collect(lhs ? add.getRhs() : add.getLhs()))
        return false;
      sum.terms.push_back(term.getInput());
      sum.ops.push_back(term);
    }
    sum.ops.push_back(add);
    return true;
  };
  if (!typeOf(norm->getOperand(0)).getElementType().isF32() || !collect(norm->getOperand(0)) ||
      sum.terms.size() > 3)
    return {};
  llvm::sort(sum.ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return sum;
}

/// On CUDA: a norm's gradient whose input gradient only feeds an add into
/// the residual stream's gradient (made before the norm's backward) writes
/// that sum itself, and, where the sum is rounded to bf16 for the GEMMs
/// before the norm, that rounding too: one pass over the rows instead of
/// the norm's and the add's ("..._grad_add[_rounded]"). Where the stream
/// starts (the final norm's gradient: no add) an input gradient rounded to
/// bf16 is written rounded beside it ("..._grad_rounded"). dy f32, or a
/// widened bf16 read as it is ("..._of_bf16"). Results: the sum (or dx),
/// the weight (and bias) gradients, the rounding. Null when neither pattern
/// is there.
///
/// Where dy is the f32 sum of two or three widened bf16 values (Llama's
/// gate and up projections' input gradients, or its q, k and v ones) and
/// the input gradient goes into the stream's ("_add"), the kernel reads
/// the bf16 terms and adds them as the step does ("..._of_bf16_sum2",
/// "_sum3"), where a kernel wrote the f32 sum and the norm read it back.
stepk::CallOp lowerNormGradInto(Operation *op, const LibraryCall &call, ConvertOp widening) {
  if (!isa<LayerNormGradOp, RmsNormGradOp>(op))
    return nullptr;
  Value dx = op->getResult(0), acc;
  AddOp add;
  if (dx.hasOneUse())
    add = dyn_cast<AddOp>(*dx.getUsers().begin());
  if (add) {
    acc = add.getLhs() == dx ? add.getRhs() : add.getLhs();
    Operation *def = acc.getDefiningOp();
    if (add->getBlock() != op->getBlock() || acc == dx || acc.getType() != dx.getType() ||
        !typeOf(acc).getElementType().isF32() ||
        (def && (def->getBlock() != op->getBlock() || !def->isBeforeInBlock(op))))
      add = nullptr;
  }
  Value out = add ? add.getResult() : dx;
  ConvertOp rounding;
  for (Operation *user : out.getUsers())
    if (auto convert = dyn_cast<ConvertOp>(user);
        convert && !rounding && convert->getBlock() == op->getBlock() &&
        typeOf(convert.getResult()).getElementType().isBF16())
      rounding = convert;
  if (!add && !rounding)
    return nullptr;
  DyTerms dy;
  if (widening)
    dy = {{widening.getInput()}, {widening}};
  else if (add)
    dy = summedBf16Terms(op);
  std::string callee = (call.callee + (add ? "_add" : "") + (rounding ? "_rounded" : "") +
                        (dy.terms.empty() ? "" : "_of_bf16") +
                        (dy.terms.size() > 1 ? "_sum" + std::to_string(dy.terms.size()) : ""))
                           .str();
  SmallVector<Value> operands = dy.terms;
  if (dy.terms.empty())
    operands.push_back(op->getOperand(0));
  llvm::append_range(operands, op->getOperands().drop_front());
  if (add)
    operands.push_back(acc);
  SmallVector<Value> yields = {out};
  llvm::append_range(yields, op->getResults().drop_front());
  if (rounding)
    yields.push_back(rounding.getResult());
  SmallVector<Operation *> body(dy.ops);
  body.push_back(op);
  if (add)
    body.push_back(add);
  if (rounding)
    body.push_back(rounding);
  return replaceByCall(op, callee, operands, call, body, yields);
}

/// A broadcast along leading dims only (GPT-2's position embeddings, [T, C]
/// to [B, T, C]) that nothing else reads: its input, read in place as a
/// table of rows repeated every `rows` rows, in the consumer's kernel.
/// Null when `v` is not one.
BroadcastOp soleRepeatOfRows(Value v, Block *block, int64_t *rows) {
  auto broadcast = v.getDefiningOp<BroadcastOp>();
  if (!broadcast || broadcast->getBlock() != block || !broadcast->hasOneUse())
    return nullptr;
  ArrayRef<int64_t> in = typeOf(broadcast.getInput()).getShape();
  ArrayRef<int64_t> out = typeOf(broadcast.getResult()).getShape();
  while (!in.empty() && in.front() == 1)
    in = in.drop_front();
  if (in.empty() || in != out.take_back(in.size()))
    return nullptr;
  *rows = typeOf(broadcast.getInput()).getNumElements() / in.back();
  return broadcast;
}

/// On CUDA: a norm of a residual add (x = a + b, b maybe a widened bf16
/// GEMM result read as it is, or a table of rows broadcast along leading
/// dims, "_of_repeated": the position embeddings) computes the add itself
/// and writes x beside the norm ("layer_norm_add[_of_bf16][_bf16]",
/// "rms_norm_add..."): one pass where an add kernel wrote x and the norm
/// read it back (and a broadcast kernel wrote b). Every other reader of x
/// must come after the norm. Results: x, the norm (or its only rounding).
/// Null when the pattern is not there.
stepk::CallOp lowerAddNorm(Operation *op, const LibraryCall &call, ConvertOp rounding) {
  if (!isa<LayerNormOp, RmsNormOp>(op))
    return nullptr;
  auto add = op->getOperand(0).getDefiningOp<AddOp>();
  if (!add || add->getBlock() != op->getBlock() ||
      !typeOf(add.getResult()).getElementType().isF32() ||
      add.getLhs().getType() != add.getRhs().getType())
    return nullptr;
  for (Operation *user : add->getUsers())
    if (user != op && (user->getBlock() != op->getBlock() || !op->isBeforeInBlock(user)))
      return nullptr;
  // The bf16 side, read as it is when it was widened for this add alone.
  Value a = add.getLhs(), b = add.getRhs();
  auto widened = [&](Value v) { return soleWideningOfBf16(v, op->getBlock()); };
  ConvertOp widening = widened(b);
  if (!widening && (widening = widened(a)))
    std::swap(a, b);
  int64_t period = 0;
  BroadcastOp repeat;
  if (!widening && !(repeat = soleRepeatOfRows(b, op->getBlock(), &period)) &&
      (repeat = soleRepeatOfRows(a, op->getBlock(), &period)))
    std::swap(a, b);
  std::string callee = (call.callee + "_add" + (widening ? "_of_bf16" : "") +
                        (repeat ? "_of_repeated" : "") + (rounding ? "_bf16" : ""))
                           .str();
  SmallVector<Value> operands = {
      a, widening ? widening.getInput() : repeat ? repeat.getInput() : b};
  llvm::append_range(operands, op->getOperands().drop_front());
  LibraryCall repeated = call;  // its rows' period after the norm's scalars
  if (repeat)
    repeated.scalars.push_back(Builder(op->getContext()).getI64IntegerAttr(period));
  Value normed = rounding ? Value(rounding.getResult()) : op->getResult(0);
  SmallVector<Operation *> body;
  if (widening)
    body.push_back(widening);
  if (repeat)
    body.push_back(repeat);
  body.append({add, op});
  if (rounding)
    body.push_back(rounding);
  return replaceByCall(op, callee, operands, repeated, body, {add.getResult(), normed});
}

/// On CUDA: a sum of a value's squares (the gradient norm's Σ g² of each
/// gradient, clipping's) squares each value as the reduction reads it
/// (reduce kind 3): no g² buffer and no multiply kernel, 148 launches and a
/// gigabyte a step fewer in gpt2-124m. Null when the pattern is not there.
stepk::CallOp lowerSumOfSquares(Operation *op, const LibraryCall &call) {
  auto sum = dyn_cast<ReduceSumOp>(op);
  if (!sum)
    return nullptr;
  auto square = sum.getInput().getDefiningOp<MulOp>();
  if (!square || square.getLhs() != square.getRhs() || !square.getResult().hasOneUse() ||
      square->getBlock() != op->getBlock() ||
      !typeOf(square.getResult()).getElementType().isF32())
    return nullptr;
  LibraryCall squares = call;  // scalars (shape, rank, mask, kind): kind 3
  squares.scalars.back() = Builder(op->getContext()).getI32IntegerAttr(3);
  return replaceByCall(op, call.callee, ValueRange{square.getLhs()}, squares, {square, op},
                       {sum.getResult()});
}

/// Every GEMM the target passes left as a step.matmul or step.batch_matmul
/// (nothing folded into it) as a stepk.gemm, so the emitters print one GEMM
/// op per target.
void lowerGemms(func::FuncOp step) {
  SmallVector<Operation *> gemms;
  for (Operation &op : step.getBody().front())
    if (isa<MatmulOp, BatchMatmulOp>(op))
      gemms.push_back(&op);
  for (Operation *op : gemms) {
    OpBuilder b(op);
    bool shared = isa<MatmulOp>(op);
    bool ta = shared ? cast<MatmulOp>(op).getTransposeA() : cast<BatchMatmulOp>(op).getTransposeA();
    bool tb = shared ? cast<MatmulOp>(op).getTransposeB() : cast<BatchMatmulOp>(op).getTransposeB();
    auto gemm = b.create<stepk::GemmOp>(op->getLoc(), op->getResult(0).getType(), Type(),
                                        op->getOperand(0), op->getOperand(1), Value(), Value(),
                                        ta, tb, shared, stepk::Epilogue::none, /*fp8=*/nullptr,
                                        Value(), Value());
    gemm->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    op->getResult(0).replaceAllUsesWith(gemm.getResult());
    op->erase();
  }
}

/// Under bf16, both targets: a norm whose only use rounds it to bf16 (the
/// GEMM after it) writes bf16 itself, one pass fewer.
ConvertOp roundingOnlyUse(Operation *op, bool cuda) {
  // On CUDA also a rotation (Llama's query and key, rounded for attention;
  // their gradients, rounded for the projections' GEMMs) and an fp8
  // rounding (rounded again for its GEMMs, exactly).
  if (!(isa<LayerNormOp, RmsNormOp>(op) || (cuda && isa<RotaryOp, QuantizeFp8Op>(op))) ||
      !op->getResult(0).hasOneUse())
    return nullptr;
  auto convert = dyn_cast<ConvertOp>(*op->getResult(0).getUsers().begin());
  if (!convert || convert->getBlock() != op->getBlock() ||
      !typeOf(convert.getResult()).getElementType().isBF16())
    return nullptr;
  return convert;
}

/// Under bf16: a reduction of bf16 values widened for it alone (the QKV
/// bias gradient, from the bf16 attention gradient) reads them itself: the
/// same sums of the same values, no f32 copy written and read
/// (reduce_of_bf16 on both targets).
ConvertOp wideningOnlyUse(Operation *op, bool cuda) {
  // On CUDA also a rotation of a bf16 GEMM or attention-gradient result,
  // a norm's gradient whose dy (operand 0) is a bf16 GEMM's input
  // gradient, and an fp8 rounding of a bf16 value.
  if (!isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op) &&
      !(cuda && isa<RotaryOp, LayerNormGradOp, RmsNormGradOp, QuantizeFp8Op>(op)))
    return nullptr;
  return soleWideningOfBf16(op->getOperand(0), op->getBlock());
}

/// On CUDA: the two fp8 roundings step-fp8-weight-grads leaves on one value
/// x (f32): [1, 128] tiles for the forward and input-gradient products,
/// and [128, 1] tiles of x flattened to [tokens, features] for the weight
/// gradient, each only rounded to bf16 for its GEMM. One pass reads x once
/// and writes both bf16 copies (quantize_fp8_rows_columns_bf16; of a
/// widened bf16 x, the bf16 values: ..._of_bf16_bf16), and x's bias
/// gradient where the step sums it (..._dbias_...); where x is a GELU only
/// the pair reads, the GELU's input, applying it (..._gelu_...).
void lowerRoundingPairs(func::FuncOp step) {
  SmallVector<QuantizeFp8Op> byColumns;
  step.walk([&](QuantizeFp8Op q) {
    if (q.getTile() == ArrayRef<int64_t>{128, 1})
      byColumns.push_back(q);
  });
  for (QuantizeFp8Op columns : byColumns) {
    auto flatten = columns.getInput().getDefiningOp<ReshapeOp>();
    if (!flatten || !flatten->hasOneUse())
      continue;
    Value x = flatten.getInput();
    RankedTensorType flat = typeOf(flatten.getResult());
    if (!typeOf(x).getElementType().isF32() || flat.getRank() != 2 ||
        flat.getShape().back() != typeOf(x).getShape().back())
      continue;
    QuantizeFp8Op rows;
    for (Operation *user : x.getUsers())
      if (auto q = dyn_cast<QuantizeFp8Op>(user))
        if (q.getTile() == ArrayRef<int64_t>{1, 128} && q.getFormat() == columns.getFormat() &&
            q->getBlock() == columns->getBlock() && q->isBeforeInBlock(flatten))
          rows = q;
    ConvertOp rowsRounded = rows ? roundingOnlyUse(rows, true) : nullptr;
    ConvertOp columnsRounded = roundingOnlyUse(columns, true);
    if (!rowsRounded || !columnsRounded)
      continue;
    Scalars sc(step.getContext(), true);
    LibraryCall call{"quantize_fp8_rows_columns_bf16",
                     {sc.i64(flat.getDimSize(0)), sc.i64(flat.getDimSize(1)),
                      sc.i32(static_cast<int>(columns.getFormat()))},
                     std::nullopt};
    SmallVector<Operation *> body{rows, rowsRounded, flatten, columns, columnsRounded};
    SmallVector<Value> yields{rowsRounded.getResult(), columnsRounded.getResult()};
    // x's bias gradient (a sum over its leading dims that nothing reads
    // before the pass runs): summed from the unrounded values as the pass
    // reads them (TransformerEngine's cast + dbias), no second read of x.
    ReduceSumOp dbias;
    auto leading = llvm::to_vector(llvm::seq<int64_t>(0, typeOf(x).getRank() - 1));
    for (Operation *user : x.getUsers()) {
      auto sum = dyn_cast<ReduceSumOp>(user);
      if (sum && sum->getBlock() == rows->getBlock() && !sum.getKeepDims() &&
          sum.getDims() == ArrayRef<int64_t>(leading) &&
          llvm::all_of(sum->getUsers(), [&](Operation *u) {
            Operation *at = rows->getBlock()->findAncestorOpInBlock(*u);
            return at && rows->isBeforeInBlock(at);
          })) {
        dbias = sum;
        break;
      }
    }
    if (dbias) {
      body.push_back(dbias);
      yields.push_back(dbias.getResult());
      call.scratchBytes = cuda::Fp8PairColumnSumScratchFloats(flat.getDimSize(0),
                                                              flat.getDimSize(1)) *
                          static_cast<int64_t>(sizeof(float));
    }
    Value source = x;
    // x the GELU of the MLP's first product, read by nothing but the pair
    // (the forward's fc2 input): the pass applies the GELU to what it reads,
    // so the f32 activation is neither written nor read again.
    auto gelu = x.getDefiningOp<GeluOp>();
    if (gelu && (dbias || gelu->getBlock() != rows->getBlock() ||
                 !llvm::all_of(x.getUsers(), [&](Operation *user) {
                   return user == rows.getOperation() || user == flatten.getOperation();
                 })))
      gelu = nullptr;
    if (gelu) {
      body.insert(body.begin(), gelu);
      source = gelu.getInput();
      call.scalars.push_back(sc.i32(gelu.isTanhApproximation() ? 1 : 0));
    }
    // The source widened from bf16 (the packed attention gradient, the MLP's
    // bf16 pre-activation): the pass reads the bf16 values through a
    // widening of its own, and the shared one is left to the source's other
    // readers (the bias's sum then reads bf16 too).
    bool ofBf16 = false;
    if (auto widening = source.getDefiningOp<ConvertOp>();
        widening && typeOf(widening.getInput()).getElementType().isBF16()) {
      OpBuilder b(gelu ? gelu.getOperation() : rows.getOperation());
      auto own = b.create<ConvertOp>(widening.getLoc(), source.getType(), widening.getInput());
      step::copyPhase(widening, own);
      if (gelu) {
        gelu->setOperand(0, own);
      } else {
        rows->setOperand(0, own);
        flatten->setOperand(0, own);
        if (dbias)
          dbias->setOperand(0, own);
      }
      body.insert(body.begin(), own);
      source = widening.getInput();
      ofBf16 = true;
    }
    std::string callee = (Twine("quantize_fp8_rows_columns") + (gelu ? "_gelu" : "") +
                          (dbias ? "_dbias" : "") + (ofBf16 ? "_of_bf16" : "") + "_bf16")
                             .str();
    replaceByCall(rows, callee, {source}, call, body, yields);
  }
}

struct StepLowerLibraryCallsPass
    : public stepc::impl::StepLowerLibraryCallsBase<StepLowerLibraryCallsPass> {
  using StepLowerLibraryCallsBase::StepLowerLibraryCallsBase;
  void runOnOperation() override {
    if (failed(checkTarget(getOperation(), "step-lower-library-calls", target)))
      return signalPassFailure();
    for (func::FuncOp step : trainingSteps(getOperation())) {
      explicitLossCounts(step);
      foldIotas(step);
      if (target == "cpu") {
        lowerPackedAttention(step);
        foldConversions(step);
        lowerFusedCrossEntropy(step, /*cuda=*/false);
      }
      if (target == "cuda")
        lowerRoundingPairs(step);
      SmallVector<std::pair<Operation *, LibraryCall>> calls;
      for (Operation &op : step.getBody().front())
        if (std::optional<LibraryCall> call = libraryCall(&op, target == "cuda"))
          calls.push_back({&op, std::move(*call)});
      for (auto &[op, call] : calls) {
        bool cuda = target == "cuda";
        if (cuda && (lowerNormGradInto(op, call, wideningOnlyUse(op, cuda)) ||
                     lowerSumOfSquares(op, call) ||
                     lowerAddNorm(op, call, roundingOnlyUse(op, cuda))))
          continue;
        lower(op, call, roundingOnlyUse(op, cuda), wideningOnlyUse(op, cuda));
      }
      lowerGemms(step);
      if (target == "cuda") {
        markFp8Gemms(step);
        packFp8Pairs(step);
        packFp8Roundings(step);
      }
      eraseDeadOps(step);
    }
  }

  /// Values the foldings above left unread (a widening whose reader now
  /// takes the bf16 value): a kernel each, and arena bytes, if kept.
  static void eraseDeadOps(func::FuncOp step) {
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(step.getBody().front())))
      if (isOpTriviallyDead(&op))
        op.erase();
  }
};

} // namespace
