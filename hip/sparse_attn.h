/* sparse_attn.h - the sparse MLA attention with sink kernel shared by
 * rocm_sparse_attn_prefill (dense rows over the gathered bf16 workspace),
 * rocm_sparse_attn_decode and sparse_mla_fwd (ragged lists over the paged
 * fp8_ds_mla caches).  Semantics: ref/attention.c,
 * docs/semantics/attention.md A8.1-A8.5; the rounding points are the ROCm Triton
 * kernels' (docs/semantics/attention.md A8.3 [S9]): fp32 scores x scale, online softmax in fp32
 * from a running max initialised to -3.4028e38, p rounded to bf16 before
 * P.V while l sums the fp32 p, then the sink merge
 *   m_f = max(m, sink), alpha = e^{m - m_f}, l_f = l alpha + e^{sink - m_f},
 *   out = acc alpha / max(l_f, 1e-30), or 0 if l_f <= 0.
 *
 * One 256-thread block per (token, group of HG = 16 heads) (BLOCK_H = 16,
 * docs/semantics/attention.md A8.4).  The block walks the token's entries in tiles of KT = 16 keys:
 * every valid key row is loaded ONCE into shared memory as bf16 (K = V =
 * the whole 512-lane row [S9, S24, S23]) and used for the scores of all 16
 * heads and for their P.V.  Where the rows are bf16 already (the prefill
 * op's workspace, the paged ops' pre-decoded rows) the walk is pipelined:
 * each thread holds the next tile's chunks in registers, loaded while this
 * tile is computed.  Invalid entries (-1, out of range) get a zero
 * row and score -inf, so they add nothing (docs/semantics/attention.md A8.2).  Both dots run on
 * the matrix units (mma_compat.h): the 16 x 16 scores Q K^T split over the
 * block's waves by lane range, summed in wave order; P V as 32 column tiles
 * of 16 lanes, each wave owning a contiguous run.  Accumulation fp32,
 * output bf16 RNE.  A launch of few (token, head group) blocks (decode)
 * splits each token's entries over up to 16 blocks, tile-aligned, and
 * merges their (m, l, acc) partials in split order: the split-K form of
 * docs/semantics/attention.md A8.4.
 *
 * On NVIDIA (sm_80+ with 227 KiB of opt-in shared memory: the H100 / H200)
 * launches with H >= 64 over bf16 rows take the wide form below instead
 * (attn_wide_kernel): 512 threads per (token, 64 heads), 64-key tiles
 * double-buffered by cp.async, four barriers a tile; DSV4_HIP_ATTN_WIDE=0
 * forces the form above, =1 the wide form for any H.  AMD (64 KiB of LDS
 * a workgroup on gfx942) and the fused paged source keep the form above. */
#ifndef DSV4_HIP_SPARSE_ATTN_H
#define DSV4_HIP_SPARSE_ATTN_H

#include "kernels.h"
#include "kv_decode.h"
#include "mma_compat.h"

namespace sattn {

constexpr int D = 512;       /* head dim: 448 NoPE + 64 RoPE (docs/semantics/numerics.md A1 [S14]) */
constexpr int NOPE = 448;
constexpr int HG = 16;       /* heads per block (BLOCK_H = 16, docs/semantics/attention.md A8.4) */
constexpr int KT = 16;       /* keys per shared tile */
constexpr int NT = 256;      /* threads per block: the mappings below assume it */
constexpr int ROW = D + 8;   /* shared row stride in bf16: 4 banks of skew per row, 16-byte aligned */
/* Triton running-max init (docs/semantics/attention.md A8.3 [S9]) */
constexpr float NEG_INIT = -3.4028234663852886e38f;

constexpr int NW = NT / mma::WAVE;  /* waves per block */
constexpr int PROW = KT + 8;        /* shared row stride of the bf16 p tile */
constexpr int CT = D / 16 / NW;     /* P.V column tiles per wave */

static_assert(NT == HG * KT, "softmax mapping: one thread per (head, key)");
static_assert(HG == 16 && KT == 16, "one 16 x 16 tile of heads x keys");
static_assert(D % (16 * NW) == 0, "score and P.V splits over the waves");


/* The value p takes in the P.V dot: bf16(p) (docs/semantics/attention.md A8.3 [S9]). */
__device__ inline float round_bf16(float f) { return __uint_as_float(bf16_rne(f) << 16); }

struct __align__(16) smem_t {
    uint16_t q[HG][ROW];     /* the head group's queries, bf16 */
    uint16_t k[KT][ROW];     /* the key tile, bf16 (zero rows for invalid entries) */
    float part[NW][HG][KT];  /* each wave's partial scores over its lane range */
    uint16_t p[HG][PROW];    /* bf16-rounded probabilities, the A operand of P.V */
    float alpha[HG];         /* rescale of the running accumulators */
    float m[HG], l[HG];      /* final running max and sum */
    const uint8_t *row[KT];  /* the tile's key rows (NULL: invalid entry); pipelined: the next tile's */
    int valid[KT];           /* pipelined sources: the tile in sm.k has a valid key */
    const uint8_t *scl[KT];  /* paged: the rows' scale bytes */
    int fnuz[KT];            /* paged: the row's cache is FNUZ */
};

/* A tile of bf16 rows is 16 keys x 64 chunks of 16 bytes: FETCH chunks a
 * thread, chunk c = threadIdx.x + i NT.  fetch_rows loads them into
 * registers (zeros for invalid entries; no NaN scrubbing,
 * docs/semantics/attention.md A8.3), store_rows puts them in the shared tile:
 * the walk issues the next tile's loads before computing on this one. */
constexpr int FETCH = KT * (D / 8) / NT;
static_assert(KT * (D / 8) % NT == 0, "whole chunks a thread");

__device__ inline void fetch_rows(const uint8_t *const row[KT], uint4 w[FETCH])
{
#pragma unroll
    for (int i = 0; i < FETCH; i++) {
        const int c = threadIdx.x + i * NT, key = c / (D / 8), ch = c % (D / 8);
        w[i] = row[key] ? reinterpret_cast<const uint4 *>(row[key])[ch] : make_uint4(0, 0, 0, 0);
    }
}

__device__ inline void store_rows(smem_t &sm, const uint4 w[FETCH])
{
#pragma unroll
    for (int i = 0; i < FETCH; i++) {
        const int c = threadIdx.x + i * NT, key = c / (D / 8), ch = c % (D / 8);
        *reinterpret_cast<uint4 *>(&sm.k[key][ch * 8]) = w[i];
    }
}

/* Source of key rows, dense prefill form: entry j < clamp(len[t], 0, P) of
 * indices [T, 1, P]; valid iff 0 <= v < rows (docs/semantics/attention.md A8.2;
 * docs/semantics/indices.md A5.8 [S9]). */
struct dense_src {
    const uint16_t *kv; /* [rows, 512] bf16 */
    long long rows;
    const int32_t *idx;
    const int32_t *len;
    long long P;

