/* simd.c - the run-time choice between the AVX2 and the portable codec
 * paths; see simd.h. */
#include "simd.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static int cpu_and_env_allow; /* set once by detect() */
static atomic_int forced_portable;

static void detect(void)
{
    const char *env = getenv("DSV4_SIMD");
    int ok = !(env && strcmp(env, "0") == 0);
#if DSV4_HAVE_AVX2_PATHS
    __builtin_cpu_init();
    ok = ok && __builtin_cpu_supports("avx2");
#else
    ok = 0;
#endif
    cpu_and_env_allow = ok;
}

int dsv4_simd_avx2(void)
{
    pthread_once(&detect_once, detect);
    return cpu_and_env_allow && !atomic_load_explicit(&forced_portable, memory_order_relaxed);
}

void dsv4_simd_force_portable(int on) { atomic_store(&forced_portable, on != 0); }
