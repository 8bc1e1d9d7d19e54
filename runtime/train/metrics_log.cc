#include "runtime/train/metrics_log.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "runtime/formats/atomic_file.h"

namespace stepc {
namespace {

// The step a metrics line is of ({"step": N, ...}); -1 if none.
int64_t StepOf(const std::string& line) {
  const std::string key = "{\"step\": ";
  if (line.rfind(key, 0) != 0) return -1;
  return std::strtoll(line.c_str() + key.size(), nullptr, 10);
}

}  // namespace

absl::Status MetricsLog::Start() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path_, ec);
  if (fs::is_fifo(status) || fs::is_socket(status))
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write '", path_, "': it is a FIFO or socket (it would block)"));
  const bool regular = fs::is_regular_file(status);
  if (first_step_ > 1 && regular) {
    // Resumed: keep the lines of the steps before it (a run killed after its
    // last checkpoint logged steps the resumed run does again).
    std::ifstream in(path_);
    std::string line, kept;
    while (std::getline(in, line))
      if (const int64_t step = StepOf(line); step >= 0 && step < first_step_)
        kept += line + "\n";
    AtomicFile file;
    std::string error;
    if (!file.Open(path_, error)) return absl::PermissionDeniedError(error);
    file.stream() << kept;
    if (!file.Commit(error)) return absl::DataLossError(error);
    out_.open(path_, std::ios::app);
  } else if (!regular && fs::exists(status)) {
    // A device (/dev/null): written in place, never replaced.
    out_.open(path_, std::ios::app);
  } else {
    out_.open(path_, std::ios::trunc);
  }
  if (!out_)
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write --metrics '", path_, "': ", std::strerror(errno)));
  started_ = true;
  return absl::OkStatus();
}

absl::Status MetricsLog::Write(const std::string& line) {
  if (path_.empty()) return absl::OkStatus();
  if (!started_) {
    absl::Status started = Start();
    if (!started.ok()) return started;
  }
  out_ << line;
  out_.flush();
  if (!out_)
    return absl::DataLossError(absl::StrCat("failed writing --metrics '", path_, "': ",
                                            std::strerror(errno ? errno : EIO)));
  return absl::OkStatus();
}

}  // namespace stepc
