//===- StepKOps.cpp - the stepk kernel-level dialect ----------------------===//

#include "stepc/Dialect/StepK/IR/StepKOps.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::stepk;

#include "stepc/Dialect/StepK/IR/StepKDialect.cpp.inc"

void StepKDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "stepc/Dialect/StepK/IR/StepKOps.cpp.inc"
      >();
}

int64_t FusedOp::getNumElements() {
  return cast<RankedTensorType>(getResult(0).getType()).getNumElements();
}

YieldOp FusedOp::getYield() { return cast<YieldOp>(getBody().front().getTerminator()); }

/// What every kernel with a body checks: one block argument per input, of
/// its type, and a yield of the results' types.
static LogicalResult verifyKernelBody(Operation *op, ValueRange inputs, Region &region) {
  Block &body = region.front();
  if (body.getNumArguments() != inputs.size())
    return op->emitOpError() << "expects one body argument per input, got "
                             << body.getNumArguments() << " for " << inputs.size();
  for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
    if (input.getType() != arg.getType())
      return op->emitOpError() << "body argument #" << arg.getArgNumber() << " has type "
                               << arg.getType() << ", its input " << input.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return op->emitOpError() << "expects its body to end in 'stepk.yield'";
  if (yield.getValues().getTypes() != op->getResultTypes())
    return op->emitOpError() << "yields " << yield.getValues().getTypes()
                             << " but its results are " << op->getResultTypes();
  return success();
}

YieldOp CallOp::getYield() { return cast<YieldOp>(getBody().front().getTerminator()); }

Operation *CallOp::getKernelOp() {
  for (Operation &op : getBody().front())
    if (!isa<step::SliceOp>(op))
      return &op;
  return &getBody().front().front();
}

LogicalResult CallOp::verify() {
  if (getCallee().empty())
    return emitOpError() << "expects a callee";
  for (Attribute scalar : getScalars())
    if (!isa<IntegerAttr, FloatAttr, DenseI64ArrayAttr, DenseI32ArrayAttr>(scalar))
      return emitOpError() << "expects integer, float and integer-array scalars, got "
                           << scalar;
  if (getScratchBytes() && *getScratchBytes() < 0)
    return emitOpError() << "expects scratch_bytes >= 0, got " << *getScratchBytes();
  bool check = getIdCheck().has_value();
  if (getIdOperand().has_value() != check || getIdBound().has_value() != check)
    return emitOpError() << "expects id_check, id_operand and id_bound together";
  if (check && (*getIdOperand() >= getInputs().size() || *getIdBound() < 1))
    return emitOpError() << "expects id_operand to name an input and id_bound >= 1";
  return verifyKernelBody(*this, getInputs(), getBody());
}

LogicalResult FusedOp::verify() {
  if (getNumResults() == 0)
    return emitOpError() << "expects at least one result";
  if (failed(verifyKernelBody(*this, getInputs(), getBody())))
    return failure();
  Block &body = getBody().front();
  int64_t n = getNumElements();
  SmallVector<Value> values(getInputs());
  llvm::append_range(values, getResults());
  for (Value v : values)
    if (cast<RankedTensorType>(v.getType()).getNumElements() != n)
      return emitOpError() << "expects every input and result to hold " << n
                           << " elements, got " << v.getType();
  for (Operation &op : body.without_terminator())
    if (!isa<step::ScalarMathOpInterface, step::ConvertOp, step::ReshapeOp>(op))
      return op.emitOpError() << "cannot be computed element by element in 'stepk.fused'";
  return success();
}

LogicalResult GemmOp::verify() {
  StringRef epilogue = getEpilogue();
  if (epilogue != "none" && epilogue != "gelu" && epilogue != "dgelu")
    return emitOpError() << "has unknown epilogue '" << epilogue
                         << "' (expected none, gelu or dgelu)";
  if ((epilogue == "gelu") != static_cast<bool>(getPreActivation()))
    return emitOpError() << "returns the pre-activation exactly with the gelu epilogue";
  if ((epilogue == "dgelu") != static_cast<bool>(getAux()))
    return emitOpError() << "reads aux exactly with the dgelu epilogue";
  auto result = cast<RankedTensorType>(getResult().getType());
  if (result.getRank() < 2)
    return emitOpError() << "expects a result of rank >= 2, got " << result;
  if (Value bias = getBias()) {
    auto type = cast<RankedTensorType>(bias.getType());
    if (type.getRank() != 1 || type.getDimSize(0) != result.getShape().back())
      return emitOpError() << "expects a bias of the result's last dim ("
                           << result.getShape().back() << "), got " << type;
  }
  for (Value v : {getAux(), getPreActivation()})
    if (v && cast<RankedTensorType>(v.getType()).getShape() != result.getShape())
      return emitOpError() << "expects aux and pre_activation shaped like the result, got "
                           << v.getType();
  return success();
}

#define GET_OP_CLASSES
#include "stepc/Dialect/StepK/IR/StepKOps.cpp.inc"
