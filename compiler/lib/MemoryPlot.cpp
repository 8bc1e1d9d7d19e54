//===- MemoryPlot.cpp - the memory plan as a picture ----------------------===//

#include "stepc/Compiler/MemoryPlot.h"
#include "StepInOrder.h"

#include "stepc/Compiler/ArenaPlan.h"
#include "stepc/Dialect/Step/IR/StepOps.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

using namespace mlir;

namespace {

/// The plot's area and scales: op index on x, MB per rank on y.
struct Frame {
  static constexpr double w = 900, h = 440, left = 80, right = 30, top = 50, bottom = 50;
  double xmax, ymax;
  double x(double i) const { return left + (w - left - right) * i / xmax; }
  double y(double bytes) const { return top + (h - top - bottom) * (1 - bytes / 1e6 / ymax); }
};

/// Grid and ticks at round steps (1, 2 or 5 times a power of ten), about
/// five to an axis, and the axes' names.
void drawAxes(llvm::raw_ostream &os, const Frame &f) {
  auto roundStep = [](double span) {
    const double raw = std::max(span, 1e-9) / 5, unit = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0})
      if (m * unit >= raw)
        return m * unit;
    return 10 * unit;
  };
  const double opStep = std::max(1.0, roundStep(f.xmax)), mbStep = roundStep(f.ymax);
  for (double op = 0; op <= f.xmax + 1e-9; op += opStep)
    os << llvm::formatv("<line x1='{0:F1}' y1='{1}' x2='{0:F1}' y2='{2}' stroke='#dddddd'/>\n"
                        "<text x='{0:F1}' y='{3}' text-anchor='middle'>{4:F0}</text>\n",
                        f.x(op), f.top, f.h - f.bottom, f.h - f.bottom + 16, op);
  for (double mb = 0; mb <= f.ymax + 1e-9; mb += mbStep)
    os << llvm::formatv("<line x1='{0}' y1='{1:F1}' x2='{2}' y2='{1:F1}' stroke='#dddddd'/>\n"
                        "<text x='{3}' y='{4:F1}' text-anchor='end'>{5}</text>\n",
                        f.left, f.y(mb * 1e6), f.w - f.right, f.left - 6, f.y(mb * 1e6) + 4,
                        mbStep < 1 ? llvm::formatv("{0:F2}", mb).str()
                                   : llvm::formatv("{0:F0}", mb).str());
  os << llvm::formatv("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>\n"
                      "<line x1='{0}' y1='{3}' x2='{0}' y2='{1}' stroke='black'/>\n"
                      "<text x='{4}' y='{5}' text-anchor='middle'>op (program order of the "
                      "training step)</text>\n"
                      "<text x='18' y='{6}' text-anchor='middle' "
                      "transform='rotate(-90 18 {6})'>MB per rank</text>\n",
                      f.left, f.h - f.bottom, f.w - f.right, f.top, (f.left + f.w - f.right) / 2,
                      f.h - 12, (f.top + f.h - f.bottom) / 2);
}

/// Where the backward and the optimizer begin: the first op of each phase
/// (fused kernels and library calls carry their first member's phase).
void drawPhases(llvm::raw_ostream &os, const Frame &f, const stepc::StepInOrder &view) {
  using stepc::step::Phase;
  auto phaseStart = [&](Phase phase) -> std::optional<int64_t> {
    for (auto [i, o] : llvm::enumerate(view.ops()))
      if (stepc::step::getPhase(o.op) == phase)
        return int64_t(i);
    return std::nullopt;
  };
  for (auto [phase, label] : {std::pair(Phase::Backward, "backward"),
                              std::pair(Phase::Optimizer, "optimizer")}) {
    std::optional<int64_t> at = phaseStart(phase);
    if (!at)
      continue;
    os << llvm::formatv("<line x1='{0:F1}' y1='{1}' x2='{0:F1}' y2='{2}' stroke='#525252' "
                        "stroke-dasharray='4,3' class='phase'/>\n"
                        "<text x='{3:F1}' y='{4}' font-size='11' fill='#525252' class='phase' "
                        "id='{5}'>{5} from op {6}</text>\n",
                        f.x(double(*at)), f.top, f.h - f.bottom, f.x(double(*at)) + 4, f.top + 12,
                        label, *at);
  }
}

