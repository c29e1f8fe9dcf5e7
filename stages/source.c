/* source: fills a per-batch host buffer from a file (raw or .npy), a seeded generator or a
 * constant.
 * - file: batch i reads the i-th buffer-sized slice of the data (bytes [i*B, (i+1)*B) after the
 *   .npy header); a .npy must have the buffer's dtype and shape (N, *buffer shape); raw or .npy,
 *   the data must be a whole number of batches (a partial last batch is an error, not dropped);
 *   with `wrap: true` batch i reads slice i mod N; without it a file too short for the run fails
 *   at check time (check_files) and again at open, naming the first batch it cannot fill.
 * - generator random: counter-based (pl_rng.h: domain PL_RNG_SOURCE, id = stage index, batch =
 *   batch index, element index), so the data depends only on (seed, stage, batch, element), never
 *   on threads or depth.
 * - generator range: element j of batch b is b * count + j (integers wrap to the dtype).
 * - generator constant: every element is `value`. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_half.h"
#include "pl_kind_util.h"
#include "pl_npy.h"
#include "pl_rng.h"

static const pl_key pl__source_keys[] = {
    {"to", PL_KEY_NAME, NULL, NULL, "the host buffer to fill (required)"},
    {"file", PL_KEY_PATH, NULL, NULL,
     "raw or .npy file; batch i reads the i-th buffer-sized slice"},
    {"wrap", PL_KEY_BOOL, NULL, "false", "start again at the file's beginning when it runs out"},
    {"generator", PL_KEY_ENUM, "random|range|constant", "random", "used when no file is given"},
    {"value", PL_KEY_NUM, NULL, "0", "constant: the value"},
    {"min", PL_KEY_NUM, NULL, "-1 (floats), 0 (integers)", "random: lower bound (inclusive)"},
    {"max", PL_KEY_NUM, NULL, "1 (floats), 100 (integers)", "random: upper bound (exclusive)"},
    {"seed", PL_KEY_INT, NULL, "run seed", "random: seed of this stage's stream"},
    {NULL, 0, NULL, NULL, NULL},
};

enum { PL__GEN_RANDOM, PL__GEN_RANGE, PL__GEN_CONSTANT };

typedef struct pl__source_opts {
    const char *file; /* as written; NULL: generator */
    pl_pos file_pos;
    bool wrap;
    int generator;
    double value, min, max;
    bool has_min, has_max, has_seed;
    uint64_t seed;
} pl__source_opts;

typedef struct pl__source_state {
    int fd;
    uint64_t offset;   /* data start */
    int64_t n_batches; /* whole batches in the file */
    char path[4096];
} pl__source_state;

static pl_status pl__source_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    int w;
    PL_CHECK(pl_kind_bind_ref(spec, st, "to", true, true, "the host buffer to fill", &w, err));
    pl__source_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    const pl_opt *f = pl_stage_opt(st, "file");
    if (f) {
        o->file = f->str;
        o->file_pos = f->val_pos;
        const pl_opt *g = pl_stage_opt(st, "generator");
        if (g)
            return pl_error_at(err, PL_EINPUT, g->pos,
                               "source '%s' has both 'file' and 'generator'; keep one", st->name);
    }
    PL_CHECK(pl_opt_get_bool(st, "wrap", false, &o->wrap, err));
    PL_CHECK(pl_opt_get_enum(st, "generator", PL__GEN_RANDOM, &o->generator, err));
    PL_CHECK(pl_opt_get_num(st, "value", 0, &o->value, err));
    o->has_min = pl_stage_opt(st, "min") != NULL;
    o->has_max = pl_stage_opt(st, "max") != NULL;
    PL_CHECK(pl_opt_get_num(st, "min", 0, &o->min, err));
    PL_CHECK(pl_opt_get_num(st, "max", 0, &o->max, err));
    int64_t seed;
    o->has_seed = pl_stage_opt(st, "seed") != NULL;
    PL_CHECK(pl_opt_get_int(st, "seed", 0, INT64_MIN, INT64_MAX, &seed, err));
    o->seed = (uint64_t)seed;
    st->priv = o;
    return PL_OK;
}

/* min/max as the generator uses them: defaults per dtype. */
static void pl__source_range(const pl__source_opts *o, pl_dtype t, double *lo, double *hi)
{
    pl_rng_default_range(t, lo, hi);
    if (o->has_min) *lo = o->min;
    if (o->has_max) *hi = o->max;
}

