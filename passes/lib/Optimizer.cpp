//===- Optimizer.cpp - global-norm clipping and the optimizer update ------===//

#include "Muon.h"

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>
#include <map>

namespace stepc {
#define GEN_PASS_DEF_STEPOPTIMIZER
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

Value stepc::sumOfSquares(OpBuilder &b, Location loc, Value g, RankedTensorType scalarType) {
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
  /// The pipeline axis (-1: none).
  int64_t ppAxis = -1;
  /// The axis whose ranks hold every parameter whole and equal (ddp; -1:
  /// none), and its ranks.
  int64_t replicaAxis = -1, replicaRanks = 1;
};

/// A scalar constant of `type` (a 0-d float tensor).
Value scalar(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), value)));
}


/// A frozen parameter the step moves by a metric (`step.balance`): its
/// argument, the gradient function's result holding the metric, the rate.
struct Balance {
  unsigned arg, metric;
  double rate;
};

FailureOr<SmallVector<Balance>> balancedParams(func::FuncOp grad, ArrayRef<unsigned> frozen) {
  SmallVector<Balance> balances;
  for (unsigned i : frozen) {
    auto balance = grad.getArgAttrOfType<DictionaryAttr>(i, StepDialect::kBalanceAttrName);
    if (!balance)
      continue;
    StringRef metric = balance.getAs<StringAttr>("metric").getValue();
    std::optional<unsigned> result;
    for (unsigned r = 1, e = grad.getNumResults(); r < e; ++r)
      if (ResultAttr role = getResultRole(grad, r);
          role && role.getRole() == Role::Metric && role.getName() == metric)
        result = r;
    if (!result || grad.getResultTypes()[*result] != grad.getArgumentTypes()[i])
      return emitError(grad.getArgument(i).getLoc())
             << "is balanced by metric '" << metric << "', which the step does not return "
             << "with its type";
    balances.push_back({i, *result, balance.getAs<FloatAttr>("rate").getValueAsDouble()});
  }
  return balances;
}

/// DeepSeek-V3's bias update: bias + rate · sign(1/E − m), m the experts'
/// shares of the routed pairs (they sum to 1, so 1/E is their mean, exact).
Value balanceUpdate(OpBuilder &b, Location loc, Value bias, Value metric, double rate) {
  auto type = cast<RankedTensorType>(bias.getType());
  auto splat = [&](double value) -> Value {
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), value)));
  };
  Value share = splat(1.0 / type.getDimSize(0));
  Value under = b.create<CompareOp>(loc, ComparePredicate::LT, metric, share);
  Value over = b.create<CompareOp>(loc, ComparePredicate::GT, metric, share);
  Value sign = b.create<SelectOp>(loc, under, splat(1.0),
                                  b.create<SelectOp>(loc, over, splat(-1.0), splat(0.0)));
  return b.create<AddOp>(loc, bias, b.create<MulOp>(loc, sign, splat(rate)));
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

/// The gradient function's arguments by role, in the training step's order.
struct StepArguments {
  SmallVector<unsigned> params, frozen, inputs;
  /// Each trained parameter's name.
  SmallVector<std::string> names;
  /// The loss function's outputs and metrics (after the loss and one
  /// gradient per parameter), carried to the step's results.
  unsigned outputs = 0;
  /// Muon orthogonalises the matrices of the repeated blocks (the hidden
  /// layers); AdamW updates the rest (embeddings, the head, vectors).
  SmallVector<bool> muon;
};

