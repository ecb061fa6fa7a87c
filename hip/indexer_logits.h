/* indexer_logits.h - the paged MXFP4 MQA logits kernel and the per-row
 * block top-k shared by paged_mxfp4_mqa_logits, rocm_mxfp4_sparse_attn_indexer
 * and rocm_mxfp4_sparse_mqa_indexer (docs/semantics/indexer.md Q6.1-Q6.4;
 * reference ref/indexer.c, harness/ops_indexer.c).
 *
 * Logits (logits_kernel): one 256-thread block per row and run of tiles of
 * 64 keys.  The row's H query heads (H <= 64) and each tile's keys are
 * decoded from MXFP4 into shared memory as int8 (2 x the e2m1 value: 0,
 * +-1, +-2, +-3, +-4, +-6, +-8, +-12), and the four 32-dim block dots of
 * every (head, key) are exact integer sums on the matrix units (int8 in,
 * int32 out: mma_compat.h).  s_h then follows the fp32 model of
 * docs/semantics/indexer.md Q6.2 step 1 (faithful mode): each K = 64 chunk
 * (two blocks) summed exactly and rounded once to fp32, the second added to
 * it with one more rounding, either in double as ref/indexer_logits.c
 * chunk_dot does (score_exact) or, where the operands' block exponents are
 * close, as one exact integer scaled once (score_fast, the same bits; its
 * proof is beside it).  The head reduction is docs/semantics/indexer.md Q6.2
 * step 3's fold (two FMA chains over the MFMA lane order, fl(A0 + A1)) for
 * 32 and 64 heads, one FMA chain in head order otherwise.
 *
 * Top-k: one block per row, radix select over order-preserving uint32 keys
 * of the fp32 scores (NaN above +inf, as torch.topk), four 8-bit passes with
 * a shared histogram, then an order-preserving compaction: every key above
 * the k-th, then the ties at the k-th in slot order (deterministic); -1
 * pads rows with fewer than k candidates. */
#ifndef DSV4_HIP_INDEXER_LOGITS_H
#define DSV4_HIP_INDEXER_LOGITS_H

#include "idx_common.h"
#include "indexer_common.h"
#include "mma_compat.h"

