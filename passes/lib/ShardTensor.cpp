//===- ShardTensor.cpp - tensor parallelism on the loss function ----------===//
//
// Megatron's column- and row-parallel linears and split attention heads,
// found by propagating a sharding state through the loss function with one
// rule per op kind (`Analysis::visit`), the way Shardy propagates a
// sharding: optimistically every single-use weight of a matmul on a
// replicated input is column-parallel; an op that needs a split value whole
// undoes the choices that split it, and the propagation runs again until
// nothing is undone. Then the function is rewritten to this rank's shapes.
//
// Only two collectives are inserted, both with gradients step-autodiff
// knows: `step.copy_to_parallel` where a replicated value enters a split
// region (gradient: all-reduce) and `mesh.all_reduce` after a row-parallel
// matmul (gradient: identity). A split is along the last dimension, in
// segments (a fused QKV projection splits Q, K and V each), so no value is
// ever gathered.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>
#include <set>

namespace stepc {
#define GEN_PASS_DEF_STEPSHARDTENSOR
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

enum class Kind {
  /// The same on every tp rank.
  Replicated,
  /// Split along the last dimension (see State::segments).
  Split,
  /// A broadcast of a single-use 1-D parameter: replicated, but splittable
  /// for free by splitting the parameter (a bias).
  Source,
};

struct State {
  Kind kind = Kind::Replicated;
  /// Split: the global sizes of the last dimension's segments; rank t holds
  /// part t of M equal parts of each, side by side.
  SmallVector<int64_t> segments;
  /// Split: the column-parallel matmuls the split comes from.
  SmallVector<Operation *> origins;
  /// Source: the parameter broadcast.
  BlockArgument param;
};

int64_t total(ArrayRef<int64_t> segments) {
  return std::accumulate(segments.begin(), segments.end(), int64_t{0});
}

/// A parameter argument of `f`, or null.
BlockArgument parameter(func::FuncOp f, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner()->getParentOp() != f.getOperation() ||
      !f.getArgAttr(arg.getArgNumber(), StepDialect::kParamAttrName))
    return {};
  return arg;
}

/// `x · Wᵀ` with W a rank-2 parameter used only here: the shape of a linear
/// layer tp can split.
BlockArgument linearWeight(func::FuncOp f, MatmulOp m) {
  if (m.getTransposeA() || !m.getTransposeB())
    return {};
  BlockArgument w = parameter(f, m.getRhs());
  if (!w || cast<RankedTensorType>(w.getType()).getRank() != 2 || !w.hasOneUse())
    return {};
  return w;
}

/// The segments of a column-parallel output: the boundaries of the slices
/// along its last dimension that read it (through bias adds and
/// elementwise ops), so each slice is whole segments.
SmallVector<int64_t> segmentsOf(MatmulOp m) {
  int64_t width = m.getType().getShape().back();
  std::set<int64_t> cuts{0, width};
  SmallVector<Value> work{m.getResult()};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (Operation *user : v.getUsers()) {
      if (auto slice = dyn_cast<SliceOp>(user)) {
        int64_t last = slice.getOffsets().size() - 1;
        int64_t begin = slice.getOffsets()[last];
        cuts.insert(begin);
        cuts.insert(begin + slice.getSizes()[last]);
      } else if (user->hasTrait<OpTrait::Elementwise>() || isa<ConvertOp>(user)) {
        work.push_back(user->getResult(0));
      }
    }
  }
  SmallVector<int64_t> segments;
  for (auto it = std::next(cuts.begin()); it != cuts.end(); ++it)
    segments.push_back(*it - *std::prev(it));
  return segments;
}

/// The logits matmul `h · Wᵀ` of a vocabulary-parallel head: its only
/// user is a cross-entropy (as the logits).
CrossEntropyOp headLoss(MatmulOp m) {
  if (m.getTransposeA() || !m.getTransposeB() || !m->hasOneUse())
    return {};
  auto loss = dyn_cast<CrossEntropyOp>(*m->getUsers().begin());
  return loss && loss.getLogits() == m.getResult() ? loss : CrossEntropyOp();
}

/// Parameters [V, D] split along the vocabulary: every use is an embedding
/// lookup (its table) or the head of a cross-entropy (tied or not).
DenseSet<BlockArgument> vocabularyTables(func::FuncOp f) {
  DenseSet<BlockArgument> tables;
  for (BlockArgument arg : f.getArguments()) {
    if (!parameter(f, arg) || cast<RankedTensorType>(arg.getType()).getRank() != 2 ||
        arg.use_empty())
      continue;
    bool all = llvm::all_of(arg.getUses(), [&](OpOperand &use) {
      if (auto e = dyn_cast<EmbeddingOp>(use.getOwner()))
        return use.getOperandNumber() == 0 && !e.getFirstRow();
      auto m = dyn_cast<MatmulOp>(use.getOwner());
      return m && use.getOperandNumber() == 1 && headLoss(m);
    });
    if (all)
      tables.insert(arg);
  }
  return tables;
}

