//===- StepDialect.cpp - step dialect registration and verification -------===//

#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepAttrs.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace stepc::step;

#include "stepc/Dialect/Step/IR/StepDialect.cpp.inc"

void StepDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "stepc/Dialect/Step/IR/StepOps.cpp.inc"
      >();
}

/// True for a ranked tensor with a static shape.
static bool isStaticTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape();
}

bool stepc::step::isPlainName(StringRef name) {
  return !name.empty() && name.size() <= 200 && name != "." && name != ".." &&
         llvm::none_of(name, [](char c) {
           return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
         });
}

int64_t stepc::step::tensorBytes(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  // A mask (i1) is stored as a 32-bit 0 or 1, so every kernel that moves
  // 4-byte elements (broadcast, transpose, slices, collectives) moves masks.
  if (tensor.getElementType().isInteger(1))
    return tensor.getNumElements() * 4;
  return tensor.getNumElements() * std::max<int64_t>(tensor.getElementTypeBitWidth() / 8, 1);
}

bool stepc::step::isSupportedShape(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return false;
  int64_t elements = 1;
  for (int64_t dim : tensor.getShape()) {
    if (dim < 1 || dim > kMaxTensorElements / elements)
      return false;
    elements *= dim;
  }
  return true;
}

/// The error for an argument whose shape stepc cannot compile.
static LogicalResult unsupportedShape(Operation *op, StringRef role, unsigned argIndex,
                                      Type type) {
  return op->emitError() << "expects " << role << " argument #" << argIndex
                         << " to have every dim >= 1 and at most 2^40 elements, got " << type;
}

