//===- Optimizer.cpp - global-norm clipping and the optimizer update ------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>

namespace stepc {
#define GEN_PASS_DEF_STEPOPTIMIZER
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

struct OptimizerOptions {
  /// adamw, adam, sgd, lion or muon.
  std::string algorithm;
  double beta1, beta2, epsilon, momentum;
  bool nesterov;
  double weightDecay, maxGradNorm;
  /// Muon: momentum, Nesterov, Newton-Schulz iterations and how the step
  /// size follows the matrix's shape ("original" or "match-rms-adamw").
  double muonMomentum;
  bool muonNesterov;
  int64_t nsSteps;
  std::string adjustLr;
  /// Mesh over whose ranks the gradients are sharded ("" if not), and the
  /// axis they are sharded along.
  std::string mesh;
  int64_t meshAxis = 0;
  /// The tensor-parallel axis (-1: none).
  int64_t tpAxis = -1;
  /// Ranks along `meshAxis` (the shards of each sharded parameter).
  int64_t shardRanks = 1;
  /// Ranks along `tpAxis` (the parts of each tp-split parameter).
  int64_t tpRanks = 1;
};

/// A scalar constant of `type` (a 0-d float tensor).
Value scalar(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), value)));
}

/// Σ g² over every element of `g`, as a scalar of `scalarType`.
Value sumOfSquares(OpBuilder &b, Location loc, Value g, RankedTensorType scalarType) {
  Value squares = b.create<MulOp>(loc, g, g);
  auto type = cast<RankedTensorType>(g.getType());
  if (type.getRank() > 0) {
    SmallVector<int64_t> all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    squares = b.create<ReduceSumOp>(loc, squares, b.getDenseI64ArrayAttr(all), nullptr);
  }
  if (squares.getType() != scalarType)
    squares = b.create<ConvertOp>(loc, scalarType, squares);
  return squares;
}

