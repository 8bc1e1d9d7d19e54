//===- stepc-opt.cpp - mlir-opt with the step dialect and stepc passes ----===//

#include "stepc/Compiler/SpecialFiles.h"
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
#include "llvm/Support/ErrorHandling.h"

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>

/// stepc's own passes in pipeline order: --help leads with them (the
/// generic list below sorts them among MLIR's own). stepc-opt-help.test
/// checks that every registered step-* pass is named here.
static std::string overview() {
  using Factory = std::unique_ptr<mlir::Pass> (*)();
  const Factory passes[] = {
      stepc::createStepDeriveBlocks,    stepc::createStepRebindBatch,
      stepc::createStepShardExperts,    stepc::createStepFp8,
      stepc::createStepAutodiff,        stepc::createStepFp8WeightGrads,
      stepc::createStepMicroBatch,
      stepc::createStepPipelineStages,
      stepc::createStepShardDataParallel,
      stepc::createStepShardFully,      stepc::createStepShardTensor,
      stepc::createStepOptimizer,       stepc::createStepScheduleCollectives,
      stepc::createStepMixedPrecision,  stepc::createStepRemat,
      stepc::createStepEvalStep,        stepc::createStepSampleStep,
      stepc::createStepFuseCudaKernels,
      stepc::createStepFoldWideningGemms, stepc::createStepLowerLibraryCalls,
      stepc::createStepFuseElementwise,
      stepc::createStepPlanMemory,      stepc::createStepFitMemoryBudget,
      stepc::createStepOutlineBlocks,   stepc::createStepInlineBlocks,
      stepc::createStepReport};
  std::string text = "stepc optimizer driver: the step dialect, stepc's passes and MLIR's.\n\n"
                     "The whole compiler, as `stepc` runs it (its options: below):\n"
                     "  --stepc-pipeline=\"target=cpu shard=fsdp:2 ...\"\n\n"
                     "stepc's passes, in pipeline order:\n";
  for (Factory create : passes) {
    std::unique_ptr<mlir::Pass> pass = create();
    std::string name = ("  --" + pass->getArgument()).str();
    name.resize(std::max<size_t>(name.size() + 2, 32), ' ');
    text += name + pass->getDescription().str() + "\n";
  }
  return text;
}

/// The -o file, for the one fatal error MlirOptMain leaves to LLVM: a write
/// that fails when the output is closed ("IO failure on output stream").
static std::string outputFile = "-";

int main(int argc, char **argv) {
  llvm::install_fatal_error_handler([](void *, const char *reason, bool) {
    std::fprintf(stderr, "stepc-opt: error: %s (writing '%s')\n", reason, outputFile.c_str());
    std::_Exit(1);
  });
  mlir::DialectRegistry registry;
  registry.insert<stepc::step::StepDialect, stepc::stepk::StepKDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                  mlir::mesh::MeshDialect>();
  mlir::registerTransformsPasses(); // canonicalize, cse, ...
  stepc::registerStepcPasses();
  stepc::registerStepcCompilerPasses();
  stepc::registerStepcPipeline(); // --stepc-pipeline="target=cpu shard=fsdp:2"
  auto [inputFile, outputName] =
      mlir::registerAndParseCLIOptions(argc, argv, overview(), registry);
  outputFile = outputName;
  if (std::optional<std::string> blocking = stepc::blockingInputError(inputFile)) {
    std::fprintf(stderr, "stepc-opt: error: %s\n", blocking->c_str());
    return 1;
  }
  // A FIFO output is opened here without waiting: none reading it is an
  // error, not a wait; one reading it keeps this descriptor open until exit,
  // so MlirOptMain's own open finds the reader and closing it ends nothing.
  llvm::sys::fs::file_status status;
  if (outputName != "-" && !llvm::sys::fs::status(outputName, status) &&
      (status.type() == llvm::sys::fs::file_type::fifo_file ||
       status.type() == llvm::sys::fs::file_type::socket_file)) {
    std::string error;
    if (stepc::openSpecialForWrite(outputName, error) < 0) {
      std::fprintf(stderr, "stepc-opt: error: %s\n", error.c_str());
      return 1;
    }
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, inputFile, outputName, registry));
}
