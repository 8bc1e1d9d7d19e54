//===- Muon.cpp - Muon's update of the blocks' matrices -------------------===//

#include "Muon.h"

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "llvm/ADT/MapVector.h"

#include <cmath>
#include <tuple>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

Value splat(OpBuilder &b, Location loc, double v, Type t) {
  auto tensor = cast<RankedTensorType>(t);
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(tensor, b.getFloatAttr(tensor.getElementType(), v)));
}

Value transpose(OpBuilder &b, Location loc, Value v) {
  return b.create<TransposeOp>(loc, v, b.getDenseI64ArrayAttr({1, 0}));
}

Value reshape(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, cast<RankedTensorType>(v.getType()).getElementType());
  return type == v.getType() ? v : b.create<ReshapeOp>(loc, type, v).getResult();
}

/// The whole matrix's rows and columns (tp parts and shards joined, no
/// padding rows).
std::pair<int64_t, int64_t> wholeShape(const MuonMatrix &matrix, const MuonConfig &config) {
  auto type = cast<RankedTensorType>(matrix.param.getType());
  int64_t rows = matrix.globalRows > 0 ? matrix.globalRows : type.getDimSize(0);
  int64_t cols = type.getDimSize(1);
  (matrix.tpDim == 0 ? rows : cols) *= matrix.tpDim >= 0 ? config.tpRanks : 1;
  return {rows, cols};
}

/// torch.optim.Muon's momentum, in f32: m' = lerp(m, g, 1 - μ) and the
/// update u = lerp(g, m', μ) (Nesterov) or m'. Returns {u, m'}.
std::pair<Value, Value> momentumUpdate(OpBuilder &b, Location loc, const MuonMatrix &matrix,
                                       const MuonConfig &config) {
  Type type = matrix.param.getType();
  auto mul = [&](Value x, Value y) -> Value { return b.create<MulOp>(loc, x, y); };
  auto add = [&](Value x, Value y) -> Value { return b.create<AddOp>(loc, x, y); };
  auto sub = [&](Value x, Value y) -> Value { return b.create<SubOp>(loc, x, y); };
  // lerp(x, y, w) as PyTorch's kernel rounds it: x + w·(y - x) below 0.5,
  // y - (y - x)·(1 - w) from 0.5.
  auto lerp = [&](Value x, Value y, double w) -> Value {
    return w < 0.5 ? add(x, mul(splat(b, loc, w, type), sub(y, x)))
                   : sub(y, mul(sub(y, x), splat(b, loc, 1.0 - w, type)));
  };
  const double mu = config.momentum;
  Value clipped = mul(matrix.grad, b.create<BroadcastOp>(loc, type, matrix.gradScale));
  Value newM = lerp(matrix.momentum, clipped, 1.0 - mu);
  return {config.nesterov ? lerp(clipped, newM, mu) : newM, newM};
}

