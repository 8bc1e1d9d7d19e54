//===- Tensor.cpp - the reference interpreter's values --------------------===//

#include "stepc/Dialect/Step/Interpreter/Tensor.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace stepc::interp;

Tensor Tensor::zeros(ArrayRef<int64_t> shape) {
  Tensor t;
  t.shape.assign(shape.begin(), shape.end());
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  t.data.assign(n, 0.0);
  return t;
}

Tensor Tensor::zerosLike(Type type) {
  return zeros(cast<RankedTensorType>(type).getShape());
}

SmallVector<int64_t> Tensor::strides() const {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t i = rank() - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}
