// The CUDA kernels of random.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/random.cu"