    __device__ long long count(long long t) const
    {
        long long n = len[t];
        return n < 0 ? 0 : n > P ? P : n; /* clamp(topk_length, 0, P) (docs/semantics/indices.md A5.8) */
    }
    static constexpr bool BF16_ROWS = true; /* rows are read as they are: the pipelined walk */
    __device__ const uint8_t *row_ptr(long long t, long long j) const
    {
        const int32_t v = idx[t * P + j];
        const bool ok = v >= 0 && (long long)v < rows; /* -1 / out of range skipped [S9] */
        return ok ? reinterpret_cast<const uint8_t *>(kv + (long long)v * D) : nullptr;
    }
};

/* One chunk of a decoded fp8_ds_mla record into dst (a bf16 row, shared or
 * global): chunks 0..55 are 8 fp8 NoPE bytes each, 56..71 four RoPE bf16
 * lanes; row NULL gives zeros.  8-byte loads (the page stride B*584 is a
 * multiple of 8).  NoPE lane = bf16(fp32(fp8) * 2^(b-127))
 * (docs/semantics/kvcache.md A4; docs/semantics/attention.md A8.4), RoPE the stored bf16;
 * NaN lanes become 0. */
constexpr int NOPE_CH = NOPE / 8, RECORD_CHUNKS = NOPE_CH + (D - NOPE) / 4;

__device__ inline void decode_chunk(const uint8_t *row, const uint8_t *scl, int fz, int ch, uint16_t *dst)
{
    if (ch < NOPE_CH) {
        uint4 o = make_uint4(0, 0, 0, 0);
        if (row) /* block of dims 8ch.. = 64 * (ch/8).. */
            o = decode8_packed(reinterpret_cast<const uint2 *>(row)[ch], scl[ch / 8], fz);
        *reinterpret_cast<uint4 *>(dst + ch * 8) = o;
    } else {
        const int r = ch - NOPE_CH;
        uint2 o = make_uint2(0, 0);
        if (row) {
            const uint2 w = reinterpret_cast<const uint2 *>(row + NOPE)[r];
            o = make_uint2(scrub2(w.x), scrub2(w.y));
        }
        *reinterpret_cast<uint2 *>(dst + NOPE + r * 4) = o;
    }
}

/* The pre-decode's unit (decode_rows_kernel): a record as 64 items of 16
 * output bytes, items 0..55 the NoPE chunks of decode_chunk (8 fp8 bytes
 * and their block's scale byte), items 56..63 eight RoPE lanes each (two
 * 8-byte loads: the page stride B*584 is a multiple of 8, not of 16); item
 * it fills lanes 8 it .. 8 it + 7.  fetch_item only loads (zeros for a NULL
 * row), put_item decodes and stores with decode_chunk's rules: the same
 * bits, a thread's loads all in flight before its first decode and one
 * 16-byte store an item. */
constexpr int ITEMS = D / 8;

struct rec_item {
    uint2 a, b; /* NoPE: a the codes, b.x the scale byte; RoPE: a, b the eight bf16 lanes */
};

__device__ inline rec_item fetch_item(const uint8_t *row, const uint8_t *scl, int it)
{
    rec_item r = {make_uint2(0, 0), make_uint2(0, 0)};
    if (row) {
        if (it < NOPE_CH) {
            r.a = reinterpret_cast<const uint2 *>(row)[it];
            r.b.x = scl[it / 8]; /* block of dims 8it.. = 64 * (it/8).. */
        } else {
            const uint2 *w = reinterpret_cast<const uint2 *>(row + NOPE) + 2 * (it - NOPE_CH);
            r.a = w[0];
            r.b = w[1];
        }
    }
    return r;
}

__device__ inline void put_item(const rec_item &r, int fz, int it, uint4 *dst)
{
    /* lanes 8 it .. 8 it + 7; RoPE NaN lanes become 0, as decode_chunk's */
    dst[it] = it < NOPE_CH ? decode8_packed(r.a, r.b.x, fz)
                           : make_uint4(scrub2(r.a.x), scrub2(r.a.y), scrub2(r.b.x), scrub2(r.b.y));
}

/* Source of key rows, ragged form over one or two paged fp8_ds_mla caches
 * (main, extra): entries indices[indptr[t] .. indptr[t+1]) of main then of
 * extra; slot valid iff 0 <= slot < pages * B (docs/semantics/attention.md A8.2 [S9]). */
struct paged_seg {
    const uint8_t *cache;
    long long B, rows; /* tokens per page, pages * B */
    const int32_t *idx, *ptr;
    int fnuz;
};

struct paged_src {
    paged_seg seg[2];
    int nseg;