/// One propagation over the loss function for a set of column-parallel
/// matmuls: the state of every value, what each op needs inserted, the
/// parameters split, and the choices an op undid.
struct Analysis {
  Analysis(func::FuncOp loss, int64_t parts, const DenseSet<Operation *> &columns)
      : loss(loss), parts(parts), columns(columns) {}

  func::FuncOp loss;
  int64_t parts;
  const DenseSet<Operation *> &columns;

  DenseMap<Value, State> states;
  /// Parameter argument -> (dim, global segments).
  DenseMap<unsigned, std::pair<int64_t, SmallVector<int64_t>>> splitParams;
  /// Operands entering a split region: (op, operand number).
  SmallVector<std::pair<Operation *, unsigned>> copies;
  /// Row-parallel matmuls (their result is a partial sum).
  SmallVector<Operation *> rows;
  /// Attention ops with (local heads, local kv heads).
  SmallVector<std::tuple<AttentionOp, int64_t, int64_t>> attentions;
  /// Vocabulary parallelism: the split tables, their lookups (partial sums,
  /// all-reduced) and the cross-entropies of their heads.
  DenseSet<BlockArgument> tables;
  SmallVector<EmbeddingOp> lookups;
  SmallVector<CrossEntropyOp> losses;
  DenseSet<Operation *> undone;
  /// Rules that cannot hold whatever is undone: errors once stable.
  SmallVector<std::pair<Operation *, std::string>> problems;

  State stateOf(Value v) { return states.lookup(v); }

  /// `v` must be whole at `op`: undo what split it.
  void needWhole(Value v) {
    State s = stateOf(v);
    if (s.kind != Kind::Split)
      return;
    undone.insert(s.origins.begin(), s.origins.end());
    if (s.origins.empty() && v.getDefiningOp())
      problems.push_back({v.getDefiningOp(), "splits the vocabulary, but a user needs its "
                                             "result whole"});
  }

  void split(Value v, SmallVector<int64_t> segments, SmallVector<Operation *> origins) {
    State s;
    s.kind = Kind::Split;
    s.segments = std::move(segments);
    s.origins = std::move(origins);
    states[v] = std::move(s);
  }

  void splitParam(BlockArgument p, int64_t dim, ArrayRef<int64_t> segments) {
    splitParams[p.getArgNumber()] = {dim, SmallVector<int64_t>(segments)};
  }

  void visitMatmul(MatmulOp m) {
    if (auto w = dyn_cast<BlockArgument>(m.getRhs()); w && tables.contains(w)) {
      // The head of a vocabulary-parallel cross-entropy: logits split.
      needWhole(m.getLhs());
      copies.push_back({m, 0});
      split(m.getResult(), {cast<RankedTensorType>(w.getType()).getDimSize(0)}, {});
      return;
    }
    State x = stateOf(m.getLhs());
    BlockArgument w = linearWeight(loss, m);
    if (w && x.kind == Kind::Split) {
      splitParam(w, 1, x.segments);
      rows.push_back(m);
      return;
    }
    needWhole(m.getLhs());
    needWhole(m.getRhs());
    if (w && columns.contains(m)) {
      SmallVector<int64_t> segments = segmentsOf(m);
      splitParam(w, 0, segments);
      copies.push_back({m, 0});
      split(m.getResult(), segments, {m.getOperation()});
    }
  }

  void visitAttention(AttentionOp a) {
    State q = stateOf(a.getQuery());
    if (q.kind != Kind::Split || q.segments.size() != 1) {
      for (Value v : a->getOperands())
        needWhole(v);
      return;
    }
    int64_t heads = a.getNumHeads(), kvHeads = a.getNumKvHeads();
    if (heads % parts) {
      problems.push_back({a, llvm::formatv("has {0} heads, which tp:{1} does not divide",
                                           heads, parts).str()});
      return;
    }
    if (Value mask = a.getMask()) {
      if (cast<RankedTensorType>(mask.getType()).getDimSize(1) != 1) {
        problems.push_back({a, "has a mask per head, which tp cannot split (a mask "
                               "broadcast over the heads can be)"});
        return;
      }
      needWhole(mask);
    }
    bool splitKv = kvHeads % parts == 0;
    if (!splitKv && kvHeads != 1)
      problems.push_back(
          {a, llvm::formatv("has {0} kv heads, which tp:{1} does not divide (kv heads are "
                            "split when tp divides them, replicated only when there is one)",
                            kvHeads, parts).str()});
    SmallVector<Operation *> origins(q.origins);
    for (unsigned i : {1u, 2u}) {
      Value v = a->getOperand(i);  // key, value
      State s = stateOf(v);
      if (splitKv && s.kind == Kind::Split && s.segments.size() == 1) {
        llvm::append_range(origins, s.origins);
      } else if (!splitKv) {
        needWhole(v);
        copies.push_back({a, i});
      } else {
        problems.push_back(
            {a, llvm::formatv("reads {0} that tp cannot split along its {1} kv heads (a "
                              "linear layer of its own makes them column-parallel)",
                              i == 1 ? "keys" : "values", kvHeads).str()});
      }
    }
    attentions.push_back({a, heads / parts, splitKv ? kvHeads / parts : kvHeads});
    split(a.getResult(), q.segments, origins);
  }

