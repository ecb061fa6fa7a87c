/* indexer_logits.h - the paged MXFP4 MQA logits kernel and the per-row
 * block top-k shared by paged_mxfp4_mqa_logits, rocm_mxfp4_sparse_attn_indexer
 * and rocm_mxfp4_sparse_mqa_indexer (docs/semantics/indexer.md Q6.1-Q6.4;
 * reference ref/indexer.c, harness/ops_indexer.c).
 *
 * Logits: one 256-thread block per (row, tile of 64 keys).  The row's H
 * query heads (H <= 64) and the tile's keys are decoded from MXFP4 into
 * shared memory as int8 (2 x the e2m1 value: 0, +-1, +-2, +-3, +-4, +-6,
 * +-8, +-12); each thread takes 4 keys x 4 heads and forms the four 32-dim
 * block dots as exact integer sums (dp4a).  s_h then follows the fp32 model
 * of docs/semantics/indexer.md Q6.2 step 1 (faithful mode): each K = 64 chunk (two blocks) is
 * summed exactly and rounded once to fp32, the second added to it with one
 * more rounding (the block values isum * 2^(sq + sk - 256) are exact in
 * double and combined in double as ref/indexer.c chunk_dot does; an e8m0
 * NaN scale gives NaN).  The head reduction is docs/semantics/indexer.md Q6.2 step 3's fold
 * (two FMA chains over the MFMA lane order, fl(A0 + A1)) for 32 and 64
 * heads, one FMA chain in head order otherwise.  The result is the
 * faithful reference to the bit (up to the MFMA-internal rounding the
 * reference itself leaves open), and within the ideal policy's (128 + H +
 * 2) u bound by construction.
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

namespace idxr {

enum { KT = 64, LG_THREADS = 256, MAX_H = 64, KSTRIDE = D + 16, TOPK_THREADS = 512 };

/* Signed 4 x int8 dot product accumulated into c. */
__device__ inline int dot4(int a, int b, int c)
{
#if defined(__CUDACC__) && !defined(__HIP__)
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; i++)
        c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}

/* 2 x the e2m1 value of a code (docs/semantics/quant.md Q1.2): 0 .5 1 1.5 2 3 4 6, bit 3 sign. */
__device__ inline uint32_t e2m1_x2(uint32_t c)
{
    const uint32_t m = c & 7u;
    const uint32_t v = m < 4u ? m : m < 6u ? 2u * (m - 2u) : 4u * (m - 4u);
    return (c & 8u) ? (uint32_t)(-(int)v) & 0xFFu : v;
}

/* 4 packed bytes (8 codes, even element low) -> 8 int8 values as 2 words. */
__device__ inline uint2 decode8(uint32_t w)
{
    uint32_t lo = 0, hi = 0;
    for (int i = 0; i < 4; i++) {
        lo |= e2m1_x2((w >> (4 * i)) & 15u) << (8 * i);
        hi |= e2m1_x2((w >> (16 + 4 * i)) & 15u) << (8 * i);
    }
    return make_uint2(lo, hi);
}

/* 2^e as a double, e in [-256, 254]. */
__device__ inline double pow2d(int e)
{
    return __longlong_as_double((long long)(e + 1023) << 52);
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
    const long long id = a.cand[r * a.ncand + t / a.C], col = id * a.C + t % a.C;
    return id >= 0 && id < (end + a.C - 1) / a.C && col < end ? col : -1;
}

