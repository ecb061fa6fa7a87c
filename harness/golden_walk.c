#define _POSIX_C_SOURCE 200809L
/* golden_walk.c - opening an HDF5 file that anyone may have written (a
 * golden, golden_read.c; an actuals file, actual.c): plain-file checks, then
 * a walk over every link in the file before any attribute or dataset is
 * read.  The walk refuses soft, external and user-defined links, a second
 * hard link to one object, external raw storage and virtual datasets:
 * nothing a reader does afterwards can open another file or read an object
 * twice under two names. */
#include "golden_h5.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NAME_CUT 64 /* object names kept for messages, cut */

typedef struct walk {
    const char *path, *kind;
    dsv4_status *st;
    int n, max, rc;
    haddr_t *addr;       /* addr[i]: object i's address, in visit order */
    char (*name)[NAME_CUT];
    int *slot;           /* open-addressing table of indices into addr, -1 = empty */
    size_t nslot;        /* a power of two, at least twice max + 1 */
} walk;

static size_t addr_hash(haddr_t a, size_t nslot)
{
    uint64_t h = (uint64_t)a * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (nslot - 1);
}

/* The index of the object already seen at address a, or -1 after adding it
 * as object w->n. */
static int seen_before(walk *w, haddr_t a)
{
    size_t s = addr_hash(a, w->nslot);
    for (; w->slot[s] >= 0; s = (s + 1) & (w->nslot - 1))
        if (w->addr[w->slot[s]] == a)
            return w->slot[s];
    w->slot[s] = w->n;
    return -1;
}

/* A dataset's raw data must be in this file: no external files, no
 * virtual mapping onto other datasets (or files). */
static int check_storage(const walk *w, hid_t loc, const char *name)
{
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT), dcpl = d < 0 ? -1 : H5Dget_create_plist(d);
    H5D_layout_t layout = dcpl < 0 ? H5D_LAYOUT_ERROR : H5Pget_layout(dcpl);
    int ext = dcpl < 0 ? -1 : H5Pget_external_count(dcpl);
    dsv4_h5_close(dcpl, H5Pclose);
    dsv4_h5_close(d, H5Dclose);
    if (layout == H5D_LAYOUT_ERROR || ext < 0)
        return dsv4_fail(w->st, DSV4_EINPUT, "%s:/%s: unreadable dataset (corrupt file)", w->path, name);
    if (layout == H5D_VIRTUAL)
        return dsv4_fail(w->st, DSV4_EINPUT, "%s:/%s: a virtual dataset (its data would come from other "
                         "datasets or files); a %s stores every tensor in the file", w->path, name, w->kind);
    if (ext > 0)
        return dsv4_fail(w->st, DSV4_EINPUT, "%s:/%s: external raw storage (%d file%s outside the %s); "
                         "a %s stores every tensor in the file", w->path, name, ext, ext == 1 ? "" : "s",
                         w->kind, w->kind);
    return DSV4_OK;
}