/// Muon's update of one matrix (torch.optim.Muon's, in f32): the momentum
/// buffer m' = lerp(m, g, 1 - μ), the update u = lerp(g, m', μ) (Nesterov)
/// or m', orthogonalised by `nsSteps` Newton-Schulz iterations on the wide
/// orientation X (X /= max(‖X‖_F, 1e-7); then A = X·Xᵀ, B = b·A + c·A·A,
/// X = a·X + B·X), and p' = p·(1 - lr·wd) - lr'·X with lr' = lr·√max(1, R/C)
/// (original) or lr·0.2·√max(R, C) (match-rms-adamw: AdamW's update RMS,
/// so one learning rate serves both halves of the hybrid). Returns {p', m'}.
/// Under fsdp/hsdp (`globalRows` > 0: the parameter is this rank's dim-0
/// shard of a matrix of that many rows, zero-padded to ranks · shard rows),
/// the update is gathered whole, orthogonalised on every rank (padding rows
/// stay zero and change nothing), and this rank's rows kept.
/// Under tp (`tpDim` >= 0: the parameter is this rank's part along that
/// dimension, of `tpRanks` parts), the update is gathered along it over the
/// tp axis too, after the fsdp rows. Newton-Schulz commutes with permuting
/// rows or columns (X ↦ PXQ gives f(PXQ) = P f(X) Q), so the gathered order
/// (a fused weight's segments interleaved by rank) and the zero padding rows
/// change nothing in each rank's part.
std::pair<Value, Value> muonUpdate(OpBuilder &b, Location loc, Value param, Value g, Value m,
                                   Value lr, Value gradScale, const OptimizerOptions &options,
                                   double decay, int64_t globalRows, int64_t shardRanks,
                                   int64_t tpDim, int64_t tpRanks) {
  auto type = cast<RankedTensorType>(param.getType());
  auto splat = [&](double v, Type t) -> Value {
    auto tensor = cast<RankedTensorType>(t);
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(tensor, b.getFloatAttr(tensor.getElementType(), v)));
  };
  auto spread = [&](Value scalarValue, Type t) -> Value {
    return b.create<BroadcastOp>(loc, t, scalarValue);
  };
  auto mul = [&](Value x, Value y) -> Value { return b.create<MulOp>(loc, x, y); };
  auto add = [&](Value x, Value y) -> Value { return b.create<AddOp>(loc, x, y); };
  auto sub = [&](Value x, Value y) -> Value { return b.create<SubOp>(loc, x, y); };
  // lerp(x, y, w) as PyTorch's kernel rounds it: x + w·(y - x) below 0.5,
  // y - (y - x)·(1 - w) from 0.5.
  auto lerp = [&](Value x, Value y, double w) -> Value {
    return w < 0.5 ? add(x, mul(splat(w, type), sub(y, x)))
                   : sub(y, mul(sub(y, x), splat(1.0 - w, type)));
  };
  const double mu = options.muonMomentum;
  Value clipped = mul(g, spread(gradScale, type));
  Value newM = lerp(m, clipped, 1.0 - mu);
  Value u = options.muonNesterov ? lerp(clipped, newM, mu) : newM;

  auto tpAxis = static_cast<mesh::MeshAxis>(options.tpAxis);
  RankedTensorType rowsType = type;  // this rank's tp part, its fsdp rows gathered
  if (globalRows > 0) {
    rowsType = RankedTensorType::get({type.getDimSize(0) * shardRanks, type.getDimSize(1)},
                                     type.getElementType());
    u = b.create<mesh::AllGatherOp>(
        loc, rowsType, options.mesh,
        ArrayRef<mesh::MeshAxis>{static_cast<mesh::MeshAxis>(options.meshAxis)}, u,
        APInt(64, 0));
  }
  // The collectives move contiguous parts: a column split is gathered and
  // sliced as the rows of the transpose.
  auto transpose = [&](Value v) -> Value {
    return b.create<TransposeOp>(loc, v, b.getDenseI64ArrayAttr({1, 0}));
  };
  if (tpDim >= 0) {
    Value part = tpDim == 1 ? transpose(u) : u;
    auto partType = cast<RankedTensorType>(part.getType());
    auto wholeType = RankedTensorType::get(
        {partType.getDimSize(0) * tpRanks, partType.getDimSize(1)}, type.getElementType());
    u = b.create<mesh::AllGatherOp>(loc, wholeType, kWorldMeshName,
                                    ArrayRef<mesh::MeshAxis>{tpAxis}, part, APInt(64, 0));
    if (tpDim == 1)
      u = transpose(u);
  }
  const int64_t rows = (globalRows > 0 ? globalRows : type.getDimSize(0)) *
                       (tpDim == 0 ? tpRanks : 1),
                cols = type.getDimSize(1) * (tpDim == 1 ? tpRanks : 1);
  // (The orientation of the real matrix: its rounding as on one rank.)
  const bool tall = rows > cols;
  Value x = tall ? transpose(u) : u;
  auto scalarType = RankedTensorType::get({}, type.getElementType());
  Value norm = b.create<SqrtOp>(loc, sumOfSquares(b, loc, x, scalarType));
  norm = b.create<MaximumOp>(loc, norm, splat(1e-7, scalarType));
  x = b.create<DivOp>(loc, x, spread(norm, x.getType()));
  const double ca = 3.4445, cb = -4.7750, cc = 2.0315;  // the quintic's coefficients
  for (int64_t i = 0; i < options.nsSteps; ++i) {
    Value gram = b.create<MatmulOp>(loc, x, x, nullptr, b.getUnitAttr());
    Value gramUpdate =
        add(mul(splat(cb, gram.getType()), gram),
            mul(splat(cc, gram.getType()), b.create<MatmulOp>(loc, gram, gram, nullptr, nullptr)));
    x = add(mul(splat(ca, x.getType()), x),
            b.create<MatmulOp>(loc, gramUpdate, x, nullptr, nullptr));
  }
  if (tall)
    x = transpose(x);
  if (tpDim >= 0) {
    Value whole = tpDim == 1 ? transpose(x) : x;
    auto partType = tpDim == 1 ? RankedTensorType::get({rowsType.getDimSize(1),
                                                        rowsType.getDimSize(0)},
                                                       type.getElementType())
                               : rowsType;
    x = b.create<mesh::AllSliceOp>(loc, partType, kWorldMeshName,
                                   ArrayRef<mesh::MeshAxis>{tpAxis}, whole, APInt(64, 0));
    if (tpDim == 1)
      x = transpose(x);
  }
  if (globalRows > 0)
    x = b.create<mesh::AllSliceOp>(
        loc, type, options.mesh,
        ArrayRef<mesh::MeshAxis>{static_cast<mesh::MeshAxis>(options.meshAxis)}, x,
        APInt(64, 0));

  const double shape = options.adjustLr == "original"
                           ? std::sqrt(std::max(1.0, double(rows) / double(cols)))
                           : 0.2 * std::sqrt(double(std::max(rows, cols)));
  Value adjusted = mul(lr, splat(shape, scalarType));
  Value keep = sub(splat(1.0, scalarType), mul(lr, splat(decay, scalarType)));
  Value newParam = sub(mul(param, spread(keep, type)), mul(x, spread(adjusted, type)));
  return {newParam, newM};
}

