/* mma_compat.h - one 16 x 16 x 16 bf16 matrix multiply-accumulate with an
 * fp32 accumulator, for the kernels that run their dots on the matrix units
 * (sparse_attn.h; a k-free 16 x 16 x 32 form read straight from memory for
 * block dots, the MXFP8 wo_a, and an int8 16 x 16 x 32 form with an int32
 * accumulator for the indexer logits are at the end), and the per-vendor
 * layer under it:
 *   - AMD CDNA (gfx90a, gfx940-942, gfx950): one v_mfma_f32_16x16x16_bf16
 *     per call over a wave of 64 lanes;
 *   - NVIDIA sm_80 and later: two mma.sync m16n8k16 (bf16 in, fp32 out)
 *     over a warp of 32 lanes;
 *   - any other target: the same 32-lane fragment layout computed by each
 *     lane with fmaf (correct everywhere, for targets without the units).
 * A kernel sees only WAVE (the lanes one tile spreads over: a compile-time
 * constant, unlike warpSize), an accumulator tile acc16 whose element e of
 * lane `lane` sits at (acc_row, acc_col), and two products that read their
 * operands from shared memory: A is row-major (element (m, k) at
 * a[m * lda + k]); B is given by rows of its transpose in mma_nk (element
 * (k, n) at b[n * ldb + k]: key rows for Q K^T) or row-major in mma_kn
 * (element (k, n) at b[k * ldb + n]: value rows for P V).  lda and ldb are
 * in elements, multiples of 4, and the bases 8-byte aligned.  Every lane of
 * the wave must call, with the same arguments (no divergence).  For
 * register blocking, load_frag_a / load_frag_b take one operand tile into
 * a fragment (A row-major, B as rows of its transpose; there lda, ldb
 * multiples of 8 and bases 16-byte aligned), load_frag_b_kn a row-major B
 * tile (value rows for P V, same alignment) into the same B fragment, and
 * mma_frag multiplies two.
 *
 * The products are exact in fp32 (bf16 x bf16) and the sums are fp32 in
 * the unit's order: within the fp32 dot terms of the kernels' bounds
 * (docs/semantics/attention.md, "Error bound of the attention output"). */
#ifndef DSV4_HIP_MMA_COMPAT_H
#define DSV4_HIP_MMA_COMPAT_H

#include "gpu_compat.h"

#include <stdint.h>

namespace mma {

#if defined(__HIP_DEVICE_COMPILE__) &&                                                                      \
    (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) ||            \
     defined(__gfx950__))
#define DSV4_MMA_MFMA 1
constexpr int WAVE = 64;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define DSV4_MMA_PTX 1
constexpr int WAVE = 32;
#else
constexpr int WAVE = 32; /* the fallback: the PTX layout, lane by lane */
#endif

constexpr int ACC = 256 / WAVE; /* accumulator elements per lane */

/* An accumulator tile: fp32 for the bf16 products (acc16), int32 for the
 * int8 ones (acci16, at the end); the same element layout. */
template <typename T> struct acc_tile {
    T v[ACC];
};
typedef acc_tile<float> acc16;
typedef acc_tile<int> acci16;

template <typename T> __device__ inline void zero(acc_tile<T> &c)
{
#pragma unroll
    for (int e = 0; e < ACC; e++)
        c.v[e] = T(0);
}

/* A lane's elements fall in ACC_ROWS distinct rows and ACC_COLS distinct
 * columns: element e is in the lane's row slot acc_row_slot(e) and column
 * slot acc_col_slot(e), and row_slot_elem(i) (col_slot_elem(j)) is an
 * element in slot i (j), for per-row or per-column values (scales) read
 * once a slot. */
