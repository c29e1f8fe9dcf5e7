/* pl_gpu_test: what the GPU executor tests share: skipping without a device, building small
 * pipelines through the builder API, running a spec on either executor with its sinks redirected
 * to a scratch directory, and comparing sink outputs (exact, or within a stated tolerance). */
#ifndef PL_GPU_TEST_H
#define PL_GPU_TEST_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/pl_test.h"
#include "pl_exec.h"
#include "pl_exec_host.h"
#include "pl_half.h"
#include "pl_npy.h"
#include "pl_ops.h"
#include "pl_parse.h"
#include "pl_plan.h"

static inline void gt_skip_without_device(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        printf("SKIP: no CUDA device (%s)\n", cudaGetErrorString(e));
        exit(77);
    }
    if (n == 0) {
        printf("SKIP: no CUDA device (cudaGetDeviceCount found none)\n");
        exit(77);
    }
}

/* A fresh scratch directory under TMPDIR (or /tmp); the caller may leave it behind. */
static inline const char *gt_scratch(const char *tag)
{
    static char dir[512];
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/pipectl_gpu_%s_XXXXXX", t && *t ? t : "/tmp", tag);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    return dir;
}

/* --- builder helpers -------------------------------------------------------------------------- */

static pl_pos gt_nopos = {0};

static inline void gt_buf(pl_spec *s, const char *name, pl_where where, pl_dtype t, int64_t n,
                          bool persistent, pl_init init)
{
    pl_buffer *b = pl_spec_add_buffer(s, name, gt_nopos);
    b->where = where;
    b->dtype = t;
    b->rank = 1;
    b->shape[0] = n;
    b->persistent = persistent;
    b->init = init;
}

static inline void gt_opt(pl_spec *s, pl_stage *st, const char *key, const char *val)
{
    pl_opt *o = pl_stage_add_opt(s, st, key, gt_nopos);
    o->str = pl_spec_strdup(s, val);
}

static inline pl_stage *gt_stage(pl_spec *s, const char *name, const pl_kind *kind)
{
    pl_stage *st = pl_spec_add_stage(s, name, gt_nopos);
    st->kind = kind;
    return st;
}

static inline void gt_copy(pl_spec *s, const char *name, const pl_kind *kind, const char *from,
                           const char *to)
{
    pl_stage *st = gt_stage(s, name, kind);
    gt_opt(s, st, "from", from);
    gt_opt(s, st, "to", to);
}

/* A kernel stage: op, reads (NULL-terminated list in `ins`), one write, optional key/value. */
static inline pl_stage *gt_kernel(pl_spec *s, const char *name, const char *op,
                                  const char *const *ins, const char *out, const char *key,
                                  const char *val)
{
    pl_stage *st = gt_stage(s, name, pl_kind_find("kernel"));
    gt_opt(s, st, "op", op);
    if (key) gt_opt(s, st, key, val);
    for (int i = 0; ins && ins[i]; i++)
        pl_stage_add_read(s, st, ins[i], gt_nopos);
    if (out) pl_stage_add_write(s, st, out, gt_nopos);
    return st;
}

/* --- running ---------------------------------------------------------------------------------- */

/* Points every sink that writes a file into `dir` ("<dir>/<stage>.npy" or ".raw"). Call before
 * pl_spec_check. */
static inline void gt_redirect_sinks(pl_spec *s, const char *dir)
{
    for (int i = 0; i < s->n_stages; i++) {
        pl_stage *st = &s->stages[i];
        if (st->kind != pl_kind_find("sink")) continue;
        for (int j = 0; j < st->n_opts; j++) {
            pl_opt *o = &st->opts[j];
            if (strcmp(o->key, "to") != 0 || !o->str) continue;
            size_t n = strlen(o->str);
            bool npy = n > 4 && strcmp(o->str + n - 4, ".npy") == 0;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s%s", dir, st->name, npy ? ".npy" : ".raw");
            o->str = pl_spec_strdup(s, path);
        }
    }
}

typedef struct gt_run {
    pl_status st;
    pl_error err;
    pl_run_result res;
} gt_run;

/* Checks the spec (after the caller's edits), compiles it and runs it. */
static inline void gt_run_spec(pl_spec *s, pl_exec_kind ex, bool graphs, const pl_run_cfg *base,
                               gt_run *out)
{
    memset(out, 0, sizeof *out);
    pl_plan *plan = NULL;
    out->st = pl_spec_check(s, &out->err);
    if (out->st == PL_OK) out->st = pl_plan_compile(s, &plan, &out->err);
    if (out->st == PL_OK) {
        pl_run_cfg cfg;
        if (base)
            cfg = *base;
        else
            pl_run_cfg_init(&cfg);
        cfg.executor = ex;
        cfg.use_graphs = graphs;
        out->st = ex == PL_EXEC_GPU ? pl_exec_gpu_run(plan, &cfg, &out->res, &out->err)
                                    : pl_exec_host_run(plan, &cfg, &out->res, &out->err);
    }
    pl_plan_free(plan);
}

