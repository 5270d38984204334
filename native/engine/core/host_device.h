// MOE_HOST_DEVICE marks an inline function that the CUDA kernels call too (it is empty for the host compiler), so
// an algorithm both backends run is written once.
#pragma once

#if defined(__CUDACC__)
#define MOE_HOST_DEVICE __host__ __device__
#else
#define MOE_HOST_DEVICE
#endif
