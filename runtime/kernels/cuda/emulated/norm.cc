// The CUDA kernels of norm.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/norm.cu"