LogicalResult StepDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attribute) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitError() << "'" << attribute.getName().getValue()
                           << "' is only valid on function arguments";
  Type type = function.getArgumentTypes()[argIndex];
  if (attribute.getName() == kParamAttrName) {
    if (!isa<ParamAttr>(attribute.getValue()))
      return op->emitError() << "expects '" << kParamAttrName << "' on argument #"
                             << argIndex << " to be a #step.param, got "
                             << attribute.getValue();
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() ||
        !isa<FloatType>(tensor.getElementType()))
      return op->emitError() << "expects parameter argument #" << argIndex
                             << " to be a statically shaped float tensor, got "
                             << type;
    if (!isSupportedShape(type))
      return unsupportedShape(op, "parameter", argIndex, type);
    return success();
  }
  if (attribute.getName() == kInputAttrName) {
    auto name = dyn_cast<StringAttr>(attribute.getValue());
    if (!name || name.getValue().empty())
      return op->emitError() << "expects '" << kInputAttrName
                             << "' on argument #" << argIndex
                             << " to be a non-empty string, got "
                             << attribute.getValue();
    if (!isPlainName(name.getValue()))
      return op->emitError() << "expects input argument #" << argIndex
                             << "'s name to be able to be a file name (at most 200 characters, "
                                "no '/', '\\' or control characters, not '.' or '..'), got "
                             << attribute.getValue();
    if (!isStaticTensor(type))
      return op->emitError() << "expects input argument #" << argIndex
                             << " to be a statically shaped tensor, got "
                             << type;
    if (!isSupportedShape(type))
      return unsupportedShape(op, "input", argIndex, type);
    return success();
  }
  if (attribute.getName() == kStateAttrName) {
    if (!isa<StateAttr>(attribute.getValue()))
      return op->emitError() << "expects '" << kStateAttrName << "' on argument #"
                             << argIndex << " to be a #step.state";
    if (!isStaticTensor(type))
      return op->emitError() << "expects state argument #" << argIndex
                             << " to be a statically shaped tensor, got " << type;
    return success();
  }
  if (attribute.getName() == kShardOfAttrName) {
    auto rows = dyn_cast<IntegerAttr>(attribute.getValue());
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!rows || rows.getInt() < 1 || !tensor || tensor.getRank() < 1)
      return op->emitError() << "expects '" << kShardOfAttrName << "' on argument #"
                             << argIndex << " to be a positive row count of a tensor of rank >= 1";
    return success();
  }
  if (attribute.getName() == kTpShardAttrName) {
    auto dict = dyn_cast<DictionaryAttr>(attribute.getValue());
    auto dim = dict ? dict.getAs<IntegerAttr>("dim") : IntegerAttr();
    auto segments = dict ? dict.getAs<DenseI64ArrayAttr>("segments") : DenseI64ArrayAttr();
    auto tensor = dyn_cast<RankedTensorType>(type);
    Attribute axis = dict ? dict.get("axis") : Attribute();
    if (!dim || !segments || segments.empty() || !tensor || dim.getInt() < 0 ||
        dim.getInt() >= tensor.getRank() ||
        llvm::any_of(segments.asArrayRef(), [](int64_t s) { return s < 1; }) ||
        (axis && (!isa<IntegerAttr>(axis) || cast<IntegerAttr>(axis).getInt() < 0)))
      return op->emitError() << "expects '" << kTpShardAttrName << "' on argument #" << argIndex
                             << " to be {dim, segments} (and optionally a mesh axis) with dim "
                                "a dimension of the tensor and positive segment sizes";
    return success();
  }
  if (attribute.getName() == kBalanceAttrName) {
    auto dict = dyn_cast<DictionaryAttr>(attribute.getValue());
    auto metric = dict ? dict.getAs<StringAttr>("metric") : StringAttr();
    auto rate = dict ? dict.getAs<FloatAttr>("rate") : FloatAttr();
    auto param = function.getArgAttrOfType<ParamAttr>(argIndex, kParamAttrName);
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!metric || !rate || !(rate.getValueAsDouble() > 0) || !param || !param.getFrozen() ||
        !tensor || tensor.getRank() != 1 || !tensor.getElementType().isF32())
      return op->emitError() << "expects '" << kBalanceAttrName << "' on argument #" << argIndex
                             << " to be {metric = \"name\", rate = R > 0} on a frozen f32 "
                                "parameter of rank 1";
    return success();
  }
  if (attribute.getName() == kHyperAttrName) {
    if (!isa<HyperAttr>(attribute.getValue()))
      return op->emitError() << "expects '" << kHyperAttrName << "' on argument #"
                             << argIndex << " to be a #step.hyper";
    auto scalar = dyn_cast<RankedTensorType>(type);
    if (cast<HyperAttr>(attribute.getValue()).getValue() == Hyper::Seed) {
      if (!scalar || scalar.getRank() != 0 || !scalar.getElementType().isInteger(32))
        return op->emitError() << "expects the seed argument #" << argIndex
                               << " to be a scalar i32 tensor, got " << type;
      return success();
    }
    if (!scalar || scalar.getRank() != 0 || !isa<FloatType>(scalar.getElementType()))
      return op->emitError() << "expects hyperparameter argument #" << argIndex
                             << " to be a scalar float tensor, got " << type;
    return success();
  }
  // A pipeline stage's copy of a parameter whose home is another stage.
  if (attribute.getName() == kPpIndexAttrName) {
    auto index = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!index || index.getInt() < 0)
      return op->emitError() << "expects 'step.pp_index' on argument #" << argIndex
                             << " to be an integer >= 0 (the parameter's place in the model)";
    return success();
  }
  if (attribute.getName() == kPpReplicaAttrName) {
    if (!isa<UnitAttr>(attribute.getValue()))
      return op->emitError() << "expects 'step.pp_replica' on argument #" << argIndex
                             << " to be a unit attribute";
    return success();
  }
  return op->emitError() << "unknown step argument attribute '"
                         << attribute.getName().getValue() << "'";
}

LogicalResult StepDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attribute) {
  if (attribute.getName() != kResultAttrName)
    return op->emitError() << "unknown step result attribute '"
                           << attribute.getName().getValue() << "'";
  if (!isa<ResultAttr>(attribute.getValue()))
    return op->emitError() << "expects '" << kResultAttrName << "' on result #" << resultIndex
                           << " to be a #step.result<role[, \"name\"]>, got "
                           << attribute.getValue();
  return success();
}

