// The CUDA kernels of optimizer.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/optimizer.cu"
