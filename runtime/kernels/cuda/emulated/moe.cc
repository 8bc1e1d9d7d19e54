// The CUDA kernels of moe.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/moe.cu"
