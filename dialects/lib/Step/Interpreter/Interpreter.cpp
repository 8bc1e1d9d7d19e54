//===- Interpreter.cpp - dispatch and rounding ----------------------------===//

#include "stepc/Dialect/Step/Interpreter/Interpreter.h"

#include "Eval.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/ScopeExit.h"

#include <cmath>
#include <cstring>

#include <functional>

using namespace mlir;
using namespace stepc;
using namespace stepc::interp;
using namespace stepc::step;

double stepc::interp::roundToBF16(double value) {
  float f = static_cast<float>(value);
  if (std::isnan(f))
    return f;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  bits += 0x7FFF + ((bits >> 16) & 1);
  bits &= 0xFFFF0000u;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

void Interpreter::round(Tensor &tensor, Type elementType) const {
  // Integers and masks hold what a store of the value keeps, in any mode: a
  // float truncated toward zero, a mask 0 or 1.
  if (elementType.isInteger(1)) {
    for (double &x : tensor.data)
      x = x != 0.0 ? 1.0 : 0.0;
    return;
  }
  if (elementType.isInteger()) {
    for (double &x : tensor.data)
      x = std::trunc(x);
    return;
  }
  if (exactF64)
    return;
  if (elementType.isF32()) {
    for (double &x : tensor.data)
      x = static_cast<float>(x);
  } else if (elementType.isBF16()) {
    for (double &x : tensor.data)
      x = roundToBF16(x);
  } else if (elementType.isF16()) {
    // Through APFloat, not _Float16: clang 14 has that type on x86 only
    // with AVX512-FP16 (the fuzz build's compiler on other CPUs).
    for (double &x : tensor.data) {
      llvm::APFloat half(x);
      bool inexact;
      half.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &inexact);
      half.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &inexact);
      x = half.convertToDouble();
    }
  }
}

/// The families, asked in turn: each evaluates its own ops.
static constexpr Evaluated (*kFamilies[])(Operation *, Operands, Results) = {
    &evalElementwise, &evalShape, &evalMatmul, &evalNorm, &evalAttention, &evalMoe, &evalFp8, &evalRandom, &evalLoss,
};

FailureOr<std::vector<Tensor>> Interpreter::run(func::FuncOp function,
                                                ArrayRef<Tensor> args) const {
  if (function.isExternal())
    return function.emitOpError() << "has no body to interpret";
  if (args.size() != function.getNumArguments())
    return function.emitOpError() << "expects " << function.getNumArguments()
                                  << " arguments, got " << args.size();
  DenseMap<Value, Tensor> values;
  for (auto [i, arg] : llvm::enumerate(function.getArguments())) {
    auto type = cast<RankedTensorType>(arg.getType());
    if (ArrayRef<int64_t>(args[i].shape) != type.getShape() ||
        args[i].numel() != type.getNumElements())
      return emitError(arg.getLoc()) << "argument #" << i << " expects shape "
                                     << type << ", got "
                                     << args[i].numel() << " values";
    Tensor t = args[i];
    round(t, type.getElementType());
    values[arg] = std::move(t);
  }

  // One op: its results from its operands' values. A kernel with a body
  // (stepk.fused, stepk.call, stepk.adamw_group) evaluates it, each member
  // rounded as if stored (as the back ends round registers), and yields its
  // results.
  std::function<LogicalResult(Operation &)> evalOp = [&](Operation &op) -> LogicalResult {
    SmallVector<const Tensor *> operands;
    for (Value v : op.getOperands()) {
      auto it = values.find(v);
      if (it == values.end())
        return op.emitOpError() << "uses a value defined outside the function body";
      operands.push_back(&it->second);
    }
    if (isa<stepk::FusedOp, stepk::CallOp, stepk::AdamwGroupOp>(op)) {
      Block &body = op.getRegion(0).front();
      // By value: inserting into `values` may move the tensors `operands`
      // points to.
      for (auto [arg, input] : llvm::zip(body.getArguments(), op.getOperands())) {
        Tensor t = values.lookup(input);
        values[arg] = std::move(t);
      }
      for (Operation &member : body.without_terminator())
        if (failed(evalOp(member)))
          return failure();
      auto yield = cast<stepk::YieldOp>(body.getTerminator());
      for (auto [result, yielded] : llvm::zip(op.getResults(), yield.getValues()))
        values[result] = values.lookup(yielded);
      return success();
    }
    // A call (a block function step-outline-blocks made): its body on the
    // operands' values.
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (!callee)
        return call.emitOpError() << "calls " << call.getCallee() << ", not a function here";
      // A call nests at most a few deep; a recursive one is refused before
      // it exhausts the stack.
      static thread_local int depth = 0;
      if (depth >= 16)
        return call.emitOpError() << "nests calls more than 16 deep (a recursive call?)";
      ++depth;
      auto leave = llvm::make_scope_exit([] { --depth; });
      std::vector<Tensor> inputs;
      for (const Tensor *operand : operands)
        inputs.push_back(*operand);
      FailureOr<std::vector<Tensor>> returned = run(callee, inputs);
      if (failed(returned))
        return failure();
      for (auto [value, tensor] : llvm::zip(call.getResults(), *returned))
        values[value] = std::move(tensor);
      return success();
    }
    SmallVector<Tensor> results;
    for (Type type : op.getResultTypes())
      results.push_back(Tensor::zerosLike(type));
    Evaluated evaluated;
    for (auto family : kFamilies)
      if ((evaluated = family(&op, operands, results)))
        break;
    if (!evaluated)
      return op.emitOpError() << "cannot be interpreted";
    if (failed(*evaluated))
      return failure();
    for (auto [value, tensor] : llvm::zip(op.getResults(), results)) {
      round(tensor, cast<RankedTensorType>(value.getType()).getElementType());
      values[value] = std::move(tensor);
    }
    return success();
  };
  for (Operation &op : function.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (Value v : ret.getOperands())
        results.push_back(values.lookup(v));
      return results;
    }
    if (failed(evalOp(op)))
      return failure();
  }
  return function.emitOpError() << "has no return";
}
