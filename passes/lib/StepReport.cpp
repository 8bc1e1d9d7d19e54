//===- StepReport.cpp - the model report ----------------------------------===//

#include "stepc/Analysis/ModelReport.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

namespace stepc {
#define GEN_PASS_DEF_STEPREPORT
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

struct StepReportPass : public stepc::impl::StepReportBase<StepReportPass> {
  using StepReportBase::StepReportBase;

  void runOnOperation() override {
    SmallVector<func::FuncOp> losses;
    getOperation().walk([&](func::FuncOp function) {
      if (function->hasAttr(StepDialect::kLossAttrName))
        losses.push_back(function);
    });
    if (losses.empty()) {
      emitError(getOperation().getLoc())
          << "no function is marked '" << StepDialect::kLossAttrName << "'";
      return signalPassFailure();
    }

    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(output, &error);
    if (!file) {
      emitError(getOperation().getLoc()) << "cannot open report file '" << output
                                 << "': " << error;
      return signalPassFailure();
    }
    for (func::FuncOp function : losses) {
      FailureOr<ModelReport> report = analyzeModel(function);
      if (failed(report))
        return signalPassFailure();
      llvm::json::OStream json(file->os(), /*IndentSize=*/2);
      json.object([&] {
        json.attribute("function", function.getSymName());
        json.attribute("params", report->params);
        json.attribute("param_tensors", report->paramTensors);
        json.attribute("param_bytes", report->paramBytes);
        json.attribute("matmul_params", report->matmulParams);
        json.attribute("forward_flops", report->forwardFlops);
        json.attribute("model_flops_per_step", report->modelFlops);
        json.attribute("tokens_per_step", report->tokens);
        if (report->tokens > 0)
          json.attribute("model_flops_per_token",
                         report->modelFlops / report->tokens);
      });
      file->os() << "\n";
    }
    file->keep();
  }
};

} // namespace