#if defined(DSV4_MMA_MFMA)
/* D lane l: rows 4 (l / 16) + e, column l % 16. */
__device__ inline int acc_row(int lane, int e) { return 4 * (lane >> 4) + e; }
__device__ inline int acc_col(int lane, int /* e */) { return lane & 15; }
constexpr int ACC_ROWS = 4, ACC_COLS = 1;
__device__ inline int acc_row_slot(int e) { return e; }
__device__ inline int acc_col_slot(int /* e */) { return 0; }
__device__ inline int row_slot_elem(int i) { return i; }
__device__ inline int col_slot_elem(int /* j */) { return 0; }
#else
/* m16n8k16 C fragments of n-tiles 0 and 1: lane l holds rows l / 4 and
 * l / 4 + 8, columns 8 nt + 2 (l % 4) + {0, 1}. */
__device__ inline int acc_row(int lane, int e) { return (lane >> 2) + 8 * ((e >> 1) & 1); }
__device__ inline int acc_col(int lane, int e) { return 8 * (e >> 2) + 2 * (lane & 3) + (e & 1); }
constexpr int ACC_ROWS = 2, ACC_COLS = 4;
__device__ inline int acc_row_slot(int e) { return (e >> 1) & 1; }
__device__ inline int acc_col_slot(int e) { return (e & 1) | (e >> 2) << 1; }
__device__ inline int row_slot_elem(int i) { return 2 * i; }
__device__ inline int col_slot_elem(int j) { return (j & 1) | (j >> 1) << 2; }
#endif

__device__ inline uint32_t pack2(uint16_t lo, uint16_t hi) { return (uint32_t)lo | (uint32_t)hi << 16; }

#if defined(DSV4_MMA_MFMA)
typedef short bf16x4 __attribute__((ext_vector_type(4)));
typedef float f32x4 __attribute__((ext_vector_type(4)));

__device__ inline void mfma(acc16 &c, bf16x4 a, bf16x4 b)
{
    f32x4 d = {c.v[0], c.v[1], c.v[2], c.v[3]};
    d = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, d, 0, 0, 0);
    c.v[0] = d[0], c.v[1] = d[1], c.v[2] = d[2], c.v[3] = d[3];
}

/* A lane l: row l % 16, k = 4 (l / 16) .. + 3; B lane l: column l % 16,
 * the same four k. */
__device__ inline bf16x4 load4(const uint16_t *p) { return *reinterpret_cast<const bf16x4 *>(p); }

__device__ inline void mma_nk(acc16 &c, const uint16_t *a, int lda, const uint16_t *b, int ldb)
{
    const int lane = threadIdx.x % WAVE, r = lane & 15, k = 4 * (lane >> 4);
    mfma(c, load4(a + r * lda + k), load4(b + r * ldb + k));
}

/* Operand fragments, for kernels that reuse one A or B tile in several
 * products (register blocking): frag_a of a row-major 16 x 16 A tile,
 * frag_b of a B tile given by the rows of its transpose (as mma_nk). */
struct frag_a {
    bf16x4 v;
};
typedef frag_a frag_b;

__device__ inline void load_frag_a(frag_a &f, const uint16_t *a, int lda)
{
    const int lane = threadIdx.x % WAVE;
    f.v = load4(a + (lane & 15) * lda + 4 * (lane >> 4));
}

__device__ inline void load_frag_b(frag_b &f, const uint16_t *b, int ldb) { load_frag_a(f, b, ldb); }

__device__ inline void mma_frag(acc16 &c, const frag_a &a, const frag_b &b) { mfma(c, a.v, b.v); }

/* A row-major B tile (element (k, n) at b[k * ldb + n]): lane l gathers
 * column l % 16, k = 4 (l / 16) .. + 3, as mma_kn. */
__device__ inline void load_frag_b_kn(frag_b &f, const uint16_t *b, int ldb)
{
    const int lane = threadIdx.x % WAVE, r = lane & 15, k = 4 * (lane >> 4);
    for (int i = 0; i < 4; i++)
        f.v[i] = (short)b[(k + i) * ldb + r];
}