/// Keys every dropout of `step` by the run's seed (a `#step.hyper<seed>`
/// i32 argument, appended when the step draws at all) and `stepNumber`.
void bindDropoutKeys(func::FuncOp step, Value stepNumber) {
  SmallVector<DropoutOp> unkeyed;
  step.walk([&](DropoutOp d) {
    if (!d.getSeed())
      unkeyed.push_back(d);
  });
  if (unkeyed.empty())
    return;
  MLIRContext *ctx = step.getContext();
  Builder attrs(ctx);
  unsigned index = step.getNumArguments();
  step.insertArgument(index, RankedTensorType::get({}, attrs.getI32Type()),
                      attrs.getDictionaryAttr(attrs.getNamedAttr(
                          StepDialect::kHyperAttrName, HyperAttr::get(ctx, Hyper::Seed))),
                      step.getLoc());
  Value seed = step.getArgument(index);
  for (DropoutOp d : unkeyed) {
    d.getSeedMutable().assign(seed);
    d.getStepMutable().assign(stepNumber);
  }
}

LogicalResult buildTrainStep(func::FuncOp grad, SymbolTable &symbols,
                             const OptimizerOptions &options) {
  OpBuilder b(grad);
  b.setInsertionPointAfter(grad);
  Location loc = grad.getLoc();
  auto lossType = dyn_cast<RankedTensorType>(grad.getResultTypes().front());
  if (!lossType || lossType.getRank() != 0)
    return grad.emitOpError() << "expects a scalar loss as the first result";

  // Signature: params, exp_avg, exp_avg_sq, inputs, lr, step.
  SmallVector<unsigned> params, inputs;
  SmallVector<std::string> names;
  for (unsigned i = 0, e = grad.getNumArguments(); i < e; ++i) {
    if (auto param = grad.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName)) {
      // AdamW keeps parameters and moments in f32 (or f64): master weights.
      Type element = cast<ShapedType>(grad.getArgumentTypes()[i]).getElementType();
      if (!element.isF32() && !element.isF64())
        return emitError(grad.getArgument(i).getLoc())
               << "parameter '" << param.getName() << "' is " << element
               << ": parameters are trained in f32 or f64 (write the model in f32 and compile "
                  "with --precision=bf16 to compute in bf16)";
      params.push_back(i);
      names.push_back(param.getName().str());
    } else {
      inputs.push_back(i);
    }
  }
  // After the loss and one gradient per parameter: the loss function's
  // outputs (role output), carried to the training step's results.
  if (grad.getNumResults() < params.size() + 1)
    return grad.emitOpError() << "expects the loss and one gradient per parameter";
  const unsigned outputs = grad.getNumResults() - 1 - params.size();

  ArrayRef<Type> argTypes = grad.getArgumentTypes();
  SmallVector<Type> newArgs, newResults{lossType, lossType};
  SmallVector<Attribute> argAttrs, resultAttrs{
      resultRoleDict(ResultAttr::get(b.getContext(), Role::Loss)),
      resultRoleDict(ResultAttr::get(b.getContext(), Role::GradNorm))};
  for (unsigned i : params) {
    newArgs.push_back(argTypes[i]);
    argAttrs.push_back(grad.getArgAttrDict(i));
  }
  // Muon orthogonalises the matrices of the repeated blocks (the hidden
  // layers); AdamW updates the rest (embeddings, the head, vectors).
  SmallVector<bool> muon;
  for (unsigned i : params)
    muon.push_back(options.algorithm == "muon" &&
                   cast<RankedTensorType>(argTypes[i]).getRank() == 2 &&
                   grad.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName).hasBlock());
  if (options.algorithm == "muon" && llvm::none_of(muon, [](bool m) { return m; }))
    return grad.emitOpError()
           << "has no matrix parameter inside a repeated block: Muon updates those (mark "
              "the model's blocks, e.g. #step.param<..., block N>), AdamW the rest";
  // The optimizer's state per parameter: AdamW's and Adam's two moments,
  // SGD's momentum buffer, Lion's moment or Muon's momentum (kept as
  // exp_avg). Arguments: every exp_avg, then every exp_avg_sq.
  auto hasSecondMoment = [&](size_t k) {
    return options.algorithm == "adamw" || options.algorithm == "adam" ||
           (options.algorithm == "muon" && !muon[k]);
  };
  SmallVector<std::pair<Moment, size_t>> stateOrder;
  for (Moment moment : {Moment::ExpAvg, Moment::ExpAvgSq})
    for (size_t k = 0; k < params.size(); ++k)
      if (moment == Moment::ExpAvg || hasSecondMoment(k))
        stateOrder.push_back({moment, k});
  for (auto [moment, k] : stateOrder) {
    newArgs.push_back(argTypes[params[k]]);
    argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        StepDialect::kStateAttrName, StateAttr::get(b.getContext(), moment, names[k]))));
  }
  for (unsigned i : inputs) {
    newArgs.push_back(argTypes[i]);
    argAttrs.push_back(grad.getArgAttrDict(i));
  }
  for (Hyper hyper : {Hyper::Lr, Hyper::Step}) {
    newArgs.push_back(lossType);
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(StepDialect::kHyperAttrName, HyperAttr::get(b.getContext(), hyper))));
  }
  // The updated parameters, then each moment, in the arguments' order.
  for (auto [i, name] : llvm::zip(params, names)) {
    newResults.push_back(argTypes[i]);
    resultAttrs.push_back(resultRoleDict(ResultAttr::get(b.getContext(), Role::Param, name)));
  }
  for (auto [moment, k] : stateOrder) {
    newResults.push_back(argTypes[params[k]]);
    resultAttrs.push_back(resultRoleDict(ResultAttr::get(b.getContext(), moment, names[k])));
  }

  for (unsigned k = 0; k < outputs; ++k) {
    unsigned i = 1 + params.size() + k;
    newResults.push_back(grad.getResultTypes()[i]);
    resultAttrs.push_back(grad.getResultAttrDict(i));
  }

  StringRef base = grad.getSymName();
  base.consume_back("_grad");
  auto step = b.create<func::FuncOp>(loc, (base + "_train_step").str(),
                                     b.getFunctionType(newArgs, newResults));
  step.setAllArgAttrs(argAttrs);
  step.setAllResultAttrs(resultAttrs);
  step->setAttr(StepDialect::kTrainStepAttrName, b.getUnitAttr());
  symbols.insert(step);

  // The gradient function's body, its arguments mapped to the new ones.
  Block *entry = step.addEntryBlock();
  size_t n = params.size();
  const size_t firstInput = n + stateOrder.size();
  // Each parameter's state arguments, by moment.
  SmallVector<Value> expAvgArg(n), expAvgSqArg(n);
  for (auto [j, state] : llvm::enumerate(stateOrder))
    (state.first == Moment::ExpAvg ? expAvgArg : expAvgSqArg)[state.second] =
        entry->getArgument(n + j);
  IRMapping mapping;
  for (auto [k, i] : llvm::enumerate(params))
    mapping.map(grad.getArgument(i), entry->getArgument(k));
  for (auto [k, i] : llvm::enumerate(inputs))
    mapping.map(grad.getArgument(i), entry->getArgument(firstInput + k));
  b.setInsertionPointToEnd(entry);
  auto gradReturn = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
  for (Operation &op : grad.getBody().front().without_terminator())
    b.clone(op, mapping);
  Value loss = mapping.lookup(gradReturn.getOperand(0));
  SmallVector<Value> grads;
  for (unsigned k = 0; k < n; ++k)
    grads.push_back(mapping.lookup(gradReturn.getOperand(k + 1)));
  Value lr = entry->getArgument(firstInput + inputs.size());
  Value stepNumber = entry->getArgument(firstInput + inputs.size() + 1);

  // norm = sqrt(Σ_i Σ g_i²); scale = min(1, max_norm / (norm + 1e-6))
  // tp-split gradients are each rank's part of one gradient: their squares
  // are summed over the tp ranks; replicated ones are counted once.
  Value total = scalar(b, loc, lossType, 0.0), split = scalar(b, loc, lossType, 0.0);
  for (auto [k, g] : llvm::enumerate(grads)) {
    bool tpSplit = grad.getArgAttr(params[k], StepDialect::kTpShardAttrName) != nullptr;
    Value &sum = tpSplit && options.tpAxis >= 0 ? split : total;
    sum = b.create<AddOp>(loc, sum, sumOfSquares(b, loc, g, lossType));
  }
  if (options.tpAxis >= 0)
    total = b.create<AddOp>(
        loc, total,
        b.create<mesh::AllReduceOp>(loc, lossType, options.mesh,
                                    ArrayRef<mesh::MeshAxis>{
                                        static_cast<mesh::MeshAxis>(options.tpAxis)},
                                    split, mesh::ReductionKind::Sum));
  // Sharded gradients: each rank holds part of every gradient, so the
  // squares are summed over the ranks (padding rows are zero).
  if (!options.mesh.empty() && options.meshAxis >= 0)
    total = b.create<mesh::AllReduceOp>(loc, lossType, options.mesh,
                                        ArrayRef<mesh::MeshAxis>{
                                            static_cast<mesh::MeshAxis>(options.meshAxis)},
                                        total,
                                        mesh::ReductionKind::Sum);
  Value norm = b.create<SqrtOp>(loc, total);
  Value scale = scalar(b, loc, lossType, 1.0);
  if (options.maxGradNorm > 0.0) {
    Value coef = b.create<DivOp>(
        loc, scalar(b, loc, lossType, options.maxGradNorm),
        b.create<AddOp>(loc, norm, scalar(b, loc, lossType, 1e-6)));
    scale = b.create<MinimumOp>(loc, coef, scale);
  }

  SmallVector<Value> newParams, newM, newV;
  for (unsigned k = 0; k < n; ++k) {
    Value param = entry->getArgument(k);
    Value g = grads[k];
    Value scaleK = scale, lrK = lr, stepK = stepNumber;
    auto elem = cast<RankedTensorType>(param.getType()).getElementType();
    auto scalarType = RankedTensorType::get({}, elem);
    if (scalarType != lossType) {
      scaleK = b.create<ConvertOp>(loc, scalarType, scale);
      lrK = b.create<ConvertOp>(loc, scalarType, lr);
      stepK = b.create<ConvertOp>(loc, scalarType, stepNumber);
    }
    double decay = cast<RankedTensorType>(param.getType()).getRank() >= 2
                       ? options.weightDecay
                       : 0.0;
    Value m = expAvgArg[k];
    if (muon[k]) {
      auto shardOf = grad.getArgAttrOfType<IntegerAttr>(params[k], StepDialect::kShardOfAttrName);
      auto tpShard = grad.getArgAttrOfType<DictionaryAttr>(params[k], StepDialect::kTpShardAttrName);
      auto [newParam, newMomentum] =
          muonUpdate(b, loc, param, g, m, lrK, scaleK, options, decay,
                     shardOf ? shardOf.getInt() : 0, options.shardRanks,
                     tpShard ? tpShard.getAs<IntegerAttr>("dim").getInt() : -1, options.tpRanks);
      newParams.push_back(newParam);
      newM.push_back(newMomentum);
      continue;
    }
    if (options.algorithm == "sgd") {
      auto update = b.create<SgdOp>(loc, param, g, m, lrK, scaleK,
                                    b.getF64FloatAttr(options.momentum),
                                    b.getBoolAttr(options.nesterov), b.getF64FloatAttr(decay));
      newParams.push_back(update.getNewParam());
      newM.push_back(update.getNewBuf());
      continue;
    }
    if (options.algorithm == "lion") {
      auto update = b.create<LionOp>(loc, param, g, m, lrK, scaleK,
                                     b.getF64FloatAttr(options.beta1),
                                     b.getF64FloatAttr(options.beta2), b.getF64FloatAttr(decay));
      newParams.push_back(update.getNewParam());
      newM.push_back(update.getNewM());
      continue;
    }
    auto update = b.create<AdamwOp>(
        loc, param, g, m, expAvgSqArg[k], lrK, stepK, scaleK,
        b.getF64FloatAttr(options.beta1), b.getF64FloatAttr(options.beta2),
        b.getF64FloatAttr(options.epsilon), b.getF64FloatAttr(decay),
        // (AdamW's decoupled decay is the op's default.)
        options.algorithm == "adam" ? b.getBoolAttr(false) : BoolAttr());
    newParams.push_back(update.getNewParam());
    newM.push_back(update.getNewM());
    newV.push_back(update.getNewV());
  }
  SmallVector<Value> results{loss, norm};
  llvm::append_range(results, newParams);
  llvm::append_range(results, newM);
  llvm::append_range(results, newV);
  for (unsigned k = 0; k < outputs; ++k)
    results.push_back(mapping.lookup(gradReturn.getOperand(1 + n + k)));
  b.create<func::ReturnOp>(loc, results);
  setMissingPhases(*entry, Phase::Optimizer);
  bindDropoutKeys(step, stepNumber);
  return success();
}