/// The three largest buffers, labelled where they are defined. A label
/// that would overlap one placed before moves up a line; labels start right
/// of the marker, so none crosses the y axis's figures.
void labelLargestBuffers(llvm::raw_ostream &os, const Frame &f, const stepc::MemoryPlan &plan,
                         const std::vector<int64_t> &live, int64_t args) {
  std::vector<size_t> order(plan.buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.buffers[a].bytes > plan.buffers[b].bytes;
  });
  std::vector<std::pair<double, double>> placed;
  for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k) {
    const stepc::MemoryPlan::Buffer &b = plan.buffers[order[k]];
    const double bx = f.x(double(b.firstDef)),
                 by = f.y(double(args + live[std::min<int64_t>(b.firstDef, live.size() - 1)]));
    double ly = by - 6;
    for (bool moved = true; moved;) {
      moved = false;
      for (auto [px, py] : placed)
        if (std::abs(px - bx) < 130 && std::abs(py - ly) < 12) {
          ly = py - 13;
          moved = true;
        }
    }
    placed.push_back({bx, ly});
    os << llvm::formatv("<circle cx='{0:F1}' cy='{1:F1}' r='3' fill='#cb181d'/>\n"
                        "<text x='{2:F1}' y='{3:F1}' font-size='10' text-anchor='start' "
                        "class='buffer'>{4:F2} MB (ops {5}-{6})</text>\n",
                        bx, by, bx + 4, ly, b.bytes / 1e6, b.firstDef, b.lastUse);
  }
}

} // namespace

FailureOr<std::string> stepc::memoryPlotSvg(func::FuncOp step,
                                            std::optional<int64_t> budgetBytes) {
  FailureOr<MemoryPlan> plan = readMemoryPlan(step);
  if (failed(plan))
    return failure();
  // The ops in the order the step runs them (a block function's per call).
  FailureOr<StepInOrder> view = StepInOrder::of(step);
  if (failed(view))
    return failure();
  const int64_t args = argumentBytes(step);
  const int64_t ops = view->ops().size();
  const std::vector<int64_t> live = liveBytesByOp(*plan, ops);
  const int64_t peakAt = std::max_element(live.begin(), live.end()) - live.begin();
  const int64_t planned = plannedPeakBytes(step).value_or(args + plan->arenaBytes);

  Frame f;
  f.ymax = std::max(double(std::max(planned, budgetBytes.value_or(0))) * 1.08 / 1e6, 1e-3);
  f.xmax = double(std::max<int64_t>(ops - 1, 1));
  const double w = Frame::w, h = Frame::h, left = Frame::left, right = Frame::right;
  std::string svg;
  llvm::raw_string_ostream os(svg);
  os << llvm::formatv("<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' "
                      "font-family='sans-serif' font-size='12'>\n"
                      "<rect width='100%' height='100%' fill='white'/>\n",
                      w, h);
  os << llvm::formatv("<text x='{0}' y='20' font-size='15'>{1}: bytes per rank across the "
                      "step's {2} ops</text>\n"
                      "<text x='{0}' y='38' font-size='11' id='figures'>arguments {3} B, arena "
                      "{4} B, planned peak {5} B, live peak {6} B at op {7}</text>\n",
                      left, step.getSymName(), ops, args, plan->arenaBytes, planned,
                      args + live[peakAt], peakAt);
  drawAxes(os, f);
  // The arguments (parameters, optimizer state, inputs) as a band, the live
  // arena above them as a filled curve.
  os << llvm::formatv("<rect x='{0}' y='{1:F1}' width='{2}' height='{3:F1}' fill='#bdbdbd'/>\n",
                      left, f.y(double(args)), w - left - right, f.y(0) - f.y(double(args)));
  std::string points = llvm::formatv("{0:F1},{1:F1} ", f.x(0), f.y(double(args))).str();
  for (int64_t i = 0; i < int64_t(live.size()); ++i)
    points += llvm::formatv("{0:F1},{1:F1} ", f.x(double(i)), f.y(double(args + live[i]))).str();
  points += llvm::formatv("{0:F1},{1:F1}", f.x(f.xmax), f.y(double(args))).str();
  os << "<polygon fill='#6baed6' stroke='#08519c' points='" << points << "'/>\n";
  // Labels above their line; the lower of two lines close together is
  // labelled below it.
  auto hline = [&](int64_t bytes, const char *color, const char *dash, std::string label,
                   bool below) {
    os << llvm::formatv("<line x1='{0}' y1='{1:F1}' x2='{2}' y2='{1:F1}' stroke='{3}' "
                        "stroke-dasharray='{4}'/>\n"
                        "<text x='{2}' y='{5:F1}' text-anchor='end' fill='{3}'>{6}</text>\n",
                        left, f.y(double(bytes)), w - right, color, dash,
                        f.y(double(bytes)) + (below ? 13 : -4), label);
  };
  const bool close =
      budgetBytes && std::abs(f.y(double(*budgetBytes)) - f.y(double(planned))) < 16;
  hline(planned, "#08519c", "6,3", llvm::formatv("planned peak {0:F1} MB", planned / 1e6),
        close && planned < *budgetBytes);
  if (budgetBytes)
    hline(*budgetBytes, "#cb181d", "2,2", llvm::formatv("budget {0:F1} MB", *budgetBytes / 1e6),
          close && *budgetBytes < planned);
  drawPhases(os, f, *view);
  labelLargestBuffers(os, f, *plan, live, args);
  os << "<text x='" << w - right << "' y='" << h - Frame::bottom - 8
     << "' text-anchor='end' font-size='10'>grey: arguments; blue: live arena buffers; dashed: where the backward and the optimizer begin</text>\n"
     << "</svg>\n";
  return svg;
}
