/* simd.c - the run-time choice between the AVX2 and the portable codec
 * paths; see simd.h. */
#include "simd.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static int cpu_and_env_level; /* set once by detect() */
static atomic_int level_cap = DSV4_SIMD_AVX512;

static void detect(void)
{
    const char *env = getenv("DSV4_SIMD");
    int level = DSV4_SIMD_PORTABLE;
#if DSV4_HAVE_AVX2_PATHS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        level = DSV4_SIMD_AVX2;
        if (__builtin_cpu_supports("fma"))
            level = __builtin_cpu_supports("avx512f") ? DSV4_SIMD_AVX512 : DSV4_SIMD_AVX2_FMA;
    }
#endif
    cpu_and_env_level = env && strcmp(env, "0") == 0 ? DSV4_SIMD_PORTABLE : level;
}

int dsv4_simd_level(void)
{
    pthread_once(&detect_once, detect);
    const int cap = atomic_load_explicit(&level_cap, memory_order_relaxed);
    return cpu_and_env_level < cap ? cpu_and_env_level : cap;
}

int dsv4_simd_avx2(void) { return dsv4_simd_level() >= DSV4_SIMD_AVX2; }

void dsv4_simd_force_portable(int on) { atomic_store(&level_cap, on ? DSV4_SIMD_PORTABLE : DSV4_SIMD_AVX512); }

void dsv4_simd_cap_level(int level) { atomic_store(&level_cap, level); }
