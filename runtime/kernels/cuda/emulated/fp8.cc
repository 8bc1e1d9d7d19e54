// The CUDA kernel of fp8.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/fp8.cu"
