// The loss curve as an SVG picture (stepc-run --plot).

#ifndef STEPC_RUNTIME_TRAIN_LOSS_PLOT_H_
#define STEPC_RUNTIME_TRAIN_LOSS_PLOT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace stepc {

struct LossPlot {
  std::vector<float> losses;  // one per step, from first_step
  int64_t first_step = 1;     // > 1 for a resumed run
  std::vector<std::pair<int64_t, double>> val_losses;  // (step, val_loss)
  bool log_scale = false;     // a logarithmic loss axis
  std::string title;
};

// Writes the training loss, its moving average and the validation losses
// as an SVG line chart with titled, ticked axes to `path` (atomically).
absl::Status WriteLossPlot(const std::string& path, const LossPlot& plot);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_LOSS_PLOT_H_