FailureOr<StepArguments> classifyArguments(func::FuncOp grad, const OptimizerOptions &options) {
  StepArguments a;
  ArrayRef<Type> argTypes = grad.getArgumentTypes();
  for (unsigned i = 0, e = grad.getNumArguments(); i < e; ++i) {
    auto param = grad.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName);
    if (!param) {
      a.inputs.push_back(i);
      continue;
    }
    // AdamW keeps parameters and moments in f32 (or f64): master weights.
    Type element = cast<ShapedType>(argTypes[i]).getElementType();
    if (!element.isF32() && !element.isF64())
      return emitError(grad.getArgument(i).getLoc())
             << "parameter '" << param.getName() << "' is " << element
             << ": parameters are trained in f32 or f64 (write the model in f32 and compile "
                "with --precision=bf16 to compute in bf16)";
    if (!param.isTrained()) {
      a.frozen.push_back(i); // held and read, never updated: no state, no result
      continue;
    }
    a.params.push_back(i);
    a.names.push_back(param.getName().str());
  }
  if (grad.getNumResults() < a.params.size() + 1)
    return grad.emitOpError() << "expects the loss and one gradient per parameter";
  a.outputs = grad.getNumResults() - 1 - a.params.size();
  for (unsigned i : a.params)
    a.muon.push_back(options.algorithm == "muon" &&
                     cast<RankedTensorType>(argTypes[i]).getRank() == 2 &&
                     grad.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName).hasBlock());
  if (options.algorithm == "muon" && llvm::none_of(a.muon, [](bool m) { return m; }))
    return grad.emitOpError()
           << "has no matrix parameter inside a repeated block: Muon updates those (mark "
              "the model's blocks, e.g. #step.param<..., block N>; frozen ones do not "
              "count), AdamW the rest";
  return a;
}

/// The optimizer's state arguments in order: every exp_avg, then every
/// exp_avg_sq, as (moment, index into the trained parameters). AdamW's and
/// Adam's two moments, SGD's momentum buffer, Lion's moment or Muon's
/// momentum (kept as exp_avg).
SmallVector<std::pair<Moment, size_t>> stateOrder(const StepArguments &a,
                                                  const OptimizerOptions &options) {
  auto hasSecondMoment = [&](size_t k) {
    return options.algorithm == "adamw" || options.algorithm == "adam" ||
           (options.algorithm == "muon" && !a.muon[k]);
  };
  SmallVector<std::pair<Moment, size_t>> order;
  for (Moment moment : {Moment::ExpAvg, Moment::ExpAvgSq})
    for (size_t k = 0; k < a.params.size(); ++k)
      if (moment == Moment::ExpAvg || hasSecondMoment(k))
        order.push_back({moment, k});
  return order;
}

/// The training step's function: arguments params, frozen params,
/// exp_avg, exp_avg_sq, inputs, lr, step; results the loss, the norm, the
/// updated parameters and moments, the loss function's outputs, then each
/// balanced frozen parameter.
func::FuncOp declareTrainStep(OpBuilder &b, func::FuncOp grad, const StepArguments &a,
                              ArrayRef<std::pair<Moment, size_t>> state,
                              ArrayRef<Balance> balances) {
  MLIRContext *ctx = b.getContext();
  ArrayRef<Type> argTypes = grad.getArgumentTypes();
  Type lossType = grad.getResultTypes().front();
  SmallVector<Type> newArgs, newResults{lossType, lossType};
  SmallVector<Attribute> argAttrs, resultAttrs{
      resultRoleDict(ResultAttr::get(ctx, Role::Loss)),
      resultRoleDict(ResultAttr::get(ctx, Role::GradNorm))};
  for (unsigned i : llvm::concat<const unsigned>(a.params, a.frozen)) {
    newArgs.push_back(argTypes[i]);
    argAttrs.push_back(grad.getArgAttrDict(i));
  }
  for (auto [moment, k] : state) {
    newArgs.push_back(argTypes[a.params[k]]);
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(StepDialect::kStateAttrName, StateAttr::get(ctx, moment, a.names[k]))));
  }
  for (unsigned i : a.inputs) {
    newArgs.push_back(argTypes[i]);
    argAttrs.push_back(grad.getArgAttrDict(i));
  }
  for (Hyper hyper : {Hyper::Lr, Hyper::Step}) {
    newArgs.push_back(lossType);
    argAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(StepDialect::kHyperAttrName, HyperAttr::get(ctx, hyper))));
  }
  // The updated parameters, then each moment, in the arguments' order.
  for (auto [i, name] : llvm::zip(a.params, a.names)) {
    newResults.push_back(argTypes[i]);
    resultAttrs.push_back(resultRoleDict(ResultAttr::get(ctx, Role::Param, name)));
  }
  for (auto [moment, k] : state) {
    newResults.push_back(argTypes[a.params[k]]);
    resultAttrs.push_back(resultRoleDict(ResultAttr::get(ctx, moment, a.names[k])));
  }
  for (unsigned k = 0; k < a.outputs; ++k) {
    unsigned i = 1 + a.params.size() + k;
    newResults.push_back(grad.getResultTypes()[i]);
    resultAttrs.push_back(grad.getResultAttrDict(i));
  }
  // Each balanced frozen parameter, moved by its metric (reduced over the
  // ranks and micro-batches by now, so every rank moves it alike).
  for (const Balance &balance : balances) {
    newResults.push_back(argTypes[balance.arg]);
    resultAttrs.push_back(resultRoleDict(ResultAttr::get(
        ctx, Role::Param,
        grad.getArgAttrOfType<ParamAttr>(balance.arg, StepDialect::kParamAttrName).getName())));
  }
  // Named for the loss function the gradient differentiates.
  StringRef base = grad.getSymName();
  if (auto loss = grad->getAttrOfType<FlatSymbolRefAttr>(StepDialect::kGradientAttrName))
    base = loss.getValue();
  auto step = b.create<func::FuncOp>(grad.getLoc(), (base + "_train_step").str(),
                                     b.getFunctionType(newArgs, newResults));
  step.setAllArgAttrs(argAttrs);
  step.setAllResultAttrs(resultAttrs);
  step->setAttr(StepDialect::kTrainStepAttrName, b.getUnitAttr());
  return step;
}