static bool pl__int_fits(double v, pl_dtype t)
{
    if (v != floor(v)) return false;
    switch (t) {
    case PL_U8:
        return v >= 0 && v <= 255;
    case PL_I32:
        return v >= -2147483648.0 && v <= 2147483647.0;
    default:
        return v >= -9.2e18 && v <= 9.2e18;
    }
}

static pl_status pl__source_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl__source_opts *o = st->priv;
    const pl_buffer *b = pl_kind_wbuf(spec, st, st->n_writes - 1);
    if (o->file) return PL_OK;
    if (o->generator == PL__GEN_RANDOM) {
        double lo, hi;
        pl__source_range(o, b->dtype, &lo, &hi);
        const pl_opt *mo = pl_stage_opt(st, "max");
        pl_pos pos = mo ? mo->val_pos : st->pos;
        if (!(hi > lo))
            return pl_error_at(err, PL_EINPUT, pos,
                               "source '%s': max (%g) must be larger than min (%g)", st->name, hi,
                               lo);
        if (!pl_dtype_is_float(b->dtype) &&
            (!pl__int_fits(lo, b->dtype) || !pl__int_fits(hi - 1, b->dtype)))
            return pl_error_at(err, PL_EINPUT, pos,
                               "source '%s': buffer '%s' is %s, so min and max must be whole "
                               "numbers in its range (got %g and %g)",
                               st->name, b->name, pl_dtype_name(b->dtype), lo, hi);
    }
    if (o->generator == PL__GEN_CONSTANT && !pl_dtype_is_float(b->dtype) &&
        !pl__int_fits(o->value, b->dtype)) {
        const pl_opt *vo = pl_stage_opt(st, "value");
        return pl_error_at(err, PL_EINPUT, vo ? vo->val_pos : st->pos,
                           "source '%s': value %g does not fit buffer '%s' (%s); give a whole "
                           "number in its range",
                           st->name, o->value, b->name, pl_dtype_name(b->dtype));
    }
    return PL_OK;
}

/* Opens the source's file and checks it against the buffer and a run of `batches` batches; on
 * success fills s (offset, whole batches, path) and leaves s->fd open. Used at check time
 * (check_files) and again at open, so both say the same. */