namespace idxr {

enum {
    KT = 64,            /* keys a tile */
    LG_THREADS = 256,
    LG_WAVES = LG_THREADS / mma::WAVE,
    MAX_H = 64,
    KSTRIDE = D + 16,   /* int8 row stride of the q and key tiles (16-byte aligned rows) */
    SSTRIDE = KT + 4,   /* the score tile sS[head][key]: a fold round (keys x chains 4 heads apart) on 32 banks */
    TOPK_THREADS = 512,
    TOPK_BATCH = 8,     /* slots a thread reads before counting them (block_topk) */
    FAST_SPREAD = 9,    /* the fast epilogue's bound on spread_q + spread_k (below) */
};

/* 2^e as a double, e in [-256, 254]. */
__device__ inline double pow2d(int e)
{
    return __longlong_as_double((long long)(e + 1023) << 52);
}

/* 2^e as a float, e in [-149, 127] (subnormal below -126). */
__device__ inline float pow2f(int e)
{
    return e >= -126 ? __int_as_float((e + 127) << 23) : __int_as_float(1 << (e + 149));
}

__device__ inline float relu_f(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }

/* hr(i) of docs/semantics/indexer.md Q6.2 step 3: the MFMA lane order of the head fold. */
__device__ inline int fold_head(int i)
{
    return (i & 1) + 2 * ((i >> 1) & 1) + 8 * ((i >> 2) & 1) + 16 * ((i >> 3) & 1);
}

struct lg_args {
    const uint8_t *q, *qs;        /* [rows, H, 64], [rows, H, 4] */
    const float *w;               /* [rows, H] */
    const uint8_t *cache;         /* [pages, page bytes] */
    const int32_t *bt, *ctx, *qsl, *re;
    const int32_t *cand;          /* [rows, ncand] or NULL (dense columns) */
    long long rows, width, maxb, B, ncand, C;
    int H;
    layout l;
    int c_shift; /* log2 C, -1 unless a power of two (set with C) */
};

/* The request of row r (largest b with qsl[b] <= r) and its end:
 * min(row_ends[r], context_lens[b]), 0 when context_len <= 0 (docs/semantics/indexer.md Q6.2
 * "Masking"; ref/indexer.c dsv4_idx_row_end). */
__device__ inline long long row_end(const lg_args &a, long long r, long long *req)
{
    const long long b = idx::request_of_row(a.qsl, a.B, r);
    *req = b;
    const long long ctx = a.ctx[b];
    if (ctx <= 0)
        return 0;
    long long e = a.re[r] < ctx ? a.re[r] : ctx;
    return e < 0 ? 0 : e;
}

/* Column of compact slot t of row r, or -1: dense t itself; with a
 * candidate list id*C + t%C for 0 <= id < ceil(end/C), below end (docs/semantics/indexer.md Q6.3). */
__device__ inline long long slot_col(const lg_args &a, long long r, long long t, long long end)
{
    if (!a.cand)
        return t < end ? t : -1;
    if (t >= a.ncand * a.C) /* the last tile's tail */
        return -1;
    const long long blk = a.c_shift >= 0 ? t >> a.c_shift : t / a.C, id = a.cand[r * a.ncand + blk];
    const long long col = id * a.C + (t - blk * a.C); /* id < ceil(end / C) is id * C < end */
    return id >= 0 && id * a.C < end && col < end ? col : -1;
}

/* Exponent statistics of one operand of the dots (a head row of q, or a
 * key) over its four MX blocks, for the fast epilogue (score_fast): emin,
 * the smallest scale byte of a non-zero block (127 when every block is
 * zero), and spread, the largest such byte minus emin, made larger than any
 * screen passes (4 FAST_SPREAD) when a block's scale is the NaN byte 0xFF. */
struct opstat {
    int spread, emin;
};

/* One operand as its four MX blocks sit on four neighbouring lanes (lane %
 * 4 = block): decodes this lane's block (16 bytes v, scale byte sb) into
 * dst as 32 int8 (2 x e2m1), keeps sb in *scale and the block's exponent
 * shift in *shift (sb - emin for a non-zero block; 0 for a zero one, whose
 * dots are 0 whatever the shift), and returns the operand's opstat on all
 * four lanes.  Every lane of the wave calls (xor shuffles over the four). */
__device__ inline opstat decode_operand(uint4 v, uint32_t sb, int8_t *dst, uint8_t *scale, uint8_t *shift)
{
    const uint2 d0 = decode8(v.x), d1 = decode8(v.y), d2 = decode8(v.z), d3 = decode8(v.w);
    uint4 *o = reinterpret_cast<uint4 *>(dst);
    o[0] = make_uint4(d0.x, d0.y, d1.x, d1.y);
    o[1] = make_uint4(d2.x, d2.y, d3.x, d3.y);
    const bool nz = ((v.x | v.y | v.z | v.w) & 0x77777777u) != 0;
    int lo = nz ? (int)sb : 255, hi = nz ? (int)sb : 0, wild = sb == 255u;
    for (int off = 1; off < 4; off <<= 1) {
        lo = min(lo, __shfl_xor(lo, off));
        hi = max(hi, __shfl_xor(hi, off));
        wild |= __shfl_xor(wild, off);
    }
    if (lo > hi) /* every block zero */
        lo = hi = 127;
    *scale = (uint8_t)sb;
    *shift = (uint8_t)(nz ? (int)sb - lo : 0);
    opstat st;
    st.spread = wild ? 4 * FAST_SPREAD : hi - lo;
    st.emin = lo;
    return st;
}

/* The fp32 score s of docs/semantics/indexer.md Q6.2 step 1 (faithful: each
 * K = 64 chunk, two blocks, exact and rounded once, the second added with one
 * more rounding) from the block dots, in double as ref/indexer_logits.c
 * chunk_dot does (the block values isum * 2^(sq + sk - 256) exact; an e8m0
 * NaN scale gives NaN).  For any scales. */
__device__ inline float score_exact(const int isum[NB], const uint8_t *sq, const uint8_t *sk)
{
    double v[NB];
    for (int b = 0; b < NB; b++)
        v[b] = (sq[b] == 255 || sk[b] == 255) ? __longlong_as_double(0x7FF8000000000000LL)
                                               : (double)isum[b] * pow2d((int)sq[b] + (int)sk[b] - 256);
    const float c0 = __double2float_rn(__dadd_rn(v[0], v[1]));
    return __double2float_rn(__dadd_rn((double)c0, __dadd_rn(v[2], v[3])));
}

/* The fast epilogue: relu(s) of the same s, where both operands pass the
 * screen spread_q + spread_k <= FAST_SPREAD and -149 <= E <= 100, E =
 * emin_q + emin_k - 256.  Block b's value is isum_b * 2^(E + d_b), d_b =
 * shift_q + shift_k <= 9 (a zero block's isum is 0), so
 *     S = sum_b isum_b << d_b,  |S| <= 4 * 4608 * 2^9 < 2^24
 * (|isum_b| <= 32 * 12 * 12) is exact in int32 and in fp32, and so is every
 * partial sum scaled by 2^E: a multiple of 2^E >= 2^-149 below 2^(24 + E)
 * <= 2^124.  Both chunk roundings of the exact model then round exact
 * values, and s = S * 2^E with no rounding: the bits of score_exact; relu
 * is taken on S (2^E > 0; S = 0 gives +0 as relu_f does).  dsum: the four
 * d_b as bytes (shift_q + shift_k packed, no carries); scale = 2^E (fq * fk,
 * exact).  The shifts use the low five bits of their byte (a funnel shift
 * on NVIDIA reads only those). */
__device__ inline uint32_t shl_low5(uint32_t x, uint32_t n)
{
#if defined(__CUDACC__) && !defined(__HIP__)
    return __funnelshift_l(0u, x, n);
#else
    return x << (n & 31u);
#endif
}

__device__ inline float score_fast_relu(const int isum[NB], uint32_t dsum, float scale)
{
    uint32_t S = shl_low5((uint32_t)isum[0], dsum);
    S += shl_low5((uint32_t)isum[1], dsum >> 8);
    S += shl_low5((uint32_t)isum[2], dsum >> 16);
    S += shl_low5((uint32_t)isum[3], dsum >> 24);
    return __fmul_rn(__int2float_rn(max((int)S, 0)), scale);
}

/* One block per (row, run of tiles of KT keys).  The row's q (H <= 64 heads)
 * is decoded once into shared memory as int8 (2 x e2m1); each tile's keys
 * are read from the cache into registers during the tile before (the block
 * table, then the 16-byte MX block of each lane), decoded to int8, and the
 * H x 64 scores formed as 16 x 16 tiles of four block dots on the matrix
 * units (mma_i8, one per 32-dim block), with the fast or the exact epilogue
 * (score_fast_relu, score_exact: the same bits; a wave takes the fast one
 * when every lane's elements pass its screen), relu applied there.
 * The head reduction is docs/semantics/indexer.md Q6.2 step 3's fold (two
 * FMA chains over the MFMA lane order, fl(A0 + A1)) for 32 and 64 heads,
 * one FMA chain in head order otherwise.  The result is the faithful
 * reference to the bit (up to the MFMA-internal rounding the reference
 * itself leaves open), and within the ideal policy's (128 + H + 2) u bound
 * by construction.  Three blocks an SM on NVIDIA (80 registers, a few
 * spilled): the 64-row decode line ran 0.243 ms against 0.258 at two
 * (hip/README.md, third session). */
static __global__ void GPU_LAUNCH_BOUNDS_OCC(LG_THREADS, 3) logits_kernel(lg_args a, float *__restrict__ logits,
                                                                    long long ntiles, int tiles_per_block)
{
    __shared__ __align__(16) int8_t q8[MAX_H][KSTRIDE];
    __shared__ __align__(16) int8_t k8[KT][KSTRIDE];
    __shared__ uint8_t qsc[MAX_H][NB], ksc[KT][NB];       /* scale bytes */
    __shared__ __align__(4) uint8_t qsh[MAX_H][NB];       /* block shifts, read as a word */
    __shared__ __align__(4) uint8_t ksh[KT][NB];
    __shared__ opstat qst[MAX_H], kst[KT];
    __shared__ float qf[MAX_H], kf[KT], wsh[MAX_H];     /* 2^(emin_q - 127), 2^(emin_k - 129) */
    __shared__ float sS[MAX_H][SSTRIDE];
    __shared__ long long cols[2][KT];                    /* by tile parity: the fold of one tile
                                                            overlaps the next tile's decode */
    const long long r = blockIdx.x;
    const int tid = (int)threadIdx.x, H = a.H, HT = (H + 15) / 16;
    long long req;
    const long long end = row_end(a, r, &req);
    long long t0 = (long long)blockIdx.y * tiles_per_block, t1 = t0 + tiles_per_block;
    t1 = t1 < ntiles ? t1 : ntiles;
    if (!a.cand) { /* nothing at or past the row end */
        const long long te = (end + KT - 1) / KT;
        t1 = t1 < te ? t1 : te;
    }
    if (t0 >= t1)
        return;
    /* q of the row: one 16-byte MX block a lane, heads up to a multiple of 16 (zeros past H) */
    for (int i = tid; i < HT * 16 * NB; i += LG_THREADS) {
        const int h = i / NB, b = i % NB;
        uint4 v = make_uint4(0, 0, 0, 0);
        uint32_t sb = 127;
        if (h < H) {
            v = *reinterpret_cast<const uint4 *>(a.q + ((r * H + h) * TB + b * 16));
            sb = a.qs[(r * H + h) * NB + b];
        }
        const opstat st = decode_operand(v, sb, &q8[h][b * 32], &qsc[h][b], &qsh[h][b]);
        if (b == 0) {
            qst[h] = st;
            qf[h] = pow2f(st.emin - 127);
        }
    }
    for (int h = tid; h < H; h += LG_THREADS)
        wsh[h] = a.w[r * H + h];
    /* this lane's key block of a tile: key tid / 4, block tid % 4 */
    const int ki = tid / NB, kb = tid % NB;
    uint4 kv = make_uint4(0, 0, 0, 0);
    uint32_t ksb = 127;
    long long kcol = -1;
    auto fetch = [&](long long t) {
        kcol = slot_col(a, r, t * KT + ki, end);
        kv = make_uint4(0, 0, 0, 0);
        ksb = 127;
        if (kcol >= 0) {
            const long long page = a.bt[req * a.maxb + page_of(a.l, kcol)], p = entry_of(a.l, kcol);
            const uint8_t *pg = a.cache + page * a.l.P * ENTRY;
            kv = *reinterpret_cast<const uint4 *>(pg + value_off(a.l, p, kb * 16));
            ksb = pg[scale_off(a.l, p, kb)];
        }
    };
    fetch(t0);
    const int wave = tid / mma::WAVE, lane = tid % mma::WAVE;
    for (long long t = t0; t < t1; t++) {
        const opstat st = decode_operand(kv, ksb, &k8[ki][kb * 32], &ksc[ki][kb], &ksh[ki][kb]);
        if (kb == 0) {
            kst[ki] = st;
            kf[ki] = pow2f(st.emin - 129); /* the 1/4 of the two x2 codes */
            cols[t & 1][ki] = kcol;
        }
        __syncthreads();
        if (t + 1 < t1)
            fetch(t + 1); /* in flight during this tile's products */
        /* wave w: the 16 keys k0.. of column group w % 4 (their operand fragments
         * loaded once) against head groups w / 4, w / 4 + LG_WAVES / 4, ... */
        const int k0 = (wave % (KT / 16)) * 16;
        mma::frag_i8 fk[NB];
        for (int b = 0; b < NB; b++)
            mma::load_frag_i8b(fk[b], &k8[k0][b * 32], KSTRIDE);
        int ks = 0, klo = 255, khi = 0; /* this lane's keys: the screen's key half */
        for (int e = 0; e < mma::ACC; e++) {
            const opstat o = kst[k0 + mma::acc_col(lane, e)];
            ks = max(ks, o.spread), klo = min(klo, o.emin), khi = max(khi, o.emin);
        }
        for (int h0 = (wave / (KT / 16)) * 16; h0 < HT * 16; h0 += (LG_WAVES / (KT / 16)) * 16) {
            mma::acci16 acc[NB];
            for (int b = 0; b < NB; b++) {
                mma::frag_i8 fq;
                mma::load_frag_i8a(fq, &q8[h0][b * 32], KSTRIDE);
                mma::zero(acc[b]);
                mma::mma_i8(acc[b], fq, fk[b]);
            }
            int qs = 0, qlo = 255, qhi = 0;
            for (int e = 0; e < mma::ACC; e++) {
                const opstat o = qst[h0 + mma::acc_row(lane, e)];
                qs = max(qs, o.spread), qlo = min(qlo, o.emin), qhi = max(qhi, o.emin);
            }
            /* score_fast's screen over every (head, key) of the lane: spreads, -149 <= E <= 100 */
            const bool ok = qs + ks <= FAST_SPREAD && qlo + klo >= 256 - 149 && qhi + khi <= 256 + 100;
            if (!gpu_any(!ok)) {
                /* every operand read before the first store (the compiler then reads a
                 * head or key shared by several elements once) */
                uint32_t dsum[mma::ACC];
                float scale[mma::ACC];
                for (int e = 0; e < mma::ACC; e++) {
                    const int h = h0 + mma::acc_row(lane, e), key = k0 + mma::acc_col(lane, e);
                    dsum[e] = *reinterpret_cast<const uint32_t *>(qsh[h]) + *reinterpret_cast<const uint32_t *>(ksh[key]);
                    scale[e] = __fmul_rn(qf[h], kf[key]);
                }
                for (int e = 0; e < mma::ACC; e++) {
                    const int isum[NB] = {acc[0].v[e], acc[1].v[e], acc[2].v[e], acc[3].v[e]};
                    sS[h0 + mma::acc_row(lane, e)][k0 + mma::acc_col(lane, e)] =
                        score_fast_relu(isum, dsum[e], scale[e]);
                }
            } else {
                for (int e = 0; e < mma::ACC; e++) {
                    const int h = h0 + mma::acc_row(lane, e), key = k0 + mma::acc_col(lane, e);
                    const int isum[NB] = {acc[0].v[e], acc[1].v[e], acc[2].v[e], acc[3].v[e]};
                    sS[h][key] = relu_f(score_exact(isum, qsc[h], ksc[key]));
                }
            }
        }
        __syncthreads();
        if (H == 32 || H == 64) { /* docs/semantics/indexer.md Q6.2 step 3: the fixed fold, FMA */
            if (tid < 2 * KT) { /* lanes 2 key + L: chain L of the key, then fl(A0 + A1) */
                const int key = tid >> 1, L = tid & 1;
                int h = fold_head(0) + 4 * L;
                float A = __fmul_rn(sS[h][key], wsh[h]);
                for (int c = 0; c < H / 32; c++)
                    for (int i = (c == 0 ? 1 : 0); i < 16; i++) {
                        h = 32 * c + fold_head(i) + 4 * L;
                        A = __fmaf_rn(sS[h][key], wsh[h], A);
                    }
                const float other = __shfl_xor(A, 1);
                if (L == 0 && cols[t & 1][key] >= 0)
                    logits[r * a.width + cols[t & 1][key]] = __fadd_rn(A, other);
            }
        } else if (tid < KT && cols[t & 1][tid] >= 0) { /* other head counts: one FMA chain (ideal policy) */
            const int key = tid;
            float out = __fmul_rn(sS[0][key], wsh[0]);
            for (int h = 1; h < H; h++)
                out = __fmaf_rn(sS[h][key], wsh[h], out);
            logits[r * a.width + cols[t & 1][key]] = out;
        }
    }
}

/* Order-preserving uint32 key of an fp32 score; every NaN above +inf. */
__device__ inline uint32_t order_key(float v)
{
    const uint32_t u = dsv4q_bits(v);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0xFFFFFFFFu;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* This lane's exclusive count of p over the lanes of its wave below it;
 * *total: the wave's count.  Every lane of the wave calls. */
__device__ inline int wave_prefix(bool p, int *total)
{
#if defined(__CUDACC__) && !defined(__HIP__)
    const unsigned b = __ballot_sync(0xffffffffu, p), lane = threadIdx.x & 31u;
    *total = __popc(b);
    return __popc(b & ((1u << lane) - 1u));
#else
    const unsigned long long b = __ballot(p);
    const unsigned lane = threadIdx.x % warpSize;
    *total = __popcll(b);
    return __popcll(b & ((1ull << lane) - 1ull));
#endif
}

/* hist[d] += 1 for each lane with p.  On NVIDIA the lanes of a warp with the
 * same digit add once together (a row's scores share few top digits, and
 * 32 lanes on one shared word would take turns).  Every lane of the wave
 * calls. */
__device__ inline void hist_add(unsigned *hist, unsigned d, bool p)
{
#if defined(__CUDACC__) && !defined(__HIP__)
    const unsigned active = __ballot_sync(0xffffffffu, p);
    if (p) {
        const unsigned peers = __match_any_sync(active, d);
        if ((int)(threadIdx.x & 31u) == __ffs(peers) - 1)
            atomicAdd(&hist[d], (unsigned)__popc(peers));
    }
#else
    if (p)
        atomicAdd(&hist[d], 1u);
#endif
}

/* Top-k of slots [0, n) of one row by the whole block (TOPK_THREADS):
 * get(t, &key, &index) says whether slot t is a candidate.  out[k]: the
 * indices of the k largest keys (all above the k-th, then ties in slot
 * order), -1 after the candidates when there are fewer than k.
 * Radix select: the first pass counts the candidates and histograms the
 * top 8 bits, three more the next 8 bits under the prefix so far; every
 * pass reads TOPK_BATCH slots a thread before it counts any (a row's reads
 * are L2 hits whose latency, one at a time, was the select's time).  The
 * compaction gives each wave a contiguous run of slots (in rounds of one
 * slot a lane): a pass counts each wave's keys above and at the k-th, one
 * barrier, then a second places them, a lane's place within its round by a
 * ballot, so slot order holds with no block-wide scan a round. */
template <class F> __device__ inline void block_topk(F get, long long n, int k, int32_t *out)
{
    __shared__ unsigned hist[256];
    __shared__ uint32_t sh_prefix;
    __shared__ int sh_kk;
    __shared__ int wave_gt[GPU_MAX_WARPS], wave_eq[GPU_MAX_WARPS];
    const int tid = (int)threadIdx.x, nthr = (int)blockDim.x;
    const int ws = warpSize, lane = tid % ws, wave = tid / ws, nwaves = nthr / ws;
    for (int d = tid; d < 256; d += nthr)
        hist[d] = 0;
    __syncthreads();
    int mine = 0, total;
    for (long long t0 = 0; t0 < n; t0 += (long long)nthr * TOPK_BATCH) {
        uint32_t key[TOPK_BATCH];
        bool ok[TOPK_BATCH];
        for (int j = 0; j < TOPK_BATCH; j++) { /* the batch's reads first: they overlap */
            const long long t = t0 + (long long)j * nthr + tid;
            int32_t ix;
            key[j] = 0;
            ok[j] = t < n && get(t, &key[j], &ix);
        }
        for (int j = 0; j < TOPK_BATCH; j++) {
            mine += ok[j];
            hist_add(hist, key[j] >> 24, ok[j]);
        }
    }
    (void)idx::block_exclusive_scan(mine, &total); /* its barriers also complete hist */
    uint32_t K = 0; /* every candidate >= K: all are taken */
    int kk = total;
    if (total > k) {
        uint32_t prefix = 0, mask = 0;
        kk = k; /* rank still to place inside the current prefix */
        for (int shift = 24; shift >= 0; shift -= 8) {
            if (shift < 24) {
                for (int d = tid; d < 256; d += nthr)
                    hist[d] = 0;
                __syncthreads();
                for (long long t0 = 0; t0 < n; t0 += (long long)nthr * TOPK_BATCH) {
                    uint32_t key[TOPK_BATCH];
                    bool ok[TOPK_BATCH];
                    for (int j = 0; j < TOPK_BATCH; j++) {
                        const long long t = t0 + (long long)j * nthr + tid;
                        int32_t ix;
                        key[j] = 0;
                        ok[j] = t < n && get(t, &key[j], &ix);
                    }
                    for (int j = 0; j < TOPK_BATCH; j++)
                        hist_add(hist, (key[j] >> shift) & 255u, ok[j] && (key[j] & mask) == prefix);
                }
                __syncthreads();
            }
            /* digits from the top: cum = count above digit d */
            const int d = 255 - tid;
            const int cnt = tid < 256 ? (int)hist[d] : 0;
            int tot;
            const int cum = idx::block_exclusive_scan(cnt, &tot);
            if (tid < 256 && cum < kk && cum + cnt >= kk) {
                sh_prefix = prefix | ((uint32_t)d << shift);
                sh_kk = kk - cum;
            }
            __syncthreads();
            prefix = sh_prefix;
            kk = sh_kk;
            mask |= 255u << shift;
            __syncthreads();
        }
        K = prefix; /* the k-th key; kk of the keys == K are taken */
    }
    const int ngt = total > k ? k - kk : 0;
    const long long seg = ((n + nwaves - 1) / nwaves + ws - 1) / ws * ws;
    const long long s0 = (long long)wave * seg, s1 = s0 + seg < n ? s0 + seg : n;
    int base_gt = 0, base_eq = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (long long t0 = s0; t0 < s1; t0 += (long long)ws * TOPK_BATCH) {
            uint32_t key[TOPK_BATCH];
            int32_t ix[TOPK_BATCH];
            bool ok[TOPK_BATCH];
            for (int j = 0; j < TOPK_BATCH; j++) {
                const long long t = t0 + (long long)j * ws + lane;
                key[j] = 0;
                ix[j] = -1;
                ok[j] = t < s1 && get(t, &key[j], &ix[j]);
            }
            for (int j = 0; j < TOPK_BATCH; j++) { /* rounds in slot order */
                const bool gt = ok[j] && (total <= k || key[j] > K), eq = ok[j] && total > k && key[j] == K;
                int tg, te;
                const int pg = wave_prefix(gt, &tg), pe = wave_prefix(eq, &te);
                if (pass == 1) {
                    if (gt)
                        out[base_gt + pg] = ix[j];
                    if (eq && base_eq + pe < kk)
                        out[ngt + base_eq + pe] = ix[j];
                }
                base_gt += tg;
                base_eq += te;
            }
        }
        if (pass == 0) { /* the waves' counts -> each wave's first place */
            if (lane == 0)
                wave_gt[wave] = base_gt, wave_eq[wave] = base_eq;
            __syncthreads();
            base_gt = base_eq = 0;
            for (int w = 0; w < wave; w++)
                base_gt += wave_gt[w], base_eq += wave_eq[w];
        }
    }
    const int taken = total > k ? k : total;
    for (int i = taken + tid; i < k; i += nthr)
        out[i] = -1;
    __syncthreads();
}

/* ---- host side ------------------------------------------------------------ */

struct lg_shape {
    int q, qs, w, kc, ctx, bt, qsl, re, logits;
    int64_t heads, P, shuffle;
    layout l;
};

static inline int lg_shape_of(const dsv4_hip_call *c, lg_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "q:uint8:3 q_scale:int32:2 weights:float32:2 kv_cache:uint8:3 "
                                  "context_lens:int32:1 block_table:int32:2 query_start_loc:int32:1 "
                                  "row_ends:int32:1 -> logits:float32:2",
                               {&s->q, &s->qs, &s->w, &s->kc, &s->ctx, &s->bt, &s->qsl, &s->re,
                                &s->logits}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "heads page_entries shuffle", {&s->heads, &s->P, &s->shuffle}, err, errlen)))
        return rc;
    return layout_make((int)s->heads, s->P, (int)(s->shuffle != 0), &s->l, err, errlen);
}

