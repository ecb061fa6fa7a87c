/* errmap.h - where the errors of one failing output lie, for the HTML
 * report: the tensor viewed as rows x last-dim columns, binned into at most
 * DSV4_MAP_ROWS x DSV4_MAP_COLS cells, and a histogram (errmap.c). */
#ifndef DSV4_ERRMAP_H
#define DSV4_ERRMAP_H

#include <stdint.h>

#include "../compare/compare.h"
#include "../ref/tensor.h"

#define DSV4_MAP_ROWS 32
#define DSV4_MAP_COLS 32
#define DSV4_HIST_BINS 16
typedef struct dsv4_errmap {
    int exact;                 /* 1: cell = fraction of differing elements;
                                * 0: cell = max |a - e| / bound (units of the tolerance) */
    int rows, cols;            /* cells used */
    int64_t nrows, ncols;      /* the tensor as nrows x ncols */
    int64_t row_step, col_step; /* tensor rows / columns per cell */
    float cell[DSV4_MAP_ROWS * DSV4_MAP_COLS]; /* -1: nothing compared in the cell */
    /* exact: bin 0 equal, bin k |a - e| in [2^(k-1), 2^k), last bin >= 2^14 or NaN;
     * float: bin 0 error 0, bin k err/bound in [2^(k-8), 2^(k-7)), first
     * non-zero bin from 0, last bin >= 2^7 or non-finite. */
    int64_t hist[DSV4_HIST_BINS];
} dsv4_errmap;

/* The error map of actual vs expected under pol (mask may be NULL);
 * NULL when out of memory. */
dsv4_errmap *dsv4_errmap_make(const dsv4_tensor *expected, const dsv4_tensor *actual,
                              const dsv4_policy *pol, const uint8_t *mask);

#endif