    __device__ long long count(long long t) const
    {
        long long n = (long long)seg[0].ptr[t + 1] - seg[0].ptr[t];
        if (nseg > 1)
            n += (long long)seg[1].ptr[t + 1] - seg[1].ptr[t];
        return n;
    }
    /* Entry j of token t: its record, scale bytes and kind; false if the
     * slot is -1 or out of range (skipped [S9]). */
    __device__ long long slot(long long t, long long j, bool &main) const
    {
        const long long n0 = (long long)seg[0].ptr[t + 1] - seg[0].ptr[t];
        main = j < n0;
        return main ? seg[0].idx[seg[0].ptr[t] + j] : seg[1].idx[seg[1].ptr[t] + (j - n0)];
    }
    __device__ bool valid(long long t, long long j) const
    {
        bool main;
        const long long v = slot(t, j, main);
        return v >= 0 && v < (main ? seg[0].rows : seg[1].rows);
    }
    __device__ bool locate(long long t, long long j, const uint8_t **row, const uint8_t **scl, int *fnuz) const
    {
        bool main;
        const long long v = slot(t, j, main);
        const long long B = main ? seg[0].B : seg[1].B, rows = main ? seg[0].rows : seg[1].rows;
        if (v < 0 || v >= rows)
            return false;
        /* slot -> (slot // B, slot % B); page stride B*584; record at row*576,
         * scale bytes at B*576 + row*8 (docs/semantics/kvcache.md A2.1) */
        const long long page = v / B, r = v % B;
        const uint8_t *base = (main ? seg[0].cache : seg[1].cache) + page * B * 584;
        *row = base + r * 576;
        *scl = base + B * 576 + r * 8;
        *fnuz = main ? seg[0].fnuz : seg[1].fnuz;
        return true;
    }
    static constexpr bool BF16_ROWS = false; /* records decoded into the tile: the plain walk */
    __device__ void entry(long long t, long long j, smem_t &sm, int slot) const
    {
        if (!locate(t, j, &sm.row[slot], &sm.scl[slot], &sm.fnuz[slot]))
            sm.row[slot] = nullptr;
    }
    __device__ void load(smem_t &sm) const
    {
        for (int c = threadIdx.x; c < KT * RECORD_CHUNKS; c += NT) {
            const int key = c / RECORD_CHUNKS, ch = c % RECORD_CHUNKS;
            decode_chunk(sm.row[key], sm.scl[key], sm.fnuz[key], ch, sm.k[key]);
        }
    }
};

/* Source of key rows for the paged ops after decode_rows_kernel: the same
 * entries and validity as paged, each valid row already decoded to bf16 at
 * rows[offset(t) + j] (offset: the token's first entry over both
 * segments).  The shared tile gets the same bf16 lanes as paged's load. */
struct decoded_src {
    paged_src paged;
    const uint16_t *rows;