/// Checks a function marked `step.loss`: a scalar float result (the loss),
/// then any f32 outputs and metrics named by `step.result` (what the runtime
/// may read: accuracy counts, probabilities; expert loads), every argument
/// exactly one of parameter or input, names unique.
static LogicalResult verifyLossFunction(FunctionOpInterface function) {
  ArrayRef<Type> results = function.getResultTypes();
  auto loss = !results.empty() ? dyn_cast<RankedTensorType>(results[0]) : RankedTensorType();
  if (!loss || loss.getRank() != 0 || !isa<FloatType>(loss.getElementType()))
    return function.emitOpError()
           << "expects a loss function to return a scalar float tensor first, got "
           << results.size() << " result(s)"
           << (!results.empty() ? ", the first of type " : "")
           << (!results.empty() ? results[0] : Type());
  llvm::StringSet<> outputs;
  for (unsigned i = 1; i < results.size(); ++i) {
    auto type = dyn_cast<RankedTensorType>(results[i]);
    auto role = function.getResultAttrOfType<ResultAttr>(i, StepDialect::kResultAttrName);
    if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
      return function.emitOpError() << "expects output #" << i
                                    << " of a loss function to be a static f32 tensor, got "
                                    << results[i];
    if (!role || (role.getRole() != Role::Output && role.getRole() != Role::Metric) ||
        !outputs.insert(role.getName()).second)
      return function.emitOpError()
             << "expects output #" << i << " of a loss function to be marked by a '"
             << StepDialect::kResultAttrName
             << " = #step.result<output | metric, \"name\">' of a unique name";
  }
  if (function.isExternal())
    return function.emitOpError() << "expects a loss function to have a body";
  // A balanced parameter's metric: one of the loss function's, of its shape.
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
    auto balance = function.getArgAttrOfType<DictionaryAttr>(i, StepDialect::kBalanceAttrName);
    auto metric = balance ? balance.getAs<StringAttr>("metric") : StringAttr();
    if (!metric)
      continue;
    bool found = false;
    for (unsigned r = 1; r < results.size(); ++r) {
      auto role = function.getResultAttrOfType<ResultAttr>(r, StepDialect::kResultAttrName);
      found |= role && role.getRole() == Role::Metric && role.getName() == metric.getValue() &&
               results[r] == function.getArgumentTypes()[i];
    }
    if (!found)
      return function.emitOpError() << "balances argument #" << i << " by metric '"
                                    << metric.getValue()
                                    << "', which is no metric result of its type";
  }

  llvm::StringMap<unsigned> paramNames, inputNames;
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
    Location loc = function.getArgument(i).getLoc();
    auto param = function.getArgAttrOfType<ParamAttr>(i, StepDialect::kParamAttrName);
    auto input = function.getArgAttrOfType<StringAttr>(i, StepDialect::kInputAttrName);
    if (static_cast<bool>(param) == static_cast<bool>(input))
      return emitError(loc) << "expects argument #" << i
                            << " of a loss function to be marked either '"
                            << StepDialect::kParamAttrName << "' or '"
                            << StepDialect::kInputAttrName << "'";
    auto &names = param ? paramNames : inputNames;
    StringRef name = param ? param.getName() : input.getValue();
    auto [it, inserted] = names.try_emplace(name, i);
    if (!inserted)
      return emitError(loc) << "expects unique " << (param ? "parameter" : "input")
                            << " names, '" << name << "' names arguments #"
                            << it->second << " and #" << i;
    // The runtime finds both kinds by name: one name, one argument.
    auto &others = param ? inputNames : paramNames;
    if (auto other = others.find(name); other != others.end())
      return emitError(loc) << "expects parameter and input names to differ, '" << name
                            << "' names " << (param ? "input" : "parameter") << " #"
                            << other->second << " and " << (param ? "parameter" : "input")
                            << " #" << i;
  }
  return success();
}

