// The CUDA kernels of loss.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/loss.cu"
