/* simd.h - whether the hand-vectorized (AVX2) codec paths run.  They give
 * the same bytes as the portable paths (tests/test_simd.c checks both);
 * the portable ones stay the definition and run where AVX2 is missing,
 * under DSV4_SIMD=0, or when a test forces them.  Private to ref/ and ops/. */
#ifndef DSV4_SIMD_H
#define DSV4_SIMD_H

/* The AVX2 paths are compiled in (x86-64 with gcc >= 8 or clang >= 14). */
#if defined(__x86_64__) && !defined(DSV4_NO_AVX2_PATHS) && \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 8))
#define DSV4_HAVE_AVX2_PATHS 1
#else
#define DSV4_HAVE_AVX2_PATHS 0
#endif

/* 1 when the AVX2 paths are to run: compiled in, the CPU has AVX2, the
 * environment does not set DSV4_SIMD=0 (read once), and no test forced
 * the portable paths. */
int dsv4_simd_avx2(void);

/* The widest vector level the paths may use, under the same rules as
 * dsv4_simd_avx2 (DSV4_SIMD=0 and the test hooks give DSV4_SIMD_PORTABLE):
 * AVX2 alone (the codecs: no FMA, so that fp32 rounding matches the
 * portable lanes), AVX2 with FMA, or AVX-512F (with AVX2 and FMA).  Only
 * code whose results cannot depend on the level uses FMA or AVX-512 (the
 * wo_a bmm's exact block dots, docs/semantics/gemm.md A10.3). */
enum { DSV4_SIMD_PORTABLE = 0, DSV4_SIMD_AVX2 = 1, DSV4_SIMD_AVX2_FMA = 2, DSV4_SIMD_AVX512 = 3 };
int dsv4_simd_level(void);

/* Test hook: 1 forces the portable paths, 0 restores the default. */
void dsv4_simd_force_portable(int on);

/* Test hook: caps dsv4_simd_level at level (DSV4_SIMD_AVX512 restores the
 * default), so that a test can run each level the CPU has. */
void dsv4_simd_cap_level(int level);

#endif
