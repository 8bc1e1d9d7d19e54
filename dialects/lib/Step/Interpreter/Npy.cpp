//===- Npy.cpp - .npy files for the interpreter ---------------------------===//
//
// Thin wrappers over runtime/formats/npy.h, the one .npy reader of the project.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/Interpreter/Interpreter.h"

#include "runtime/formats/npy.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace stepc::interp;

FailureOr<Tensor> stepc::interp::readNpy(const std::string &path, std::string &error) {
  npy::Array array;
  if (!npy::Read(path, array, error))
    return failure();
  Tensor t;
  t.shape.assign(array.shape.begin(), array.shape.end());
  t.data = std::move(array.data);
  return t;
}

LogicalResult stepc::interp::writeNpy(const std::string &path, const Tensor &tensor,
                                      Type elementType, bool asDouble, std::string &error) {
  npy::Dtype dtype = isa<IntegerType>(elementType) ? npy::Dtype::kI8
                     : asDouble                    ? npy::Dtype::kF8
                                                   : npy::Dtype::kF4;
  std::vector<int64_t> shape(tensor.shape.begin(), tensor.shape.end());
  return success(npy::Write(path, shape, tensor.data.data(), tensor.data.size(), dtype, error));
}