/// The clipping norm's squares: sqrt(Σ_i Σ g_i²) over the whole model.
/// tp-split gradients are each rank's part of one gradient: their squares
/// are summed over the tp ranks; replicated ones are counted once.
class GradientNorm {
public:
  GradientNorm(OpBuilder &b, Location loc, func::FuncOp grad, const StepArguments &a,
               ArrayRef<Value> grads, const OptimizerOptions &options)
      : b(b), loc(loc), grad(grad), a(a), grads(grads), options(options),
        lossType(cast<RankedTensorType>(grad.getResultTypes().front())) {}

  Value build() {
    Value total = scalar(b, loc, lossType, 0.0);
    // A pipeline stage's squares go to their places among the whole
    // model's parameters (step-pipeline-stages' step.pp_index), are
    // exchanged, and are summed in that order: the norm of one rank's
    // step, bit for bit.
    auto stageParams = options.ppAxis >= 0
                           ? grad->getAttrOfType<IntegerAttr>(StepDialect::kPpParamsAttrName)
                           : IntegerAttr();
    if (stageParams)
      total = stageSquares(total, stageParams.getInt());
    else
      total = rankSquares(total);
    return b.create<SqrtOp>(loc, total);
  }

private:
  /// The mesh axis a parameter's parts lie along (-1: whole): the tp axis,
  /// or (an expert weight under ep) the axis its step.tp_shard names.
  int64_t splitAxisOf(unsigned k) {
    auto split =
        grad.getArgAttrOfType<DictionaryAttr>(a.params[k], StepDialect::kTpShardAttrName);
    if (!split)
      return -1;
    auto axis = split.getAs<IntegerAttr>("axis");
    return axis ? axis.getInt() : options.tpAxis;
  }

  bool replicaOfOtherStage(unsigned k) {
    return static_cast<bool>(grad.getArgAttr(a.params[k], StepDialect::kPpReplicaAttrName));
  }

  Value allReduce(Type type, ArrayRef<mesh::MeshAxis> axes, Value v) {
    return b.create<mesh::AllReduceOp>(loc, type, options.mesh, axes, v,
                                       mesh::ReductionKind::Sum);
  }

