// The learning-rate schedule and seed of a run: from the options, or from
// the checkpoint a run resumes.

#ifndef STEPC_RUNTIME_TRAIN_SCHEDULE_H_
#define STEPC_RUNTIME_TRAIN_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/train/options.h"

namespace stepc {

// What decides the learning rate and the batches of every step.
struct Schedule {
  int64_t steps;
  double lr;
  int64_t warmup;
  double min_lr_ratio;
  uint64_t seed;
};

Schedule OptionSchedule(const TrainOptions& o);
nlohmann::json ScheduleJson(const Schedule& s);

// The schedule a resumed run follows: the checkpoint's (its trainer state
// `trainer`, read from `path`), but for the options given explicitly (a
// longer --steps extends a run). A given option that differs from the
// checkpoint is said out loud on the lead rank: the run no longer repeats
// the one that wrote it. Stored values outside what a run can mean are
// errors naming the field.
absl::StatusOr<Schedule> ResumedSchedule(const TrainOptions& o, const nlohmann::json& trainer,
                                         const std::string& path, bool lead);

// Warmup from 0 to lr over `warmup` steps, then cosine to lr·min_ratio.
double LearningRate(const Schedule& s, int64_t step);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_SCHEDULE_H_
