#include "runtime/device/local_device.h"

#include <cstdlib>

#include "absl/strings/numbers.h"

namespace stepc {

int LocalRankFromEnvironment() {
  // In order of precedence; the first set and well-formed one wins.
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                          "LOCAL_RANK"}) {
    const char* text = std::getenv(var);
    int rank = -1;
    if (text && absl::SimpleAtoi(text, &rank) && rank >= 0) return rank;
  }
  return -1;
}

int LocalDeviceOrdinal(int devices) {
  if (devices <= 0) return 0;
  int local = LocalRankFromEnvironment();
  return local < 0 ? 0 : local % devices;
}

}  // namespace stepc
