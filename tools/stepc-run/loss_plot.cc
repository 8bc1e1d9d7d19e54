#include "tools/stepc-run/loss_plot.h"

#include "runtime/atomic_file.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stepc {

absl::Status WriteLossPlot(const std::string& path, const std::vector<float>& losses,
                           const std::string& title) {
  if (losses.empty()) return absl::FailedPreconditionError("no steps to plot");
  const double w = 720, h = 400, left = 60, right = 20, top = 40, bottom = 50;
  float lo = *std::min_element(losses.begin(), losses.end());
  float hi = *std::max_element(losses.begin(), losses.end());
  if (hi - lo < 1e-6f) hi = lo + 1.0f;
  auto x = [&](size_t i) {
    return left + (w - left - right) * (losses.size() == 1 ? 0.5 : double(i) / (losses.size() - 1));
  };
  auto y = [&](double v) { return top + (h - top - bottom) * (hi - v) / (hi - lo); };
  std::string raw, smooth;
  double avg = losses[0];
  for (size_t i = 0; i < losses.size(); ++i) {
    avg = i == 0 ? losses[0] : 0.9 * avg + 0.1 * losses[i];
    absl::StrAppend(&raw, absl::StrFormat("%.1f,%.1f ", x(i), y(losses[i])));
    absl::StrAppend(&smooth, absl::StrFormat("%.1f,%.1f ", x(i), y(avg)));
  }
  AtomicFile file;
  std::string error;
  if (!file.Open(path, error)) return absl::PermissionDeniedError(error);
  file.stream() << absl::StrFormat(
      "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
      "font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%%' height='100%%' fill='white'/>\n"
      "<text x='%.0f' y='24' font-size='15'>%s</text>\n"
      "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='black'/>\n"
      "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='black'/>\n"
      "<text x='%.0f' y='%.0f'>%.3f</text><text x='%.0f' y='%.0f'>%.3f</text>\n"
      "<text x='%.0f' y='%.0f'>step 1</text><text x='%.0f' y='%.0f' text-anchor='end'>step %zu</text>\n"
      "<polyline fill='none' stroke='#9ecae1' stroke-width='1' points='%s'/>\n"
      "<polyline fill='none' stroke='#08519c' stroke-width='2' points='%s'/>\n"
      "<text x='%.0f' y='%.0f' fill='#08519c'>loss (moving average 0.9)</text>\n</svg>\n",
      w, h, left, title, left, h - bottom, w - right, h - bottom, left, top, left, h - bottom,
      4.0, y(hi) + 4, hi, 4.0, y(lo) + 4, lo, left, h - bottom + 18, w - right,
      h - bottom + 18, losses.size(), raw, smooth, w - right - 200, top + 14);
  return file.Commit(error) ? absl::OkStatus() : absl::DataLossError(error);
}

}  // namespace stepc