__device__ inline void mma_kn(acc16 &c, const uint16_t *a, int lda, const uint16_t *b, int ldb)
{
    const int lane = threadIdx.x % WAVE, r = lane & 15, k = 4 * (lane >> 4);
    bf16x4 bv;
    for (int i = 0; i < 4; i++)
        bv[i] = (short)b[(k + i) * ldb + r];
    mfma(c, load4(a + r * lda + k), bv);
}
#elif defined(DSV4_MMA_PTX)
/* The m16n8k16 operands of one lane: A rows g and g + 8, k pairs 2 tq and
 * 2 tq + 8 (a[4]); B column 8 nt + g, the same k pairs (b[nt][2]). */
struct frag {
    uint32_t a[4], b[2][2];
};

__device__ inline void load_a(frag &f, const uint16_t *a, int lda, int g, int tq)
{
    f.a[0] = *reinterpret_cast<const uint32_t *>(a + g * lda + 2 * tq);
    f.a[1] = *reinterpret_cast<const uint32_t *>(a + (g + 8) * lda + 2 * tq);
    f.a[2] = *reinterpret_cast<const uint32_t *>(a + g * lda + 2 * tq + 8);
    f.a[3] = *reinterpret_cast<const uint32_t *>(a + (g + 8) * lda + 2 * tq + 8);
}

__device__ inline void issue(acc16 &c, const frag &f)
{
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c.v[4 * nt]), "+f"(c.v[4 * nt + 1]), "+f"(c.v[4 * nt + 2]), "+f"(c.v[4 * nt + 3])
                     : "r"(f.a[0]), "r"(f.a[1]), "r"(f.a[2]), "r"(f.a[3]), "r"(f.b[nt][0]), "r"(f.b[nt][1]));
}

__device__ inline void mma_nk(acc16 &c, const uint16_t *a, int lda, const uint16_t *b, int ldb)
{
    const int lane = threadIdx.x % WAVE, g = lane >> 2, tq = lane & 3;
    frag f;
    load_a(f, a, lda, g, tq);
    for (int nt = 0; nt < 2; nt++) {
        const uint16_t *col = b + (8 * nt + g) * ldb;
        f.b[nt][0] = *reinterpret_cast<const uint32_t *>(col + 2 * tq);
        f.b[nt][1] = *reinterpret_cast<const uint32_t *>(col + 2 * tq + 8);
    }
    issue(c, f);
}

/* Operand fragments (see the MFMA form), loaded with ldmatrix: each lane
 * names one 16-byte row of an 8 x 8 submatrix, so a and b must be 16-byte
 * aligned with lda, ldb multiples of 8. */
struct frag_a {
    uint32_t v[4];
};
typedef frag_a frag_b;

__device__ inline void ldmatrix4(uint32_t (&r)[4], const uint16_t *row)
{
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* The same with .trans: lane T receives, of the 8 x 8 submatrix whose rows
 * the lanes name, the elements (2 (T % 4), T / 4) and (2 (T % 4) + 1, T / 4):
 * of a row-major [k][n] submatrix that is k = 2 tq, 2 tq + 1 at n = g, the
 * m16n8k16 B register. */
__device__ inline void ldmatrix4_trans(uint32_t (&r)[4], const uint16_t *row)
{
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* Submatrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) = a[0..3]. */
__device__ inline void load_frag_a(frag_a &f, const uint16_t *a, int lda)
{
    const int lane = threadIdx.x % WAVE;
    ldmatrix4(f.v, a + (lane & 15) * lda + 8 * (lane >> 4));
}

/* Submatrices (n 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) = b[0][0], b[0][1], b[1][0], b[1][1]. */
__device__ inline void load_frag_b(frag_b &f, const uint16_t *b, int ldb)
{
    const int lane = threadIdx.x % WAVE;
    ldmatrix4(f.v, b + ((lane & 7) + 8 * (lane >> 4)) * ldb + 8 * ((lane >> 3) & 1));
}

/* A row-major B tile (element (k, n) at b[k * ldb + n]), transposed by
 * ldmatrix: submatrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
 * (k 8-15, n 8-15) = b[0][0], b[0][1], b[1][0], b[1][1], the order of
 * load_frag_b.  One instruction where mma_kn gathers eight halves. */
__device__ inline void load_frag_b_kn(frag_b &f, const uint16_t *b, int ldb)
{
    const int lane = threadIdx.x % WAVE;
    ldmatrix4_trans(f.v, b + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ldb + 8 * (lane >> 4));
}

__device__ inline void mma_frag(acc16 &c, const frag_a &a, const frag_b &b)
{
    frag f;
    for (int i = 0; i < 4; i++)
        f.a[i] = a.v[i];
    f.b[0][0] = b.v[0], f.b[0][1] = b.v[1], f.b[1][0] = b.v[2], f.b[1][1] = b.v[3];
    issue(c, f);
}

/* mma_frag with fp16 operands (the same fragment layout, fp32 accumulate):
 * for values that fp16 holds exactly, as the GEMM's e4m3 codes. */
#define DSV4_MMA_F16 1
__device__ inline void mma_frag_f16(acc16 &c, const frag_a &a, const frag_b &b)
{
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c.v[4 * nt]), "+f"(c.v[4 * nt + 1]), "+f"(c.v[4 * nt + 2]), "+f"(c.v[4 * nt + 3])
                     : "r"(a.v[0]), "r"(a.v[1]), "r"(a.v[2]), "r"(a.v[3]), "r"(b.v[2 * nt]), "r"(b.v[2 * nt + 1]));
}

