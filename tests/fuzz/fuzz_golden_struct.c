/* fuzz_golden_struct.c - structure-aware libFuzzer target for the HDF5
 * golden reader (harness/golden.c).
 *
 * An input is not a file image but a small fixed-size description (gs_desc:
 * the op, root attributes, parameters, and up to GS_TENSORS datasets with
 * their shape, storage type, layout, chunking, filters, attributes, link
 * kind and an optional chunk "lie").  LLVMFuzzerCustomMutator mutates the
 * description field by field; LLVMFuzzerTestOneInput writes it through the
 * HDF5 C API as a real file in a temporary folder (with a sibling file for
 * external links and virtual-dataset sources, raw files for external
 * storage), then reads it with dsv4_golden_read.  So every input is a
 * well-formed HDF5 file with valid Fletcher32 checksums, and the fuzzer
 * reaches what byte flips rarely do: external storage, external and soft
 * links, virtual datasets, hard-linked duplicates, chunks rewritten with
 * H5Dwrite_chunk whose stored size or content lies about the data (with a
 * recomputed, valid checksum), deflate bombs, odd types and attributes.
 *
 * The oracle: the reader returns DSV4_OK or DSV4_EINPUT with a message,
 * never crashes or hangs; and a dataset written honestly (chunked with
 * Fletcher32, no lie, a plain hard link) that the reader accepts reads back
 * with exactly the bytes written.  The memory limit is 64 MiB, as in
 * fuzz_golden.c.  libhdf5's own leaks on error paths are suppressed by
 * library name (tests/fuzz/README.md).  GS_VERBOSE=1 in the environment
 * prints each description and the reader's answer (for triage). */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "../../harness/golden.h"
#include "../../harness/golden_h5.h"
#include "../../harness/op.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomCrossOver(const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2,
                                 uint8_t *out, size_t max_out, unsigned int seed);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
#ifdef GS_STANDALONE
/* Outside libFuzzer (the seed writer, the replay test): one byte flipped. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size)
{
    (void)max_size;
    if (size)
        data[(size * 7919u) % size] ^= (uint8_t)(1u << (size % 8));
    return size;
}
#endif
#ifndef GS_NO_LSAN_SUPPRESSIONS
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5_serial.so\n"; }
#endif

/* ---- the description ------------------------------------------------ */

#define GS_TENSORS 6
#define GS_PARAMS 6
#define GS_MAGIC 0x31534447u /* "GDS1" */

enum { GRP_INPUTS, GRP_OUTPUTS, GRP_PARAMS, GRP_COUNT };
/* How /inputs, /outputs or /params is reached from the root. */
enum { GL_GROUP, GL_SOFT, GL_EXT_SIDE, GL_EXT_SELF, GL_EXT_MISSING, GL_EXT_FIFO, GL_DATASET,
       GL_ABSENT, GL_HARD_OTHER, GL_COUNT };
/* Storage layout of one dataset. */
enum { LAY_CHUNKED, LAY_CONTIGUOUS, LAY_COMPACT, LAY_EXTERNAL, LAY_VIRTUAL_SIDE,
       LAY_VIRTUAL_SELF, LAY_CHUNKED_EARLY, LAY_COUNT };
/* The dataset's link in its group. */
enum { LINK_HARD, LINK_SOFT, LINK_SOFT_DANGLING, LINK_EXT_SIDE, LINK_EXT_FIFO, LINK_HARD_DUP,
       LINK_COUNT };
/* What is done to one stored chunk after the honest write. */
enum { LIE_NONE, LIE_TRUNCATE, LIE_EXTEND, LIE_GARBAGE, LIE_BOMB, LIE_MASK, LIE_SWAP,
       LIE_BAD_SUM, LIE_COUNT };
/* Filter bits, applied in this order. */
enum { F_SHUFFLE = 1, F_DEFLATE = 2, F_FLETCHER = 4, F_NBIT = 8, F_SCALEOFFSET = 16,
       F_UNKNOWN = 32 };
/* Attribute bits of one dataset. */
enum { A_NO_DTYPE = 1, A_DTYPE_INT = 2, A_DTYPE_VLEN = 4, A_OUTPUT_DTYPE = 8, A_PACKING = 16,
       A_LONG = 32, A_EXTRA = 64 };

typedef struct gs_tensor {
    uint8_t used, group, name_id, dtype_mode, type_mode, ndim, layout, filters;
    uint8_t chunk_div, lie, link, attrs, unlimited, lie_chunk;
    uint16_t dims[7];
    uint32_t data_seed, lie_arg;
} gs_tensor;

typedef struct gs_param {
    uint8_t used, name_id, kind, n;
    int64_t value;
} gs_param;

typedef struct gs_desc {
    uint32_t magic;
    uint8_t op_id, variant_id, schema_mode, root_mode;
    uint8_t group_link[GRP_COUNT], libver, userblock;
    int64_t seed;
    gs_param p[GS_PARAMS];
    gs_tensor t[GS_TENSORS];
} gs_desc;

static uint32_t gs_rand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Every byte pattern decodes into a description whose fields are in range. */
static void gs_sanitize(gs_desc *d)
{
    d->magic = GS_MAGIC;
    d->op_id %= (uint8_t)dsv4_op_count();
    for (int g = 0; g < GRP_COUNT; g++)
        d->group_link[g] %= GL_COUNT;
    d->libver %= 3;
    d->userblock %= 3;
    for (int k = 0; k < GS_TENSORS; k++) {
        gs_tensor *t = &d->t[k];
        t->used &= 1;
        t->group %= 3; /* 2 = the root group, outside /inputs and /outputs */
        t->ndim %= 8;  /* 7 is past DSV4_MAX_DIMS */
        t->layout %= LAY_COUNT;
        t->filters &= 63;
        t->lie %= LIE_COUNT;
        t->link %= LINK_COUNT;
        t->type_mode %= 10;
        t->dtype_mode %= DSV4_DTYPE_COUNT + 3;
        t->unlimited &= 1;
        t->chunk_div = (uint8_t)(t->chunk_div % 5);
        for (int i = 0; i < 7; i++)
            t->dims[i] = t->dims[i] > 70 && t->dims[i] != 0xffff ? t->dims[i] % 70 : t->dims[i];
    }
    for (int k = 0; k < GS_PARAMS; k++) {
        d->p[k].used &= 1;
        d->p[k].kind %= 7;
    }
}