static inline long long host_row_end(const int32_t *qsl, const int32_t *ctx, const int32_t *re, long long B,
                                     long long r, long long *req)
{
    long long b = 0;
    while (b + 1 < B && qsl[b + 1] <= r)
        b++;
    *req = b;
    if (ctx[b] <= 0)
        return 0;
    long long e = re[r] < ctx[b] ? re[r] : ctx[b];
    return e < 0 ? 0 : e;
}

/* What the logits launch relies on: shapes, H <= 64 (else a skip: the
 * shared tiles are sized for the V4.1 index heads), query_start_loc from 0
 * to rows and non-decreasing, every row end <= the logits width, and every
 * block-table entry a key below a row end reads inside the cache
 * (ref/indexer.c dsv4_idx_logits_check).  s: from lg_shape_of. */
static inline int lg_check(const dsv4_hip_call *c, const lg_shape &s, char *err, size_t errlen)
{
    const dsv4_plugin_tensor *q = &c->in[s.q], *kc = &c->in[s.kc], *bt = &c->in[s.bt], *lg = &c->out[s.logits];
    const long long rows = q->shape[0], H = q->shape[1], B = c->in[s.ctx].shape[0];
    if (H != s.heads || q->shape[2] != TB || c->in[s.qs].shape[0] != rows || c->in[s.qs].shape[1] != H ||
        c->in[s.w].shape[0] != rows || c->in[s.w].shape[1] != H || c->in[s.re].shape[0] != rows ||
        c->in[s.qsl].shape[0] != B + 1 || bt->shape[0] != B || kc->shape[1] != s.P || kc->shape[2] != ENTRY ||
        lg->shape[0] != rows || B < 1)
        return IFAIL("%s: q [rows, heads, 64], q_scale and weights [rows, heads], row_ends [rows], query_start_loc "
                     "[B + 1], block_table [B, *], kv_cache [pages, %lld, 68], logits [rows, width] expected",
                     c->op, (long long)s.P);
    if (H > MAX_H)
        return snprintf(err, errlen, "%s: %lld heads: the kernel's shared tiles hold at most %d", c->op, H, MAX_H),
               DSV4_PLUGIN_ESKIP;
    if (rows > (long long)0x7fffffff || lg->shape[1] / KT >= 65535)
        return IFAIL("%s: rows %lld / width %lld too large for the grid", c->op, rows, (long long)lg->shape[1]);
    const int32_t *qsl = (const int32_t *)c->in[s.qsl].data, *ctx = (const int32_t *)c->in[s.ctx].data;
    const int32_t *re = (const int32_t *)c->in[s.re].data, *btd = (const int32_t *)bt->data;
    if (qsl[0] != 0 || qsl[B] != rows)
        return IFAIL("%s: query_start_loc must run from 0 to rows = %lld", c->op, rows);
    for (long long b = 0; b < B; b++)
        if (qsl[b + 1] < qsl[b])
            return IFAIL("%s: query_start_loc[%lld] decreases", c->op, b + 1);
    for (long long r = 0; r < rows; r++) {
        long long b;
        const long long e = host_row_end(qsl, ctx, re, B, r, &b);
        if (re[r] > lg->shape[1])
            return IFAIL("%s: row_ends[%lld] = %d > width %lld", c->op, r, re[r], (long long)lg->shape[1]);
        if ((e + s.P - 1) / s.P > bt->shape[1])
            return IFAIL("%s: row %lld ends at %lld, past block_table's %lld blocks", c->op, r, e,
                         (long long)bt->shape[1]);
        for (long long i = 0; i * s.P < e; i++) {
            const int32_t pg = btd[b * bt->shape[1] + i];
            if (pg < 0 || pg >= kc->shape[0])
                return IFAIL("%s: block_table[%lld, %lld] = %d: not a page in [0, %lld) (row %lld reads it)", c->op, b,
                             i, pg, (long long)kc->shape[0], r);
        }
    }
    return DSV4_PLUGIN_OK;
}