  void visitSlice(SliceOp slice) {
    State in = stateOf(slice.getInput());
    if (in.kind != Kind::Split)
      return;
    int64_t last = slice.getOffsets().size() - 1;
    int64_t begin = slice.getOffsets()[last], size = slice.getSizes()[last];
    SmallVector<int64_t> segments;
    int64_t at = 0;
    for (int64_t s : in.segments) {
      if (at >= begin && at + s <= begin + size)
        segments.push_back(s);
      else if (at < begin + size && at + s > begin)
        return needWhole(slice.getInput()); // cuts a segment
      at += s;
    }
    split(slice.getResult(), segments, in.origins);
  }

  void visitElementwise(Operation *op) {
    SmallVector<State> in;
    for (Value v : op->getOperands())
      in.push_back(stateOf(v));
    const State *splitIn = nullptr;
    for (const State &s : in)
      if (s.kind == Kind::Split)
        splitIn = &s;
    if (!splitIn)
      return;
    SmallVector<Operation *> origins;
    for (auto [v, s] : llvm::zip(op->getOperands(), in)) {
      if (s.kind == Kind::Split && s.segments == splitIn->segments)
        llvm::append_range(origins, s.origins);
      else if (s.kind == Kind::Source) {
        splitParam(s.param, 0, splitIn->segments);
        split(v, splitIn->segments, {}); // the broadcast of the now split bias
      }
      else {
        for (Value w : op->getOperands())
          needWhole(w);
        return;
      }
    }
    split(op->getResult(0), splitIn->segments, origins);
  }

  /// A vocabulary-parallel table's lookup is a partial sum (all-reduced:
  /// whole after); any other lookup reads its operands whole.
  void visitEmbedding(EmbeddingOp e) {
    if (auto table = dyn_cast<BlockArgument>(e.getTable()); table && tables.contains(table))
      return lookups.push_back(e);
    readWhole(e);
  }

  /// The loss of a vocabulary-parallel head (split logits no column-parallel
  /// matmul made) is computed split; any other reads its operands whole.
  void visitCrossEntropy(CrossEntropyOp c) {
    State logits = stateOf(c.getLogits());
    if (logits.kind == Kind::Split && logits.origins.empty())
      return losses.push_back(c);
    readWhole(c);
  }

  /// The broadcast of a single-use 1-D parameter (a bias) is a source:
  /// replicated, split for free by splitting the parameter.
  void visitBroadcast(BroadcastOp b) {
    BlockArgument p = parameter(loss, b.getInput());
    auto type = p ? cast<RankedTensorType>(p.getType()) : RankedTensorType();
    if (p && type.getRank() == 1 && p.hasOneUse() && b->hasOneUse() &&
        b.getType().getShape().back() == type.getDimSize(0)) {
      State s;
      s.kind = Kind::Source;
      s.param = p;
      states[b.getResult()] = s;
    }
  }

  /// Rotary positions rotate each head's pairs: split when every rank holds
  /// whole heads of one segment.
  void visitRotary(RotaryOp r) {
    State in = stateOf(r.getInput());
    if (in.kind == Kind::Split && in.segments.size() == 1 &&
        (in.segments[0] / parts) % r.getHeadDim() == 0)
      return split(r.getResult(), in.segments, in.origins);
    needWhole(r.getInput());
  }

  /// Every other op (norms, reductions, reshapes, return) reads its
  /// operands whole.
  void readWhole(Operation *op) {
    for (Value v : op->getOperands())
      needWhole(v);
  }

  /// One sharding rule per op kind, as Shardy keeps them: how the splits
  /// of an op's operands carry to its results, or what must be whole.
  void visit(Operation *op) {
    llvm::TypeSwitch<Operation *>(op)
        .Case<MatmulOp>([&](MatmulOp m) { visitMatmul(m); })
        .Case<EmbeddingOp>([&](EmbeddingOp e) { visitEmbedding(e); })
        .Case<CrossEntropyOp>([&](CrossEntropyOp c) { visitCrossEntropy(c); })
        .Case<AttentionOp>([&](AttentionOp a) { visitAttention(a); })
        .Case<SliceOp>([&](SliceOp s) { visitSlice(s); })
        .Case<BroadcastOp>([&](BroadcastOp b) { visitBroadcast(b); })
        .Case<RotaryOp>([&](RotaryOp r) { visitRotary(r); })
        .Default([&](Operation *other) {
          if (other->hasTrait<OpTrait::Elementwise>() || isa<ConvertOp>(other))
            return visitElementwise(other);
          readWhole(other);
        });
  }