  /// Each pipeline stage's squares placed in a vector of the model's
  /// parameters, summed over the stages (and the split axes), then added
  /// in order.
  Value stageSquares(Value total, int64_t n) {
    auto vector = RankedTensorType::get({n}, lossType.getElementType());
    auto one = RankedTensorType::get({1}, lossType.getElementType());
    auto zeros = [&] {
      return b.create<ConstantOp>(
          loc, DenseElementsAttr::get(vector, b.getFloatAttr(lossType.getElementType(), 0.0)));
    };
    // tp-split squares are summed over tp first (each slot holds one
    // parameter's: the sums stay exact), then joined to the replicated.
    std::map<int64_t, Value> splitSums;
    Value squares = zeros();
    for (auto [k, g] : llvm::enumerate(grads)) {
      auto index = grad.getArgAttrOfType<IntegerAttr>(a.params[k], StepDialect::kPpIndexAttrName);
      if (!index || replicaOfOtherStage(k))
        continue;
      int64_t at = index.getInt();
      Value square = b.create<ReshapeOp>(loc, one, sumOfSquares(b, loc, g, lossType));
      Value placed = b.create<PadOp>(loc, vector, square, b.getDenseI64ArrayAttr({at}),
                                     b.getDenseI64ArrayAttr({n - 1 - at}));
      int64_t splitAxis = splitAxisOf(k);
      if (splitAxis >= 0 && !splitSums.count(splitAxis))
        splitSums[splitAxis] = zeros();
      Value &sum = splitAxis >= 0 ? splitSums[splitAxis] : squares;
      sum = b.create<AddOp>(loc, sum, placed);
    }
    for (auto &[axis, splitSquares] : splitSums)
      squares = b.create<AddOp>(
          loc, squares,
          allReduce(vector, {static_cast<mesh::MeshAxis>(axis)}, splitSquares));
    SmallVector<mesh::MeshAxis> axes;
    if (options.meshAxis >= 0 && options.meshAxis != options.ppAxis)
      axes.push_back(static_cast<mesh::MeshAxis>(options.meshAxis));
    axes.push_back(static_cast<mesh::MeshAxis>(options.ppAxis));
    llvm::sort(axes);
    Value all = allReduce(vector, axes, squares);
    for (int64_t i = 0; i < n; ++i)
      total = b.create<AddOp>(
          loc, total,
          b.create<ReshapeOp>(loc, lossType,
                              b.create<SliceOp>(loc, all, b.getDenseI64ArrayAttr({i}),
                                                b.getDenseI64ArrayAttr({1}))));
    return total;
  }

  /// One rank's squares (no pipeline), the split ones summed over their
  /// axes and, with sharded gradients, all over the shards' axis.
  Value rankSquares(Value total) {
    std::map<int64_t, Value> splitSums;
    for (auto [k, g] : llvm::enumerate(grads)) {
      // A pipeline stage holding a copy of another stage's parameter (a
      // tied embedding) leaves its square to that stage.
      if (replicaOfOtherStage(k))
        continue;
      int64_t splitAxis = splitAxisOf(k);
      if (splitAxis >= 0 && !splitSums.count(splitAxis))
        splitSums[splitAxis] = scalar(b, loc, lossType, 0.0);
      Value &sum = splitAxis >= 0 ? splitSums[splitAxis] : total;
      sum = b.create<AddOp>(loc, sum, sumOfSquares(b, loc, g, lossType));
    }
    // (With tp, its sum is added even when no parameter is split.)
    if (options.tpAxis >= 0 && !splitSums.count(options.tpAxis))
      splitSums[options.tpAxis] = scalar(b, loc, lossType, 0.0);
    for (auto &[axis, split] : splitSums)
      total = b.create<AddOp>(loc, total,
                              allReduce(lossType, {static_cast<mesh::MeshAxis>(axis)}, split));
    // Sharded gradients: each rank holds part of every gradient, so the
    // squares are summed over the ranks (padding rows are zero).
    if (!options.mesh.empty() && options.meshAxis >= 0)
      total = allReduce(lossType, {static_cast<mesh::MeshAxis>(options.meshAxis)}, total);
    return total;
  }

  OpBuilder &b;
  Location loc;
  func::FuncOp grad;
  const StepArguments &a;
  ArrayRef<Value> grads;
  const OptimizerOptions &options;
  RankedTensorType lossType;
};

/// The values each parameter's update reads, in the step's body.
struct UpdateInputs {
  SmallVector<Value> params, grads, expAvg, expAvgSq;
  Value lr, stepNumber, gradScale;
};

/// Each trained parameter's update by the algorithm: new parameters, first
/// moments and (AdamW, Adam and Muon's AdamW part) second moments.
struct Updates {
  SmallVector<Value> params, m, v;
};