static pl_status pl__source_probe(const pl_spec *spec, const pl_stage *st, int64_t batches,
                                  pl__source_state *s, pl_error *err)
{
    const pl__source_opts *o = st->priv;
    const pl_buffer *b = pl_kind_wbuf(spec, st, st->n_writes - 1);
    pl_status ps = PL_OK;
    s->fd = -1;
    pl_spec_path(spec, o->file, s->path, sizeof s->path);
    const char *base = strrchr(s->path, '/') ? strrchr(s->path, '/') + 1 : s->path;
    FILE *f = fopen(s->path, "rb");
    if (!f)
        return pl_error_at(err, PL_EINPUT, o->file_pos, "source '%s': cannot open '%s': %s",
                           st->name, s->path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ps = pl_error_at(err, PL_EINPUT, o->file_pos,
                         "source '%s': '%s' is not a regular file; a source reads batch i at its "
                         "offset, which a FIFO or a device cannot do: copy the data to a file",
                         st->name, s->path);
        goto done;
    }
    uint64_t data = (uint64_t)sb.st_size;
    size_t n = strlen(s->path);
    bool npy = n >= 4 && strcmp(s->path + n - 4, ".npy") == 0;
    if (npy) {
        pl_npy_info info;
        ps = pl_npy_read_header(f, s->path, &info, err);
        if (ps != PL_OK) {
            pl_npy_error_at(err, o->file_pos, "source", st->name);
            goto done;
        }
        if (!pl_npy_descr_matches(info.descr, b->dtype) || info.fortran_order) {
            ps = pl_error_at(err, PL_EINPUT, o->file_pos,
                             "source '%s': '%s' holds '%s'%s but buffer '%s' is %s; save it as "
                             "numpy dtype '%s' in C order",
                             st->name, s->path, info.descr,
                             info.fortran_order ? " in Fortran order" : "", b->name,
                             pl_dtype_name(b->dtype), pl_npy_descr(b->dtype));
            goto done;
        }
        /* (N, *buffer shape), or the buffer's shape for one batch: anything else (a transposed
         * or reshaped array of the right size) would be read in the wrong order. */
        int lead = info.rank - b->rank;
        bool ok = lead == 0 || lead == 1;
        for (int i = 0; ok && i < b->rank; i++)
            ok = info.shape[lead + i] == b->shape[i];
        if (!ok) {
            char have[160], want[160];
            pl_npy_shape_str(info.rank, info.shape, have, sizeof have);
            int64_t nshape[PL_MAX_RANK + 1];
            nshape[0] = 0;
            memcpy(nshape + 1, b->shape, (size_t)b->rank * sizeof *nshape);
            pl_npy_shape_str(b->rank + 1, nshape, want, sizeof want);
            char *zero = strstr(want, "(0");
            if (zero) zero[1] = 'N';
            ps = pl_error_at(err, PL_EINPUT, o->file_pos,
                             "source '%s': '%s' holds an array of shape %s, but batches of "
                             "buffer '%s' need shape %s; a transposed or reshaped array would be "
                             "read in the wrong order: save it with that shape",
                             st->name, base, have, b->name, want);
            goto done;
        }
        if (info.data_offset + info.data_bytes > data) {
            ps = pl_error_at(
                err, PL_EINPUT, o->file_pos,
                "source '%s': '%s' is truncated: its header promises %llu bytes of "
                "data, the file has %llu",
                st->name, s->path, (unsigned long long)info.data_bytes,
                (unsigned long long)(data > info.data_offset ? data - info.data_offset : 0));
            goto done;
        }
        s->offset = info.data_offset;
        data = info.data_bytes;
    }
    if (data % b->bytes) {
        ps = pl_error_at(err, PL_EINPUT, o->file_pos,
                         "source '%s': '%s' holds %llu bytes, not a whole number of batches of "
                         "%llu bytes (buffer '%s'): the last %llu bytes would be ignored; %s",
                         st->name, s->path, (unsigned long long)data, (unsigned long long)b->bytes,
                         b->name, (unsigned long long)(data % b->bytes),
                         npy ? "save an array of shape (N, ...) with the buffer's shape after N"
                             : "trim the file to whole batches or change the buffer's shape");
        goto done;
    }
    s->n_batches = (int64_t)(data / b->bytes);
    if (s->n_batches == 0) {
        ps = pl_error_at(err, PL_EINPUT, o->file_pos,
                         "source '%s': %s holds no whole batch of %llu bytes; give a larger "
                         "file or a smaller buffer",
                         st->name, base, (unsigned long long)b->bytes);
        goto done;
    }
    if (!o->wrap && s->n_batches < batches) {
        ps = pl_error_at(err, PL_EINPUT, o->file_pos,
                         "source '%s': %s holds %lld batches of %llu bytes, the run needs %lld: "
                         "batch %lld is the first it cannot fill; set wrap: true or run fewer "
                         "batches",
                         st->name, base, (long long)s->n_batches, (unsigned long long)b->bytes,
                         (long long)batches, (long long)s->n_batches);
        goto done;
    }
    s->fd = dup(fileno(f));
    if (s->fd < 0)
        ps = pl_error_at(err, PL_EINPUT, o->file_pos, "source '%s': cannot open '%s': %s", st->name,
                         s->path, strerror(errno));
done:
    fclose(f);
    return ps;
}

static pl_status pl__source_check_files(const pl_spec *spec, const pl_stage *st, int64_t batches,
                                        pl_error *err)
{
    const pl__source_opts *o = st->priv;
    if (!o->file) return PL_OK;
    pl__source_state s;
    memset(&s, 0, sizeof s);
    pl_status ps = pl__source_probe(spec, st, batches, &s, err);
    if (s.fd >= 0) close(s.fd);
    return ps;
}

/* `batches: all`: a file without wrap ends after its whole batches; a partial last batch is the
 * probe's error, as for any run (never dropped silently). */
static pl_status pl__source_count(const pl_spec *spec, const pl_stage *st, bool probe, int64_t *n,
                                  pl_error *err)
{
    const pl__source_opts *o = st->priv;
    *n = -1;
    if (!o->file || o->wrap) return PL_OK;
    *n = 0;
    if (!probe) return PL_OK;
    pl__source_state s;
    memset(&s, 0, sizeof s);
    pl_status ps = pl__source_probe(spec, st, 0, &s, err);
    if (s.fd >= 0) close(s.fd);
    if (ps == PL_OK) *n = s.n_batches;
    return ps;
}

