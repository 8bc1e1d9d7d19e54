//===- Pareto.cpp - memory budget vs recompute, over a sweep --------------===//

#include "stepc/Compiler/Pareto.h"
#include "StepInOrder.h"
#include "stepc/Analysis/FlopCount.h"
#include "stepc/Analysis/ModelReport.h"
#include "stepc/Compiler/Report.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <optional>

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// One compilation of the sweep.
struct Point {
  int64_t budget = 0;
  bool feasible = false;
  int64_t plannedPeak = 0;
  double executedOverModel = 0;
};

/// The step of `model` compiled with `budget` under remat=auto, or none if
/// the budget is infeasible (its diagnostic swallowed). Model FLOPs are
/// counted on the loss function.
FailureOr<std::optional<Point>> compileAt(ModuleOp model, const StepcPipelineOptions &base,
                                          int64_t budget) {
  OwningOpRef<ModuleOp> copy = model.clone();
  StepcPipelineOptions options;
  options.copyOptionValuesFrom(base);
  options.until = "train-step";
  options.remat = "auto";
  options.memoryBudget = std::to_string(budget);
  PassManager pm(model.getContext());
  std::string error;
  if (failed(buildStepcPipeline(pm, options, [&](const Twine &message) {
        error = message.str();
        return failure();
      })))
    return emitError(model.getLoc()) << error;
  bool infeasible = false;
  {
    ScopedDiagnosticHandler quiet(model.getContext(), [&](Diagnostic &d) {
      infeasible |= d.getSeverity() == DiagnosticSeverity::Error;
      return success();
    });
    if (failed(pm.run(*copy)) && !infeasible)
      return failure();
  }
  if (infeasible)
    return std::optional<Point>();
  Point point{budget, true};
  int64_t modelFlops = 0, executed = 0;
  // Under a pipeline, the stage --pp-stage shows.
  SmallVector<ModuleOp> stages = compiledStages(*copy);
  ModuleOp shown = stages[stages.size() > 1 ? size_t(base.ppStage.getValue()) : 0];
  for (auto f : shown.getOps<func::FuncOp>()) {
    if (f->hasAttr(StepDialect::kLossAttrName)) {
      FailureOr<ModelReport> model = analyzeModel(f);
      if (failed(model))
        return failure();
      modelFlops = model->modelFlops;
    }
    if (!f->hasAttr(StepDialect::kTrainStepAttrName))
      continue;
    // Every op the step runs: a block function's once per call.
    FailureOr<StepInOrder> view = StepInOrder::of(f);
    if (failed(view))
      return failure();
    for (const StepInOrder::Op &o : view->ops())
      if (FailureOr<int64_t> flops = getExecutedFlops(o.op); succeeded(flops))
        executed += *flops;
    auto decision = f->getAttrOfType<DictionaryAttr>(StepDialect::kRematAttrName);
    if (!decision)
      return f.emitOpError() << "has no step.remat decision";
    point.plannedPeak = cast<IntegerAttr>(decision.get("planned_peak")).getInt();
  }
  point.executedOverModel = modelFlops ? double(executed) / double(modelFlops) : 0.0;
  return std::optional<Point>(point);
}

