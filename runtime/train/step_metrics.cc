#include "runtime/train/step_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace stepc {

double StepMetric::MaxOverMean() const {
  if (rank == 0 || values.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0, max = values[0];
  for (float v : values) {
    sum += v;
    max = std::max<double>(max, v);
  }
  const double mean = sum / static_cast<double>(values.size());
  return mean != 0 ? max / mean : std::numeric_limits<double>::quiet_NaN();
}

std::vector<StepMetric> SplitMetrics(const stepc_module_info& info,
                                     const std::vector<float>& flat) {
  std::vector<StepMetric> metrics;
  size_t at = 0;
  for (int i = 0; i < info.num_metrics; ++i) {
    const stepc_output_info& m = info.metrics[i];
    size_t count = 1;
    for (int d = 0; d < m.rank; ++d) count *= static_cast<size_t>(m.shape[d]);
    if (at + count > flat.size()) break;  // a step that returned none
    metrics.push_back({m.name, m.rank, std::vector<float>(flat.begin() + at,
                                                          flat.begin() + at + count)});
    at += count;
  }
  return metrics;
}

std::string MetricsJsonMember(const std::vector<StepMetric>& metrics) {
  if (metrics.empty()) return "";
  nlohmann::json all = nlohmann::json::object();
  for (const StepMetric& m : metrics) {
    auto number = [](float v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
    if (m.rank == 0) {
      all[m.name] = number(m.values[0]);
      continue;
    }
    nlohmann::json values = nlohmann::json::array();
    for (float v : m.values) values.push_back(number(v));
    all[m.name] = std::move(values);
  }
  return absl::StrCat(", \"metrics\": ", all.dump());
}

std::string MetricsText(const std::vector<StepMetric>& metrics) {
  std::string text;
  const StepMetric* worst = nullptr;
  int tensors = 0;
  for (const StepMetric& m : metrics) {
    if (m.rank == 0) {
      absl::StrAppendFormat(&text, " | %s %.4g", m.name, m.values[0]);
      continue;
    }
    ++tensors;
    const double r = m.MaxOverMean();
    if (!std::isnan(r) && (!worst || r > worst->MaxOverMean())) worst = &m;
  }
  if (worst)
    absl::StrAppendFormat(&text, " | %s max/mean %.2f%s", worst->name, worst->MaxOverMean(),
                          tensors > 1 ? absl::StrFormat(" (worst of %d)", tensors) : "");
  return text;
}

std::string JsonNumber(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.6f", v) : "null";
}

}  // namespace stepc
