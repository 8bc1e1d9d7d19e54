#include "runtime/train/schedule.h"

#include <cmath>
#include <cstdio>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace stepc {

using json = nlohmann::json;

Schedule OptionSchedule(const TrainOptions& o) {
  return {o.steps, o.lr, o.warmup, o.min_lr_ratio, o.seed};
}

json ScheduleJson(const Schedule& s) {
  return {{"steps", s.steps},
          {"lr", s.lr},
          {"warmup", s.warmup},
          {"min_lr_ratio", s.min_lr_ratio},
          {"seed", s.seed}};
}

absl::StatusOr<Schedule> ResumedSchedule(const TrainOptions& o, const json& trainer,
                                         const std::string& path, bool lead) {
  Schedule s = OptionSchedule(o);
  if (!trainer.contains("schedule") || !trainer["schedule"].is_object())
    return s;  // written by another trainer: the flags decide
  const json& saved = trainer["schedule"];
  // Each stored field is checked to be within what a run can mean (the file
  // is another program's as much as ours), used or not: the culprit is
  // named, not met later as a NaN loss.
  auto take = [&](const char* flag, auto& value, auto valid, const char* expected) -> absl::Status {
    using T = std::decay_t<decltype(value)>;
    // An integer field must hold an integer of its sign (converting 1e300 or
    // -1 to one is undefined or wraps).
    const bool fits = !saved.contains(flag)         ? false
                      : std::is_floating_point_v<T> ? saved[flag].is_number()
                      : std::is_signed_v<T>         ? saved[flag].is_number_integer()
                                                    : saved[flag].is_number_unsigned();
    if (!fits)
      return absl::DataLossError(absl::StrCat("checkpoint '", path, "': its schedule lacks ",
                                              std::is_floating_point_v<T> ? "a numeric"
                                              : std::is_signed_v<T>       ? "an integer"
                                                                    : "a non-negative integer",
                                              " '", flag, "'"));
    const T stored = saved[flag].get<T>();
    if (!valid(stored))
      return absl::DataLossError(absl::StrCat("checkpoint '", path, "': its schedule's '", flag,
                                              "' is ", saved[flag].dump(), " (expected ", expected,
                                              ")"));
    if (!o.Given(flag)) {
      value = stored;
    } else if (value != stored && lead && !(std::string_view(flag) == "steps" && value == 0)) {
      std::fprintf(stderr,
                   "stepc-run: note: --%s differs from the checkpoint's (%s): the resumed run "
                   "follows the flag\n",
                   flag, saved[flag].dump().c_str());
    }
    return absl::OkStatus();
  };
  constexpr int64_t kMaxSteps = int64_t{1} << 40;
  STEPC_RETURN_IF_ERROR(take(
      "steps", s.steps, [](int64_t v) { return v >= 1 && v <= kMaxSteps; }, "1 to 2^40"));
  STEPC_RETURN_IF_ERROR(take(
      "lr", s.lr, [](double v) { return v >= 0 && v <= 1e4; }, "a learning rate from 0 to 10000"));
  STEPC_RETURN_IF_ERROR(take(
      "warmup", s.warmup, [](int64_t v) { return v >= 0 && v <= kMaxSteps; }, "0 to 2^40"));
  STEPC_RETURN_IF_ERROR(take(
      "min_lr_ratio", s.min_lr_ratio, [](double v) { return v >= 0 && v <= 1; }, "0 to 1"));
  STEPC_RETURN_IF_ERROR(take(
      "seed", s.seed, [](uint64_t) { return true; }, "any"));
  return s;
}

double LearningRate(const Schedule& s, int64_t step) {
  const int64_t steps = s.steps, warmup = s.warmup;
  const double lr = s.lr, min_ratio = s.min_lr_ratio;
  if (warmup > 0 && step <= warmup) return lr * step / warmup;
  if (steps <= warmup) return lr;
  double progress = double(step - warmup) / double(steps - warmup);
  double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return lr * (min_ratio + (1.0 - min_ratio) * cosine);
}

}  // namespace stepc