/// Budget (x, MB) against executed / model FLOPs (y), feasible points joined.
std::string chart(ArrayRef<Point> points, int64_t unconstrained) {
  const double w = 720, h = 400, left = 70, right = 20, top = 40, bottom = 50;
  double xmax = double(unconstrained) / 1e6, ymin = 1.0, ymax = 1.0;
  for (const Point &p : points)
    if (p.feasible)
      ymax = std::max(ymax, p.executedOverModel);
  ymax = std::max(ymax + 0.05, ymin + 0.1);
  auto x = [&](int64_t bytes) { return left + (w - left - right) * (double(bytes) / 1e6) / xmax; };
  auto y = [&](double v) { return top + (h - top - bottom) * (ymax - v) / (ymax - ymin); };
  std::string svg, line;
  llvm::raw_string_ostream os(svg);
  os << llvm::formatv("<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' "
                      "font-family='sans-serif' font-size='12'>\n"
                      "<rect width='100%' height='100%' fill='white'/>\n"
                      "<text x='{2}' y='24' font-size='15'>executed / model FLOPs against "
                      "the memory budget (step-remat auto)</text>\n",
                      w, h, left);
  // A grid with ticks every fifth of each axis, then the axes and their titles.
  constexpr int kTicks = 5;
  for (int i = 0; i <= kTicks; ++i) {
    double mb = xmax * i / kTicks, ratio = ymin + (ymax - ymin) * i / kTicks;
    double gx = x(int64_t(mb * 1e6)), gy = y(ratio);
    os << llvm::formatv("<line x1='{0:F1}' y1='{1}' x2='{0:F1}' y2='{2}' stroke='#dddddd'/>\n"
                        "<text x='{0:F1}' y='{3}' text-anchor='middle'>{4:F1}</text>\n",
                        gx, top, h - bottom, h - bottom + 16, mb);
    os << llvm::formatv("<line x1='{0}' y1='{1:F1}' x2='{2}' y2='{1:F1}' stroke='#dddddd'/>\n"
                        "<text x='{3}' y='{4:F1}' text-anchor='end'>{5:F2}</text>\n",
                        left, gy, w - right, left - 6, gy + 4, ratio);
  }
  os << llvm::formatv("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>\n"
                      "<line x1='{0}' y1='{3}' x2='{0}' y2='{1}' stroke='black'/>\n",
                      left, h - bottom, w - right, top);
  os << llvm::formatv("<text x='{0}' y='{1}' text-anchor='middle'>memory budget per rank "
                      "(MB)</text>\n",
                      (left + w - right) / 2, h - 10);
  os << llvm::formatv("<text x='16' y='{0}' text-anchor='middle' transform='rotate(-90 16 {0})'>"
                      "executed / model FLOPs</text>\n",
                      (top + h - bottom) / 2);
  for (const Point &p : points) {
    if (!p.feasible) {
      os << llvm::formatv("<text x='{0}' y='{1}' fill='#cb181d' text-anchor='middle'>x</text>\n",
                          x(p.budget), h - bottom - 6);
      continue;
    }
    line += llvm::formatv("{0:F1},{1:F1} ", x(p.budget), y(p.executedOverModel)).str();
    os << llvm::formatv("<circle cx='{0:F1}' cy='{1:F1}' r='3' fill='#08519c'/>\n",
                        x(p.budget), y(p.executedOverModel));
  }
  os << "<polyline fill='none' stroke='#08519c' stroke-width='2' points='" << line << "'/>\n"
     << llvm::formatv("<text x='{0}' y='{1}' fill='#cb181d'>x: infeasible budget</text>\n",
                      w - right - 140, top + 14)
     << "</svg>\n";
  return svg;
}

} // namespace

LogicalResult stepc::sweepMemoryBudgets(ModuleOp model, const StepcPipelineOptions &options,
                                        std::string &json, std::string &svg) {
  // The unconstrained peak: a budget nothing exceeds recomputes nothing.
  FailureOr<std::optional<Point>> free = compileAt(model, options, int64_t{1} << 62);
  if (failed(free))
    return failure();
  if (!*free)
    return emitError(model.getLoc()) << "--report-pareto: the step does not compile without "
                                        "a memory budget";
  int64_t unconstrained = (*free)->plannedPeak;
  SmallVector<Point> points;
  constexpr int kPoints = 16;
  for (int i = kPoints; i >= 1; --i) {
    int64_t budget = unconstrained / 4 + (unconstrained - unconstrained / 4) * (i - 1) / (kPoints - 1);
    FailureOr<std::optional<Point>> p = compileAt(model, options, budget);
    if (failed(p))
      return failure();
    points.push_back(*p ? **p : Point{budget, false});
  }
  llvm::json::Array rows;
  for (const Point &p : points) {
    llvm::json::Object row{{"budget_bytes", p.budget}, {"feasible", p.feasible}};
    if (p.feasible) {
      row["planned_peak_bytes"] = p.plannedPeak;
      row["executed_over_model_flops"] = p.executedOverModel;
    }
    rows.push_back(std::move(row));
  }
  llvm::json::Object table{{"unconstrained_peak_bytes", unconstrained},
                           {"points", std::move(rows)}};
  json = llvm::formatv("{0:2}", llvm::json::Value(std::move(table))).str() + "\n";
  svg = chart(points, unconstrained);
  return success();
}
