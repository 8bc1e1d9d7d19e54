// The --metrics JSON-lines log, streamed: each line is written and flushed
// when its step ends, so a run killed at any point (kill -9 included) leaves
// every logged step, and a resumed run appends to the same file.

#ifndef STEPC_RUNTIME_TRAIN_METRICS_LOG_H_
#define STEPC_RUNTIME_TRAIN_METRICS_LOG_H_

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"

namespace stepc {

class MetricsLog {
 public:
  // Logs to `path` (empty: nothing) for a run whose first step is
  // `first_step`. Nothing is touched until the first line: a run that fails
  // before its first step leaves an existing log as it was.
  MetricsLog(std::string path, int64_t first_step)
      : path_(std::move(path)), first_step_(first_step) {}

  bool enabled() const { return !path_.empty(); }

  // Appends `line` (with its newline) and flushes it. The first line of a
  // fresh run (first step 1) starts the file anew; the first line of a
  // resumed run keeps the existing lines of earlier steps (those of steps
  // the checkpoint did not reach are dropped) and appends. A failed write is
  // an error naming the file.
  absl::Status Write(const std::string& line);

 private:
  absl::Status Start();

  std::string path_;
  int64_t first_step_;
  std::ofstream out_;
  bool started_ = false;
};

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_METRICS_LOG_H_