struct StepOptimizerPass : public stepc::impl::StepOptimizerBase<StepOptimizerPass> {
  using StepOptimizerBase::StepOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> grads;
    for (auto function : module.getOps<func::FuncOp>())
      if (function->hasAttr(StepDialect::kGradientAttrName))
        grads.push_back(function);
    if (grads.empty()) {
      emitError(module.getLoc()) << "no function is marked '" << StepDialect::kGradientAttrName
                         << "' (run step-autodiff first)";
      return signalPassFailure();
    }
    if (algorithm != "adamw" && algorithm != "adam" && algorithm != "sgd" &&
        algorithm != "lion" && algorithm != "muon") {
      emitError(module.getLoc()) << "unknown optimizer '" << algorithm
                                 << "' (expected adamw, adam, sgd, lion or muon)";
      return signalPassFailure();
    }
    if (!(muonMomentum >= 0 && muonMomentum < 1) || nsSteps < 1 || nsSteps > 100 ||
        (adjustLr != "original" && adjustLr != "match-rms-adamw")) {
      emitError(module.getLoc()) << "invalid step-optimizer options: muon needs muon-momentum "
                                    "in [0, 1), ns-steps in [1, 100] and adjust-lr original "
                                    "or match-rms-adamw";
      return signalPassFailure();
    }
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && epsilon > 0 &&
          weightDecay >= 0 && maxGradNorm >= 0)) {
      emitError(module.getLoc()) << "invalid step-optimizer options: betas must be in "
                            "[0, 1), epsilon positive, weight-decay and "
                            "max-grad-norm non-negative";
      return signalPassFailure();
    }
    if (!(momentum >= 0 && momentum < 1)) {
      emitError(module.getLoc()) << "invalid step-optimizer options: momentum must be in "
                                    "[0, 1), got "
                                 << momentum.getValue();
      return signalPassFailure();
    }
    if (nesterov && (algorithm != "sgd" || momentum == 0)) {
      emitError(module.getLoc()) << "invalid step-optimizer options: nesterov=true needs "
                                    "algorithm=sgd (stepc --optimizer=sgd) and a momentum > 0";
      return signalPassFailure();
    }
    OptimizerOptions options{algorithm,    beta1,       beta2,    epsilon,  momentum,
                             nesterov,     weightDecay, maxGradNorm, muonMomentum,
                             muonNesterov, nsSteps,     adjustLr, mesh,     meshAxis,
                             tpAxis};
    if (!mesh.empty() && meshAxis >= 0)
      if (auto meshOp = symbols.lookup<mesh::MeshOp>(mesh))
        if (meshAxis < int64_t(meshOp.getShape().size()))
          options.shardRanks = meshOp.getShape()[meshAxis];
    if (tpAxis >= 0)
      if (auto meshOp = symbols.lookup<mesh::MeshOp>(kWorldMeshName))
        if (tpAxis < int64_t(meshOp.getShape().size()))
          options.tpRanks = meshOp.getShape()[tpAxis];
    for (func::FuncOp grad : grads)
      if (failed(buildTrainStep(grad, symbols, options)))
        return signalPassFailure();
  }
};

} // namespace