static pl_status pl__source_open(const pl_run_env *env, const pl_stage *st, void **state,
                                 pl_error *err)
{
    *state = NULL;
    const pl__source_opts *o = st->priv;
    if (!o->file) return PL_OK;
    pl__source_state *s = calloc(1, sizeof *s);
    if (!s) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status ps = pl__source_probe(env->spec, st, env->batches, s, err);
    if (ps != PL_OK) {
        if (s->fd >= 0) close(s->fd);
        free(s);
        return ps;
    }
    *state = s;
    return PL_OK;
}

static pl_status pl__source_close(const pl_run_env *env, const pl_stage *st, void *state,
                                  int64_t completed, bool failed, pl_error *err)
{
    pl__source_state *s = state;
    if (s && s->fd >= 0) close(s->fd);
    free(s);
    return PL_OK;
}

static void pl__fill_value(void *dst, pl_dtype t, int64_t j, double v)
{
    switch (t) {
    case PL_F64:
        ((double *)dst)[j] = v;
        break;
    case PL_F32:
        ((float *)dst)[j] = (float)v;
        break;
    case PL_F16:
        ((uint16_t *)dst)[j] = pl_f32_to_f16((float)v);
        break;
    case PL_BF16:
        ((uint16_t *)dst)[j] = pl_f32_to_bf16((float)v);
        break;
    case PL_U8:
        ((uint8_t *)dst)[j] = (uint8_t)(int64_t)v;
        break;
    case PL_I32:
        ((int32_t *)dst)[j] = (int32_t)(int64_t)v;
        break;
    case PL_I64:
        ((int64_t *)dst)[j] = (int64_t)v;
        break;
    case PL_DTYPE_COUNT:
        break;
    }
}

static pl_status pl__source_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__source_opts *o = st->priv;
    const pl_buffer *b = pl_kind_wbuf(ctx->spec, st, st->n_writes - 1);
    void *dst = ctx->bufs[b->index];
    pl__source_state *s = ctx->state;
    if (s) {
        uint64_t off = s->offset + (uint64_t)(ctx->batch % s->n_batches) * b->bytes;
        uint64_t got = 0;
        while (got < b->bytes) {
            ssize_t r =
                pread(s->fd, (char *)dst + got, (size_t)(b->bytes - got), (off_t)(off + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0)
                return pl_error_set(err, PL_EIO, "error: reading '%s' failed: %s", s->path,
                                    r < 0 ? strerror(errno) : "the file got shorter");
            got += (uint64_t)r;
        }
        return PL_OK;
    }
    switch (o->generator) {
    case PL__GEN_RANDOM: {
        double lo, hi;
        pl__source_range(o, b->dtype, &lo, &hi);
        uint64_t seed = o->has_seed ? o->seed : ctx->env->seed;
        pl_rng_fill(dst, b->dtype, b->count,
                    pl_rng_key(seed, PL_RNG_SOURCE, (uint64_t)st->index, (uint64_t)ctx->batch), 0,
                    lo, hi);
        break;
    }
    case PL__GEN_RANGE: {
        uint64_t base = (uint64_t)ctx->batch * (uint64_t)b->count;
        for (int64_t j = 0; j < b->count; j++) {
            uint64_t v = base + (uint64_t)j;
            switch (b->dtype) {
            case PL_U8:
                ((uint8_t *)dst)[j] = (uint8_t)v;
                break;
            case PL_I32:
                ((int32_t *)dst)[j] = (int32_t)(uint32_t)v;
                break;
            case PL_I64:
                ((int64_t *)dst)[j] = (int64_t)v;
                break;
            default:
                pl__fill_value(dst, b->dtype, j, (double)v);
                break;
            }
        }
        break;
    }
    case PL__GEN_CONSTANT:
        for (int64_t j = 0; j < b->count; j++)
            pl__fill_value(dst, b->dtype, j, o->value);
        break;
    }
    return PL_OK;
}

const pl_kind pl_kind_source = {
    .name = "source",
    .engine = PL_ENGINE_HOST,
    .role = PL_ROLE_INPUT,
    .keys = pl__source_keys,
    .doc = "fills a per-batch host buffer from a file, a seeded generator or a constant",
    .bind = pl__source_bind,
    .validate = pl__source_validate,
    .check_files = pl__source_check_files,
    .count_batches = pl__source_count,
    .open = pl__source_open,
    .close = pl__source_close,
    .run_host = pl__source_run,
};
