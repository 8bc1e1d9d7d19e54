// The step's communication, predicted before step 1 and measured during
// the run, per set of mesh axes (the report's keys: "axis0",
// "axis0+axis1", ...).
//
// Predicted: a CPU step on several ranks probes its own link before step 1
// (blocking all-gathers of a small and a large message on each mask the
// step communicates over, on the job's own ranks: MPI's shared memory on
// one host, the network across hosts), fits time = latency + wire bytes /
// bandwidth, and charges the report's collectives on that mask
// (collectives_by_axes · latency + collective_wire_bytes_by_axes /
// bandwidth). Nothing is taken as hidden behind compute: MPI moves a
// nonblocking collective's data inside its calls, so on the CPU it is the
// time the step waits. The probe is not cached: it depends on the job.
// Measured: the host seconds the step spent in its collectives' start and
// wait calls (Communicator::times), per step.

#ifndef STEPC_RUNTIME_TRAIN_COMMUNICATION_H_
#define STEPC_RUNTIME_TRAIN_COMMUNICATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/comm/communicator.h"
#include "runtime/session/module.h"

namespace stepc {

// "axis0+axis2" <-> the mask 5; an unknown key is 0.
int AxesMask(const std::string& key);
std::string AxesName(int mask);

struct AxisCommunication {
  std::string axes;
  int mask = 0, ranks = 0;
  int64_t collectives = 0;
  double wire_bytes = 0;           // per rank per step, from the report
  double latency_seconds = 0;      // probed
  double gbps = 0;                 // probed, wire bytes per second / 1e9
  double predicted_seconds = 0;
};

struct CommunicationPrediction {
  bool known = false;
  std::vector<AxisCommunication> axes;
  double seconds = 0;
};

// Collective: every rank calls it (same module, same communicator). A CUDA
// step or one rank predicts nothing (known = false).
absl::StatusOr<CommunicationPrediction> PredictCommunication(Communicator& comm,
                                                             const Module& module);

}  // namespace stepc

#endif  // STEPC_RUNTIME_TRAIN_COMMUNICATION_H_
