/* pl_safetensors: the safetensors reader (see pl_safetensors.h). jansson parses the header;
 * everything it says is checked against the file's size before a byte of data is trusted. */
#include "pl_safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_half.h"

/* A header larger than this is not a weights file (HF caps it at 100 MB). */
#define PL__ST_MAX_HEADER (100u << 20)

struct pl_st_file {
    char *path;
    FILE *f;
    uint64_t data_start; /* 8 + header length */
    uint64_t data_bytes; /* file size - data_start */
    int n;
    pl_st_tensor *t;
};

static size_t pl__st_elem_size(const char *dt)
{
    static const struct {
        const char *name;
        size_t size;
    } sizes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},    {"I64", 8},
                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},      {"BOOL", 1},
                 {"U16", 2}, {"U32", 4}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(dt, sizes[i].name) == 0) return sizes[i].size;
    return 0;
}

void pl_st_close(pl_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++)
        free((char *)f->t[i].name);
    free(f->t);
    if (f->f) fclose(f->f);
    free(f->path);
    free(f);
}

/* One header entry: {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}. */
static pl_status pl__st_entry(pl_st_file *f, const char *name, json_t *v, pl_st_tensor *t,
                              pl_error *err)
{
    const char *p = f->path;
    if (!json_is_object(v))
        return pl_error_set(err, PL_EINPUT,
                            "error: safetensors file '%s': tensor '%s': header entry is not an "
                            "object",
                            p, name);
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) ||
        json_array_size(off) != 2)
        return pl_error_set(err, PL_EINPUT,
                            "error: safetensors file '%s': tensor '%s': header entry needs "
                            "\"dtype\" (a string), \"shape\" (a list) and \"data_offsets\" (two "
                            "integers)",
                            p, name);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", json_string_value(dt));
    size_t esize = pl__st_elem_size(t->dtype_name);
    if (!esize)
        return pl_error_set(err, PL_EINPUT,
                            "error: safetensors file '%s': tensor '%s': unknown dtype '%s'", p,
                            name, t->dtype_name);
    t->dtype = strcmp(t->dtype_name, "F32") == 0    ? PL_ST_F32
               : strcmp(t->dtype_name, "F16") == 0  ? PL_ST_F16
               : strcmp(t->dtype_name, "BF16") == 0 ? PL_ST_BF16
                                                    : PL_ST_OTHER;
    if (json_array_size(sh) > PL_ST_MAX_RANK)
        return pl_error_set(err, PL_EINPUT,
                            "error: safetensors file '%s': tensor '%s': rank %zu is above %d", p,
                            name, json_array_size(sh), PL_ST_MAX_RANK);
    t->rank = (int)json_array_size(sh);
    uint64_t elems = 1;
    for (int i = 0; i < t->rank; i++) {
        json_t *d = json_array_get(sh, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 ||
            json_integer_value(d) > (INT64_C(1) << 40))
            return pl_error_set(err, PL_EINPUT,
                                "error: safetensors file '%s': tensor '%s': shape entries must be "
                                "integers from 0 to 2^40",
                                p, name);
        t->shape[i] = json_integer_value(d);
        elems *= (uint64_t)t->shape[i];
        if (elems > (UINT64_C(1) << 40))
            return pl_error_set(err, PL_EINPUT,
                                "error: safetensors file '%s': tensor '%s': more than 2^40 "
                                "elements",
                                p, name);
    }
    json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b))
        return pl_error_set(err, PL_EINPUT,
                            "error: safetensors file '%s': tensor '%s': data_offsets must be two "
                            "integers 0 <= begin <= end",
                            p, name);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(e);
    if (t->end - t->begin != elems * esize)
        return pl_error_set(err, PL_EINPUT,
                            "error: safetensors file '%s': tensor '%s': data_offsets [%llu, %llu) "
                            "hold %llu bytes, but %s of %llu elements needs %llu",
                            p, name, (unsigned long long)t->begin, (unsigned long long)t->end,
                            (unsigned long long)(t->end - t->begin), t->dtype_name,
                            (unsigned long long)elems, (unsigned long long)(elems * esize));
    if (t->end > f->data_bytes)
        return pl_error_set(err, PL_EINPUT,
                            "error: safetensors file '%s' is truncated: tensor '%s' needs data "
                            "bytes [%llu, %llu), but the file holds %llu after its header",
                            p, name, (unsigned long long)t->begin, (unsigned long long)t->end,
                            (unsigned long long)f->data_bytes);
    return PL_OK;
}

