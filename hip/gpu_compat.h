/* gpu_compat.h - one kernel source for AMD (hipcc / clang -x hip) and NVIDIA
 * (nvcc -x cu).  Debian's HIP 5.2 headers do not compile against CUDA 13
 * (45 errors in nvidia_hip_runtime_api.h: changed cudaMemAdvise, cudaDeviceProp
 * members, cuCtxCreate, graph edge APIs), so under nvcc the few hip runtime
 * names the backend uses are mapped to CUDA here.
 *
 * Portability rules for kernels (the warp is 64 lanes on CDNA, 32 on NVIDIA):
 *   - read warpSize at run time only (64 on CDNA, 32 on NVIDIA; not a
 *     compile-time constant on ROCm 7 / clang 22);
 *   - size shared arrays for the worst case (GPU_MAX_WARPS);
 *   - never hard-code 32-lane masks or 0x1f; keep shuffles out of divergent
 *     branches (CUDA's full-mask shuffle needs every lane). */
#ifndef DSV4_GPU_COMPAT_H
#define DSV4_GPU_COMPAT_H

#if defined(__CUDACC__) && !defined(__HIP__)
#include <cuda_runtime.h>

#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipStream_t cudaStream_t
#define hipEvent_t cudaEvent_t
#define hipDeviceProp_t cudaDeviceProp
#define hipMemcpyKind cudaMemcpyKind
#define hipMemcpyHostToHost cudaMemcpyHostToHost
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyDefault cudaMemcpyDefault
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetErrorString cudaGetErrorString
#define hipGetErrorName cudaGetErrorName
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define hipDeviceAttributeSharedMemPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
/* more than 48 KiB of dynamic shared memory a block is opt-in, per kernel */
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
/* CUDA declares the mask-less __shfl_xor only for sm < 70; every lane of
 * the warp takes part (see the rules above). */
#define __shfl_xor(...) __shfl_xor_sync(0xffffffffu, __VA_ARGS__)
/* Whether p holds on any lane of the warp; every lane takes part. */
#define gpu_any(p) __any_sync(0xffffffffu, (p))
#define GPU_PLATFORM "cuda"
/* __launch_bounds__(threads, blocks): CUDA's second argument is the blocks
 * to keep resident per SM, a register budget nvcc can meet. */
#define GPU_LAUNCH_BOUNDS_OCC(threads, blocks) __launch_bounds__(threads, blocks)
#else
#include <hip/hip_runtime.h>
#define GPU_PLATFORM "amd"
#define gpu_any(p) __any(p)
/* HIP reads the second argument as waves per execution unit, which the
 * shared memory of a large block cannot reach on gfx942/gfx950 (clang 19+
 * fails the build with -Wpass-failed); AMD gets the thread bound only. */
#define GPU_LAUNCH_BOUNDS_OCC(threads, blocks) __launch_bounds__(threads)
#endif

/* Orders a wave's shared-memory writes before its lanes' later reads (a
 * barrier of one warp / wave, not of the block): CUDA's __syncwarp; on AMD
 * a wave runs in lockstep, so a workgroup-scope fence pair around the wave
 * barrier (which keeps the compiler from moving LDS accesses across it). */
#if defined(__CUDACC__) && !defined(__HIP__)
#define gpu_wave_sync() __syncwarp()
#else
#define gpu_wave_sync()                                                                                             \
    do {                                                                                                            \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");                                                      \
        __builtin_amdgcn_wave_barrier();                                                                            \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");                                                      \
    } while (0)
#endif

/* Relaxed 64-bit atomic load and store at device (agent) scope, for words
 * other blocks of the same launch write or spin on (the look-back scan's
 * status words, idx_common.h).  An aligned 64-bit atomic access is
 * single-copy atomic (a reader sees the whole old or the whole new word)
 * and is served by the device-coherent level (L2), never by a stale L1:
 * NVIDIA sm_70+ ld/st.relaxed.gpu (before sm_70, volatile, which also
 * bypasses L1); AMD the clang HIP atomic builtins at agent scope.  No
 * ordering of other memory accesses is implied. */
#if defined(__CUDACC__) && !defined(__HIP__)
__device__ inline unsigned long long gpu_load_relaxed_u64(const unsigned long long *p)
{
#if __CUDA_ARCH__ >= 700
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return *(const volatile unsigned long long *)p;
#endif
}
__device__ inline void gpu_store_relaxed_u64(unsigned long long *p, unsigned long long v)
{
#if __CUDA_ARCH__ >= 700
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
#else
    *(volatile unsigned long long *)p = v;
#endif
}
#else
__device__ inline unsigned long long gpu_load_relaxed_u64(const unsigned long long *p)
{
    return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
__device__ inline void gpu_store_relaxed_u64(unsigned long long *p, unsigned long long v)
{
    __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
#endif

/* 16 bytes from global to shared memory without a register stage: on
 * NVIDIA sm_80+ cp.async (L2 only, .cg), zero-filled without reading src
 * where !fill (src must still be a valid address); elsewhere a plain copy.
 * gpu_async_wait_all: this thread's copies have landed; a barrier after it
 * makes every thread's visible to the block.  Both addresses 16-byte aligned. */
__device__ inline void gpu_async_copy16(void *dst, const void *src, bool fill)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" : : "r"(d), "l"(src), "r"(fill ? 16 : 0) : "memory");
#else
    *reinterpret_cast<uint4 *>(dst) = fill ? *reinterpret_cast<const uint4 *>(src) : make_uint4(0, 0, 0, 0);
#endif
}

__device__ inline void gpu_async_wait_all()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" : : : "memory");
#endif
}

/* Worst case over AMD (wave64) and NVIDIA (warp32): 1024 threads / 32. */
#define GPU_MAX_WARPS 32

#endif
