// How many threads a CPU step uses: the OpenMP pool the emitted loops and
// OpenBLAS (its OpenMP build) share.

#ifndef STEPC_RUNTIME_CPU_THREADS_H_
#define STEPC_RUNTIME_CPU_THREADS_H_

namespace stepc {

// The ranks the launcher put on this node (OpenMPI, Slurm, MPICH's Hydra,
// torchrun), or 1 without a launcher.
int LocalRanksFromEnvironment();

// The CPUs this process may run on (its affinity mask) divided among the
// local ranks, at least 1. A launcher that already bound each rank to its
// own cores leaves a mask smaller than the machine: that mask is the rank's
// share, undivided.
int DefaultCpuThreads();

// Sets the pool to `threads`: OMP_NUM_THREADS for an OpenMP runtime not yet
// loaded (step.so brings it), and omp_set_num_threads for one already
// loaded. Call before loading a CPU step.
void UseCpuThreads(int threads);

}  // namespace stepc

#endif  // STEPC_RUNTIME_CPU_THREADS_H_
