// The CUDA kernels of layout.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/layout.cu"