__device__ inline void mma_kn(acc16 &c, const uint16_t *a, int lda, const uint16_t *b, int ldb)
{
    const int lane = threadIdx.x % WAVE, g = lane >> 2, tq = lane & 3;
    frag f;
    load_a(f, a, lda, g, tq);
    for (int nt = 0; nt < 2; nt++) {
        const int n = 8 * nt + g;
        f.b[nt][0] = pack2(b[(2 * tq) * ldb + n], b[(2 * tq + 1) * ldb + n]);
        f.b[nt][1] = pack2(b[(2 * tq + 8) * ldb + n], b[(2 * tq + 9) * ldb + n]);
    }
    issue(c, f);
}
#else
/* Fallback: each lane computes its own accumulator elements, k in order. */
__device__ inline float bf16_f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* B element (k, n) at b[n * n_stride + k * k_stride]. */
__device__ inline void mma_strided(acc16 &c, const uint16_t *a, int lda, const uint16_t *b, int n_stride, int k_stride)
{
    const int lane = threadIdx.x % WAVE;
    for (int e = 0; e < ACC; e++) {
        const int m = acc_row(lane, e), n = acc_col(lane, e);
        for (int k = 0; k < 16; k++)
            c.v[e] = fmaf(bf16_f(a[m * lda + k]), bf16_f(b[n * n_stride + k * k_stride]), c.v[e]);
    }
}

__device__ inline void mma_nk(acc16 &c, const uint16_t *a, int lda, const uint16_t *b, int ldb)
{
    mma_strided(c, a, lda, b, ldb, 1);
}

__device__ inline void mma_kn(acc16 &c, const uint16_t *a, int lda, const uint16_t *b, int ldb)
{
    mma_strided(c, a, lda, b, 1, ldb);
}

/* Fragments of the fallback: where the tile is and its strides (the lanes
 * read it in mma_frag, so it must stay in place until then); element
 * (row or n, k) at p[i * ns + k * ks]. */
struct frag_a {
    const uint16_t *p;
    int ns, ks;
};
typedef frag_a frag_b;

__device__ inline void load_frag_a(frag_a &f, const uint16_t *a, int lda) { f.p = a, f.ns = lda, f.ks = 1; }
__device__ inline void load_frag_b(frag_b &f, const uint16_t *b, int ldb) { f.p = b, f.ns = ldb, f.ks = 1; }
__device__ inline void load_frag_b_kn(frag_b &f, const uint16_t *b, int ldb) { f.p = b, f.ns = 1, f.ks = ldb; }
__device__ inline void mma_frag(acc16 &c, const frag_a &a, const frag_b &b)
{
    mma_strided(c, a.p, a.ns, b.p, b.ns, b.ks);
}
#endif

