// The loss function's metrics of a training step (stepc_module_info.metrics:
// an expert's share of the routed tokens, an auxiliary loss), as the trainer
// shows them: whole in the --metrics log, summed up in the progress line
// and the trace.

#ifndef STEPC_RUNTIME_TRAIN_STEP_METRICS_H_
#define STEPC_RUNTIME_TRAIN_STEP_METRICS_H_

#include <string>
#include <vector>

#include "runtime/stepc_abi.h"

namespace stepc {

struct StepMetric {
  std::string name;
  int rank = 0;
  std::vector<float> values;  // row-major
  // A tensor's largest element over its mean (an expert load's imbalance:
  // 1 when balanced); NaN for a scalar or a mean of 0.
  double MaxOverMean() const;
};

// The metrics of `info` from a step's flat buffer (StepResult::metrics).
std::vector<StepMetric> SplitMetrics(const stepc_module_info& info,
                                     const std::vector<float>& flat);

// `, "metrics": {"name": value or [values], ...}` for a JSON line (empty
// with no metric; a non-finite value is null).
std::string MetricsJsonMember(const std::vector<StepMetric>& metrics);

// ` | name value` per scalar, then the tensors' largest max/mean (the
// imbalance of the most skewed; `name max/mean r`), for the progress line.
std::string MetricsText(const std::vector<StepMetric>& metrics);

// A number for a JSON line with 6 decimals, or null for what JSON cannot
// hold (NaN, infinities).
std::string JsonNumber(double v);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_STEP_METRICS_H_
