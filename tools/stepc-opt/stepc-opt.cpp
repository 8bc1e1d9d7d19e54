//===- stepc-opt.cpp - mlir-opt with the step dialect and stepc passes ----===//

#include "stepc/Compiler/Passes.h"
#include "stepc/Compiler/Pipeline.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<stepc::step::StepDialect, stepc::stepk::StepKDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                  mlir::mesh::MeshDialect>();
  mlir::registerTransformsPasses(); // canonicalize, cse, ...
  stepc::registerStepcPasses();
  stepc::registerStepcCompilerPasses();
  stepc::registerStepcPipeline(); // --stepc-pipeline="target=cpu shard=fsdp:2"
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "stepc optimizer driver\n", registry));
}