/// Orthogonalises `u`, this rank's tp part of a matrix whose rows are all
/// here (with zero padding rows past `rows` when it was sharded): under tp
/// the parts are gathered along the split dimension (a column split as the
/// rows of the transpose: the collectives move contiguous parts), then
/// `nsSteps` Newton-Schulz iterations on the wide orientation X
/// (X /= max(‖X‖_F, 1e-7); A = X·Xᵀ, B = b·A + c·A·A, X = a·X + B·X), and
/// this rank's part kept. Newton-Schulz commutes with permuting rows or
/// columns (f(PXQ) = P f(X) Q), so the gathered order (a fused weight's
/// segments interleaved by rank) and the zero rows change nothing in each
/// rank's part.
Value orthogonalise(OpBuilder &b, Location loc, Value u, const MuonMatrix &matrix,
                    const MuonConfig &config) {
  auto partType = cast<RankedTensorType>(u.getType());
  Type element = partType.getElementType();
  auto tpAxis = static_cast<mesh::MeshAxis>(config.tpAxis);
  const int64_t tpDim = matrix.tpDim;
  if (tpDim >= 0) {
    Value part = tpDim == 1 ? transpose(b, loc, u) : u;
    auto rowsType = cast<RankedTensorType>(part.getType());
    auto wholeType = RankedTensorType::get(
        {rowsType.getDimSize(0) * config.tpRanks, rowsType.getDimSize(1)}, element);
    u = b.create<mesh::AllGatherOp>(loc, wholeType, kWorldMeshName,
                                    ArrayRef<mesh::MeshAxis>{tpAxis}, part, APInt(64, 0));
    if (tpDim == 1)
      u = transpose(b, loc, u);
  }
  auto [rows, cols] = wholeShape(matrix, config);
  // (The orientation of the real matrix: its rounding as on one rank.)
  const bool tall = rows > cols;
  Value x = tall ? transpose(b, loc, u) : u;
  auto scalarType = RankedTensorType::get({}, element);
  Value norm = b.create<SqrtOp>(loc, sumOfSquares(b, loc, x, scalarType));
  norm = b.create<MaximumOp>(loc, norm, splat(b, loc, 1e-7, scalarType));
  x = b.create<DivOp>(loc, x, b.create<BroadcastOp>(loc, x.getType(), norm));
  const double ca = 3.4445, cb = -4.7750, cc = 2.0315; // the quintic's coefficients
  auto mul = [&](Value x, Value y) -> Value { return b.create<MulOp>(loc, x, y); };
  auto add = [&](Value x, Value y) -> Value { return b.create<AddOp>(loc, x, y); };
  for (int64_t i = 0; i < config.nsSteps; ++i) {
    Value gram = b.create<MatmulOp>(loc, x, x, nullptr, b.getUnitAttr());
    Value gramUpdate =
        add(mul(splat(b, loc, cb, gram.getType()), gram),
            mul(splat(b, loc, cc, gram.getType()),
                b.create<MatmulOp>(loc, gram, gram, nullptr, nullptr)));
    x = add(mul(splat(b, loc, ca, x.getType()), x),
            b.create<MatmulOp>(loc, gramUpdate, x, nullptr, nullptr));
  }
  if (tall)
    x = transpose(b, loc, x);
  if (tpDim >= 0) {
    Value whole = tpDim == 1 ? transpose(b, loc, x) : x;
    auto mineType = tpDim == 1 ? RankedTensorType::get({partType.getDimSize(1),
                                                        partType.getDimSize(0)},
                                                       element)
                               : partType;
    x = b.create<mesh::AllSliceOp>(loc, mineType, kWorldMeshName,
                                   ArrayRef<mesh::MeshAxis>{tpAxis}, whole, APInt(64, 0));
    if (tpDim == 1)
      x = transpose(b, loc, x);
  }
  return x;
}

/// k matrices of one [h, c] shape dealt out to `ranks` owners: flattened
/// and stacked as [ranks, m·h·c], row o holding matrices o·m .. o·m + m - 1
/// (m = ⌈k / ranks⌉; zero matrices fill the slots past k: their update is
/// zero, and every rank runs as many Newton-Schulz iterations).
Value stackSlots(OpBuilder &b, Location loc, ArrayRef<Value> updates, int64_t ranks) {
  auto type = cast<RankedTensorType>(updates.front().getType());
  const int64_t k = updates.size(), perRank = (k + ranks - 1) / ranks;
  const int64_t hc = type.getNumElements();
  SmallVector<Value> flat;
  for (Value u : updates)
    flat.push_back(reshape(b, loc, u, {1, hc}));
  for (int64_t j = k; j < perRank * ranks; ++j)
    flat.push_back(splat(b, loc, 0.0, RankedTensorType::get({1, hc}, type.getElementType())));
  return reshape(b, loc, b.create<ConcatOp>(loc, flat, b.getI64IntegerAttr(0)),
                 {ranks, perRank * hc});
}

/// `mine` [R, m·h·c] holds m matrices of R·h rows (column block i, its R
/// rows of h·c: one [h, c] part each, in row order): each orthogonalised
/// whole, returned in the same layout.
Value orthogonaliseBlocks(OpBuilder &b, Location loc, Value mine, int64_t perRank, int64_t h,
                          int64_t c, const MuonMatrix &like, const MuonConfig &config) {
  const int64_t parts = cast<RankedTensorType>(mine.getType()).getDimSize(0), hc = h * c;
  SmallVector<Value> done;
  for (int64_t i = 0; i < perRank; ++i) {
    Value blocks = perRank == 1 ? mine
                                : b.create<SliceOp>(loc, mine, b.getDenseI64ArrayAttr({0, i * hc}),
                                                    b.getDenseI64ArrayAttr({parts, hc}))
                                      .getResult();
    Value x = orthogonalise(b, loc, reshape(b, loc, blocks, {parts * h, c}), like, config);
    done.push_back(reshape(b, loc, x, {parts, hc}));
  }
  return done.size() == 1 ? done.front()
                          : b.create<ConcatOp>(loc, done, b.getI64IntegerAttr(1)).getResult();
}