pl_status pl_st_open(const char *path, pl_st_file **out, pl_error *err)
{
    pl_status st = PL_OK;
    char *hdr = NULL;
    json_t *root = NULL;
    *out = NULL;
    pl_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory opening '%s'", path);
    }
    f->f = fopen(path, "rb");
    if (!f->f) {
        st = pl_error_set(err, PL_EINPUT, "error: cannot open safetensors file '%s': %s", path,
                          strerror(errno));
        goto fail;
    }
    if (fseeko(f->f, 0, SEEK_END) != 0) {
        st = pl_error_set(err, PL_EIO, "error: cannot seek in '%s': %s", path, strerror(errno));
        goto fail;
    }
    uint64_t size = (uint64_t)ftello(f->f);
    rewind(f->f);
    unsigned char len8[8];
    if (size < 8 || fread(len8, 1, 8, f->f) != 8) {
        st = pl_error_set(err, PL_EINPUT,
                          "error: safetensors file '%s' is truncated: %llu bytes, not even the "
                          "8-byte header length",
                          path, (unsigned long long)size);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    if (hlen > PL__ST_MAX_HEADER || hlen > size - 8) {
        st = pl_error_set(err, PL_EINPUT,
                          "error: safetensors file '%s': header length %llu does not fit the "
                          "file (%llu bytes); is it a safetensors file?",
                          path, (unsigned long long)hlen, (unsigned long long)size);
        goto fail;
    }
    hdr = malloc(hlen + 1);
    if (!hdr) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory reading the header of '%s'", path);
        goto fail;
    }
    if (fread(hdr, 1, hlen, f->f) != hlen) {
        st = pl_error_set(err, PL_EIO, "error: cannot read the header of '%s'", path);
        goto fail;
    }
    hdr[hlen] = 0;
    f->data_start = 8 + hlen;
    f->data_bytes = size - f->data_start;
    json_error_t je;
    root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        st = pl_error_set(err, PL_EINPUT,
                          "error: safetensors file '%s': header is not a JSON object%s%s", path,
                          root ? "" : ": ", root ? "" : je.text);
        goto fail;
    }
    f->t = calloc(json_object_size(root) + 1, sizeof *f->t);
    if (!f->t) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory reading the header of '%s'", path);
        goto fail;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "__metadata__") == 0) continue;
        pl_st_tensor *t = &f->t[f->n];
        if (!(t->name = strdup(key))) {
            st = pl_error_set(err, PL_ENOMEM, "error: out of memory reading '%s'", path);
            goto fail;
        }
        f->n++;
        PL_CHECK_GOTO(pl__st_entry(f, key, val, t, err), st, fail);
    }
    json_decref(root);
    free(hdr);
    *out = f;
    return PL_OK;
fail:
    json_decref(root);
    free(hdr);
    pl_st_close(f);
    return st;
}

const pl_st_tensor *pl_st_find(const pl_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

int pl_st_count(const pl_st_file *f)
{
    return f->n;
}
const pl_st_tensor *pl_st_at(const pl_st_file *f, int i)
{
    return &f->t[i];
}
const char *pl_st_path(const pl_st_file *f)
{
    return f->path;
}

pl_status pl_st_read_f32(const pl_st_file *f, const pl_st_tensor *t, float *dst, int64_t n,
                         pl_error *err)
{
    size_t esize = t->dtype == PL_ST_F32 ? 4 : 2;
    if (t->dtype == PL_ST_OTHER || (uint64_t)n * esize != t->end - t->begin)
        return pl_error_set(err, PL_EINPUT,
                            "error: safetensors file '%s': tensor '%s' is %s with %llu bytes, not "
                            "%lld F32/F16/BF16 values",
                            f->path, t->name, t->dtype_name,
                            (unsigned long long)(t->end - t->begin), (long long)n);
    if (fseeko(f->f, (off_t)(f->data_start + t->begin), SEEK_SET) != 0)
        return pl_error_set(err, PL_EIO, "error: cannot seek in '%s': %s", f->path,
                            strerror(errno));
    if (t->dtype == PL_ST_F32) {
        if (fread(dst, 4, (size_t)n, f->f) != (size_t)n)
            return pl_error_set(err, PL_EIO, "error: cannot read tensor '%s' from '%s'", t->name,
                                f->path);
        return PL_OK;
    }
    /* 16-bit: widened a chunk at a time through a stack buffer. */
    enum { CHUNK = 1 << 14 };
    uint16_t buf[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        size_t m = (size_t)(n - i < CHUNK ? n - i : CHUNK);
        if (fread(buf, 2, m, f->f) != m)
            return pl_error_set(err, PL_EIO, "error: cannot read tensor '%s' from '%s'", t->name,
                                f->path);
        for (size_t j = 0; j < m; j++)
            dst[i + (int64_t)j] =
                t->dtype == PL_ST_F16 ? pl_f16_to_f32(buf[j]) : pl_bf16_to_f32(buf[j]);
    }
    return PL_OK;
}