    __device__ long long offset(long long t) const
    {
        long long o = (long long)paged.seg[0].ptr[t] - paged.seg[0].ptr[0];
        if (paged.nseg > 1)
            o += (long long)paged.seg[1].ptr[t] - paged.seg[1].ptr[0];
        return o;
    }
    __device__ long long count(long long t) const { return paged.count(t); }
    static constexpr bool BF16_ROWS = true;
    __device__ const uint8_t *row_ptr(long long t, long long j) const
    {
        return paged.valid(t, j) ? reinterpret_cast<const uint8_t *>(rows + (offset(t) + j) * D) : nullptr;
    }
};

/* Every valid entry of the paged source decoded once into rows (the
 * attention blocks of a token's HG-head groups then share it instead of
 * decoding it again each).  Grid (ceil(max_n / KT), T) of NT threads. */
constexpr int DEC_PER = KT * ITEMS / NT; /* items a thread */
static_assert(KT * ITEMS % NT == 0, "whole items a thread");

template <typename Src> /* paged_src; a template so that only its users instantiate it */
__global__ void __launch_bounds__(NT) decode_rows_kernel(Src src, decoded_src dst, uint16_t *rows)
{
    __shared__ const uint8_t *row[KT], *scl[KT];
    __shared__ int fnuz[KT];
    const long long t = blockIdx.y, j0 = (long long)blockIdx.x * KT, n = src.count(t);
    if (threadIdx.x < KT) {
        const long long j = j0 + threadIdx.x;
        const uint8_t *r = nullptr, *sc = nullptr;
        int fz = 0;
        if (j >= n || !src.locate(t, j, &r, &sc, &fz))
            r = nullptr;
        row[threadIdx.x] = r, scl[threadIdx.x] = sc, fnuz[threadIdx.x] = fz;
    }
    __syncthreads();
    const long long first = dst.offset(t) + j0;
    /* every load of this thread's DEC_PER items first, then the decodes and
     * stores: the stores may alias the loads as far as the compiler knows,
     * so a load-decode-store loop kept one load in flight */
    rec_item in[DEC_PER];
#pragma unroll
    for (int i = 0; i < DEC_PER; i++) {
        const int c = threadIdx.x + i * NT, key = c / ITEMS;
        in[i] = fetch_item(row[key], scl[key], c % ITEMS); /* invalid, past-the-end: NULL, never read */
    }
#pragma unroll
    for (int i = 0; i < DEC_PER; i++) {
        const int c = threadIdx.x + i * NT, key = c / ITEMS;
        if (row[key])
            put_item(in[i], fnuz[key], c % ITEMS, reinterpret_cast<uint4 *>(rows + (first + key) * D));
    }
}

/* The sink merge of one head after its last tile (docs/semantics/attention.md
 * A8.1, A8.3 [S9, S23]; the sink is in the denominator only):
 *   m_f = max(m, sink), alpha = e^{m - m_f}, l_f = l alpha + e^{sink - m_f},
 *   out = acc alpha / max(l_f, 1e-30), or 0 if l_f <= 0 (no key, no sink). */
struct sink_merge {
    float alpha, lf;
    __device__ float out(float acc) const { return lf > 0.0f ? acc * alpha / fmaxf(lf, 1e-30f) : 0.0f; }
};

__device__ inline sink_merge merge_sink(float m, float l, float sg)
{
    const float mf = fmaxf(m, sg);
    const float alpha = expf(m - mf);
    return {alpha, l * alpha + expf(sg - mf)};
}

/* Split-K partials (docs/semantics/attention.md A8.4, the gfx942/950 form):
 * per block of the split launch, acc[HG][D] (unnormalised), then m[HG] and
 * l[HG], in fp32. */
constexpr int PART = HG * D + 2 * HG;
constexpr int MAX_SPLITS = 16;
/* Two blocks an SM on NVIDIA: the walk's prefetched chunks then fit in
 * registers (118, no spills; three blocks cap it at 80 and it spills) */
constexpr int BLOCKS_PER_SM = 2;

/* Grid: T * ceil(H / HG) * splits blocks of NT threads; block b is split
 * b % splits of (token, head group) b / splits.  Split s walks the tiles
 * [s per, (s + 1) per) of the token's entries, per = ceil(tiles / splits).
 * One split: the sink merge and the bf16 store here; more: the partial
 * (m, l, acc) to part, merged by combine_kernel. */
template <typename Src>
__global__ void GPU_LAUNCH_BOUNDS_OCC(NT, BLOCKS_PER_SM) attn_kernel(Src src, const uint16_t *__restrict__ q,
                                                 const float *__restrict__ sink, long long H, int groups,
                                                 int splits, float scale, uint16_t *__restrict__ out,
                                                 float *__restrict__ part)
{
    __shared__ smem_t sm;
    const int tid = threadIdx.x;
    const long long tg = blockIdx.x / splits;
    const int split = blockIdx.x % splits;
    const long long t = tg / groups;
    const long long h0 = (long long)(tg % groups) * HG;
    const int nh = H - h0 < HG ? (int)(H - h0) : HG;

    /* the group's q rows; heads past H read as 0 and are never stored */
    for (int c = tid; c < HG * (D / 8); c += NT) {
        const int h = c / (D / 8), ch = c % (D / 8);
        uint4 w = make_uint4(0, 0, 0, 0);
        if (h < nh)
            w = reinterpret_cast<const uint4 *>(q + (t * H + h0 + h) * D)[ch];
        *reinterpret_cast<uint4 *>(&sm.q[h][ch * 8]) = w;
    }

    const int lane = tid % mma::WAVE, wave = tid / mma::WAVE;
    /* softmax mapping: head sh, key sk; m and l live in registers, replicated over the head's 16 lanes */
    const int sh = tid / KT, sk = tid % KT;
    float m_run = NEG_INIT, l_run = 0.0f;
    /* P.V: column tiles wave * CT .. + CT - 1 of the 16 x 512 output */
    mma::acc16 acc[CT];
#pragma unroll
    for (int j = 0; j < CT; j++)
        mma::zero(acc[j]);

    const long long count = src.count(t);
    const long long per = ((count + KT - 1) / KT + splits - 1) / splits * KT;
    const long long jb = split * per, n = count < jb + per ? count : jb + per;

    /* One tile on the matrix units, its keys in sm.k; valid(k): key k counts. */
    auto tile = [&](auto valid) {
        /* scores: wave w dots lanes [w D / NW, (w + 1) D / NW) of the 16 heads x 16 keys */
        {
            mma::acc16 sc;
            mma::zero(sc);
#pragma unroll
            for (int k0 = wave * (D / NW); k0 < (wave + 1) * (D / NW); k0 += 16)
                mma::mma_nk(sc, &sm.q[0][k0], ROW, &sm.k[0][k0], ROW);
#pragma unroll
            for (int e = 0; e < mma::ACC; e++)
                sm.part[wave][mma::acc_row(lane, e)][mma::acc_col(lane, e)] = sc.v[e];
        }
        __syncthreads();

        /* online softmax of head sh over the tile's 16 keys */
        {
            float dot = 0.0f;
#pragma unroll
            for (int w = 0; w < NW; w++) /* fixed order: bitwise identical reruns */
                dot += sm.part[w][sh][sk];
            /* tl.dot in fp32, then x scale (docs/semantics/attention.md A8.3 [S9]) */
            const float s = valid(sk) ? dot * scale : -INFINITY;
            float mx = s;
            for (int off = KT / 2; off; off >>= 1)
                mx = fmaxf(mx, __shfl_xor(mx, off));
            const float m_new = fmaxf(m_run, mx);
            const float p = expf(s - m_new); /* invalid: e^-inf = 0 */
            float ps = p;
            for (int off = KT / 2; off; off >>= 1)
                ps += __shfl_xor(ps, off);
            const float alpha = expf(m_run - m_new);
            l_run = l_run * alpha + ps; /* l sums the unrounded p [S9] */
            m_run = m_new;
            sm.p[sh][sk] = (uint16_t)bf16_rne(p); /* p cast to bf16 before P.V [S9] */
            if (sk == 0)
                sm.alpha[sh] = alpha;
        }
        __syncthreads();

        /* P.V: rescale, then one 16 x 16 x 16 product per column tile */
#pragma unroll
        for (int j = 0; j < CT; j++) {
#pragma unroll
            for (int e = 0; e < mma::ACC; e++)
                acc[j].v[e] *= sm.alpha[mma::acc_row(lane, e)];
            mma::mma_kn(acc[j], &sm.p[0][0], PROW, &sm.k[0][16 * (wave * CT + j)], ROW);
        }
    };

    if constexpr (Src::BF16_ROWS) {
        /* pipelined: sm.row holds the pointers of the tile whose chunks are in
         * flight in nx; four barriers a tile */
        uint4 nx[FETCH];
        if (tid < KT)
            sm.row[tid] = jb + tid < n ? src.row_ptr(t, jb + tid) : nullptr;
        __syncthreads();
        if (jb < n)
            fetch_rows(sm.row, nx);
        for (long long j0 = jb; j0 < n; j0 += KT) {
            __syncthreads(); /* the previous tile is consumed, and every fetch of sm.row done */
            store_rows(sm, nx);
            if (tid < KT) {
                sm.valid[tid] = sm.row[tid] != nullptr;
                const long long jn = j0 + KT + tid;
                sm.row[tid] = jn < n ? src.row_ptr(t, jn) : nullptr;
            }
            __syncthreads();
            if (j0 + KT < n)
                fetch_rows(sm.row, nx); /* the next tile's loads overlap this tile's products */
            tile([&](int k) { return sm.valid[k] != 0; });
        }
    } else {
        for (long long j0 = jb; j0 < n; j0 += KT) {
            __syncthreads(); /* the previous tile is consumed */
            if (tid < KT) {
                if (j0 + tid < n)
                    src.entry(t, j0 + tid, sm, tid);
                else
                    sm.row[tid] = nullptr;
            }
            __syncthreads();
            src.load(sm);
            __syncthreads();
            tile([&](int k) { return sm.row[k] != nullptr; });
        }
    }

    if (splits > 1) { /* the partial; heads past H are written and never read */
        float *pb = part + (long long)blockIdx.x * PART;
        if (sk == 0) {
            pb[HG * D + sh] = m_run;
            pb[HG * D + HG + sh] = l_run;
        }
#pragma unroll
        for (int j = 0; j < CT; j++)
#pragma unroll
            for (int e = 0; e < mma::ACC; e++)
                pb[mma::acc_row(lane, e) * D + 16 * (wave * CT + j) + mma::acc_col(lane, e)] = acc[j].v[e];
        return;
    }
    if (sk == 0) {
        sm.m[sh] = m_run;
        sm.l[sh] = l_run;
    }
    __syncthreads();
    /* sink merge: the sink is in the denominator only (docs/semantics/attention.md A8.1, A8.3 [S9, S23]) */
#pragma unroll
    for (int j = 0; j < CT; j++) { /* constant trip counts: acc stays in registers */
#pragma unroll
        for (int e = 0; e < mma::ACC; e++) {
            const int h = mma::acc_row(lane, e), col = 16 * (wave * CT + j) + mma::acc_col(lane, e);
            if (h >= nh)
                continue; /* heads past H: computed on zero queries, never stored */
            const sink_merge mg = merge_sink(sm.m[h], sm.l[h], sink[h0 + h]);
            out[(t * H + h0 + h) * D + col] = (uint16_t)bf16_rne(mg.out(acc[j].v[e]));
        }
    }
}

/* The split-K merge (docs/semantics/attention.md A8.4): per head
 * m_f = max(max_s m_s, sink), w_s = e^{m_s - m_f}, l_f = sum_s w_s l_s + e^{sink - m_f},
 * out = (sum_s w_s acc_s) / max(l_f, 1e-30), or 0 if l_f <= 0; sums in split
 * order (bitwise identical reruns).  With one split this is the single-pass
 * kernel's own sink merge.  Grid: T * ceil(H / HG) * CPARTS blocks of NT
 * threads, a block the output columns [D / CPARTS part, ...) of one 16-head
 * group (each block forms the group's weights itself: 16 heads' worth): a
 * block a whole group left 256 blocks of 32 loads in a row a thread for the
 * 64-token decode, too few in flight. */
constexpr int CPARTS = 4;
static __global__ void __launch_bounds__(NT) combine_kernel(const float *__restrict__ part, const float *__restrict__ sink,
                                                     long long H, int groups, int splits,
                                                     uint16_t *__restrict__ out)
{
    __shared__ float w[MAX_SPLITS][HG], lf[HG];
    const int tid = threadIdx.x;
    const long long tgrp = blockIdx.x / CPARTS; /* (token, 16-head group) */
    const int dbase = (int)(blockIdx.x % CPARTS) * (D / CPARTS);
    const long long t = tgrp / groups;
    const long long h0 = (long long)(tgrp % groups) * HG;
    const int nh = H - h0 < HG ? (int)(H - h0) : HG;
    const float *pb = part + tgrp * splits * PART;
    if (tid < nh) {
        const float sg = sink[h0 + tid];
        float m = NEG_INIT;
        for (int s = 0; s < splits; s++)
            m = fmaxf(m, pb[s * PART + HG * D + tid]);
        const float mf = fmaxf(m, sg);
        float l = 0.0f;
        for (int s = 0; s < splits; s++) {
            w[s][tid] = expf(pb[s * PART + HG * D + tid] - mf);
            l += pb[s * PART + HG * D + HG + tid] * w[s][tid];
        }
        lf[tid] = l + expf(sg - mf);
    }
    __syncthreads();
    for (int c = tid; c < nh * (D / CPARTS / 4); c += NT) {
        const int h = c / (D / CPARTS / 4), d = dbase + 4 * (c % (D / CPARTS / 4));
        float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int s = 0; s < splits; s++) {
            const float4 a = *reinterpret_cast<const float4 *>(pb + s * PART + h * D + d);
            o[0] += a.x * w[s][h], o[1] += a.y * w[s][h], o[2] += a.z * w[s][h], o[3] += a.w * w[s][h];
        }
        const float l = lf[h];
        uint32_t b[4];
        for (int i = 0; i < 4; i++) /* l_f <= 0: no key and no sink -> 0 (docs/semantics/attention.md A8.1) */
            b[i] = bf16_rne(l > 0.0f ? o[i] / fmaxf(l, 1e-30f) : 0.0f);
        *reinterpret_cast<uint2 *>(out + (t * H + h0 + h) * D + d) = make_uint2(b[0] | b[1] << 16, b[2] | b[3] << 16);
    }
}