/* --- comparing -------------------------------------------------------------------------------- */

static inline unsigned char *gt_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

static inline double gt_elem(const unsigned char *p, pl_dtype t, size_t i)
{
    switch (t) {
    case PL_F32: {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case PL_F64: {
        double v;
        memcpy(&v, p + 8 * i, 8);
        return v;
    }
    case PL_F16: {
        uint16_t v;
        memcpy(&v, p + 2 * i, 2);
        return pl_f16_to_f32(v);
    }
    case PL_BF16: {
        uint16_t v;
        memcpy(&v, p + 2 * i, 2);
        return pl_bf16_to_f32(v);
    }
    default:
        return 0;
    }
}

/* The tolerance a pipeline's float outputs get on the GPU, from its kernel ops (relative L2
 * error ||gpu - host|| / ||host||): 0 (bit-identical) for copies, fill, scale, add, checksum,
 * argmax on f32/f64; 1e-6 for saxpy (the GPU may fuse the multiply-add) and sum (f64
 * accumulation in a different order, rounded to f32); 1e-5 for f32 gemm (cuBLAS blocking order);
 * 1e-2 for anything in f16/bf16 (one rounding of a half value is ~4e-3). Integer outputs are
 * always compared exactly. */
static inline double gt_tolerance(const pl_spec *s)
{
    double tol = 0;
    for (int i = 0; i < s->n_stages; i++) {
        const pl_stage *st = &s->stages[i];
        if (st->kind != pl_kind_find("kernel") || !st->priv) continue;
        const pl_kernel_opts *o = st->priv;
        pl_dtype t = st->n_writes ? s->buffers[st->writes[0].index].dtype : PL_F32;
        double k = 0;
        if (t == PL_F16 || t == PL_BF16)
            k = 1e-2;
        else if (o->op == PL_OP_GEMM)
            k = 1e-5;
        else if (o->op == PL_OP_SAXPY || o->op == PL_OP_SUM)
            k = 1e-6;
        if (k > tol) tol = k;
    }
    return tol;
}

/* Compares two sink files of dtype t. Returns true when they match: same bytes, or (floats) same
 * header and size and relative L2 error <= tol, no NaN where the host has none. */
static inline bool gt_compare_files(const char *want, const char *got, pl_dtype t, double tol,
                                    char *why, size_t cap)
{
    size_t na = 0, nb = 0;
    unsigned char *a = gt_read_file(want, &na), *b = gt_read_file(got, &nb);
    bool ok = false;
    if (!a || !b) {
        snprintf(why, cap, "cannot read %s", !a ? want : got);
        goto done;
    }
    if (na == nb && memcmp(a, b, na) == 0) {
        snprintf(why, cap, "bit-identical (%zu bytes)", na);
        ok = true;
        goto done;
    }
    if (na != nb) {
        snprintf(why, cap, "sizes differ: %zu (host) vs %zu (gpu)", na, nb);
        goto done;
    }
    if (!pl_dtype_is_float(t) || tol <= 0) {
        size_t i = 0;
        while (i < na && a[i] == b[i])
            i++;
        snprintf(why, cap, "bytes differ from offset %zu (dtype %s: exact comparison)", i,
                 pl_dtype_name(t));
        goto done;
    }
    size_t off = 0;
    size_t nl = strlen(want);
    if (nl > 4 && strcmp(want + nl - 4, ".npy") == 0) {
        FILE *f = fopen(want, "rb");
        pl_npy_info info;
        pl_error e;
        if (f && pl_npy_read_header(f, want, &info, &e) == PL_OK) off = info.data_offset;
        if (f) fclose(f);
        if (memcmp(a, b, off) != 0) {
            snprintf(why, cap, ".npy headers differ");
            goto done;
        }
    }
    size_t n = (na - off) / pl_dtype_size(t);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double x = gt_elem(a + off, t, i), y = gt_elem(b + off, t, i);
        if (isnan(y) && !isnan(x)) {
            snprintf(why, cap, "NaN at element %zu on the gpu", i);
            goto done;
        }
        if (isnan(x)) continue;
        num += (x - y) * (x - y);
        den += x * x;
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    ok = rel <= tol;
    snprintf(why, cap, "relative L2 error %.3g (tolerance %.0e)", rel, tol);
done:
    free(a);
    free(b);
    return ok;
}

#endif