static __global__ void __launch_bounds__(LG_THREADS) logits_kernel(lg_args a, float *__restrict__ logits)
{
    __shared__ __align__(16) uint8_t q8[MAX_H][KSTRIDE];
    __shared__ __align__(16) uint8_t k8[KT][KSTRIDE];
    __shared__ uint8_t qsc[MAX_H][NB], ksc[KT][NB];
    __shared__ float wsh[MAX_H], sS[KT][MAX_H + 1], sA[2][KT];
    __shared__ long long cols[KT];
    const long long r = blockIdx.x, j0 = (long long)blockIdx.y * KT;
    const int tid = (int)threadIdx.x, H = a.H;
    long long req;
    const long long end = row_end(a, r, &req);
    if (!a.cand && j0 >= end)
        return; /* whole block: nothing below the row end */
    if (tid < KT)
        cols[tid] = slot_col(a, r, j0 + tid, end);
    /* q of the row: H x 4 chunks of 16 bytes, one per thread */
    for (int i = tid; i < H * NB; i += LG_THREADS) {
        const int h = i / NB, b = i % NB;
        const uint4 v = *reinterpret_cast<const uint4 *>(a.q + ((r * H + h) * TB + b * 16));
        const uint2 d0 = decode8(v.x), d1 = decode8(v.y), d2 = decode8(v.z), d3 = decode8(v.w);
        uint4 *dst = reinterpret_cast<uint4 *>(&q8[h][b * 32]);
        dst[0] = make_uint4(d0.x, d0.y, d1.x, d1.y);
        dst[1] = make_uint4(d2.x, d2.y, d3.x, d3.y);
        qsc[h][b] = a.qs[(r * H + h) * NB + b];
    }
    for (int h = tid; h < H; h += LG_THREADS)
        wsh[h] = a.w[r * H + h];
    __syncthreads();
    { /* the tile's keys: one 16-byte MX block per thread */
        const int i = tid / NB, b = tid % NB;
        const long long col = cols[i];
        uint4 v = make_uint4(0, 0, 0, 0);
        uint8_t sb = 127;
        if (col >= 0) {
            const long long page = a.bt[req * a.maxb + col / a.l.P], p = col % a.l.P;
            const uint8_t *pg = a.cache + page * a.l.P * ENTRY;
            v = *reinterpret_cast<const uint4 *>(pg + value_off(a.l, p, b * 16));
            sb = pg[scale_off(a.l, p, b)];
        }
        const uint2 d0 = decode8(v.x), d1 = decode8(v.y), d2 = decode8(v.z), d3 = decode8(v.w);
        uint4 *dst = reinterpret_cast<uint4 *>(&k8[i][b * 32]);
        dst[0] = make_uint4(d0.x, d0.y, d1.x, d1.y);
        dst[1] = make_uint4(d2.x, d2.y, d3.x, d3.y);
        ksc[i][b] = sb;
    }
    __syncthreads();
    /* 4 keys (kg + 16 i) x 4 heads (hg + 16 j) per thread */
    const int kg = tid % 16, hg = tid / 16;
    int acc[NB][4][4];
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                acc[b][i][j] = 0;
    for (int b = 0; b < NB; b++)
        for (int half = 0; half < 2; half++) {
            uint4 kv[4], qv[4];
            for (int i = 0; i < 4; i++)
                kv[i] = *reinterpret_cast<const uint4 *>(&k8[kg + 16 * i][b * 32 + half * 16]);
            for (int j = 0; j < 4; j++)
                qv[j] = (hg + 16 * j < H) ? *reinterpret_cast<const uint4 *>(&q8[hg + 16 * j][b * 32 + half * 16])
                                          : make_uint4(0, 0, 0, 0);
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    int s = acc[b][i][j];
                    s = dot4((int)kv[i].x, (int)qv[j].x, s);
                    s = dot4((int)kv[i].y, (int)qv[j].y, s);
                    s = dot4((int)kv[i].z, (int)qv[j].z, s);
                    s = dot4((int)kv[i].w, (int)qv[j].w, s);
                    acc[b][i][j] = s;
                }
        }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const int key = kg + 16 * i, h = hg + 16 * j;
            if (h >= H)
                continue;
            double v[NB];
            for (int b = 0; b < NB; b++) {
                const int sq = qsc[h][b], sk = ksc[key][b];
                /* block value isum/4 * 2^(sq-127) * 2^(sk-127), exact; e8m0 NaN propagates */
                v[b] = (sq == 255 || sk == 255) ? __longlong_as_double(0x7FF8000000000000LL)
                                                : (double)acc[b][i][j] * pow2d(sq + sk - 256);
            }
            /* two K = 64 MFMAs chained through the fp32 accumulator (docs/semantics/indexer.md Q6.2 step 1) */
            const float c0 = __double2float_rn(__dadd_rn(v[0], v[1]));
            sS[key][h] = __double2float_rn(__dadd_rn((double)c0, __dadd_rn(v[2], v[3])));
        }
    __syncthreads();
    if (tid < 2 * KT) {
        const int key = tid % KT, L = tid / KT;
        const float *s = sS[key];
        float A = 0.0f;
        if (H == 32 || H == 64) { /* docs/semantics/indexer.md Q6.2 step 3: the fixed fold, FMA */
            int h = fold_head(0) + 4 * L;
            A = __fmul_rn(relu_f(s[h]), wsh[h]);
            for (int c = 0; c < H / 32; c++)
                for (int i = (c == 0 ? 1 : 0); i < 16; i++) {
                    h = 32 * c + fold_head(i) + 4 * L;
                    A = __fmaf_rn(relu_f(s[h]), wsh[h], A);
                }
        } else if (L == 0) { /* other head counts: one FMA chain (ideal policy) */
            A = __fmul_rn(relu_f(s[0]), wsh[0]);
            for (int h = 1; h < H; h++)
                A = __fmaf_rn(relu_f(s[h]), wsh[h], A);
        }
        sA[L][key] = A;
    }
    __syncthreads();
    if (tid < KT && cols[tid] >= 0)
        logits[r * a.width + cols[tid]] = (H == 32 || H == 64) ? __fadd_rn(sA[0][tid], sA[1][tid]) : sA[0][tid];
}