Updates buildUpdates(OpBuilder &b, Location loc, func::FuncOp grad, const StepArguments &a,
                     const UpdateInputs &in, const OptimizerOptions &options) {
  size_t n = a.params.size();
  Updates out;
  out.params.resize(n);
  out.m.resize(n);
  auto lossType = cast<RankedTensorType>(grad.getResultTypes().front());
  SmallVector<MuonMatrix> muonMatrices;
  SmallVector<unsigned> muonIndex;
  for (unsigned k = 0; k < n; ++k) {
    Value param = in.params[k], g = in.grads[k], m = in.expAvg[k];
    Value scaleK = in.gradScale, lrK = in.lr, stepK = in.stepNumber;
    auto elem = cast<RankedTensorType>(param.getType()).getElementType();
    auto scalarType = RankedTensorType::get({}, elem);
    if (scalarType != lossType) {
      scaleK = b.create<ConvertOp>(loc, scalarType, scaleK);
      lrK = b.create<ConvertOp>(loc, scalarType, lrK);
      stepK = b.create<ConvertOp>(loc, scalarType, stepK);
    }
    // A parameter's own decay and learning-rate scale (a torch.optim
    // parameter group), else the rule: decay matrices, not vectors.
    auto attr = grad.getArgAttrOfType<ParamAttr>(a.params[k], StepDialect::kParamAttrName);
    double decay = attr.hasWeightDecay() ? attr.getWeightDecayValue()
                   : cast<RankedTensorType>(param.getType()).getRank() >= 2
                       ? options.weightDecay
                       : 0.0;
    if (attr.getLrScaleValue() != 1.0)
      lrK = b.create<MulOp>(loc, lrK, scalar(b, loc, cast<RankedTensorType>(lrK.getType()),
                                              attr.getLrScaleValue()));
    if (a.muon[k]) {
      auto shardOf =
          grad.getArgAttrOfType<IntegerAttr>(a.params[k], StepDialect::kShardOfAttrName);
      auto tpShard =
          grad.getArgAttrOfType<DictionaryAttr>(a.params[k], StepDialect::kTpShardAttrName);
      MuonMatrix matrix;
      matrix.param = param;
      matrix.grad = g;
      matrix.momentum = m;
      matrix.globalRows = shardOf ? shardOf.getInt() : 0;
      matrix.tpDim = tpShard ? tpShard.getAs<IntegerAttr>("dim").getInt() : -1;
      matrix.decay = decay;
      matrix.lr = lrK;
      matrix.gradScale = scaleK;
      muonMatrices.push_back(matrix);
      muonIndex.push_back(k);
      continue;
    }
    if (options.algorithm == "sgd") {
      auto update = b.create<SgdOp>(loc, param, g, m, lrK, scaleK,
                                    b.getF64FloatAttr(options.momentum),
                                    b.getBoolAttr(options.nesterov), b.getF64FloatAttr(decay));
      out.params[k] = update.getNewParam();
      out.m[k] = update.getNewBuf();
      continue;
    }
    if (options.algorithm == "lion") {
      auto update = b.create<LionOp>(loc, param, g, m, lrK, scaleK,
                                     b.getF64FloatAttr(options.beta1),
                                     b.getF64FloatAttr(options.beta2), b.getF64FloatAttr(decay));
      out.params[k] = update.getNewParam();
      out.m[k] = update.getNewM();
      continue;
    }
    auto update = b.create<AdamwOp>(
        loc, param, g, m, in.expAvgSq[k], lrK, stepK, scaleK, b.getF64FloatAttr(options.beta1),
        b.getF64FloatAttr(options.beta2), b.getF64FloatAttr(options.epsilon),
        b.getF64FloatAttr(decay),
        // (AdamW's decoupled decay is the op's default.)
        options.algorithm == "adam" ? b.getBoolAttr(false) : BoolAttr());
    out.params[k] = update.getNewParam();
    out.m[k] = update.getNewM();
    out.v.push_back(update.getNewV());
  }
  if (!muonMatrices.empty()) {
    MuonConfig config{options.muonMomentum, options.muonNesterov, options.nsSteps,
                      options.adjustLr,     options.mesh,         options.meshAxis,
                      options.shardRanks,   options.tpAxis,       options.tpRanks,
                      options.replicaAxis,  options.replicaRanks};
    for (auto [k, update] :
         llvm::zip(muonIndex, buildMuonUpdates(b, loc, muonMatrices, config))) {
      out.params[k] = update.first;
      out.m[k] = update.second;
    }
  }
  return out;
}

