//===- EvalElementwise.cpp - elementwise ops ------------------------------===//
//
// Every elementwise op names its scalar helper in ODS
// (ScalarMathOpInterface); the interpreter runs that helper in double, the
// same template the back ends run in float.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

Evaluated stepc::interp::evalElementwise(Operation *op, Operands in, Results out) {
  auto math = dyn_cast<ScalarMathOpInterface>(op);
  if (!math)
    return std::nullopt;
  SmallVector<const double *, 2> operands;
  for (const Tensor *t : in)
    operands.push_back(t->data.data());
  math.evalScalar(operands, out[0].data.data(), static_cast<int64_t>(out[0].data.size()));
  return success();
}