/* ---- k-free 16 x 16 x 32 -----------------------------------------------------
 * For block dots whose k order is free (the 32 terms of one scale block,
 * summed by the unit): each lane reads its share of a 16 x 32 operand tile
 * straight from memory, no shared staging.  A lane holds K32_CHUNKS chunks
 * of 8 consecutive k: chunk i of row (A) or column (B, given by the rows of
 * its transpose) k32_row(lane, i), codes k32_col(lane) .. + 7.  The kernel
 * decodes chunk i's 8 values into frag32 words 4i .. 4i + 3 (16-bit values
 * in k order, low half first); A and B lanes place the same k in the same
 * slot, so every product pairs matching k.  mma32 adds the 16 x 16 x 32
 * product of two bf16 fragments (mma32_f16: f16, where DSV4_MMA_F16) to an
 * acc16, as two 16-term unit steps.
 *   - AMD CDNA: lane l, row l % 16, codes 8 (l / 16) .. + 7; two MFMA
 *     16x16x16 (codes 0-3, then 4-7);
 *   - NVIDIA: lane l, rows l / 4 and l / 4 + 8, codes 8 (l % 4) .. + 7; per
 *     unit step h the words 2h, 2h + 1 of each chunk (the m16n8k16 k pairs
 *     2 tq and 2 tq + 8);
 *   - elsewhere: the NVIDIA shares, each lane's elements summed in k order
 *     from the other lanes' words (shuffles). */
#if defined(DSV4_MMA_MFMA)
constexpr int K32_CHUNKS = 1;
__device__ inline int k32_row(int lane, int /* i */) { return lane & 15; }
__device__ inline int k32_col(int lane) { return 8 * (lane >> 4); }
#else
constexpr int K32_CHUNKS = 2;
__device__ inline int k32_row(int lane, int i) { return (lane >> 2) + 8 * i; }
__device__ inline int k32_col(int lane) { return 8 * (lane & 3); }
#endif

struct frag32 {
    uint32_t v[4 * K32_CHUNKS];
};

#if defined(DSV4_MMA_MFMA)
__device__ inline void mma32(acc16 &c, const frag32 &a, const frag32 &b)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        bf16x4 x, y;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int w = 2 * h + i / 2, sh = 16 * (i % 2);
            x[i] = (short)(a.v[w] >> sh), y[i] = (short)(b.v[w] >> sh);
        }
        mfma(c, x, y);
    }
}
#elif defined(DSV4_MMA_PTX)
/* Unit step h's operand fragments (load_frag_a / load_frag_b's layout): the
 * words 2h, 2h + 1 of each chunk, the m16n8k16 k pairs 2 tq and 2 tq + 8. */
__device__ inline void step32(int h, const frag32 &a, const frag32 &b, frag_a &fa, frag_b &fb)
{
    fa.v[0] = a.v[2 * h], fa.v[1] = a.v[4 + 2 * h], fa.v[2] = a.v[2 * h + 1], fa.v[3] = a.v[4 + 2 * h + 1];
    fb.v[0] = b.v[2 * h], fb.v[1] = b.v[2 * h + 1], fb.v[2] = b.v[4 + 2 * h], fb.v[3] = b.v[4 + 2 * h + 1];
}

__device__ inline void mma32(acc16 &c, const frag32 &a, const frag32 &b)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        frag_a fa;
        frag_b fb;
        step32(h, a, b, fa, fb);
        mma_frag(c, fa, fb);
    }
}