/// The training step of gradient function `grad`: its body, the clipping
/// norm and scale, each parameter's update, then the balanced parameters'.
LogicalResult buildTrainStep(func::FuncOp grad, SymbolTable &symbols,
                             const OptimizerOptions &options) {
  OpBuilder b(grad);
  b.setInsertionPointAfter(grad);
  Location loc = grad.getLoc();
  auto lossType = dyn_cast<RankedTensorType>(grad.getResultTypes().front());
  if (!lossType || lossType.getRank() != 0)
    return grad.emitOpError() << "expects a scalar loss as the first result";
  FailureOr<StepArguments> args = classifyArguments(grad, options);
  if (failed(args))
    return failure();
  const StepArguments &a = *args;
  FailureOr<SmallVector<Balance>> balances = balancedParams(grad, a.frozen);
  if (failed(balances))
    return failure();
  SmallVector<std::pair<Moment, size_t>> state = stateOrder(a, options);
  func::FuncOp step = declareTrainStep(b, grad, a, state, *balances);
  symbols.insert(step);

  // The gradient function's body, its arguments mapped to the new ones.
  Block *entry = step.addEntryBlock();
  size_t n = a.params.size();
  const size_t firstInput = n + a.frozen.size() + state.size();
  UpdateInputs in;
  in.expAvg.resize(n);
  in.expAvgSq.resize(n);
  for (auto [j, moment] : llvm::enumerate(state))
    (moment.first == Moment::ExpAvg ? in.expAvg : in.expAvgSq)[moment.second] =
        entry->getArgument(n + a.frozen.size() + j);
  IRMapping mapping;
  for (auto [k, i] : llvm::enumerate(llvm::concat<const unsigned>(a.params, a.frozen)))
    mapping.map(grad.getArgument(i), entry->getArgument(k));
  for (auto [k, i] : llvm::enumerate(a.inputs))
    mapping.map(grad.getArgument(i), entry->getArgument(firstInput + k));
  b.setInsertionPointToEnd(entry);
  auto gradReturn = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
  for (Operation &op : grad.getBody().front().without_terminator())
    b.clone(op, mapping);
  Value loss = mapping.lookup(gradReturn.getOperand(0));
  for (unsigned k = 0; k < n; ++k) {
    in.params.push_back(entry->getArgument(k));
    in.grads.push_back(mapping.lookup(gradReturn.getOperand(k + 1)));
  }
  in.lr = entry->getArgument(firstInput + a.inputs.size());
  in.stepNumber = entry->getArgument(firstInput + a.inputs.size() + 1);

  // scale = min(1, max_norm / (norm + 1e-6))
  Value norm = GradientNorm(b, loc, grad, a, in.grads, options).build();
  in.gradScale = scalar(b, loc, lossType, 1.0);
  if (options.maxGradNorm > 0.0) {
    Value coef = b.create<DivOp>(loc, scalar(b, loc, lossType, options.maxGradNorm),
                                 b.create<AddOp>(loc, norm, scalar(b, loc, lossType, 1e-6)));
    in.gradScale = b.create<MinimumOp>(loc, coef, in.gradScale);
  }
  Updates updates = buildUpdates(b, loc, grad, a, in, options);

  SmallVector<Value> results{loss, norm};
  llvm::append_range(results, updates.params);
  llvm::append_range(results, updates.m);
  llvm::append_range(results, updates.v);
  for (unsigned k = 0; k < a.outputs; ++k)
    results.push_back(mapping.lookup(gradReturn.getOperand(1 + n + k)));
  for (const Balance &balance : *balances)
    results.push_back(balanceUpdate(b, loc, mapping.lookup(grad.getArgument(balance.arg)),
                                    mapping.lookup(gradReturn.getOperand(balance.metric)),
                                    balance.rate));
  b.create<func::ReturnOp>(loc, results);
  setMissingPhases(*entry, Phase::Optimizer);
  bindDropoutKeys(step, in.stepNumber);
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
    options.ppAxis = ppAxis;
    if (replicaAxis >= 0) {
      auto meshOp = symbols.lookup<mesh::MeshOp>(kWorldMeshName);
      if (!meshOp || replicaAxis >= int64_t(meshOp.getShape().size())) {
        emitError(module.getLoc())
            << "invalid step-optimizer options: replica-axis=" << replicaAxis.getValue()
            << " is not an axis of the mesh @" << kWorldMeshName
            << (meshOp ? "" : " (the module has none)");
        return signalPassFailure();
      }
      options.replicaAxis = replicaAxis;
      options.replicaRanks = meshOp.getShape()[replicaAxis];
    }
    for (func::FuncOp grad : grads)
      if (failed(buildTrainStep(grad, symbols, options)))
        return signalPassFailure();
  }
};

} // namespace
