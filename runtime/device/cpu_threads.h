// How a CPU step's libraries are set up before step.so loads them: how many
// threads the OpenMP pool (the emitted loops and OpenBLAS's OpenMP build
// share) has, and which kernels OpenBLAS picks.

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

// OpenBLAS (a DYNAMIC_ARCH build, as Debian's) picks its kernels once, when
// loaded, by the CPU's model number; a CPU newer than the library (0.3.21
// does not know Emerald Rapids, model 207) gets the SSE3 "Prescott" kernels,
// 5-6x slower. So unless the user set OPENBLAS_CORETYPE, set it from the
// CPU's features (AVX512-BF16: Cooperlake; AVX-512: SkylakeX; AVX2+FMA:
// Haswell), as newer OpenBLAS releases do; warns once when an OpenBLAS the
// host loaded earlier (numpy) runs other kernels. Call before loading a CPU
// step.
void ChooseBlasKernels();

}  // namespace stepc

#endif  // STEPC_RUNTIME_CPU_THREADS_H_