static inline lg_args lg_make_args(const dsv4_hip_call *c, const lg_shape &s)
{
    const dsv4_plugin_tensor *q = &c->in[s.q];
    lg_args a = {(const uint8_t *)c->din[s.q], (const uint8_t *)c->din[s.qs], (const float *)c->din[s.w],
                 (const uint8_t *)c->din[s.kc], (const int32_t *)c->din[s.bt], (const int32_t *)c->din[s.ctx],
                 (const int32_t *)c->din[s.qsl], (const int32_t *)c->din[s.re], NULL, q->shape[0],
                 c->out[s.logits].shape[1], c->in[s.bt].shape[1], c->in[s.ctx].shape[0], 0, 1, (int)q->shape[1], s.l, 0};
    return a;
}

/* Logits of slots [0, ncols) of every row (columns past a row end are left
 * alone).  A block takes a run of tiles of its row: the q decode is paid
 * once a run, and each tile's key reads overlap the tile before; the runs
 * are as long as keeps about 2048 blocks in the launch (16 tiles at most),
 * from the shapes only.  DSV4_HIP_LOGITS_RUN (1..16) sets the run, so that
 * small cases take the multi-tile path too (scripts/gpu-run.sh runs the
 * indexer cases at 3). */
static inline hipError_t launch_logits(const lg_args &a, float *logits, long long ncols, hipStream_t stream)
{
    if (a.rows == 0 || ncols == 0)
        return hipSuccess;
    const long long ntiles = (ncols + KT - 1) / KT;
    long long run = a.rows * ntiles / 2048;
    run = run < 1 ? 1 : run > 16 ? 16 : run;
    const char *env = getenv("DSV4_HIP_LOGITS_RUN");
    if (env && atoi(env) >= 1 && atoi(env) <= 16)
        run = atoi(env);
    hipLaunchKernelGGL(logits_kernel, dim3((unsigned)a.rows, (unsigned)((ntiles + run - 1) / run)), dim3(LG_THREADS),
                       0, stream, a, logits, ntiles, (int)run);
    return hipGetLastError();
}

} // namespace idxr

#endif