/* The wide form (NVIDIA sm_80+ with WIDE_SMEM bytes of opt-in shared
 * memory a block: the H200's 227 KiB; AMD gfx942 has 64 KiB of LDS a
 * workgroup, so AMD keeps the form above).  One 512-thread block per
 * (token, group of HW = 64 heads, split) walks the entries in tiles of
 * KW = 64 keys: each key row is read from L2 once per token per 64 heads
 * (the form above: once per 16), and a tile is 64 x 64 scores and a
 * 64 x 64 x 512 P.V, 16x the products of a 16-key tile of 16 heads,
 * between four barriers (there four too).  The tile after this one is copied
 * into the other half of a double buffer by cp.async while this one is
 * computed (no register stage: the 64 heads' fp32 accumulators, 64 a
 * thread, take the registers).  Per tile:
 *   scores: warp w owns heads 32 (w / 8) .. + 31 x keys 16 ((w / 2) % 4)
 *     .. + 15 over lanes 256 (w % 2) .. + 255 (one product chain a head
 *     tile, lanes in order; its two head tiles share each key fragment:
 *     3 ldmatrix for 4 mma, where a 16 x 16 tile over all 512 lanes took
 *     4 for 4 and kept the score phase shared-memory bound); the upper
 *     half goes to sm.s as it is, one more barrier, then the lower half's
 *     warp adds it, fl(lo + hi), x scale, -inf for invalid keys, to sm.s;
 *   softmax: 8 threads a head, 8 keys each (keys 4i..4i+3, 32+4i..), the
 *     tile max and the p sum by in-thread order then a fixed xor tree;
 *   P.V: warp w owns output columns 32w..32w+31 of all 64 heads (4 x 2 tiles
 *     of 16 x 16, 64 accumulators a lane), rescaled by alpha, then
 *     P (ldmatrix) x V (ldmatrix.trans) over the tile's 64 keys.
 * Same rounding points as the form above (docs/semantics/attention.md A8.3:
 * fp32 dot x scale, bf16 p, l over fp32 p, sink merge at the end); only the
 * order of each fp32 dot and the key blocks of the online softmax differ,
 * both inside the bound ("Error bound of the attention output": online
 * softmax in key blocks of any size, any dot order).  Every order is fixed:
 * reruns are bitwise identical.  Heads past H in the last group (H not a
 * multiple of 64) run on zero queries and are never stored.  Split-K: the
 * partials in the 16-head layout of PART, merged by combine_kernel. */
#if defined(__CUDACC__) && !defined(__HIP__)
#define DSV4_ATTN_WIDE 1
constexpr int HW = 64;                 /* heads per block */
constexpr int KW = 64;                 /* keys per tile */
constexpr int NTW = 512;               /* threads per block: 16 warps of 32 */
constexpr int NWW = NTW / 32;
constexpr int SROW = KW + 8;           /* fp32 score row stride: float2 stores of a half warp conflict-free */
constexpr int PWROW = KW + 8;          /* bf16 p row stride: 144 bytes, ldmatrix rows conflict-free */
constexpr int CPW = D / NWW;           /* P.V output columns per warp */
constexpr int MTW = HW / 16, NTLW = CPW / 16;
constexpr int LPR = NTW / KW;          /* copy threads per key row (and per q row) */
constexpr int CHW = (D / 8) / LPR;     /* 16-byte chunks a copy thread moves per row */

