// The CUDA kernels of index.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/index.cu"
