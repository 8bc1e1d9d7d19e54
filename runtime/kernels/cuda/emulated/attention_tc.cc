// The CUDA kernels of attention_tc.cu compiled for the host (emulation.h).
#include "runtime/kernels/cuda/attention_tc.cu"
