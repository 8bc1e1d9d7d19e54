#include "runtime/train/loss_plot.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "runtime/formats/atomic_file.h"

namespace stepc {
namespace {

std::string Escape(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"'", "&apos;"}});
}

}  // namespace

absl::Status WriteLossPlot(const std::string& path, const LossPlot& plot) {
  const std::vector<float>& losses = plot.losses;
  if (losses.empty()) return absl::FailedPreconditionError("no steps to plot");
  const double w = 760, h = 440, left = 80, right = 24, top = 48, bottom = 64;
  double lo = *std::min_element(losses.begin(), losses.end());
  double hi = *std::max_element(losses.begin(), losses.end());
  for (const auto& [step, v] : plot.val_losses) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // A log axis needs positive losses; fall back to linear otherwise.
  const bool log_scale = plot.log_scale && lo > 0;
  auto axis = [&](double v) { return log_scale ? std::log10(v) : v; };
  double a_lo = axis(lo), a_hi = axis(hi);
  if (a_hi - a_lo < 1e-9) a_hi = a_lo + 1;
  const int64_t first = plot.first_step, last = first + static_cast<int64_t>(losses.size()) - 1;
  const double span = std::max<double>(1, double(last - first));
  auto x = [&](double step) { return left + (w - left - right) * (step - first) / span; };
  auto y = [&](double v) { return top + (h - top - bottom) * (a_hi - axis(v)) / (a_hi - a_lo); };

  std::string svg = absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
      "font-family='sans-serif' font-size='12'>\n<rect width='100%%' height='100%%' "
      "fill='white'/>\n<text x='%.0f' y='28' font-size='16' font-weight='bold'>%s</text>\n",
      w, h, left, Escape(plot.title));
  // Ticks and grid: 5 on each axis.
  for (int k = 0; k <= 4; ++k) {
    const double a = a_lo + (a_hi - a_lo) * k / 4, v = log_scale ? std::pow(10, a) : a;
    absl::StrAppend(&svg, absl::StrFormat(
        "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#eeeeee'/>"
        "<text x='%.1f' y='%.1f' text-anchor='end'>%.3g</text>\n",
        left, y(v), w - right, y(v), left - 6, y(v) + 4, v));
    const double step = first + span * k / 4;
    absl::StrAppend(&svg, absl::StrFormat(
        "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#eeeeee'/>"
        "<text x='%.1f' y='%.1f' text-anchor='middle'>%.0f</text>\n",
        x(step), top, x(step), h - bottom, x(step), h - bottom + 18, step));
  }
  absl::StrAppend(&svg, absl::StrFormat(
      "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='black'/>\n"
      "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='black'/>\n"
      "<text x='%.1f' y='%.1f' text-anchor='middle'>training step</text>\n"
      "<text transform='translate(18 %.1f) rotate(-90)' text-anchor='middle'>loss%s</text>\n",
      left, h - bottom, w - right, h - bottom, left, top, left, h - bottom,
      (left + w - right) / 2, h - 18, (top + h - bottom) / 2,
      log_scale ? " (log scale)" : ""));
  std::string raw, smooth;
  double avg = losses[0];
  for (size_t i = 0; i < losses.size(); ++i) {
    avg = i == 0 ? losses[0] : 0.9 * avg + 0.1 * losses[i];
    absl::StrAppend(&raw, absl::StrFormat("%.1f,%.1f ", x(first + double(i)), y(losses[i])));
    absl::StrAppend(&smooth, absl::StrFormat("%.1f,%.1f ", x(first + double(i)), y(avg)));
  }
  absl::StrAppend(&svg, absl::StrFormat(
      "<polyline fill='none' stroke='#9ecae1' stroke-width='1' points='%s'/>\n"
      "<polyline fill='none' stroke='#08519c' stroke-width='2' points='%s'/>\n"
      "<text x='%.0f' y='%.0f' fill='#08519c'>training loss (moving average 0.9)</text>\n",
      raw, smooth, w - right - 250, top + 14));
  if (!plot.val_losses.empty()) {
    std::string val;
    for (const auto& [step, v] : plot.val_losses) {
      absl::StrAppend(&val, absl::StrFormat("%.1f,%.1f ", x(double(step)), y(v)));
      absl::StrAppend(&svg, absl::StrFormat("<circle cx='%.1f' cy='%.1f' r='3' fill='#d94801'/>\n",
                                            x(double(step)), y(v)));
    }
    absl::StrAppend(&svg, absl::StrFormat(
        "<polyline fill='none' stroke='#d94801' stroke-width='1.5' points='%s'/>\n"
        "<text x='%.0f' y='%.0f' fill='#d94801'>validation loss</text>\n",
        val, w - right - 250, top + 30));
  }
  svg += "</svg>\n";
  AtomicFile file;
  std::string error;
  if (!file.Open(path, error)) return absl::PermissionDeniedError(error);
  file.stream() << svg;
  return file.Commit(error) ? absl::OkStatus() : absl::DataLossError(error);
}

}  // namespace stepc