static_assert(mma::WAVE == 32, "the wide form is the NVIDIA warp layout");
static_assert(NWW == (HW / 32) * (KW / 16) * 2, "a warp: 32 heads x 16 keys over one half of the lanes");
static_assert(HW == KW && NTW == HW * LPR, "the copy mapping: LPR threads a row of q and of the key tile");
static_assert(NTW == HW * 8 && KW == 64, "softmax mapping: 8 threads a head, keys 4i.. and 32 + 4i..");

struct __align__(16) wide_smem_t {
    uint16_t q[HW][ROW];       /* the group's queries, bf16 */
    uint16_t k[2][KW][ROW];    /* the double-buffered key tile (zero rows for invalid entries) */
    float s[HW][SROW];         /* scaled scores, -inf for invalid keys */
    uint16_t p[HW][PWROW];     /* bf16-rounded probabilities */
    float alpha[HW], m[HW], l[HW];
    int valid[2][KW];          /* the buffer's key is valid */
};
constexpr size_t WIDE_SMEM = sizeof(wide_smem_t);
static_assert(WIDE_SMEM <= 232448, "the H100 / H200 opt-in limit, 227 KiB");

/* Copy thread tid's share of a 512-lane bf16 row into dst (a shared row):
 * chunks tid % LPR + LPR i, zeros where row is NULL. */
__device__ inline void copy_row(uint16_t *dst, const uint8_t *row, const void *any)
{
    const int c0 = threadIdx.x % LPR;
#pragma unroll
    for (int i = 0; i < CHW; i++) {
        const int ch = c0 + LPR * i;
        gpu_async_copy16(dst + ch * 8, row ? row + ch * 16 : any, row != nullptr);
    }
}