  void run() {
    for (Operation &op : loss.getBody().front())
      visit(&op);
  }
};

RankedTensorType withDim(Type type, int64_t dim, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, t.getElementType());
}

struct StepShardTensorPass : public stepc::impl::StepShardTensorBase<StepShardTensorPass> {
  using StepShardTensorBase::StepShardTensorBase;

  /// The all-reduces of partial sums the rewrite made (row-parallel
  /// results, vocabulary lookups): where sequence parallelism starts.
  SmallVector<mesh::AllReduceOp> sums;

  mesh::MeshAxis tpAxis() const {
    return static_cast<mesh::MeshAxis>(meshShape.empty() ? 0 : meshShape.size() - 1);
  }

  LogicalResult shard(func::FuncOp loss) {
    DenseSet<Operation *> columns;
    loss.walk([&](MatmulOp m) {
      if (linearWeight(loss, m))
        columns.insert(m);
    });
    // Each round undoes at least one choice, so this ends.
    DenseSet<BlockArgument> tables = vocabularyTables(loss);
    std::optional<Analysis> a;
    while (true) {
      a.emplace(loss, tp, columns);
      a->tables = tables;
      a->run();
      if (a->undone.empty())
        break;
      for (Operation *op : a->undone)
        columns.erase(op);
    }
    for (auto &[op, message] : a->problems)
      return op->emitOpError() << message;
    // Errors in argument order, at the first use in program order.
    auto firstUser = [](BlockArgument arg) {
      Operation *first = nullptr;
      for (Operation *user : arg.getUsers())
        if (!first || user->isBeforeInBlock(first))
          first = user;
      return first;
    };
    SmallVector<BlockArgument> orderedTables(tables.begin(), tables.end());
    llvm::sort(orderedTables, [](BlockArgument x, BlockArgument y) {
      return x.getArgNumber() < y.getArgNumber();
    });
    for (BlockArgument table : orderedTables) {
      int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(0);
      auto name = loss.getArgAttrOfType<ParamAttr>(table.getArgNumber(), StepDialect::kParamAttrName);
      if (rows % tp)
        return firstUser(table)->emitOpError()
               << "reads '" << name.getName() << "', whose vocabulary of " << rows
               << " rows tp:" << tp.getValue()
               << " does not divide (the embedding and the head are split along it)";
      a->splitParams[table.getArgNumber()] = {0, SmallVector<int64_t>{rows}};
    }
    SmallVector<unsigned> splitIndices;
    for (auto &entry : a->splitParams)
      splitIndices.push_back(entry.first);
    llvm::sort(splitIndices);
    for (unsigned index : splitIndices)
      for (int64_t s : a->splitParams[index].second)
        if (s % tp) {
          auto &split = a->splitParams[index];
          BlockArgument arg = loss.getArgument(index);
          Operation *user = firstUser(arg);
          auto name = loss.getArgAttrOfType<ParamAttr>(index, StepDialect::kParamAttrName);
          return user->emitOpError()
                 << "splits parameter '" << name.getName() << "' along dimension "
                 << split.first << " in parts of " << s << ", which tp:" << tp.getValue()
                 << " does not divide";
        }
    sums.clear();
    rewrite(loss, *a);
    if (sequenceParallel)
      return splitSequence(loss);
    return success();
  }

