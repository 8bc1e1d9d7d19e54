// The loss curve as an SVG picture (stepc-run --plot).

#ifndef STEPC_TOOLS_STEPC_RUN_LOSS_PLOT_H_
#define STEPC_TOOLS_STEPC_RUN_LOSS_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace stepc {

// Writes `losses` (one per step, from step 1) and their moving average as an
// SVG line chart to `path`.
absl::Status WriteLossPlot(const std::string& path, const std::vector<float>& losses,
                           const std::string& title);

}  // namespace stepc

#endif  // STEPC_TOOLS_STEPC_RUN_LOSS_PLOT_H_
