//===- ShardDataParallel.cpp - data-parallel gradients (DDP) --------------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/LossFunctions.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"

namespace stepc {
#define GEN_PASS_DEF_STEPSHARDDATAPARALLEL
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

int64_t bytesOf(Value v) { return tensorBytes(v.getType()); }

struct StepShardDataParallelPass
    : public stepc::impl::StepShardDataParallelBase<StepShardDataParallelPass> {
  using StepShardDataParallelBase::StepShardDataParallelBase;

  /// The mean over the ranks of `v`: SUM, then · 1/N.
  Value mean(OpBuilder &b, Location loc, Value sum) {
    auto type = cast<RankedTensorType>(sum.getType());
    Value inv = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 1.0 / ranks)));
    return b.create<MulOp>(loc, sum, inv);
  }

  /// The data axes (the mesh's first, or every axis up to ep's), and those
  /// an expert weight's gradient is summed over (the data axes but ep: its
  /// experts have every ep rank's tokens in it already).
  SmallVector<mesh::MeshAxis> dataAxes{0}, expertAxes;
  int64_t epAxis = -1;

  Value allReduce(OpBuilder &b, Location loc, Value v, ArrayRef<mesh::MeshAxis> axes) {
    return b.create<mesh::AllReduceOp>(loc, v.getType(), kWorldMeshName, axes, v,
                                       mesh::ReductionKind::Sum);
  }
  Value allReduce(OpBuilder &b, Location loc, Value v) { return allReduce(b, loc, v, dataAxes); }

  /// Whether gradient function argument `i` is an expert weight of ep.
  bool isExpertWeight(func::FuncOp grad, unsigned i) {
    auto split = grad.getArgAttrOfType<DictionaryAttr>(i, StepDialect::kTpShardAttrName);
    auto axis = split ? split.getAs<IntegerAttr>("axis") : IntegerAttr();
    return axis && axis.getInt() == epAxis;
  }

  /// Replaces the loss and gradients returned by `grad` with their means
  /// over the ranks; gradients smaller than bucket-bytes are flattened and
  /// concatenated in the order they become final, one all-reduce a bucket.
  void bucketAndReduce(OpBuilder &b, func::FuncOp grad) {
    auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    Location loc = ret.getLoc();
    b.setInsertionPoint(ret);
    SmallVector<Value> results(ret.getOperands());
    results[0] = mean(b, loc, allReduce(b, loc, results[0]));
    // Gradients in the order their defining ops run (arguments first).
    // Result k + 1 is the k-th trained parameter's gradient; an expert
    // weight's is averaged on its own axes, outside the buckets.
    SmallVector<unsigned> order;
    unsigned result = 0;
    for (unsigned i = 0, e = grad.getNumArguments(); i < e; ++i) {
      if (!getTrainedParam(grad, i))
        continue;
      ++result;
      if (!isExpertWeight(grad, i)) {
        order.push_back(result);
        continue;
      }
      results[result] = expertAxes.empty()
                            ? mean(b, loc, results[result])
                            : mean(b, loc, allReduce(b, loc, results[result], expertAxes));
    }
    // After the gradients, the loss function's outputs stay this rank's;
    // its metrics are averaged as the loss is.
    for (unsigned i = result + 1; i < results.size(); ++i)
      if (hasResultRole(grad, i, Role::Metric))
        results[i] = mean(b, loc, allReduce(b, loc, results[i]));
    auto position = [](Value v) -> Operation * { return v.getDefiningOp(); };
    llvm::stable_sort(order, [&](unsigned x, unsigned y) {
      Operation *a = position(results[x]), *c = position(results[y]);
      return a && c ? a->isBeforeInBlock(c) : !a && c;
    });
    SmallVector<SmallVector<unsigned>> buckets;
    int64_t filled = 0;
    bool open = false; // whether buckets.back() takes more small gradients
    for (unsigned i : order) {
      int64_t bytes = bytesOf(results[i]);
      if (bucketBytes <= 0 || bytes >= bucketBytes) {
        buckets.push_back({i});
        open = false;
        continue;
      }
      if (!open || filled + bytes > bucketBytes) {
        buckets.push_back({});
        filled = 0;
        open = true;
      }
      buckets.back().push_back(i);
      filled += bytes;
    }
    for (ArrayRef<unsigned> bucket : buckets) {
      if (bucket.size() == 1) {
        results[bucket[0]] = mean(b, loc, allReduce(b, loc, results[bucket[0]]));
        continue;
      }
      SmallVector<Value> flats;
      for (unsigned i : bucket) {
        auto type = cast<RankedTensorType>(results[i].getType());
        auto flat = RankedTensorType::get({type.getNumElements()}, type.getElementType());
        flats.push_back(b.create<ReshapeOp>(loc, flat, results[i]));
      }
      Value all = b.create<ConcatOp>(loc, flats, b.getI64IntegerAttr(0));
      Value sum = mean(b, loc, allReduce(b, loc, all));
      int64_t offset = 0;
      for (unsigned i : bucket) {
        auto type = cast<RankedTensorType>(results[i].getType());
        Value part = b.create<SliceOp>(loc, sum, b.getDenseI64ArrayAttr({offset}),
                                       b.getDenseI64ArrayAttr({type.getNumElements()}));
        results[i] = b.create<ReshapeOp>(loc, type, part);
        offset += type.getNumElements();
      }
    }
    ret.getOperandsMutable().assign(results);
    setMissingPhases(grad.getBody().front(), Phase::Collective);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1) {
      emitError(module.getLoc()) << "step-shard-data-parallel expects ranks >= 1, got "
                         << ranks.getValue();
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> grads;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(StepDialect::kGradientAttrName))
        grads.push_back(f);
    if (grads.empty()) {
      emitError(module.getLoc()) << "no function is marked '" << StepDialect::kGradientAttrName
                         << "' (run step-autodiff first)";
      return signalPassFailure();
    }
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToStart(module.getBody());
    // With tp, step-shard-tensor made the mesh: these axes, then tp.
    if (!module.lookupSymbol(kWorldMeshName))
      b.create<mesh::MeshOp>(module.getLoc(), kWorldMeshName, ArrayRef<int64_t>{ranks.getValue()});
    // With ep (step-shard-experts), the data axes run up to ep's.
    if (auto ep = module.lookupSymbol(kWorldMeshName)->getAttrOfType<IntegerAttr>(
            StepDialect::kEpAxisAttrName)) {
      epAxis = ep.getInt();
      dataAxes.clear();
      for (int64_t axis = 0; axis <= epAxis; ++axis)
        dataAxes.push_back(static_cast<mesh::MeshAxis>(axis));
      expertAxes.assign(dataAxes.begin(), dataAxes.end() - 1);
    }
    for (func::FuncOp grad : grads) {
      bucketAndReduce(b, grad);
      if (failed(offsetDropoutRows(grad, StepDialect::kRankRowsAttrName, dataAxes, ranks)) ||
          failed(sumTokenCounts(grad, StepDialect::kRankRowsAttrName, dataAxes, ranks)))
        return signalPassFailure();
    }
  }
};

} // namespace
