/* host_device.h - STEPC_HD: a function the CUDA kernels and the host code
 * (CPU kernels, host tests, the emulation) share, inlined on both sides. */
#ifndef STEPC_RUNTIME_KERNELS_HOST_DEVICE_H_
#define STEPC_RUNTIME_KERNELS_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define STEPC_HD __host__ __device__ __forceinline__
#else
#define STEPC_HD static inline
#endif

#endif /* STEPC_RUNTIME_KERNELS_HOST_DEVICE_H_ */
