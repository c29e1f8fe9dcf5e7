/* pl_npy: the .npy format (version 1.0/2.0 read, 1.0 write), enough for sources, sinks and
 * `init: file`. bf16 has no NumPy dtype: it is written as '<u2' (the raw bits) and read from
 * '<u2' or '<V2'. */
#ifndef PL_NPY_H
#define PL_NPY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pl_spec.h"

typedef struct pl_npy_info {
    char descr[16]; /* as written, e.g. "<f4" */
    bool fortran_order;
    int rank;
    int64_t shape[PL_MAX_RANK + 1];
    uint64_t data_offset; /* where the array's bytes start */
    uint64_t data_bytes;  /* product of the shape times the item size (0 if descr is unknown) */
} pl_npy_info;

/* The NumPy descr for a dtype ("<f4"). */
const char *pl_npy_descr(pl_dtype t);
/* True when `descr` is how dtype `t` is (or may be) written. */
bool pl_npy_descr_matches(const char *descr, pl_dtype t);

/* The dtype whose data `descr` holds (the first that pl_npy_descr_matches, so '<u2' is bf16);
 * false for a descr no dtype has ('>f4', '<i2', '|b1', ...). */
bool pl_npy_descr_dtype(const char *descr, pl_dtype *out);

/* Reads and parses the header of the open file `f` (positioned anywhere; it seeks to 0). `path`
 * is only for messages. Errors are PL_EINPUT, naming the file and what is wrong; a shape whose
 * data would not fit in 2^63 bytes (a corrupt header) is one. */
pl_status pl_npy_read_header(FILE *f, const char *path, pl_npy_info *out, pl_error *err);

/* Re-anchors an error of pl_npy_read_header ("error: 'f.npy': ...") at the position of the
 * option that named the file: "file:line:col: error: <what> '<name>': 'f.npy': ...". Returns
 * err->status. */
pl_status pl_npy_error_at(pl_error *err, pl_pos pos, const char *what, const char *name);

/* "(32, 128)" (NumPy's spelling; "(5,)" for rank 1) into out. */
void pl_npy_shape_str(int rank, const int64_t *shape, char *out, size_t cap);

/* Formats a v1.0 header for dtype t and shape (first, rest...) into buf; the header is padded so
 * that rewriting it later with any first dimension up to 2^63 keeps the same length. Returns its
 * length (a multiple of 64), or 0 if buf is too small (256 bytes are always enough). */
size_t pl_npy_format_header(char *buf, size_t cap, pl_dtype t, int64_t first, int rank_rest,
                            const int64_t *rest);

#endif