/* Order-preserving uint32 key of an fp32 score; every NaN above +inf. */
__device__ inline uint32_t order_key(float v)
{
    const uint32_t u = dsv4q_bits(v);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0xFFFFFFFFu;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Top-k of slots [0, n) of one row by the whole block (TOPK_THREADS):
 * get(t, &key, &index) says whether slot t is a candidate.  out[k]: the
 * indices of the k largest keys (all above the k-th, then ties in slot
 * order), -1 after the candidates when there are fewer than k. */
template <class F> __device__ inline void block_topk(F get, long long n, int k, int32_t *out)
{
    __shared__ unsigned hist[256];
    __shared__ uint32_t sh_prefix;
    __shared__ int sh_kk;
    const int tid = (int)threadIdx.x;
    int mine = 0, total;
    for (long long t = tid; t < n; t += blockDim.x) {
        uint32_t key;
        int32_t ix;
        mine += get(t, &key, &ix);
    }
    (void)idx::block_exclusive_scan(mine, &total);
    uint32_t K = 0; /* every candidate >= K: all are taken */
    int kk = total;
    if (total > k) {
        uint32_t prefix = 0, mask = 0;
        kk = k; /* rank still to place inside the current prefix */
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int d = tid; d < 256; d += blockDim.x)
                hist[d] = 0;
            __syncthreads();
            for (long long t = tid; t < n; t += blockDim.x) {
                uint32_t key;
                int32_t ix;
                if (get(t, &key, &ix) && (key & mask) == prefix)
                    atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
            __syncthreads();
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
    int base_gt = 0, base_eq = 0;
    for (long long t0 = 0; t0 < n; t0 += blockDim.x) {
        const long long t = t0 + tid;
        uint32_t key = 0;
        int32_t ix = -1;
        const int ok = t < n ? get(t, &key, &ix) : 0;
        const int gt = ok && (total <= k || key > K), eq = ok && total > k && key == K;
        int tg, te;
        const int pg = idx::block_exclusive_scan(gt, &tg);
        const int pe = idx::block_exclusive_scan(eq, &te);
        if (gt)
            out[base_gt + pg] = ix;
        if (eq && base_eq + pe < kk)
            out[ngt + base_eq + pe] = ix;
        base_gt += tg;
        base_eq += te;
    }
    const int taken = total > k ? k : total;
    for (int i = taken + tid; i < k; i += blockDim.x)
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
                 c->out[s.logits].shape[1], c->in[s.bt].shape[1], c->in[s.ctx].shape[0], 0, 1, (int)q->shape[1], s.l};
    return a;
}

/* Dense logits over [0, width) (columns past a row end are left alone). */
static inline hipError_t launch_logits(const lg_args &a, float *logits, long long ncols, hipStream_t stream)
{
    if (a.rows == 0 || ncols == 0)
        return hipSuccess;
    hipLaunchKernelGGL(logits_kernel, dim3((unsigned)a.rows, (unsigned)((ncols + KT - 1) / KT)), dim3(LG_THREADS), 0,
                       stream, a, logits);
    return hipGetLastError();
}

} // namespace idxr

#endif