/* A description the reader accepts: the op's inputs and outputs, honest. */
static void gs_default(gs_desc *d, uint32_t seed)
{
    memset(d, 0, sizeof *d);
    d->magic = GS_MAGIC;
    d->op_id = (uint8_t)(seed % (uint32_t)dsv4_op_count());
    d->libver = 1;
    const dsv4_op *op = dsv4_op_at(d->op_id);
    int k = 0;
    for (int g = 0; g < 2; g++)
        for (const dsv4_io_spec *io = g ? dsv4_op_outputs(op) : dsv4_op_inputs(op); io && io->name; io++) {
            if (k == GS_TENSORS)
                break;
            gs_tensor *t = &d->t[k];
            t->used = 1;
            t->group = (uint8_t)g;
            t->name_id = (uint8_t)(io - (g ? dsv4_op_outputs(op) : dsv4_op_inputs(op)));
            t->ndim = 2;
            t->dims[0] = (uint16_t)(3 + k);
            t->dims[1] = 5;
            t->filters = F_SHUFFLE | F_DEFLATE | F_FLETCHER;
            t->chunk_div = 1;
            t->data_seed = seed + (uint32_t)k;
            k++;
        }
}

/* ---- the temporary folder ------------------------------------------- */

/* GS_SKIP_OPEN=1 in the environment: leave out what reproduces the open
 * findings of tests/fuzz/README.md (FIFO targets, data from outside the
 * file), so that a run explores past them until the reader is fixed. */
static int gs_skip_open;
static char gs_dir[64];
static char gs_main[128], gs_side[128], gs_fifo[128], gs_scratch[128];

static void gs_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", gs_dir, name);
}

/* The folder and what the last input left in it. */
static void gs_cleanup(void)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", gs_dir);
    if (gs_dir[0] && system(cmd) != 0)
        fprintf(stderr, "fuzz_golden_struct: could not remove %s\n", gs_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    dsv4_set_memory_limit((uint64_t)64 << 20);
    dsv4_h5_quiet();
    gs_skip_open = getenv("GS_SKIP_OPEN") != NULL;
    snprintf(gs_dir, sizeof gs_dir, "/tmp/fuzz_gs.XXXXXX");
    if (!mkdtemp(gs_dir))
        abort();
    gs_path(gs_main, sizeof gs_main, "g.h5");
    gs_path(gs_side, sizeof gs_side, "side.h5");
    gs_path(gs_fifo, sizeof gs_fifo, "fifo.h5");
    gs_path(gs_scratch, sizeof gs_scratch, "scratch.h5");
    atexit(gs_cleanup);
    if (mkfifo(gs_fifo, 0600) != 0)
        abort();
    return 0;
}

/* ---- writing ---------------------------------------------------------- */

/* The storage type a dtype must have (data/README.md), and odd ones. */
static hid_t gs_file_type(dsv4_dtype dt, int mode)
{
    switch (mode) {
    case 1: return H5T_STD_I32BE;
    case 2: return H5T_STD_U64LE;
    case 3: return H5T_IEEE_F32BE;
    case 4: return H5T_STD_I8LE;
    case 5: return H5T_STD_U16BE;
    case 6: return H5T_IEEE_F64LE;
    default: return dsv4_h5_file_type(dt);
    }
}

static void gs_str_attr(hid_t loc, const char *name, const char *v, int vlen)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, vlen ? H5T_VARIABLE : strlen(v) + 1);
    hid_t a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Awrite(a, t, vlen ? (const void *)&v : (const void *)v);
        H5Aclose(a);
    }
    H5Sclose(s);
    H5Tclose(t);
}

static void gs_int_attr(hid_t loc, const char *name, hid_t ftype, int n, const int64_t *v)
{
    hsize_t dim = (hsize_t)n;
    hid_t s = n < 0 ? H5Screate(H5S_SCALAR) : n == 0 ? H5Screate(H5S_NULL)
                                                     : H5Screate_simple(1, &dim, NULL);
    hid_t a = H5Acreate2(loc, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        if (n != 0)
            H5Awrite(a, H5T_NATIVE_INT64, v);
        H5Aclose(a);
    }
    H5Sclose(s);
}

static const char *const gs_odd_names[] = {
    "", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "with space",
    "\xc3\xbcnicode", "dtype", "x.y", "inputs"};

static const char *gs_tensor_name(const gs_desc *d, const gs_tensor *t)
{
    const dsv4_op *op = dsv4_op_at(d->op_id);
    const dsv4_io_spec *io = t->group == GRP_OUTPUTS ? dsv4_op_outputs(op) : dsv4_op_inputs(op);
    int n = 0;
    while (io && io[n].name)
        n++;
    int odd = (int)(sizeof gs_odd_names / sizeof gs_odd_names[0]);
    if (n && t->name_id < 200)
        return io[t->name_id % n].name;
    return gs_odd_names[t->name_id % odd];
}

static dsv4_dtype gs_dtype(const gs_desc *d, const gs_tensor *t)
{
    if (t->dtype_mode == 0) { /* the op's own */
        const dsv4_op *op = dsv4_op_at(d->op_id);
        const dsv4_io_spec *io = t->group == GRP_OUTPUTS ? dsv4_op_outputs(op) : dsv4_op_inputs(op);
        int n = 0;
        while (io && io[n].name)
            n++;
        if (!n)
            return DSV4_I32;
        const dsv4_io_spec *s = &io[t->name_id % n];
        return s->golden_dtype != DSV4_DT_NONE && t->group == GRP_OUTPUTS ? s->golden_dtype
                                                                           : s->dtype;
    }
    int k = t->dtype_mode - 1;
    return k < DSV4_DTYPE_COUNT ? (dsv4_dtype)k : DSV4_DT_NONE; /* NONE: an unknown name */
}

