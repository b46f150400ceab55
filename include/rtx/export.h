// Symbol visibility: the library is built with hidden visibility; RTX_API marks the exported API.
#pragma once

#if defined(_WIN32)
#define RTX_API __declspec(dllexport)
#else
#define RTX_API __attribute__((visibility("default")))
#endif

// Functions usable from both host and CUDA/HIP device code.
#if defined(__CUDACC__)
#define RTX_HOST_DEVICE __host__ __device__
#define RTX_INLINE __host__ __device__ __forceinline__
#elif defined(__HIPCC__)
#define RTX_HOST_DEVICE __host__ __device__
#define RTX_INLINE __host__ __device__ inline __attribute__((always_inline))
#else
#define RTX_HOST_DEVICE
#define RTX_INLINE inline
#endif