/// The first k matrices of stackSlots' layout [ranks, m·h·c], as [h, c].
SmallVector<Value> unstackSlots(OpBuilder &b, Location loc, Value stacked, int64_t k,
                                int64_t h, int64_t c) {
  auto type = cast<RankedTensorType>(stacked.getType());
  const int64_t hc = h * c, slots = type.getNumElements() / hc;
  Value rows = reshape(b, loc, stacked, {slots, hc});
  SmallVector<Value> results;
  for (int64_t j = 0; j < k; ++j)
    results.push_back(reshape(b, loc,
                              b.create<SliceOp>(loc, rows, b.getDenseI64ArrayAttr({j, 0}),
                                                b.getDenseI64ArrayAttr({1, hc})),
                              {h, c}));
  return results;
}

/// Row-sharded matrices of one shape, each rank holding a [h, c] shard of
/// each: matrix j is orthogonalised by rank j / m of the shard axis
/// (stackSlots). An all-to-all brings each owner the P row shards of its m
/// matrices, laid out [P, m·h·c] (row s: rank s's shards, matrix after
/// matrix); a second all-to-all returns the orthogonalised shards. Each
/// rank sends 2·(P-1)·m·h·c floats, against (P-1)·k·h·c to gather every
/// matrix everywhere (the same at P = 2, 2/P of it from k = P on), and runs
/// m Newton-Schulz iterations' worth instead of k.
SmallVector<Value> orthogonaliseByOwners(OpBuilder &b, Location loc, ArrayRef<Value> updates,
                                         const MuonMatrix &like, const MuonConfig &config) {
  auto type = cast<RankedTensorType>(updates.front().getType());
  const int64_t ranks = config.shardRanks, k = updates.size();
  const int64_t h = type.getDimSize(0), c = type.getDimSize(1);
  auto exchange = [&](Value v) -> Value {
    return b.create<mesh::AllToAllOp>(
        loc, v.getType(), config.mesh,
        ArrayRef<mesh::MeshAxis>{static_cast<mesh::MeshAxis>(config.meshAxis)}, v,
        APInt(64, 0), APInt(64, 0));
  };
  Value mine = exchange(stackSlots(b, loc, updates, ranks));
  Value done = orthogonaliseBlocks(b, loc, mine, (k + ranks - 1) / ranks, h, c, like, config);
  // Row o of the result holds owner o's matrices o·m .. o·m + m - 1.
  return unstackSlots(b, loc, exchange(done), k, h, c);
}

/// Whole matrices of one shape, equal on every rank of the replica axis
/// (ddp): matrix j is orthogonalised by rank j / m of the axis (stackSlots),
/// which takes its m from the stack where it lies (all_slice: no
/// communication); one all-gather brings every rank every result. Each rank
/// runs m Newton-Schulz iterations' worth instead of k, for (P-1)·m·h·c
/// floats received.
SmallVector<Value> orthogonaliseByReplicas(OpBuilder &b, Location loc, ArrayRef<Value> updates,
                                           const MuonMatrix &like, const MuonConfig &config) {
  auto type = cast<RankedTensorType>(updates.front().getType());
  const int64_t ranks = config.replicaRanks, k = updates.size();
  const int64_t h = type.getDimSize(0), c = type.getDimSize(1);
  const int64_t perRank = (k + ranks - 1) / ranks;
  const mesh::MeshAxis axis = static_cast<mesh::MeshAxis>(config.replicaAxis);
  Value stacked = stackSlots(b, loc, updates, ranks);
  auto rowType = RankedTensorType::get({1, perRank * h * c}, type.getElementType());
  Value mine = b.create<mesh::AllSliceOp>(loc, rowType, kWorldMeshName,
                                          ArrayRef<mesh::MeshAxis>{axis}, stacked, APInt(64, 0));
  Value done = orthogonaliseBlocks(b, loc, mine, perRank, h, c, like, config);
  Value all = b.create<mesh::AllGatherOp>(loc, stacked.getType(), kWorldMeshName,
                                          ArrayRef<mesh::MeshAxis>{axis}, done, APInt(64, 0));
  return unstackSlots(b, loc, all, k, h, c);
}

