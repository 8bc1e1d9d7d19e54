//===- StepReport.cpp - the model report ----------------------------------===//

#include "stepc/Analysis/FlopCount.h"
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

/// True if `value` reaches a matmul operand, directly or through ops that
/// only change its type or layout.
bool feedsMatmul(Value value) {
  for (Operation *user : value.getUsers()) {
    if (isa<MatmulOp, BatchMatmulOp>(user))
      return true;
    if (isa<ConvertOp, ReshapeOp, TransposeOp>(user) &&
        feedsMatmul(user->getResult(0)))
      return true;
  }
  return false;
}

/// Everything the report says about one loss function.
struct ModelReport {
  int64_t params = 0;
  int64_t paramTensors = 0;
  int64_t paramBytes = 0;
  int64_t matmulParams = 0;
  int64_t forwardFlops = 0;
  int64_t modelFlops = 0;
  /// Positions the loss averages over (the cross_entropy targets).
  int64_t tokens = 0;
};

FailureOr<ModelReport> reportFunction(func::FuncOp function) {
  ModelReport report;
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
    if (!function.getArgAttr(i, StepDialect::kParamAttrName))
      continue;
    BlockArgument arg = function.getArgument(i);
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t elements = type.getNumElements();
    report.params += elements;
    report.paramTensors += 1;
    report.paramBytes +=
        elements * static_cast<int64_t>(type.getElementTypeBitWidth() / 8);
    if (feedsMatmul(arg))
      report.matmulParams += elements;
  }
  WalkResult walk = function.walk([&](Operation *op) {
    if (op == function.getOperation())
      return WalkResult::advance();
    FailureOr<OpFlops> flops = getModelFlops(op);
    if (failed(flops))
      return WalkResult::interrupt();
    if (auto loss = dyn_cast<CrossEntropyOp>(op))
      report.tokens += loss.getTargets().getType().getNumElements();
    report.forwardFlops += flops->forward;
    report.modelFlops += flops->forward + flops->backward;
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return report;
}

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
      FailureOr<ModelReport> report = reportFunction(function);
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