__device__ inline void mma32_f16(acc16 &c, const frag32 &a, const frag32 &b)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        frag_a fa;
        frag_b fb;
        step32(h, a, b, fa, fb);
        mma_frag_f16(c, fa, fb);
    }
}
#else
#if defined(__CUDACC__) && !defined(__HIP__)
#define DSV4_MMA_SHFL(v, src) __shfl_sync(0xffffffffu, (v), (src), WAVE)
#else
#define DSV4_MMA_SHFL(v, src) __shfl((v), (src), WAVE)
#endif
/* Element e's row (column) is in chunk (e >> 1) & 1 (e >> 2) of the lanes
 * 4 (row % 8) + tq: the chunk is the same for every lane, so each shuffle
 * reads one register. */
__device__ inline void mma32(acc16 &c, const frag32 &a, const frag32 &b)
{
    const int lane = threadIdx.x % WAVE;
    for (int e = 0; e < ACC; e++) {
        const int m = acc_row(lane, e), n = acc_col(lane, e), ca = (e >> 1) & 1, cb = e >> 2;
        for (int tq = 0; tq < 4; tq++)
            for (int w = 0; w < 4; w++) {
                const uint32_t x = DSV4_MMA_SHFL(a.v[4 * ca + w], 4 * (m % 8) + tq);
                const uint32_t y = DSV4_MMA_SHFL(b.v[4 * cb + w], 4 * (n % 8) + tq);
                c.v[e] = fmaf(bf16_f((uint16_t)x), bf16_f((uint16_t)y), c.v[e]);
                c.v[e] = fmaf(bf16_f((uint16_t)(x >> 16)), bf16_f((uint16_t)(y >> 16)), c.v[e]);
            }
    }
}
#undef DSV4_MMA_SHFL
#endif

/* ---- int8 -------------------------------------------------------------------
 * One 16 x 16 x 32 int8 product with an int32 accumulator tile acci16 (the
 * layout of acc16: element e of lane `lane` at (acc_row, acc_col)), for the
 * indexer's MXFP4 dots (hip/indexer_logits.h).  Operands int8 in shared
 * memory: A row-major (element (m, k) at a[m * lda + k]), B by the rows of
 * its transpose (element (k, n) at b[n * ldb + k]); lda, ldb in bytes,
 * multiples of 16, bases 16-byte aligned.  Integer sums are exact, so the
 * units' order does not matter and every target gives the same bits:
 *   - NVIDIA sm_80 and later: two mma.sync m16n8k32 (s8 in, s32 out);
 *   - AMD gfx940-gfx950: one v_mfma_i32_16x16x32_i8; gfx90a: two
 *     v_mfma_i32_16x16x16i8 (k 0-15, then 16-31);
 *   - any other target: each lane its own elements. */
#if defined(DSV4_MMA_MFMA)
typedef int i32x4 __attribute__((ext_vector_type(4)));
#if defined(__gfx90a__)
/* lane l: row (A) or column (B) l % 16, k = 4 (l / 16) .. + 3 and the same + 16 */
struct frag_i8 {
    int v[2];
};

__device__ inline void load_frag_i8(frag_i8 &f, const int8_t *p, int ld)
{
    const int lane = threadIdx.x % WAVE;
    const int8_t *row = p + (lane & 15) * ld + 4 * (lane >> 4);
    f.v[0] = *reinterpret_cast<const int *>(row);
    f.v[1] = *reinterpret_cast<const int *>(row + 16);
}

__device__ inline void mma_i8(acci16 &c, const frag_i8 &a, const frag_i8 &b)
{
    i32x4 d = {c.v[0], c.v[1], c.v[2], c.v[3]};
    d = __builtin_amdgcn_mfma_i32_16x16x16i8(a.v[0], b.v[0], d, 0, 0, 0);
    d = __builtin_amdgcn_mfma_i32_16x16x16i8(a.v[1], b.v[1], d, 0, 0, 0);
    c.v[0] = d[0], c.v[1] = d[1], c.v[2] = d[2], c.v[3] = d[3];
}
#else
/* lane l: row (A) or column (B) l % 16, k = 8 (l / 16) .. + 7 */
struct frag_i8 {
    long v;
};

__device__ inline void load_frag_i8(frag_i8 &f, const int8_t *p, int ld)
{
    const int lane = threadIdx.x % WAVE;
    f.v = *reinterpret_cast<const long *>(p + (lane & 15) * ld + 8 * (lane >> 4));
}