template <typename Src>
__global__ void __launch_bounds__(NTW, 1) attn_wide_kernel(Src src, const uint16_t *__restrict__ q,
                                                           const float *__restrict__ sink, long long H,
                                                           int wgroups, int groups, int splits, float scale,
                                                           uint16_t *__restrict__ out, float *__restrict__ part)
{
    extern __shared__ __align__(16) unsigned char wide_raw[];
    wide_smem_t &sm = *reinterpret_cast<wide_smem_t *>(wide_raw);
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const long long tg = blockIdx.x / splits;
    const int split = blockIdx.x % splits;
    const long long t = tg / wgroups;
    const long long h0 = (long long)(tg % wgroups) * HW;
    const int nh = H - h0 < HW ? (int)(H - h0) : HW;
    const int crow = tid / LPR; /* the q row and key row this thread copies */

    /* the group's q rows (heads past H: zeros) */
    copy_row(sm.q[crow], crow < nh ? reinterpret_cast<const uint8_t *>(q + (t * H + h0 + crow) * D) : nullptr, q);

    const long long count = src.count(t);
    const long long per = ((count + KW - 1) / KW + splits - 1) / splits * KW;
    const long long jb = split * per, n = count < jb + per ? count : jb + per;
    auto row_at = [&](long long j) -> const uint8_t * { return j < n ? src.row_ptr(t, j) : nullptr; };
    /* one tile's copies into buffer b: this thread's share of key row crow */
    auto issue = [&](int b, const uint8_t *row) {
        copy_row(sm.k[b][crow], row, q);
        if (tid % LPR == 0)
            sm.valid[b][crow] = row != nullptr;
    };
    const uint8_t *nxt = nullptr; /* this thread's key row of the tile after the one in flight */
    if (jb < n) {
        issue(0, row_at(jb + crow));
        nxt = row_at(jb + KW + crow);
    }

    /* softmax mapping: head sh, keys 4 si .. + 3 and 32 + 4 si .. + 3; m and l
     * replicated over the head's 8 threads */
    const int sh = tid / 8, si = tid % 8;
    float m_run = NEG_INIT, l_run = 0.0f;
    const int c0 = CPW * warp; /* P.V: output columns c0 .. c0 + CPW - 1 of all HW heads */
    mma::acc16 acc[MTW][NTLW];
#pragma unroll
    for (int mt = 0; mt < MTW; mt++)
#pragma unroll
        for (int nt = 0; nt < NTLW; nt++)
            mma::zero(acc[mt][nt]);

    int b = 0;
    for (long long j0 = jb; j0 < n; j0 += KW, b ^= 1) {
        gpu_async_wait_all();
        /* tile j0 (and q) landed everywhere; the previous tile's P.V is done,
         * so buffer b ^ 1, sm.p and sm.alpha are free */
        __syncthreads();
        if (j0 + KW < n) {
            issue(b ^ 1, nxt); /* lands while this tile is computed */
            nxt = row_at(j0 + 2 * KW + crow);
        }

        /* scores: tl.dot in fp32, then x scale (docs/semantics/attention.md A8.3 [S9]) */
        {
            /* warp w: heads 32 (w >> 3) .., keys 16 ((w >> 1) & 3) .., dims 256 (w & 1) ..:
             * two head tiles share each key fragment (3 ldmatrix for 4 mma, not 4 for 4);
             * the dims-256.. half goes to sm.s raw, then the other adds it: fl(lo + hi) */
            const int hb = 32 * (warp >> 3), kb = 16 * ((warp >> 1) & 3), dh = warp & 1, kd = 256 * dh;
            mma::acc16 sc[2];
            mma::zero(sc[0]);
            mma::zero(sc[1]);
#pragma unroll 4
            for (int k0 = kd; k0 < kd + D / 2; k0 += 16) {
                mma::frag_a fa0, fa1;
                mma::frag_b fb;
                mma::load_frag_b(fb, &sm.k[b][kb][k0], ROW);
                mma::load_frag_a(fa0, &sm.q[hb][k0], ROW);
                mma::load_frag_a(fa1, &sm.q[hb + 16][k0], ROW);
                mma::mma_frag(sc[0], fa0, fb);
                mma::mma_frag(sc[1], fa1, fb);
            }
            if (dh) {
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
#pragma unroll
                    for (int e = 0; e < mma::ACC; e += 2) {
                        const int h = hb + 16 * mt + mma::acc_row(lane, e), k = kb + mma::acc_col(lane, e);
                        *reinterpret_cast<float2 *>(&sm.s[h][k]) = make_float2(sc[mt].v[e], sc[mt].v[e + 1]);
                    }
            }
            __syncthreads();
            if (!dh) {
#pragma unroll
                for (int mt = 0; mt < 2; mt++)
#pragma unroll
                    for (int e = 0; e < mma::ACC; e += 2) {
                        const int h = hb + 16 * mt + mma::acc_row(lane, e), k = kb + mma::acc_col(lane, e);
                        float2 v = *reinterpret_cast<const float2 *>(&sm.s[h][k]);
                        v.x = sm.valid[b][k] ? (sc[mt].v[e] + v.x) * scale : -INFINITY;
                        v.y = sm.valid[b][k + 1] ? (sc[mt].v[e + 1] + v.y) * scale : -INFINITY;
                        *reinterpret_cast<float2 *>(&sm.s[h][k]) = v;
                    }
            }
        }
        __syncthreads();

        /* online softmax of head sh over the tile's KW keys */
        {
            const float4 a = *reinterpret_cast<const float4 *>(&sm.s[sh][4 * si]);
            const float4 c = *reinterpret_cast<const float4 *>(&sm.s[sh][32 + 4 * si]);
            const float v[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
            float mx = v[0];
#pragma unroll
            for (int i = 1; i < 8; i++)
                mx = fmaxf(mx, v[i]);
            for (int off = 4; off; off >>= 1) /* the head's 8 lanes, an aligned group */
                mx = fmaxf(mx, __shfl_xor(mx, off));
            const float m_new = fmaxf(m_run, mx);
            float ps = 0.0f;
            uint32_t pb[8];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float p = expf(v[i] - m_new); /* invalid: e^-inf = 0 */
                ps += p;
                pb[i] = bf16_rne(p); /* p cast to bf16 before P.V [S9] */
            }
            for (int off = 4; off; off >>= 1) /* fixed order: bitwise identical reruns */
                ps += __shfl_xor(ps, off);
            const float alpha = expf(m_run - m_new);
            l_run = l_run * alpha + ps; /* l sums the unrounded p [S9] */
            m_run = m_new;
            *reinterpret_cast<uint2 *>(&sm.p[sh][4 * si]) = make_uint2(pb[0] | pb[1] << 16, pb[2] | pb[3] << 16);
            *reinterpret_cast<uint2 *>(&sm.p[sh][32 + 4 * si]) =
                make_uint2(pb[4] | pb[5] << 16, pb[6] | pb[7] << 16);
            if (si == 0)
                sm.alpha[sh] = alpha;
        }
        __syncthreads();

        /* P.V: rescale, then the tile's KW keys in steps of 16 */
#pragma unroll
        for (int mt = 0; mt < MTW; mt++)
#pragma unroll
            for (int e = 0; e < mma::ACC; e++) {
                const float al = sm.alpha[16 * mt + mma::acc_row(lane, e)];
#pragma unroll
                for (int nt = 0; nt < NTLW; nt++)
                    acc[mt][nt].v[e] *= al;
            }
#pragma unroll
        for (int kk = 0; kk < KW; kk += 16) {
            mma::frag_a fa[MTW];
            mma::frag_b fb[NTLW];
#pragma unroll
            for (int mt = 0; mt < MTW; mt++)
                mma::load_frag_a(fa[mt], &sm.p[16 * mt][kk], PWROW);
#pragma unroll
            for (int nt = 0; nt < NTLW; nt++)
                mma::load_frag_b_kn(fb[nt], &sm.k[b][kk][c0 + 16 * nt], ROW);
#pragma unroll
            for (int mt = 0; mt < MTW; mt++)
#pragma unroll
                for (int nt = 0; nt < NTLW; nt++)
                    mma::mma_frag(acc[mt][nt], fa[mt], fb[nt]);
        }
    }
    gpu_async_wait_all(); /* an empty split's q copies */

    if (splits > 1) { /* the partials of each 16-head group, combine_kernel's layout; heads past H skipped */
        auto pbase = [&](int h) {
            return part + ((t * groups + (h0 + h) / HG) * splits + split) * PART + ((h0 + h) % HG) * D;
        };
        if (si == 0 && h0 + sh < H) {
            float *pb = part + ((t * groups + (h0 + sh) / HG) * splits + split) * PART + HG * D;
            pb[(h0 + sh) % HG] = m_run;
            pb[HG + (h0 + sh) % HG] = l_run;
        }
#pragma unroll
        for (int mt = 0; mt < MTW; mt++)
#pragma unroll
            for (int nt = 0; nt < NTLW; nt++)
#pragma unroll
                for (int e = 0; e < mma::ACC; e += 2) {
                    const int h = 16 * mt + mma::acc_row(lane, e), col = c0 + 16 * nt + mma::acc_col(lane, e);
                    if (h < nh)
                        *reinterpret_cast<float2 *>(pbase(h) + col) =
                            make_float2(acc[mt][nt].v[e], acc[mt][nt].v[e + 1]);
                }
        return;
    }
    if (si == 0) {
        sm.m[sh] = m_run;
        sm.l[sh] = l_run;
    }
    __syncthreads();
    /* sink merge: the sink is in the denominator only (docs/semantics/attention.md A8.1, A8.3 [S9, S23]) */
#pragma unroll
    for (int mt = 0; mt < MTW; mt++)
#pragma unroll
        for (int e = 0; e < mma::ACC; e += 2) {
            const int h = 16 * mt + mma::acc_row(lane, e);
            if (h >= nh)
                continue; /* heads past H: computed on zero queries, never stored */
            const sink_merge mg = merge_sink(sm.m[h], sm.l[h], sink[h0 + h]);
#pragma unroll
            for (int nt = 0; nt < NTLW; nt++) {
                const int col = c0 + 16 * nt + mma::acc_col(lane, e);
                *reinterpret_cast<uint32_t *>(out + (t * H + h0 + h) * D + col) =
                    bf16_rne(mg.out(acc[mt][nt].v[e])) | bf16_rne(mg.out(acc[mt][nt].v[e + 1])) << 16;
            }
        }
}
#endif

/* How many key splits a launch of `blocks` (token, head group) blocks uses,
 * for rows of at most max_n entries: enough blocks to fill the device
 * (about `target` in flight) and at least MIN_SPLIT_TILES tiles of `kt`
 * keys per split; from the shapes only, so a case rounds the same way on
 * every device of a form.  DSV4_HIP_ATTN_SPLITS (1..16) overrides it, for
 * tuning.  The form above: 16-key tiles, about 1024 blocks (of 256
 * threads, two an SM).  The wide form (512 threads, one block an SM): at
 * most WIDE_WAVE blocks, one wave of a 132-SM H100 / H200, so the split
 * count is rounded down: the H200 ran the 64-token decode bench line at 2
 * splits (128 blocks) in 0.131 ms, at 3 in 0.178, at 4 in 0.150 and at 1
 * in 0.209 (DSV4_HIP_ATTN_SPLITS). */
