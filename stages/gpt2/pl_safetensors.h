/* pl_safetensors: reads Hugging Face safetensors files (8-byte little-endian header length, a
 * JSON header, then the raw tensor bytes) and checks every header entry against the file before
 * any tensor is read. The header is parsed with jansson. Used by the gpt2 kind's weight loader. */
#ifndef PL_SAFETENSORS_H
#define PL_SAFETENSORS_H

#include <stdint.h>

#include "pl_status.h"

#define PL_ST_MAX_RANK 8

/* Element types a safetensors header may name; only F32, F16 and BF16 hold weights here. */
typedef enum pl_st_dtype { PL_ST_F32, PL_ST_F16, PL_ST_BF16, PL_ST_OTHER } pl_st_dtype;

typedef struct pl_st_tensor {
    const char *name; /* owned by the file object */
    pl_st_dtype dtype;
    char dtype_name[16]; /* as written ("F32", "I64", ...) */
    int rank;
    int64_t shape[PL_ST_MAX_RANK];
    uint64_t begin, end; /* byte offsets into the data section, end exclusive */
} pl_st_tensor;

typedef struct pl_st_file pl_st_file;

/* Opens `path`, reads and validates its header: the length fits the file, the JSON parses to an
 * object, each entry has a known-shaped "dtype", "shape" and "data_offsets" whose size is
 * product(shape) * dtype size and whose bytes lie inside the file. Errors are PL_EINPUT (bad or
 * truncated file: the message names the file and the tensor) or PL_EIO (cannot open/read).
 * *out is owned by the caller: pl_st_close. */
pl_status pl_st_open(const char *path, pl_st_file **out, pl_error *err);
void pl_st_close(pl_st_file *f); /* accepts NULL */

/* The tensor called `name`, or NULL. Borrowed from f. */
const pl_st_tensor *pl_st_find(const pl_st_file *f, const char *name);
int pl_st_count(const pl_st_file *f);
const pl_st_tensor *pl_st_at(const pl_st_file *f, int i);
const char *pl_st_path(const pl_st_file *f); /* as opened; borrowed */

/* Reads tensor t (F32, F16 or BF16) and converts it to `n` f32 values at dst (n must be its
 * element count). PL_EIO when the read fails. */
pl_status pl_st_read_f32(const pl_st_file *f, const pl_st_tensor *t, float *dst, int64_t n,
                         pl_error *err);

#endif