__device__ inline void mma_i8(acci16 &c, const frag_i8 &a, const frag_i8 &b)
{
    i32x4 d = {c.v[0], c.v[1], c.v[2], c.v[3]};
    d = __builtin_amdgcn_mfma_i32_16x16x32_i8(a.v, b.v, d, 0, 0, 0);
    c.v[0] = d[0], c.v[1] = d[1], c.v[2] = d[2], c.v[3] = d[3];
}
#endif
/* Both operands are read the same way (B given by the rows of its transpose). */
__device__ inline void load_frag_i8a(frag_i8 &f, const int8_t *a, int lda) { load_frag_i8(f, a, lda); }
__device__ inline void load_frag_i8b(frag_i8 &f, const int8_t *b, int ldb) { load_frag_i8(f, b, ldb); }
#elif defined(DSV4_MMA_PTX)
/* m16n8k32 s8: A rows g, g + 8 and k 4 tq .. + 3, 16 + 4 tq .. + 3 (v[0..3]
 * = a0..a3); B of n-tile nt: column 8 nt + g, the same k (v[2 nt], v[2 nt + 1]). */
struct frag_i8 {
    uint32_t v[4];
};

__device__ inline void load_frag_i8a(frag_i8 &f, const int8_t *a, int lda)
{
    const int lane = threadIdx.x % WAVE, g = lane >> 2, tq = lane & 3;
    f.v[0] = *reinterpret_cast<const uint32_t *>(a + g * lda + 4 * tq);
    f.v[1] = *reinterpret_cast<const uint32_t *>(a + (g + 8) * lda + 4 * tq);
    f.v[2] = *reinterpret_cast<const uint32_t *>(a + g * lda + 16 + 4 * tq);
    f.v[3] = *reinterpret_cast<const uint32_t *>(a + (g + 8) * lda + 16 + 4 * tq);
}

__device__ inline void load_frag_i8b(frag_i8 &f, const int8_t *b, int ldb)
{
    const int lane = threadIdx.x % WAVE, g = lane >> 2, tq = lane & 3;
    for (int nt = 0; nt < 2; nt++) {
        const int8_t *col = b + (8 * nt + g) * ldb;
        f.v[2 * nt] = *reinterpret_cast<const uint32_t *>(col + 4 * tq);
        f.v[2 * nt + 1] = *reinterpret_cast<const uint32_t *>(col + 16 + 4 * tq);
    }
}

__device__ inline void mma_i8(acci16 &c, const frag_i8 &a, const frag_i8 &b)
{
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+r"(c.v[4 * nt]), "+r"(c.v[4 * nt + 1]), "+r"(c.v[4 * nt + 2]), "+r"(c.v[4 * nt + 3])
                     : "r"(a.v[0]), "r"(a.v[1]), "r"(a.v[2]), "r"(a.v[3]), "r"(b.v[2 * nt]), "r"(b.v[2 * nt + 1]));
}
#else
/* Fallback: where the tile is (read in mma_i8, so it must stay in place). */
struct frag_i8 {
    const int8_t *p;
    int ld;
};

__device__ inline void load_frag_i8a(frag_i8 &f, const int8_t *a, int lda) { f.p = a, f.ld = lda; }
__device__ inline void load_frag_i8b(frag_i8 &f, const int8_t *b, int ldb) { f.p = b, f.ld = ldb; }

__device__ inline void mma_i8(acci16 &c, const frag_i8 &a, const frag_i8 &b)
{
    const int lane = threadIdx.x % WAVE;
    for (int e = 0; e < ACC; e++) {
        const int8_t *x = a.p + acc_row(lane, e) * a.ld, *y = b.p + acc_col(lane, e) * b.ld;
        for (int k = 0; k < 32; k++)
            c.v[e] += (int)x[k] * (int)y[k];
    }
}
#endif

} // namespace mma

#endif