constexpr long long SPLIT_TARGET = 1024, WIDE_WAVE = 128, MIN_SPLIT_TILES = 8, WIDE_MIN_SPLIT_TILES = 4;

inline int split_count(long long blocks, long long max_n, long long kt, long long min_tiles, bool wide)
{
    const char *env = getenv("DSV4_HIP_ATTN_SPLITS");
    if (env && atoi(env) >= 1 && atoi(env) <= MAX_SPLITS)
        return atoi(env);
    if (blocks <= 0 || blocks >= (wide ? WIDE_WAVE : SPLIT_TARGET / 2))
        return 1;
    long long s = wide ? WIDE_WAVE / blocks : (SPLIT_TARGET + blocks - 1) / blocks;
    const long long by_keys = (max_n + kt * min_tiles - 1) / (kt * min_tiles);
    s = s < by_keys ? s : by_keys;
    return s < 1 ? 1 : s > MAX_SPLITS ? MAX_SPLITS : (int)s;
}

/* Whether a launch takes the wide form: NVIDIA builds on a device with the
 * opt-in shared memory it needs (sm_80+), rows already bf16 (the fused
 * paged decode stays on the form above), and H >= WIDE_MIN_H; the env var
 * DSV4_HIP_ATTN_WIDE=0 forces the form above, =1 the wide form for any H
 * (where the device allows: for tests and comparisons). */
constexpr long long WIDE_MIN_H = 64;

inline bool wide_device()
{
#ifdef DSV4_ATTN_WIDE
    static const bool ok = [] {
        int dev = 0, major = 0, optin = 0;
        if (hipGetDevice(&dev) != hipSuccess ||
            hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, dev) != hipSuccess ||
            hipDeviceGetAttribute(&optin, hipDeviceAttributeSharedMemPerBlockOptin, dev) != hipSuccess)
            return false;
        return major >= 8 && (size_t)optin >= WIDE_SMEM;
    }();
    return ok;
#else
    return false;
#endif
}

inline bool use_wide(long long H, bool bf16_rows)
{
    const char *env = getenv("DSV4_HIP_ATTN_WIDE");
    if (!bf16_rows || (env && env[0] == '0'))
        return false;
    return ((env && env[0] == '1') || H >= WIDE_MIN_H) && wide_device();
}

/* A launch's form: wide or not, its head groups (of HW or HG heads), splits. */
struct plan {
    bool wide;
    long long groups;
    int splits;
};

inline plan plan_of(long long T, long long H, long long max_n, bool bf16_rows)
{
    plan p;
    p.wide = use_wide(H, bf16_rows);
#ifdef DSV4_ATTN_WIDE
    if (p.wide) {
        p.groups = (H + HW - 1) / HW;
        p.splits = split_count(T * p.groups, max_n, KW, WIDE_MIN_SPLIT_TILES, true);
        return p;
    }
#endif
    p.groups = (H + HG - 1) / HG;
    p.splits = split_count(T * p.groups, max_n, KT, MIN_SPLIT_TILES, false);
    return p;
}

/* Bytes of split-K partials a launch of T tokens x H heads with at most
 * max_n entries needs (0: one split); bf16_rows: Src::BF16_ROWS.  Both
 * forms write PART floats per (token, 16-head group, split). */
inline size_t part_bytes(long long T, long long H, long long max_n, bool bf16_rows)
{
    const plan p = plan_of(T, H, max_n, bf16_rows);
    const long long groups16 = (H + HG - 1) / HG;
    return p.splits > 1 ? (size_t)(T * groups16 * p.splits) * PART * sizeof(float) : 0;
}

/* The attention and, when split, its merge; part: part_bytes of scratch. */
template <typename Src>
inline hipError_t attn_launch_parts(const Src &src, const void *q, const void *sink, long long T, long long H,
                                    double scale, long long max_n, void *out, float *part, hipStream_t stream)
{
    const plan p = plan_of(T, H, max_n, Src::BF16_ROWS);
    const long long groups16 = (H + HG - 1) / HG;
#ifdef DSV4_ATTN_WIDE
    if constexpr (Src::BF16_ROWS) {
        if (p.wide) {
            static const hipError_t attr = hipFuncSetAttribute(
                attn_wide_kernel<Src>, hipFuncAttributeMaxDynamicSharedMemorySize, (int)WIDE_SMEM);
            if (attr != hipSuccess)
                return attr;
            hipLaunchKernelGGL(attn_wide_kernel<Src>, dim3((unsigned)(T * p.groups * p.splits)), dim3(NTW),
                               WIDE_SMEM, stream, src, (const uint16_t *)q, (const float *)sink, H, (int)p.groups,
                               (int)groups16, p.splits, (float)scale, (uint16_t *)out, part);
        }
    }
#endif
    if (!p.wide)
        hipLaunchKernelGGL(attn_kernel<Src>, dim3((unsigned)(T * p.groups * p.splits)), dim3(NT), 0, stream, src,
                           (const uint16_t *)q, (const float *)sink, H, (int)p.groups, p.splits, (float)scale,
                           (uint16_t *)out, part);
    if (p.splits > 1)
        hipLaunchKernelGGL(combine_kernel, dim3((unsigned)(T * groups16 * CPARTS)), dim3(NT), 0, stream, part,
                           (const float *)sink, H, (int)groups16, p.splits, (uint16_t *)out);
    return hipGetLastError();
}

/* max_n: the most entries a token has (host side, for the split count). */
template <typename Src>
inline hipError_t attn_launch(const Src &src, const void *q, const void *sink, long long T, long long H, double scale,
                              long long max_n, void *out, hipStream_t stream)
{
    if (T == 0 || H == 0)
        return hipSuccess;
    float *part = nullptr;
    const size_t pb = part_bytes(T, H, max_n, Src::BF16_ROWS);
    if (pb) {
        hipError_t e = dsv4_hip_scratch(pb, (void **)&part);
        if (e != hipSuccess)
            return e;
    }
    return attn_launch_parts(src, q, sink, T, H, scale, max_n, out, part, stream);
}

} // namespace sattn

#endif
