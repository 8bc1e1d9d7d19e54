// libFuzzer target: arbitrary text as a model. Parsed and verified with the
// step dialects; what verifies is compiled by the whole target-independent
// pipeline (stepc-opt --stepc-pipeline="target=cpu until=train-step") and,
// under a memory budget, through step-remat; and step-inline-blocks runs on
// it as written. Any input must end in
// diagnostics or a step, never a crash, an assertion or a fatal error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "stepc/Compiler/OutlineBlocks.h"
#include "stepc/Compiler/Pipeline.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

namespace {

mlir::MLIRContext& Context() {
  static mlir::MLIRContext* context = [] {
    mlir::DialectRegistry registry;
    registry.insert<stepc::step::StepDialect, stepc::stepk::StepKDialect, mlir::func::FuncDialect,
                    mlir::arith::ArithDialect, mlir::mesh::MeshDialect>();
    auto* c = new mlir::MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->disableMultithreading();
    c->printOpOnDiagnostic(false);
    return c;
  }();
  return *context;
}

void Compile(mlir::ModuleOp module, const char* budget) {
  stepc::StepcPipelineOptions options;
  options.target = "cpu";
  options.until = "train-step";
  if (budget) options.memoryBudget = budget;
  mlir::PassManager pm(module->getContext());
  if (mlir::failed(stepc::buildStepcPipeline(
          pm, options, [](const llvm::Twine&) { return mlir::failure(); })))
    return;
  (void)pm.run(module);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mlir::MLIRContext& context = Context();
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic&) { return mlir::success(); });
  std::string text(reinterpret_cast<const char*>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module) return 0;
  mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
  // A final module's block functions put back in their steps (what
  // step-inline-blocks does): any calls, plans and bodies.
  mlir::OwningOpRef<mlir::ModuleOp> outlined = module->clone();
  if (mlir::succeeded(stepc::inlineBlockFunctions(*outlined))) (void)mlir::verify(*outlined);
  Compile(*module, nullptr);
  // And under a tight budget: remat's search and its infeasibility report.
  Compile(*copy, "100000");
  return 0;
}