/* The dataset's attributes (the schema's dtype, output_dtype, packing). */
static void gs_tensor_attrs(hid_t ds, const gs_tensor *t, dsv4_dtype dt)
{
    const char *name = dt == DSV4_DT_NONE ? "float128" : dsv4_dtype_name(dt);
    char longname[300];
    if (t->attrs & A_LONG) {
        memset(longname, 'f', sizeof longname - 1);
        longname[sizeof longname - 1] = '\0';
        name = longname;
    }
    if (t->attrs & A_DTYPE_INT) {
        int64_t v = 5;
        gs_int_attr(ds, "dtype", H5T_STD_I64LE, -1, &v);
    } else if (!(t->attrs & A_NO_DTYPE)) {
        gs_str_attr(ds, "dtype", name, t->attrs & A_DTYPE_VLEN);
    }
    if (t->attrs & A_OUTPUT_DTYPE)
        gs_str_attr(ds, "output_dtype", t->data_seed & 1 ? "bfloat16" : "nonsense", 0);
    if (t->attrs & A_PACKING)
        gs_str_attr(ds, "packing", t->data_seed & 2 ? "low_nibble_first" : "high", 0);
    if (t->attrs & A_EXTRA) {
        int64_t v[3] = {1, 2, 3};
        gs_int_attr(ds, "extra", H5T_STD_I64LE, 3, v);
    }
}

/* Shape of a tensor; 0xffff in a dim stands for 2^40 (nothing written). */
static int gs_shape(const gs_tensor *t, hsize_t *dims, int *huge)
{
    *huge = 0;
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        dims[i] = t->dims[i] == 0xffff ? (hsize_t)1 << 40 : t->dims[i];
        *huge |= t->dims[i] == 0xffff;
        n = n * (dims[i] ? dims[i] : 1);
    }
    return !*huge && n > (1u << 18); /* too many elements to write: skip */
}

/* dcpl for one tensor, or -1 when the combination cannot be created. */
static hid_t gs_dcpl(const gs_tensor *t, int k, const hsize_t *dims, hid_t ftype, hid_t vsrc_space)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int lay = t->layout;
    if (lay == LAY_CHUNKED || lay == LAY_CHUNKED_EARLY || t->unlimited) {
        hsize_t chunk[8];
        for (int i = 0; i < t->ndim; i++) {
            hsize_t c = t->chunk_div ? dims[i] / t->chunk_div : 1;
            chunk[i] = c ? (c > 4096 ? 4096 : c) : 1;
        }
        if (t->ndim == 0 || H5Pset_chunk(dcpl, t->ndim, chunk) < 0)
            goto bad;
        if (lay == LAY_CHUNKED_EARLY)
            H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
        if (t->filters & F_SHUFFLE)
            H5Pset_shuffle(dcpl);
        if (t->filters & F_NBIT)
            H5Pset_nbit(dcpl);
        if (t->filters & F_SCALEOFFSET)
            H5Pset_scaleoffset(dcpl, H5Tget_class(ftype) == H5T_FLOAT ? H5Z_SO_FLOAT_DSCALE
                                                                        : H5Z_SO_INT, 2);
        if (t->filters & F_DEFLATE)
            H5Pset_deflate(dcpl, 1 + (t->data_seed % 9));
        if (t->filters & F_UNKNOWN) {
            unsigned cd[1] = {7};
            H5Pset_filter(dcpl, 32123, H5Z_FLAG_OPTIONAL, 1, cd);
        }
        if (t->filters & F_FLETCHER)
            H5Pset_fletcher32(dcpl);
    } else if (lay == LAY_COMPACT) {
        H5Pset_layout(dcpl, H5D_COMPACT);
    } else if (lay == LAY_EXTERNAL) {
        char raw[160], rel[32];
        snprintf(rel, sizeof rel, "raw%d.bin", k);
        gs_path(raw, sizeof raw, rel);
        /* raw data outside the file: a raw file of ours, a device, a FIFO */
        int fifo = t->lie_arg % 5 == 1 && !gs_skip_open;
        const char *name = t->lie_arg % 5 == 0 ? "/dev/zero" : fifo ? gs_fifo : raw;
        hsize_t size = t->lie_arg % 3 ? H5F_UNLIMITED : (hsize_t)(t->lie_arg % 4096);
        if (H5Pset_external(dcpl, name, (off_t)(t->lie_arg % 97), size) < 0)
            goto bad;
    } else if (lay == LAY_VIRTUAL_SIDE || lay == LAY_VIRTUAL_SELF) {
        hid_t vspace = H5Screate_simple(t->ndim, dims, NULL);
        char src[32];
        snprintf(src, sizeof src, "/src%d", k);
        herr_t e = vspace < 0 ? -1 : H5Pset_virtual(dcpl, vspace, lay == LAY_VIRTUAL_SELF ? "." :
                                                    t->lie_arg & 1 ? gs_side : "side.h5", src,
                                                    vsrc_space);
        if (vspace >= 0)
            H5Sclose(vspace);
        if (t->ndim == 0 || e < 0)
            goto bad;
    }
    return dcpl;
bad:
    H5Pclose(dcpl);
    return -1;
}

/* What was written for one tensor, for the read-back oracle: a link made
 * in group grp (after group redirections), and the bytes when honest. */
typedef struct gs_written {
    int linked, honest, outside, grp;
    char name[80];
    size_t n;
    uint8_t *bytes;
} gs_written;

static gs_written gs_w[GS_TENSORS];

static uint8_t *gs_fill(size_t n, uint32_t seed)
{
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        abort();
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)gs_rand(&seed);
    return b;
}

/* The filtered bytes of an all-zero chunk of n bytes (a deflate bomb when
 * n is far above the chunk's size), made in an in-memory scratch file with
 * the tensor's filters but no checksum; NULL when it cannot be made. */