  /// [B, T, ...] <-> [T, B, ...]: the sequence outermost, so that a rank's
  /// positions are contiguous for the collectives (dimension 0).
  Value swapSequence(OpBuilder &b, Location loc, Value x) {
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < cast<RankedTensorType>(x.getType()).getRank(); ++d)
      perm.push_back(d);
    std::swap(perm[0], perm[1]);
    return b.create<TransposeOp>(loc, x, b.getDenseI64ArrayAttr(perm));
  }

  RankedTensorType withSequence(Type type, int64_t length) {
    return withDim(type, 1, length);
  }

  /// This rank's positions of a replicated [B, T, ...] value (no
  /// communication; the gradient gathers them).
  Value slicePositions(OpBuilder &b, Location loc, Value x) {
    Value swapped = swapSequence(b, loc, x);
    auto type = cast<RankedTensorType>(swapped.getType());
    Value part = b.create<mesh::AllSliceOp>(loc, withDim(type, 0, type.getDimSize(0) / tp),
                                            kWorldMeshName, ArrayRef<mesh::MeshAxis>{tpAxis()},
                                            swapped, APInt(64, 0));
    return swapSequence(b, loc, part);
  }

  /// Every position of a sequence-split value, gathered over tp.
  Value gatherPositions(OpBuilder &b, Location loc, Value x) {
    Value swapped = swapSequence(b, loc, x);
    auto type = cast<RankedTensorType>(swapped.getType());
    Value all = b.create<mesh::AllGatherOp>(loc, withDim(type, 0, type.getDimSize(0) * tp),
                                            kWorldMeshName, ArrayRef<mesh::MeshAxis>{tpAxis()},
                                            swapped, APInt(64, 0));
    return swapSequence(b, loc, all);
  }

  /// A replicated operand of an op on this rank's positions: a broadcast
  /// of a value without the sequence (a bias) is rebuilt at this rank's
  /// shape from the value entering through f (its gradient, a sum over
  /// this rank's positions, is summed over tp); one with the sequence
  /// outermost (a position embedding) from this rank's rows of it; any
  /// other value is sliced.
  Value localOperand(OpBuilder &b, Location loc, Value v, RankedTensorType whole) {
    // The operand's own element type (a select's mask beside its floats).
    auto local = RankedTensorType::get(withSequence(whole, whole.getDimSize(1) / tp).getShape(),
                                       cast<RankedTensorType>(v.getType()).getElementType());
    auto mesh = FlatSymbolRefAttr::get(b.getContext(), kWorldMeshName);
    if (auto broadcast = v.getDefiningOp<BroadcastOp>()) {
      Value in = broadcast.getInput();
      auto inType = cast<RankedTensorType>(in.getType());
      int64_t sequenceAt = 1 - (whole.getRank() - inType.getRank());
      if (sequenceAt < 0) {
        Value entered = b.create<CopyToParallelOp>(loc, in.getType(), in, mesh,
                                                   b.getDenseI16ArrayAttr({tpAxis()}));
        return b.create<BroadcastOp>(loc, local, entered);
      }
      if (sequenceAt == 0 && inType.getDimSize(0) == whole.getDimSize(1)) {
        Value rows = b.create<mesh::AllSliceOp>(
            loc, withDim(inType, 0, inType.getDimSize(0) / tp), kWorldMeshName,
            ArrayRef<mesh::MeshAxis>{tpAxis()}, in, APInt(64, 0));
        return b.create<BroadcastOp>(loc, local, rows);
      }
    }
    return slicePositions(b, loc, v);
  }

  /// Sequence parallelism: the partial sums are reduce-scattered along the
  /// sequence instead of all-reduced, and what they feed runs on this
  /// rank's positions until a value enters a tp region (all-gathered) or
  /// an op needs every position (gathered).
  LogicalResult splitSequence(func::FuncOp loss) {
    DenseSet<Value> split;
    OpBuilder b(loss.getContext());
    for (mesh::AllReduceOp sum : sums) {
      auto type = cast<RankedTensorType>(sum.getType());
      if (type.getRank() < 2 || type.getDimSize(1) % tp)
        return sum.emitOpError() << "sums a value whose sequence of "
                                 << (type.getRank() < 2 ? 0 : type.getDimSize(1))
                                 << " positions tp:" << tp.getValue()
                                 << " does not divide (sequence parallelism splits it)";
      b.setInsertionPoint(sum);
      Location loc = sum.getLoc();
      Value swapped = swapSequence(b, loc, sum.getInput());
      auto swappedType = cast<RankedTensorType>(swapped.getType());
      Value part = b.create<mesh::ReduceScatterOp>(
          loc, withDim(swappedType, 0, swappedType.getDimSize(0) / tp), kWorldMeshName,
          ArrayRef<mesh::MeshAxis>{tpAxis()}, swapped, mesh::ReductionKind::Sum, APInt(64, 0));
      Value mine = swapSequence(b, loc, part);
      sum.getResult().replaceAllUsesWith(mine);
      sum.erase();
      split.insert(mine);
    }
    auto mesh = FlatSymbolRefAttr::get(loss.getContext(), kWorldMeshName);
    SmallVector<Operation *> ops;
    for (Operation &op : loss.getBody().front())
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (llvm::none_of(op->getOperands(), [&](Value v) { return split.contains(v); }))
        continue;
      Location loc = op->getLoc();
      b.setInsertionPoint(op);
      if (auto copy = dyn_cast<CopyToParallelOp>(op)) {
        // Entering a tp region: every position. The copy sits right after
        // the gather, so their gradients (the copy's all-reduce, then the
        // gather's slice) become one reduce-scatter in step-autodiff.
        Value swapped = swapSequence(b, loc, copy.getInput());
        auto type = cast<RankedTensorType>(swapped.getType());
        Value all = b.create<mesh::AllGatherOp>(loc, withDim(type, 0, type.getDimSize(0) * tp),
                                                kWorldMeshName,
                                                ArrayRef<mesh::MeshAxis>{tpAxis()}, swapped,
                                                APInt(64, 0));
        Value entered = b.create<CopyToParallelOp>(loc, all.getType(), all, mesh,
                                                   b.getDenseI16ArrayAttr({tpAxis()}));
        copy.getResult().replaceAllUsesWith(swapSequence(b, loc, entered));
        copy.erase();
        continue;
      }
      bool elementwise = op->hasTrait<OpTrait::Elementwise>() || isa<ConvertOp>(op);
      if (elementwise || op->hasTrait<RowWise>()) {
        auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
        for (OpOperand &use : op->getOpOperands()) {
          Value v = use.get();
          if (split.contains(v))
            continue;
          if (elementwise) {
            use.set(localOperand(b, loc, v, resultType));
            if (auto broadcast = v.getDefiningOp<BroadcastOp>(); broadcast && v.use_empty())
              broadcast.erase(); // rebuilt at this rank's shape
          } else
            // A norm's weight: each rank's positions give part of its gradient.
            use.set(b.create<CopyToParallelOp>(loc, v.getType(), v, mesh,
                                               b.getDenseI16ArrayAttr({tpAxis()})));
        }
        op->getResult(0).setType(withSequence(resultType, resultType.getDimSize(1) / tp));
        split.insert(op->getResult(0));
        continue;
      }
      // Any other reader needs every position.
      for (OpOperand &use : op->getOpOperands())
        if (split.contains(use.get()))
          use.set(gatherPositions(b, loc, use.get()));
    }
    return success();
  }

  void rewrite(func::FuncOp loss, Analysis &a) {
    MLIRContext *ctx = loss.getContext();
    OpBuilder b(ctx);
    Block &body = loss.getBody().front();
    // Parameters: this rank's part.
    for (auto &[index, split] : a.splitParams) {
      BlockArgument arg = loss.getArgument(index);
      int64_t dim = split.first;
      auto type = cast<RankedTensorType>(arg.getType());
      arg.setType(withDim(type, dim, type.getDimSize(dim) / tp));
      loss.setArgAttr(index, StepDialect::kTpShardAttrName,
                      b.getDictionaryAttr({b.getNamedAttr("dim", b.getI64IntegerAttr(dim)),
                                           b.getNamedAttr("segments",
                                                          b.getDenseI64ArrayAttr(split.second))}));
    }
    // Values: split ones get this rank's last dimension.
    for (Operation &op : body)
      for (Value r : op.getResults()) {
        State s = a.stateOf(r);
        if (s.kind == Kind::Split) {
          auto type = cast<RankedTensorType>(r.getType());
          r.setType(withDim(type, type.getRank() - 1, total(s.segments) / tp));
        }
      }
    for (auto &[attention, heads, kvHeads] : a.attentions) {
      attention.setNumHeads(heads);
      attention.setNumKvHeads(kvHeads);
    }
    for (auto slice : body.getOps<SliceOp>()) {
      State in = a.stateOf(slice.getInput());
      if (in.kind != Kind::Split)
        continue;
      SmallVector<int64_t> offsets(slice.getOffsets()), sizes(slice.getSizes());
      int64_t last = offsets.size() - 1;
      offsets[last] /= tp;
      sizes[last] /= tp;
      slice.setOffsets(offsets);
      slice.setSizes(sizes);
    }
    // Collectives: f where a replicated value enters, g after a row.
    auto mesh = FlatSymbolRefAttr::get(ctx, kWorldMeshName);
    DenseMap<Value, Value> entered;
    for (auto [op, index] : a.copies) {
      Value x = op->getOperand(index);
      Value &copy = entered[x];
      if (!copy) {
        b.setInsertionPointAfterValue(x);
        copy = b.create<CopyToParallelOp>(op->getLoc(), x.getType(), x, mesh,
                                          b.getDenseI16ArrayAttr({tpAxis()}));
      }
      op->setOperand(index, copy);
    }
    for (Operation *row : a.rows) {
      b.setInsertionPointAfter(row);
      Value partial = row->getResult(0);
      auto sum = b.create<mesh::AllReduceOp>(row->getLoc(), partial.getType(), kWorldMeshName,
                                             ArrayRef<mesh::MeshAxis>{tpAxis()}, partial,
                                             mesh::ReductionKind::Sum);
      partial.replaceAllUsesExcept(sum.getResult(), sum);
      sums.push_back(sum);
    }
    rewriteVocabulary(loss, a, entered);
    loss.setFunctionType(FunctionType::get(ctx, body.getArgumentTypes(), loss.getResultTypes()));
  }

  /// This rank's first vocabulary row, a scalar i32: its slice of
  /// [0, V/M, 2V/M, ...] along the tp axis.
  Value firstRow(OpBuilder &b, Location loc, int64_t rows, DenseMap<int64_t, Value> &cache) {
    Value &first = cache[rows];
    if (first)
      return first;
    // At the start of the block anew: the op the insertion point stood
    // before may be a lookup rewriteVocabulary has erased since.
    b.setInsertionPointToStart(b.getInsertionBlock());
    SmallVector<int32_t> starts;
    for (int64_t t = 0; t < tp; ++t)
      starts.push_back(static_cast<int32_t>(t * (rows / tp)));
    auto all = RankedTensorType::get({tp.getValue()}, b.getI32Type());
    Value table = b.create<ConstantOp>(loc, DenseElementsAttr::get(all, ArrayRef<int32_t>(starts)));
    Value mine = b.create<mesh::AllSliceOp>(loc, RankedTensorType::get({1}, b.getI32Type()),
                                            kWorldMeshName, ArrayRef<mesh::MeshAxis>{tpAxis()},
                                            table, APInt(64, 0));
    first = b.create<ReshapeOp>(loc, RankedTensorType::get({}, b.getI32Type()), mine);
    return first;
  }

  Value sumOverTp(OpBuilder &b, Location loc, Value partial) {
    return b.create<mesh::AllReduceOp>(loc, partial.getType(), kWorldMeshName,
                                       ArrayRef<mesh::MeshAxis>{tpAxis()}, partial,
                                       mesh::ReductionKind::Sum);
  }

  /// Lookups in a split table become shard lookups summed over tp; a
  /// cross-entropy of split logits z = h·W_tᵀ becomes, never holding all
  /// of them on a rank: lse_t = logsumexp(z) of this rank's columns;
  /// lse = logsumexp over the tp ranks of the gathered lse_t; the target's
  /// logit h·W[target] from this rank's shard lookup, summed over tp; the
  /// loss mean(lse - target logit).
  void rewriteVocabulary(func::FuncOp loss, Analysis &a, DenseMap<Value, Value> &entered) {
    OpBuilder b(loss.getContext());
    b.setInsertionPointToStart(&loss.getBody().front());
    DenseMap<int64_t, Value> firsts;
    for (EmbeddingOp lookup : a.lookups) {
      int64_t rows = cast<RankedTensorType>(lookup.getTable().getType()).getDimSize(0) * tp;
      Value first = firstRow(b, lookup.getLoc(), rows, firsts);
      OpBuilder at(lookup);
      auto part = at.create<EmbeddingOp>(lookup.getLoc(), lookup.getType(), lookup.getTable(),
                                         lookup.getIds(), first, at.getI64IntegerAttr(rows));
      Value sum = sumOverTp(at, lookup.getLoc(), part);
      lookup.getResult().replaceAllUsesWith(sum);
      lookup.erase();
      sums.push_back(sum.getDefiningOp<mesh::AllReduceOp>());
    }
    for (CrossEntropyOp ce : a.losses) {
      auto head = ce.getLogits().getDefiningOp<MatmulOp>();
      head->setAttr(StepDialect::kVocabLogitsAttrName, b.getI64IntegerAttr(tpAxis()));
      Value h = head.getLhs(), table = head.getRhs();
      int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(0) * tp;
      Value first = firstRow(b, ce.getLoc(), rows, firsts);
      OpBuilder at(ce);
      Location loc = ce.getLoc();
      Value z = ce.getLogits();
      auto zType = cast<RankedTensorType>(z.getType());
      int64_t last = zType.getRank() - 1;
      auto lastDim = at.getDenseI64ArrayAttr({last});
      auto first0 = at.getDenseI64ArrayAttr({0});
      auto logSumExp = [&](Value x, DenseI64ArrayAttr dims) -> Value {
        Value max = at.create<ReduceMaxOp>(loc, x, dims, at.getUnitAttr());
        Value shifted = at.create<SubOp>(loc, x, at.create<BroadcastOp>(loc, x.getType(), max));
        Value sum = at.create<ReduceSumOp>(loc, at.create<ExpOp>(loc, shifted), dims, nullptr);
        Value maxDropped = at.create<ReduceMaxOp>(loc, x, dims, nullptr);
        return at.create<AddOp>(loc, at.create<LogOp>(loc, sum), maxDropped);
      };
      Value local = logSumExp(z, lastDim); // [..] this rank's columns
      auto localType = cast<RankedTensorType>(local.getType());
      SmallVector<int64_t> oneMore{1}, all{tp.getValue()};
      llvm::append_range(oneMore, localType.getShape());
      llvm::append_range(all, localType.getShape());
      Value lifted = at.create<ReshapeOp>(
          loc, RankedTensorType::get(oneMore, localType.getElementType()), local);
      Value gathered = at.create<mesh::AllGatherOp>(
          loc, RankedTensorType::get(all, localType.getElementType()), kWorldMeshName,
          ArrayRef<mesh::MeshAxis>{tpAxis()}, lifted, APInt(64, 0));
      Value lse = logSumExp(gathered, first0);
      // Ignored targets are looked up as id 0 and masked out of the sum.
      Value ids = ce.getTargets(), mask;
      if (std::optional<int64_t> ignore = ce.getIgnoreIndex()) {
        auto masked = at.create<TargetMaskOp>(loc, ids, at.getI64IntegerAttr(*ignore));
        ids = masked.getIds();
        mask = masked.getMask();
      }
      Value rowsOfTargets = at.create<EmbeddingOp>(loc, h.getType(), table, ids, first,
                                                   at.getI64IntegerAttr(rows));
      Value hIn = entered.lookup(h) ? entered.lookup(h) : h;
      Value target = sumOverTp(
          at, loc, at.create<ReduceSumOp>(loc, at.create<MulOp>(loc, hIn, rowsOfTargets), lastDim,
                                          nullptr));
      SmallVector<int64_t> dims;
      for (int64_t d = 0; d < localType.getRank(); ++d)
        dims.push_back(d);
      auto splat = [&](double v, Type t) -> Value {
        auto type = cast<RankedTensorType>(t);
        return at.create<ConstantOp>(
            loc, DenseElementsAttr::get(type, at.getFloatAttr(type.getElementType(), v)));
      };
      Value mean;
      if (!ce.hasOptions()) {
        mean = at.create<ReduceMeanOp>(loc, at.create<SubOp>(loc, lse, target),
                                       at.getDenseI64ArrayAttr(dims), nullptr);
      } else {
        // Per position: lse - (1-ε)·x_t - (ε/V)·Σ_j x_j + z·lse², masked;
        // summed over the denominator (at least the smallest normal f32, so
        // nothing counted gives 0 rather than 0/0).
        double eps = ce.getLabelSmoothing() ? ce.getLabelSmoothing()->convertToDouble() : 0.0;
        double zc = ce.getZLoss() ? ce.getZLoss()->convertToDouble() : 0.0;
        Type rowType = lse.getType();
        Value per = at.create<SubOp>(
            loc, lse, eps != 0 ? at.create<MulOp>(loc, target, splat(1.0 - eps, rowType)).getResult()
                               : target);
        if (eps != 0) {
          Value sum = sumOverTp(at, loc, at.create<ReduceSumOp>(loc, z, lastDim, nullptr));
          per = at.create<SubOp>(loc, per,
                                 at.create<MulOp>(loc, sum, splat(eps / double(rows), rowType)));
        }
        if (zc != 0)
          per = at.create<AddOp>(
              loc, per, at.create<MulOp>(loc, at.create<MulOp>(loc, lse, lse), splat(zc, rowType)));
        if (mask)
          per = at.create<MulOp>(loc, per, mask);
        Value total = at.create<ReduceSumOp>(loc, per, at.getDenseI64ArrayAttr(dims), nullptr);
        auto scalarType = cast<RankedTensorType>(total.getType());
        Value count = ce.getCount();
        if (!count && mask)
          count = at.create<TokenCountOp>(loc, ce.getTargets(), ce.getIgnoreIndexAttr());
        if (!count)
          count = splat(double(ce.getTargets().getType().getNumElements()), scalarType);
        if (count.getType() != scalarType)
          count = at.create<ConvertOp>(loc, scalarType, count);
        count = at.create<MaximumOp>(loc, count, splat(1.1754943508222875e-38, scalarType));
        mean = at.create<DivOp>(loc, total, count);
      }
      mean.getDefiningOp()->setAttr(
          StepDialect::kLossTokensAttrName,
          at.getI64IntegerAttr(ce.getTargets().getType().getNumElements()));
      if (mean.getType() != ce.getType())
        mean = at.create<ConvertOp>(loc, ce.getType(), mean);
      ce.getResult().replaceAllUsesWith(mean);
      ce.erase();
    }
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1 || (!meshShape.empty() && meshShape[meshShape.size() - 1] != tp)) {
      emitError(module.getLoc()) << "step-shard-tensor expects tp >= 1 and a mesh whose last "
                                    "axis is tp";
      return signalPassFailure();
    }
    SmallVector<int64_t> shape(meshShape.begin(), meshShape.end());
    if (shape.empty())
      shape.push_back(tp);
    // (step-shard-experts made it already where ep runs beside tp.)
    auto mesh = module.lookupSymbol<mesh::MeshOp>(kWorldMeshName);
    OpBuilder b(module.getBodyRegion());
    if (!mesh) {
      b.setInsertionPointToStart(module.getBody());
      mesh = b.create<mesh::MeshOp>(module.getLoc(), kWorldMeshName, shape);
    }
    // The last axis is tp: said in the IR for every later reader.
    mesh->setAttr(StepDialect::kTpAxisAttrName, b.getI64IntegerAttr(int64_t(shape.size()) - 1));
    bool found = false;
    for (auto loss : module.getOps<func::FuncOp>()) {
      if (!loss->hasAttr(StepDialect::kLossAttrName))
        continue;
      found = true;
      if (failed(shard(loss)))
        return signalPassFailure();
    }
    if (!found) {
      emitError(module.getLoc()) << "no function is marked '" << StepDialect::kLossAttrName
                                 << "'";
      signalPassFailure();
    }
  }
};

} // namespace
