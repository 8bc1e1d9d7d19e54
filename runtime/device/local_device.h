// The GPU a rank uses, decided once for every layer that touches a GPU (the
// CUDA device layer and the NCCL communicator), so both always agree.

#ifndef STEPC_RUNTIME_LOCAL_DEVICE_H_
#define STEPC_RUNTIME_LOCAL_DEVICE_H_

namespace stepc {

// This process's rank among the ranks on its node, as the launcher says
// (OpenMPI's mpirun, Slurm's srun, MPICH's Hydra, torchrun), or -1 when no
// launcher variable is set.
int LocalRankFromEnvironment();

// The device ordinal of this process: its local rank modulo the `devices`
// visible (0 without a launcher).
int LocalDeviceOrdinal(int devices);

}  // namespace stepc

#endif  // STEPC_RUNTIME_LOCAL_DEVICE_H_