/// p' = p·(1 - lr·wd) - lr'·X with lr' = lr·√max(1, R/C) (original) or
/// lr·0.2·√max(R, C) (match-rms-adamw: AdamW's update RMS, so one learning
/// rate serves both halves of the hybrid).
Value applyUpdate(OpBuilder &b, Location loc, const MuonMatrix &matrix, Value x,
                  const MuonConfig &config) {
  Type type = matrix.param.getType();
  auto scalarType = RankedTensorType::get({}, cast<RankedTensorType>(type).getElementType());
  auto [rows, cols] = wholeShape(matrix, config);
  const double shape = config.adjustLr == "original"
                           ? std::sqrt(std::max(1.0, double(rows) / double(cols)))
                           : 0.2 * std::sqrt(double(std::max(rows, cols)));
  auto mul = [&](Value x, Value y) -> Value { return b.create<MulOp>(loc, x, y); };
  auto sub = [&](Value x, Value y) -> Value { return b.create<SubOp>(loc, x, y); };
  auto spread = [&](Value s) -> Value { return b.create<BroadcastOp>(loc, type, s); };
  Value adjusted = mul(matrix.lr, splat(b, loc, shape, scalarType));
  Value keep = sub(splat(b, loc, 1.0, scalarType),
                   mul(matrix.lr, splat(b, loc, matrix.decay, scalarType)));
  return sub(mul(matrix.param, spread(keep)), mul(x, spread(adjusted)));
}

} // namespace

SmallVector<std::pair<Value, Value>> stepc::buildMuonUpdates(OpBuilder &b, Location loc,
                                                             ArrayRef<MuonMatrix> matrices,
                                                             const MuonConfig &config) {
  SmallVector<Value> updates, newMomenta, orthogonal(matrices.size());
  for (const MuonMatrix &matrix : matrices) {
    auto [u, newM] = momentumUpdate(b, loc, matrix, config);
    updates.push_back(u);
    newMomenta.push_back(newM);
  }
  // Row-sharded matrices go to owners along the shard axis, whole ones on a
  // replica axis to owners along it, grouped by (shard) shape, whole shape
  // and tp split (one program on every rank: the same shapes everywhere).
  using Group = std::tuple<Type, int64_t, int64_t>;
  llvm::MapVector<Group, SmallVector<size_t>> sharded, replicated;
  for (auto [j, matrix] : llvm::enumerate(matrices)) {
    if (matrix.globalRows > 0 && config.shardRanks > 1)
      sharded[{updates[j].getType(), matrix.globalRows, matrix.tpDim}].push_back(j);
    else if (matrix.globalRows == 0 && config.replicaRanks > 1)
      replicated[{updates[j].getType(), 0, matrix.tpDim}].push_back(j);
    else
      orthogonal[j] = orthogonalise(b, loc, updates[j], matrix, config);
  }
  auto byGroup = [&](llvm::MapVector<Group, SmallVector<size_t>> &groups, auto deal) {
    for (auto &[key, members] : groups) {
      SmallVector<Value> parts;
      for (size_t j : members)
        parts.push_back(updates[j]);
      SmallVector<Value> done = deal(b, loc, parts, matrices[members.front()], config);
      for (auto [j, x] : llvm::zip(members, done))
        orthogonal[j] = x;
    }
  };
  byGroup(sharded, orthogonaliseByOwners);
  byGroup(replicated, orthogonaliseByReplicas);
  SmallVector<std::pair<Value, Value>> results;
  for (auto [j, matrix] : llvm::enumerate(matrices))
    results.push_back({applyUpdate(b, loc, matrix, orthogonal[j], config), newMomenta[j]});
  return results;
}