static herr_t visit_cb(hid_t root, const char *name, const H5L_info_t *info, void *data)
{
    walk *w = data;
    H5O_info_t oi;
    int first = -1;
    if (!dsv4_h5_utf8_ok((const unsigned char *)name, strlen(name)))
        w->rc = dsv4_fail(w->st, DSV4_EINPUT, "%s: a link name that is not valid UTF-8", w->path);
    else if (info->type != H5L_TYPE_HARD)
        w->rc = dsv4_fail(w->st, DSV4_EINPUT, "%s:/%s: a %s link; a %s has hard links only (a link could "
                          "lead out of the file)", w->path, name,
                          info->type == H5L_TYPE_SOFT ? "soft" : info->type == H5L_TYPE_EXTERNAL ? "external"
                                                                                                 : "user-defined",
                          w->kind);
    else if (w->n > w->max)
        w->rc = dsv4_fail(w->st, DSV4_EINPUT, "%s: more than %d objects (too many for a %s)", w->path, w->max,
                          w->kind);
    else if ((first = seen_before(w, info->u.address)) >= 0)
        w->rc = dsv4_fail(w->st, DSV4_EINPUT, "%s:/%s: a second hard link to /%s; each tensor and group "
                          "is stored once", w->path, name, w->name[first]);
    if (w->rc)
        return -1;
    w->addr[w->n] = info->u.address;
    snprintf(w->name[w->n++], NAME_CUT, "%s", name);
    if (H5Oget_info_by_name2(root, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        w->rc = dsv4_fail(w->st, DSV4_EINPUT, "%s:/%s: unreadable object (corrupt file)", w->path, name);
    else if (oi.type == H5O_TYPE_DATASET)
        w->rc = check_storage(w, root, name);
    else if (oi.type != H5O_TYPE_GROUP)
        w->rc = dsv4_fail(w->st, DSV4_EINPUT, "%s:/%s: a named datatype or other object a %s does not "
                          "have", w->path, name, w->kind);
    return w->rc ? -1 : 0;
}

int dsv4_h5_walk(const char *path, hid_t file, int max_objects, const char *kind, dsv4_status *st)
{
    walk w = {path, kind, st, 0, max_objects, DSV4_OK, NULL, NULL, NULL, 16};
    while (w.nslot < 2 * ((size_t)max_objects + 2))
        w.nslot *= 2;
    w.addr = calloc((size_t)max_objects + 2, sizeof *w.addr);
    w.name = calloc((size_t)max_objects + 2, sizeof *w.name);
    w.slot = malloc(w.nslot * sizeof *w.slot);
    H5O_info_t oi;
    int rc = DSV4_OK;
    if (!w.addr || !w.name || !w.slot) {
        rc = dsv4_fail(st, DSV4_ERUNTIME, "%s: out of memory", path);
    } else if (H5Oget_info2(file, &oi, H5O_INFO_BASIC) < 0) {
        rc = dsv4_fail(st, DSV4_EINPUT, "%s: unreadable root group (corrupt file)", path);
    } else {
        memset(w.slot, 0xff, w.nslot * sizeof *w.slot); /* every slot -1 */
        seen_before(&w, oi.addr);
        w.addr[w.n] = oi.addr;
        snprintf(w.name[w.n++], NAME_CUT, "(the root group)");
        herr_t e = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, visit_cb, &w);
        rc = w.rc;
        if (!rc && e < 0) {
            char eb[DSV4_H5_ERR_MAX];
            rc = dsv4_fail(st, DSV4_EINPUT, "%s: cannot list the file's objects (corrupt file: %s)", path,
                           dsv4_h5_err(eb));
        }
    }
    free(w.addr);
    free(w.name);
    free(w.slot);
    return rc;
}

/* Plain-file checks first, so the common mistakes get plain messages. */
static int precheck(const char *path, dsv4_status *st)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return dsv4_fail(st, DSV4_EINPUT, "%s: is a directory, not an HDF5 file", path);
    if (!S_ISREG(sb.st_mode))
        return dsv4_fail(st, DSV4_EINPUT, "%s: not a regular file", path);
    if (sb.st_size == 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: empty file, not an HDF5 file", path);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    fclose(fp);
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: not an HDF5 file", path);
    return DSV4_OK;
}

int dsv4_h5_open(const char *path, hid_t fapl, int max_objects, const char *kind, hid_t *file, dsv4_status *st)
{
    dsv4_h5_quiet();
    *file = -1;
    int rc = fapl == H5P_DEFAULT ? precheck(path, st) : DSV4_OK;
    if (rc)
        return rc;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f < 0) {
        char eb[DSV4_H5_ERR_MAX];
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot open as HDF5, truncated or corrupt file (%s)", path,
                         dsv4_h5_err(eb));
    }
    if ((rc = dsv4_h5_walk(path, f, max_objects, kind, st))) {
        H5Fclose(f);
        return rc;
    }
    *file = f;
    return DSV4_OK;
}

int dsv4_h5_image_fapl(const void *buf, size_t len, hid_t *fapl)
{
    *fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (*fapl < 0 || H5Pset_fapl_core(*fapl, 1 << 16, 0) < 0 || H5Pset_file_image(*fapl, (void *)buf, len) < 0) {
        dsv4_h5_close(*fapl, H5Pclose);
        *fapl = -1;
        return -1;
    }
    return 0;
}