LogicalResult StepDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attribute) {
  if (attribute.getName() == kGradientAttrName) {
    if (!isa<FlatSymbolRefAttr>(attribute.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError() << "expects '" << kGradientAttrName
                             << "' on a function, naming the loss function it differentiates";
    return success();
  }
  if (attribute.getName() == kTrainStepAttrName || attribute.getName() == kEvalStepAttrName ||
      attribute.getName() == kSampleStepAttrName) {
    if (!isa<UnitAttr>(attribute.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError() << "expects '" << attribute.getName().getValue()
                             << "' to be a unit attribute on a function";
    return success();
  }
  if (attribute.getName() == kRematAttrName) {
    if (!isa<DictionaryAttr>(attribute.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError() << "expects '" << kRematAttrName
                             << "' to be a dictionary on a function";
    return success();
  }
  if (attribute.getName() == kMemoryPlanAttrName) {
    if (!isa<DictionaryAttr>(attribute.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError() << "expects '" << kMemoryPlanAttrName
                             << "' to be a dictionary on a function";
    return success();
  }
  if (attribute.getName() == kRequestAttrName) {
    auto slot = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!slot || slot.getInt() < 0 || op->getDialect()->getNamespace() != "mesh")
      return op->emitError() << "expects '" << kRequestAttrName
                             << "' to be a request slot (an integer >= 0) on a collective";
    return success();
  }
  if (attribute.getName() == kBlockRunAttrName) {
    auto run = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!run || run.getInt() < 0)
      return op->emitError() << "expects '" << kBlockRunAttrName
                             << "' to be an integer >= 0 (a block run)";
    return success();
  }
  if (attribute.getName() == kBlockFunctionsAttrName) {
    auto functions = dyn_cast<DenseI64ArrayAttr>(attribute.getValue());
    if (!functions || !isa<FunctionOpInterface>(op) ||
        llvm::any_of(functions.asArrayRef(), [](int64_t f) { return f < 0; }))
      return op->emitError() << "expects '" << kBlockFunctionsAttrName
                             << "' to be an array<i64> of functions (>= 0) on a function";
    return success();
  }
  if (attribute.getName() == kBlockFunctionAttrName) {
    auto number = dyn_cast<IntegerAttr>(attribute.getValue());
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (!number || number.getInt() < 0 || !function || !function.isPrivate())
      return op->emitError() << "expects '" << kBlockFunctionAttrName
                             << "' to be an integer >= 0 on a private function";
    return success();
  }
  if (attribute.getName() == kRunPlanAttrName) {
    auto plan = dyn_cast<ArrayAttr>(attribute.getValue());
    if (!plan || op->getName().getStringRef() != "func.call" ||
        !llvm::all_of(plan, [](Attribute a) { return isa<DictionaryAttr>(a); }))
      return op->emitError() << "expects '" << kRunPlanAttrName
                             << "' to be an array of dictionaries on a func.call";
    return success();
  }
  if (attribute.getName() == kRunBlockAttrName) {
    if (!isa<StringAttr>(attribute.getValue()) || op->getName().getStringRef() != "func.call")
      return op->emitError() << "expects '" << kRunBlockAttrName
                             << "' to be a string on a func.call";
    return success();
  }
  if (attribute.getName() == kComputedForAttrName) {
    auto block = dyn_cast<StringAttr>(attribute.getValue());
    if (!block || block.getValue().empty() || op->getNumResults() == 0)
      return op->emitError() << "expects '" << kComputedForAttrName
                             << "' to be a block's name on an op with results";
    return success();
  }
  if (attribute.getName() == kBufferAttrName || attribute.getName() == kInArgAttrName) {
    auto ids = dyn_cast<DenseI64ArrayAttr>(attribute.getValue());
    if (!ids || ids.size() != int64_t(op->getNumResults()) ||
        llvm::any_of(ids.asArrayRef(), [](int64_t id) { return id < -1; }))
      return op->emitError() << "expects '" << attribute.getName().getValue()
                             << "' to be an array<i64> of one index (or -1) per result";
    return success();
  }
  if (attribute.getName() == kVocabLogitsAttrName) {
    auto axis = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!axis || axis.getInt() < 0 || op->getNumResults() != 1)
      return op->emitError() << "expects '" << kVocabLogitsAttrName
                             << "' to be a mesh axis on an op with one result";
    return success();
  }
  if (attribute.getName() == kRankRowsAttrName || attribute.getName() == kMicroRowsAttrName) {
    // On a dropout: its rows per part; on a count of targets (a
    // token_count, or micro-batches' sum of them): the number of parts.
    auto rows = dyn_cast<IntegerAttr>(attribute.getValue());
    auto scalar = op->getNumResults() == 1
                      ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                      : RankedTensorType();
    bool count = scalar && scalar.getRank() == 0 && scalar.getElementType().isF32() &&
                 (op->getName().getStringRef() == "step.token_count" ||
                  op->getName().getStringRef() == "step.mul");
    if (!rows || rows.getInt() < 1 || (op->getName().getStringRef() != "step.dropout" && !count))
      return op->emitError() << "expects '" << attribute.getName().getValue()
                             << "' to be a positive row count on a step.dropout or a part "
                                "count on a scalar count of targets";
    return success();
  }
  if (attribute.getName() == kPipelineAttrName) {
    if (!isa<DictionaryAttr>(attribute.getValue()) || op->getName().getStringRef() != "mesh.mesh")
      return op->emitError() << "expects 'step.pipeline' to be a dictionary on a mesh.mesh";
    return success();
  }
  if (attribute.getName() == kPpAxisAttrName) {
    auto axis = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!axis || axis.getInt() < 0 || op->getName().getStringRef() != "mesh.mesh")
      return op->emitError() << "expects 'step.pp_axis' to be a mesh axis on a mesh.mesh";
    return success();
  }
  if (attribute.getName() == kPpStageAttrName) {
    auto stage = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!stage || stage.getInt() < 0 || op->getName().getStringRef() != "builtin.module" ||
        !op->getParentOp() || op->getParentOp()->getName().getStringRef() != "builtin.module")
      return op->emitError() << "expects '" << kPpStageAttrName
                             << "' to be a pipeline rank on a module nested in the model's";
    return success();
  }
  if (attribute.getName() == kTpAxisAttrName || attribute.getName() == kEpAxisAttrName) {
    auto axis = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!axis || axis.getInt() < 0 || op->getName().getStringRef() != "mesh.mesh")
      return op->emitError() << "expects '" << attribute.getName().getValue()
                             << "' to be a mesh axis on a mesh.mesh";
    return success();
  }
  if (attribute.getName() == kLossTokensAttrName) {
    auto tokens = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!tokens || tokens.getInt() < 1)
      return op->emitError() << "expects '" << kLossTokensAttrName << "' to be a positive count";
    return success();
  }
  // step-pipeline-stages' marks (step.origin, step.micro_batch: between
  // step-micro-batch and it) and each transfer's tag.
  if (attribute.getName() == kOriginAttrName || attribute.getName() == kMicroBatchAttrName ||
      attribute.getName() == kTransferAttrName || attribute.getName() == kPpParamsAttrName) {
    auto index = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!index || index.getInt() < 0)
      return op->emitError() << "expects '" << attribute.getName().getValue()
                             << "' to be an integer >= 0";
    return success();
  }
  if (attribute.getName() == kPhaseAttrName) {
    if (!isa<PhaseAttr>(attribute.getValue()))
      return op->emitError() << "expects '" << kPhaseAttrName << "' to be a #step.phase";
    return success();
  }
  if (attribute.getName() != kLossAttrName)
    return op->emitError() << "unknown step attribute '"
                           << attribute.getName().getValue() << "'";
  if (!isa<UnitAttr>(attribute.getValue()))
    return op->emitError() << "expects '" << kLossAttrName
                           << "' to be a unit attribute";
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitError() << "expects '" << kLossAttrName
                           << "' on a function, got '" << op->getName() << "'";
  return verifyLossFunction(function);
}