static uint8_t *gs_bomb(size_t n, unsigned filters, size_t *len)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 20, 0);
    hid_t f = H5Fcreate(gs_scratch, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return NULL;
    hsize_t dim = n;
    hid_t sp = H5Screate_simple(1, &dim, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &dim);
    if (filters & F_SHUFFLE)
        H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 9);
    hid_t d = H5Dcreate2(f, "z", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    uint8_t *zero = calloc(n, 1), *out = NULL;
    hsize_t off = 0, size = 0;
    uint32_t mask = 0;
    if (d >= 0 && zero && H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, zero) >= 0 &&
        H5Dget_chunk_storage_size(d, &off, &size) >= 0 && size > 0 && (out = malloc(size)) &&
        H5Dread_chunk(d, H5P_DEFAULT, &off, &mask, out) < 0) {
        free(out);
        out = NULL;
    }
    *len = size;
    free(zero);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
    return out;
}

/* Rewrites one stored chunk of ds so that its size or content lies, with a
 * valid Fletcher32 checksum unless the lie is the checksum itself. */
static void gs_lie(hid_t ds, const gs_tensor *t, size_t chunk_bytes)
{
    hid_t sp = H5Dget_space(ds);
    hsize_t nchunks = 0, off[8] = {0}, off2[8] = {0}, size = 0, size2 = 0;
    haddr_t addr;
    unsigned mask = 0;
    if (sp < 0 || H5Dget_num_chunks(ds, sp, &nchunks) < 0 || nchunks == 0 ||
        H5Dget_chunk_info(ds, sp, t->lie_chunk % nchunks, off, &mask, &addr, &size) < 0 ||
        size == 0 || size > (64u << 20)) {
        if (sp >= 0)
            H5Sclose(sp);
        return;
    }
    uint8_t *raw = malloc(size), *pay = NULL;
    uint32_t fmask = 0;
    if (!raw || H5Dread_chunk(ds, H5P_DEFAULT, off, &fmask, raw) < 0) {
        free(raw);
        H5Sclose(sp);
        return;
    }
    int sum = (t->filters & F_FLETCHER) && size >= 4;
    size_t plen = sum ? size - 4 : size, extra = t->lie_arg % 4096;
    uint32_t r = t->lie_arg, wmask = fmask;
    switch (t->lie) {
    case LIE_TRUNCATE: plen = plen ? t->lie_arg % plen : 0; break;
    case LIE_EXTEND:
        pay = gs_fill(plen + extra, t->data_seed);
        memcpy(pay, raw, plen);
        plen += extra;
        break;
    case LIE_GARBAGE: plen = 1 + t->lie_arg % 2048; pay = gs_fill(plen, r); break;
    case LIE_BOMB: {
        size_t n = chunk_bytes * (2 + t->lie_arg % 255);
        pay = gs_bomb(n > (16u << 20) ? 16u << 20 : n, t->filters, &plen);
        if (!pay)
            plen = 0;
        break;
    }
    case LIE_MASK: wmask = 1 + t->lie_arg % 7; break;
    case LIE_SWAP:
        if (nchunks > 1 &&
            H5Dget_chunk_info(ds, sp, (t->lie_chunk + 1) % nchunks, off2, &mask, &addr, &size2) >= 0 &&
            size2 > 0 && size2 < (64u << 20)) {
            pay = malloc(size2);
            if (pay && H5Dread_chunk(ds, H5P_DEFAULT, off2, &fmask, pay) >= 0)
                plen = sum && size2 >= 4 ? size2 - 4 : size2;
        }
        break;
    default: break;
    }
    const uint8_t *src = pay ? pay : raw;
    /* a stored size under 4 bytes (no room for the checksum) now and then */
    int tiny = t->lie == LIE_TRUNCATE && (t->lie_arg >> 12) % 4 == 0;
    size_t n = sum && !tiny ? plen + 4 : plen;
    uint8_t *out = malloc(n ? n : 1);
    if (out && n) {
        memcpy(out, src, plen < n ? plen : n);
        if (sum && !tiny) {
            uint32_t c = dsv4_h5_fletcher32(src, plen);
            if (t->lie == LIE_BAD_SUM)
                c ^= 1u << (t->lie_arg % 32);
            for (int i = 0; i < 4; i++)
                out[plen + (size_t)i] = (uint8_t)(c >> (8 * i)); /* little-endian */
        }
        herr_t e = H5Dwrite_chunk(ds, H5P_DEFAULT, wmask, off, n, out);
        if (getenv("GS_VERBOSE"))
            fprintf(stderr, "  lie %d: chunk of %llu bytes rewritten as %zu, mask %u: %s\n", t->lie,
                    (unsigned long long)size, n, wmask, e < 0 ? "failed" : "ok");
    }
    free(out);
    free(pay);
    free(raw);
    H5Sclose(sp);
}

