// The CUDA kernels of attention.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/attention.cu"