std::optional<Phase> stepc::step::getPhase(Operation *op) {
  if (auto phase = op->getAttrOfType<PhaseAttr>(StepDialect::kPhaseAttrName))
    return phase.getValue();
  return std::nullopt;
}

void stepc::step::setPhase(Operation *op, Phase phase) {
  op->setAttr(StepDialect::kPhaseAttrName, PhaseAttr::get(op->getContext(), phase));
}

void stepc::step::setMissingPhases(Block &block, Phase phase) {
  for (Operation &op : block)
    if (!op.hasTrait<OpTrait::IsTerminator>() && !op.hasAttr(StepDialect::kPhaseAttrName))
      setPhase(&op, phase);
}

void stepc::step::copyPhase(Operation *from, Operation *to) {
  if (Attribute phase = from->getAttr(StepDialect::kPhaseAttrName))
    to->setAttr(StepDialect::kPhaseAttrName, phase);
}

bool stepc::step::hasResultRole(FunctionOpInterface function, unsigned index, Role role) {
  ResultAttr r = getResultRole(function, index);
  return r && r.getRole() == role;
}

ResultAttr stepc::step::getResultRole(FunctionOpInterface function, unsigned index) {
  return function.getResultAttrOfType<ResultAttr>(index, StepDialect::kResultAttrName);
}

std::optional<unsigned> stepc::step::findResult(FunctionOpInterface function, Role role) {
  for (unsigned i = 0, e = function.getNumResults(); i < e; ++i)
    if (ResultAttr r = getResultRole(function, i); r && r.getRole() == role)
      return i;
  return std::nullopt;
}

DictionaryAttr stepc::step::resultRoleDict(ResultAttr role) {
  return DictionaryAttr::get(role.getContext(),
                             {NamedAttribute(StringAttr::get(role.getContext(),
                                                             StepDialect::kResultAttrName),
                                             role)});
}