/* A virtual dataset's source: /src<k> in the side file or the main file. */
static hid_t gs_vds_source(hid_t main, hid_t side, const gs_tensor *t, int k, hid_t ftype,
                           const hsize_t *dims)
{
    char src[32];
    snprintf(src, sizeof src, "/src%d", k);
    hid_t sp = H5Screate_simple(t->ndim ? t->ndim : 1, dims, NULL);
    hid_t d = H5Dcreate2(t->layout == LAY_VIRTUAL_SELF ? main : side, src, ftype, sp,
                         H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    if (d >= 0 && n >= 0 && n <= (1 << 18)) {
        uint8_t *b = gs_fill((size_t)n * H5Tget_size(ftype), t->data_seed);
        H5Dwrite(d, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, b);
        free(b);
    }
    if (d >= 0)
        H5Dclose(d);
    return sp;
}

/* The group whose objects /inputs (g = 0) or /outputs (1) shows. */
static int gs_phys_group(const gs_desc *d, int g)
{
    return g != GRP_INPUTS && g < GRP_COUNT && d->group_link[g] == GL_HARD_OTHER &&
                   d->group_link[GRP_INPUTS] == GL_GROUP
               ? GRP_INPUTS
               : g;
}

static void gs_record(int k, int grp, const char *name)
{
    gs_written *w = &gs_w[k];
    w->linked = 1;
    w->grp = grp;
    snprintf(w->name, sizeof w->name, "%s", name);
}

/* home: the tensor's group, in file hfile (the main or the side file). */
static void gs_write_tensor(hid_t home, hid_t hfile, hid_t main, hid_t side, const gs_desc *d,
                            int k)
{
    const gs_tensor *t = &d->t[k];
    const char *name = gs_tensor_name(d, t);
    int grp = t->group == 2 ? 2 : gs_phys_group(d, t->group);
    dsv4_dtype dt = gs_dtype(d, t);
    hid_t ftype = gs_file_type(dt == DSV4_DT_NONE ? DSV4_U8 : dt, t->type_mode);
    hsize_t dims[8], maxdims[8];
    int huge;
    if (!name[0] || gs_shape(t, dims, &huge))
        return;
    size_t numel = 1, esize = H5Tget_size(ftype);
    for (int i = 0; i < t->ndim; i++) {
        numel *= huge ? 1 : dims[i];
        maxdims[i] = t->unlimited && i == 0 ? H5S_UNLIMITED : dims[i];
    }
    if (t->link == LINK_HARD_DUP && k > 0) { /* a second name for an earlier dataset */
        char earlier[40];
        snprintf(earlier, sizeof earlier, "/d%d", k - 1);
        if (H5Lcreate_hard(hfile, earlier, home, name, H5P_DEFAULT, H5P_DEFAULT) >= 0)
            gs_record(k, grp, name);
        return;
    }
    if (t->link == LINK_SOFT_DANGLING || t->link == LINK_EXT_FIFO) {
        herr_t e = t->link == LINK_SOFT_DANGLING
                       ? H5Lcreate_soft("/nowhere", home, name, H5P_DEFAULT, H5P_DEFAULT)
                       : H5Lcreate_external(gs_fifo, "/x", home, name, H5P_DEFAULT, H5P_DEFAULT);
        if (e >= 0)
            gs_record(k, grp, name);
        return;
    }
    hid_t vsrc = -1;
    if (t->layout == LAY_VIRTUAL_SIDE || t->layout == LAY_VIRTUAL_SELF)
        vsrc = gs_vds_source(main, side, t, k, ftype, dims);
    hid_t space = t->ndim ? H5Screate_simple(t->ndim, dims, maxdims) : H5Screate(H5S_SCALAR);
    hid_t dcpl = gs_dcpl(t, k, dims, ftype, vsrc);
    /* Where the dataset itself lives; /d<k> in the main file is also the
     * target of later hard-link duplicates. */
    char at[40];
    snprintf(at, sizeof at, "/d%d", k);
    hid_t loc = t->link == LINK_EXT_SIDE ? side : hfile;
    hid_t ds = dcpl < 0 ? -1 : H5Dcreate2(loc, at, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds >= 0) {
        uint8_t *b = NULL;
        size_t n = numel * esize;
        int virt = t->layout == LAY_VIRTUAL_SIDE || t->layout == LAY_VIRTUAL_SELF;
        if (!huge && numel > 0 && !virt) {
            b = gs_fill(n, t->data_seed);
            if (H5Dwrite(ds, ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) < 0) {
                free(b);
                b = NULL;
            }
        }
        gs_tensor_attrs(ds, t, dt);
        int chunked = t->layout == LAY_CHUNKED || t->layout == LAY_CHUNKED_EARLY || t->unlimited;
        size_t chunk_bytes = esize;
        if (chunked && t->lie != LIE_NONE && b) {
            hsize_t ch[8];
            H5Pget_chunk(dcpl, 8, ch);
            for (int i = 0; i < t->ndim; i++)
                chunk_bytes *= ch[i];
            gs_lie(ds, t, chunk_bytes);
        }
        H5Dclose(ds);
        /* Name it in its group: a hard link, a soft link, or an external link. */
        herr_t e = t->link == LINK_SOFT ? H5Lcreate_soft(at, home, name, H5P_DEFAULT, H5P_DEFAULT)
                   : t->link == LINK_EXT_SIDE
                       ? H5Lcreate_external(t->lie_arg & 1 ? gs_side : "side.h5", at, home, name,
                                            H5P_DEFAULT, H5P_DEFAULT)
                       : H5Lcreate_hard(loc, at, home, name, H5P_DEFAULT, H5P_DEFAULT);
        unsigned lossless = F_SHUFFLE | F_DEFLATE | F_FLETCHER;
        gs_written *w = &gs_w[k];
        if (e >= 0) {
            gs_record(k, grp, name);
            w->outside = t->layout == LAY_EXTERNAL || t->layout == LAY_VIRTUAL_SIDE;
        }
        if (e >= 0 && b && t->link == LINK_HARD && t->lie == LIE_NONE && chunked &&
            (t->filters & F_FLETCHER) && !(t->filters & ~lossless) && t->type_mode == 0) {
            w->honest = 1;
            w->n = n;
            w->bytes = b;
            b = NULL;
        }
        free(b);
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (vsrc >= 0)
        H5Sclose(vsrc);
    H5Sclose(space);
}

static const char *const gs_group_names[GRP_COUNT] = {"inputs", "outputs", "params"};

static void gs_root_attrs(hid_t f, const gs_desc *d)
{
    const dsv4_op *op = dsv4_op_at(d->op_id);
    int64_t one = 1, two = 2, big = -1, pair[2] = {1, 1};
    double fone = 1.0;
    switch (d->schema_mode % 8) {
    case 0: gs_int_attr(f, "dsv4check_schema", H5T_STD_I64LE, -1, &one); break;
    case 1: gs_int_attr(f, "dsv4check_schema", H5T_STD_I64LE, -1, &two); break;
    case 2: {
        hid_t s = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(f, "dsv4check_schema", H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
            H5Awrite(a, H5T_NATIVE_DOUBLE, &fone);
            H5Aclose(a);
        }
        H5Sclose(s);
        break;
    }
    case 3: gs_str_attr(f, "dsv4check_schema", "1", 0); break;
    case 4: break;
    case 5: gs_int_attr(f, "dsv4check_schema", H5T_STD_U64LE, -1, &big); break;
    case 6: gs_int_attr(f, "dsv4check_schema", H5T_STD_I64LE, 2, pair); break;
    default: gs_int_attr(f, "dsv4check_schema", H5T_STD_I8LE, -1, &one); break;
    }
    int vlen = d->root_mode & 4;
    if (!(d->root_mode & 1))
        gs_str_attr(f, "op", d->root_mode & 2 ? "frobnicate" : op->name, vlen);
    int nv = dsv4_op_variant_count(op);
    const char *variant = d->root_mode & 8 && nv ? dsv4_op_variant_name(op, d->variant_id % nv)
                                                 : "default";
    gs_str_attr(f, "variant", variant, vlen);
    char longcase[300];
    memset(longcase, 'c', sizeof longcase - 1);
    longcase[sizeof longcase - 1] = '\0';
    gs_str_attr(f, "case", d->root_mode & 16 ? longcase : "fuzz", vlen);
    gs_int_attr(f, "seed", d->root_mode & 32 ? H5T_STD_U64LE : H5T_STD_I64LE, -1, &d->seed);
    if (d->root_mode & 64)
        gs_int_attr(f, "generator", H5T_STD_I64LE, -1, &one);
    else
        gs_str_attr(f, "generator", "fuzz_golden_struct", vlen);
}

static void gs_params(hid_t g, const gs_desc *d)
{
    const dsv4_op *op = dsv4_op_at(d->op_id);
    int np = 0;
    while (dsv4_op_params(op)[np].name)
        np++;
    for (int k = 0; k < GS_PARAMS; k++) {
        const gs_param *p = &d->p[k];
        if (!p->used)
            continue;
        const char *name = np && p->name_id < 240 ? dsv4_op_params(op)[p->name_id % np].name
                                                  : gs_odd_names[p->name_id % 7];
        if (!name[0] || H5Aexists(g, name) > 0)
            continue;
        int64_t list[300];
        for (int i = 0; i < 300; i++)
            list[i] = (int64_t)((uint64_t)p->value + (uint64_t)i);
        switch (p->kind) {
        case 0: gs_int_attr(g, name, H5T_STD_I64LE, -1, &p->value); break;
        case 1: {
            double v = (double)p->value / 7.0;
            hid_t s = H5Screate(H5S_SCALAR);
            hid_t a = H5Acreate2(g, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT);
            if (a >= 0) {
                H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
                H5Aclose(a);
            }
            H5Sclose(s);
            break;
        }
        case 2: gs_str_attr(g, name, p->value & 1 ? "auto" : "x", (int)(p->value & 2)); break;
        case 3: gs_int_attr(g, name, H5T_STD_I64LE, p->n + (p->value & 1 ? 44 : 0), list); break;
        case 4: {
            hsize_t dims[2] = {2, 3};
            hid_t s = H5Screate_simple(2, dims, NULL);
            hid_t a = H5Acreate2(g, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
            if (a >= 0) {
                H5Awrite(a, H5T_NATIVE_INT64, list);
                H5Aclose(a);
            }
            H5Sclose(s);
            break;
        }
        case 5: gs_int_attr(g, name, H5T_STD_U64LE, -1, &p->value); break;
        default: gs_int_attr(g, name, H5T_STD_I32LE, 0, list); break; /* a null dataspace */
        }
    }
}

static hid_t gs_fapl(int libver)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
    static const H5F_libver_t low[] = {H5F_LIBVER_EARLIEST, H5F_LIBVER_V18, H5F_LIBVER_LATEST};
    H5Pset_libver_bounds(fapl, low[libver % 3], H5F_LIBVER_LATEST);
    return fapl;
}

/* Writes the description as gs_main (and gs_side, raw files). */
static void gs_write(const gs_desc *d)
{
    char raw[160];
    for (int k = 0; k < GS_TENSORS; k++) {
        char rel[32];
        snprintf(rel, sizeof rel, "raw%d.bin", k);
        gs_path(raw, sizeof raw, rel);
        unlink(raw);
    }
    unlink(gs_main);
    unlink(gs_side);
    hid_t fapl = gs_fapl(d->libver), fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (d->userblock)
        H5Pset_userblock(fcpl, d->userblock == 1 ? 512 : 4096);
    hid_t side = H5Fcreate(gs_side, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t main = H5Fcreate(gs_main, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (main < 0 || side < 0) {
        if (main >= 0)
            H5Fclose(main);
        if (side >= 0)
            H5Fclose(side);
        return;
    }
    hid_t home[GRP_COUNT];
    char real[GRP_COUNT][32];
    for (int g = 0; g < GRP_COUNT; g++) {
        const char *gn = gs_group_names[g];
        H5Gclose(H5Gcreate2(side, gn, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        int mode = d->group_link[g];
        snprintf(real[g], sizeof real[g], "/%s%s", gn,
                 mode == GL_SOFT || mode == GL_EXT_SELF ? "_real" : "");
        home[g] = -1;
        if (mode == GL_GROUP || mode == GL_SOFT || mode == GL_EXT_SELF || mode == GL_HARD_OTHER)
            home[g] = H5Gcreate2(main, real[g], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        else if (mode == GL_EXT_SIDE)
            home[g] = H5Gopen2(side, gn, H5P_DEFAULT);
        else if (mode == GL_DATASET) { /* a dataset where the group should be */
            hsize_t one = 1;
            hid_t sp = H5Screate_simple(1, &one, NULL);
            H5Dclose(H5Dcreate2(main, gn, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
            H5Sclose(sp);
        }
    }
    /* outputs hard-linked to inputs (or params to inputs): one group, two names */
    for (int g = 0; g < GRP_COUNT; g++)
        if (d->group_link[g] == GL_HARD_OTHER && home[g] >= 0 && g != GRP_INPUTS &&
            d->group_link[GRP_INPUTS] == GL_GROUP) {
            H5Gclose(home[g]);
            H5Ldelete(main, real[g], H5P_DEFAULT);
            H5Lcreate_hard(main, "/inputs", main, real[g], H5P_DEFAULT, H5P_DEFAULT);
            home[g] = H5Gopen2(main, "/inputs", H5P_DEFAULT);
        }
    gs_root_attrs(main, d);
    if (home[GRP_PARAMS] >= 0)
        gs_params(home[GRP_PARAMS], d);
    for (int k = 0; k < GS_TENSORS; k++) {
        const gs_tensor *t = &d->t[k];
        hid_t h = t->group == 2 ? main : home[t->group];
        hid_t hfile = t->group != 2 && d->group_link[t->group] == GL_EXT_SIDE ? side : main;
        if (t->used && h >= 0)
            gs_write_tensor(h, hfile, main, side, d, k);
    }
    for (int g = 0; g < GRP_COUNT; g++) {
        const char *gn = gs_group_names[g];
        char missing[160];
        gs_path(missing, sizeof missing, "missing.h5");
        switch (d->group_link[g]) {
        case GL_SOFT: H5Lcreate_soft(real[g], main, gn, H5P_DEFAULT, H5P_DEFAULT); break;
        case GL_EXT_SELF: H5Lcreate_external(gs_main, real[g], main, gn, H5P_DEFAULT, H5P_DEFAULT); break;
        case GL_EXT_SIDE: H5Lcreate_external("side.h5", gn, main, gn, H5P_DEFAULT, H5P_DEFAULT); break;
        case GL_EXT_MISSING: H5Lcreate_external(missing, gn, main, gn, H5P_DEFAULT, H5P_DEFAULT); break;
        case GL_EXT_FIFO: /* the open findings: see gs_skip_open */
            H5Lcreate_external(gs_skip_open ? missing : gs_fifo, gn, main, gn,
                               H5P_DEFAULT, H5P_DEFAULT);
            break;
        default: break;
        }
        if (home[g] >= 0)
            H5Gclose(home[g]);
    }
    H5Fclose(side);
    H5Fclose(main);
}

/* ---- reading and the oracle ----------------------------------------- */

static void gs_describe(const gs_desc *d)
{
    fprintf(stderr, "op %s variant %d schema %d root %#x groups %d/%d/%d libver %d ub %d\n",
            dsv4_op_at(d->op_id)->name, d->variant_id, d->schema_mode % 8, d->root_mode,
            d->group_link[0], d->group_link[1], d->group_link[2], d->libver, d->userblock);
    for (int k = 0; k < GS_TENSORS; k++) {
        const gs_tensor *t = &d->t[k];
        if (!t->used)
            continue;
        fprintf(stderr, "  t%d %s/%s dtype %d type %d dims", k, t->group == 2 ? "" :
                gs_group_names[t->group], gs_tensor_name(d, t), t->dtype_mode, t->type_mode);
        for (int i = 0; i < t->ndim; i++)
            fprintf(stderr, "%s%u", i ? "x" : " ", t->dims[i]);
        fprintf(stderr, " layout %d filters %#x chunk/%d lie %d(%u @%d) link %d attrs %#x%s\n",
                t->layout, t->filters, t->chunk_div, t->lie, t->lie_arg, t->lie_chunk, t->link,
                t->attrs, t->unlimited ? " unlimited" : "");
    }
}

static void gs_check_loaded(const gs_desc *d, const dsv4_tensors *ts, int group)
{
    int grp = gs_phys_group(d, group);
    for (int i = 0; i < ts->n; i++) {
        const dsv4_tensor *t = &ts->t[i];
        uint64_t n = 1;
        for (int d = 0; d < t->ndim; d++)
            n *= (uint64_t)t->shape[d];
        if (n * dsv4_dtype_size(t->dtype) != t->nbytes || (t->nbytes && !t->data))
            __builtin_trap(); /* a tensor inconsistent with its own shape */
        const gs_written *hit = NULL;
        int same = 0; /* links of that name made in that group (the first one stands) */
        for (int k = 0; k < GS_TENSORS; k++)
            if (gs_w[k].linked && gs_w[k].grp == grp && strcmp(gs_w[k].name, t->name) == 0) {
                hit = &gs_w[k];
                same++;
            }
        if (same == 1 && hit->honest &&
            (hit->n != t->nbytes || memcmp(hit->bytes, t->data, t->nbytes) != 0))
            __builtin_trap(); /* an honest dataset read back with other bytes */
        if (same == 1 && hit->outside && t->nbytes && !gs_skip_open)
            __builtin_trap(); /* data from another file (external storage, a virtual
                                 dataset's source), outside the checksummed golden */
    }
}

static void gs_decode(const uint8_t *data, size_t size, gs_desc *d)
{
    if (size == sizeof *d) {
        memcpy(d, data, sizeof *d);
        gs_sanitize(d);
        return;
    }
    uint32_t h = 2166136261u; /* other sizes: a default description per input */
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 16777619u;
    gs_default(d, h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gs_desc d;
    gs_decode(data, size, &d);
    gs_write(&d);
    dsv4_golden g;
    dsv4_status st = {0, ""};
    int verbose = getenv("GS_VERBOSE") != NULL;
    if (verbose)
        gs_describe(&d);
    int rc = dsv4_golden_read(gs_main, &g, &st);
    if (verbose)
        fprintf(stderr, "  -> %d %s\n", rc, st.msg);
    if (rc == DSV4_OK) {
        gs_check_loaded(&d, &g.inputs, GRP_INPUTS);
        gs_check_loaded(&d, &g.outputs, GRP_OUTPUTS);
        dsv4_golden_free(&g);
    } else if (rc != DSV4_EINPUT || !st.msg[0]) {
        __builtin_trap(); /* bad input must be DSV4_EINPUT with a message */
    }
    for (int k = 0; k < GS_TENSORS; k++) {
        free(gs_w[k].bytes);
        memset(&gs_w[k], 0, sizeof gs_w[k]);
    }
    H5garbage_collect(); /* libhdf5's free lists would otherwise only grow */
    return 0;
}

/* ---- mutation ---------------------------------------------------------- */

static const uint16_t gs_dims[] = {0, 1, 2, 3, 4, 7, 8, 16, 33, 64, 0xffff};
static const int64_t gs_values[] = {0, 1, -1, 2, 4, 7, 128, 512, 2048, 1 << 20, INT32_MAX,
                                    INT64_MAX, INT64_MIN};

static void gs_mutate_tensor(gs_tensor *t, uint32_t *r)
{
    uint32_t v = gs_rand(r);
    switch (gs_rand(r) % 16) {
    case 0: t->used ^= 1; break;
    case 1: t->group = (uint8_t)(v % 3); break;
    case 2: t->name_id = (uint8_t)(v % 4 ? v % 8 : 200 + v % 7); break;
    case 3: t->dtype_mode = (uint8_t)(v % 4 ? 0 : v); break;
    case 4: t->type_mode = (uint8_t)(v % 3 ? 0 : v); break;
    case 5: t->ndim = (uint8_t)(v % 8); break;
    case 6: t->dims[v % 7] = gs_dims[(v >> 3) % (sizeof gs_dims / sizeof gs_dims[0])]; break;
    case 7: t->layout = (uint8_t)(v % 3 ? LAY_CHUNKED : v); break;
    case 8: t->filters ^= (uint8_t)(1u << (v % 6)); break;
    case 9: t->chunk_div = (uint8_t)v; break;
    case 10: t->lie = (uint8_t)v; t->lie_arg = gs_rand(r); break;
    case 11: t->lie_chunk = (uint8_t)v; t->lie_arg ^= 1u << (v % 32); break;
    case 12: t->link = (uint8_t)(v % 2 ? LINK_HARD : v); break;
    case 13: t->attrs ^= (uint8_t)(1u << (v % 7)); break;
    case 14: t->unlimited ^= 1; break;
    default: t->data_seed = gs_rand(r); break;
    }
}

static void gs_mutate(gs_desc *d, uint32_t *r)
{
    uint32_t v = gs_rand(r);
    switch (gs_rand(r) % 10) {
    case 0: gs_default(d, v); break;
    case 1: d->variant_id = (uint8_t)v; d->root_mode ^= (uint8_t)(1u << (v % 7)); break;
    case 2: d->schema_mode = (uint8_t)(v % 3 ? 0 : v); break;
    case 3: d->group_link[v % GRP_COUNT] = (uint8_t)(v % 2 ? GL_GROUP : v >> 4); break;
    case 4: d->libver = (uint8_t)v; d->userblock = (uint8_t)(v >> 8); break;
    case 5: {
        gs_param *p = &d->p[v % GS_PARAMS];
        p->used = 1;
        p->name_id = (uint8_t)(v >> 4);
        p->kind = (uint8_t)(v >> 12);
        p->n = (uint8_t)(v >> 16);
        p->value = gs_values[(v >> 20) % (sizeof gs_values / sizeof gs_values[0])];
        break;
    }
    case 6: d->t[v % GS_TENSORS] = d->t[(v >> 8) % GS_TENSORS]; break; /* a duplicate */
    default: gs_mutate_tensor(&d->t[v % GS_TENSORS], r); break;
    }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    gs_desc d;
    if (max_size < sizeof d)
        return LLVMFuzzerMutate(data, size, max_size);
    uint32_t r = seed;
    if (size != sizeof d) {
        gs_default(&d, gs_rand(&r));
    } else if (gs_rand(&r) % 8 == 0) { /* now and then a plain byte-level mutation */
        LLVMFuzzerMutate(data, size, sizeof d);
        memcpy(&d, data, sizeof d);
    } else {
        memcpy(&d, data, sizeof d);
    }
    gs_sanitize(&d);
    for (int n = 1 + (int)(gs_rand(&r) % 3); n > 0; n--)
        gs_mutate(&d, &r);
    gs_sanitize(&d);
    memcpy(data, &d, sizeof d);
    return sizeof d;
}

/* Tensors from both parents, the rest from the first. */
size_t LLVMFuzzerCustomCrossOver(const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2,
                                 uint8_t *out, size_t max_out, unsigned int seed)
{
    gs_desc a, b;
    if (max_out < sizeof a)
        return 0;
    gs_decode(d1, s1, &a);
    gs_decode(d2, s2, &b);
    uint32_t r = seed;
    for (int k = 0; k < GS_TENSORS; k++)
        if (gs_rand(&r) % 2)
            a.t[k] = b.t[k];
    memcpy(out, &a, sizeof a);
    return sizeof a;
}

#if defined(GS_STANDALONE) && defined(GS_SEED_WRITER)
/* Writes the seed corpus (tests/fuzz/README.md): a default description of
 * every op, and a few with one feature each. */
static void gs_save(const char *dir, const char *name, const gs_desc *d)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, sizeof *d, 1, f) != 1)
        abort();
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    LLVMFuzzerInitialize(NULL, NULL);
    gs_desc d;
    char name[96];
    for (int i = 0; i < dsv4_op_count(); i++) {
        gs_default(&d, (uint32_t)i);
        snprintf(name, sizeof name, "default-%s", dsv4_op_at(i)->name);
        gs_save(argv[1], name, &d);
    }
    static const struct { const char *name; int field, value; } one[] = {
        {"group-ext-side", 0, GL_EXT_SIDE}, {"group-soft", 0, GL_SOFT},
        {"group-ext-self", 0, GL_EXT_SELF}, {"layout-external", 1, LAY_EXTERNAL},
        {"layout-virtual", 1, LAY_VIRTUAL_SIDE}, {"link-hard-dup", 2, LINK_HARD_DUP},
        {"lie-truncate", 3, LIE_TRUNCATE}, {"lie-bomb", 3, LIE_BOMB}, {"lie-mask", 3, LIE_MASK},
    };
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        gs_default(&d, 0);
        gs_tensor *t = &d.t[1];
        if (one[i].field == 0)
            d.group_link[GRP_INPUTS] = (uint8_t)one[i].value;
        else if (one[i].field == 1)
            t->layout = (uint8_t)one[i].value;
        else if (one[i].field == 2)
            t->link = (uint8_t)one[i].value;
        else
            t->lie = (uint8_t)one[i].value, t->lie_arg = 0x1234;
        gs_save(argv[1], one[i].name, &d);
    }
    return 0;
}
#endif
