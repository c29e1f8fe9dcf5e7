/* pl_bundle_replay: comparing records (a bundle and a replay, or two bundles: sinks batch by
 * batch, stage times against the recorded noise, the environment key by key), checking a bundle's
 * inputs, and running it again (pl_bundle_replay, pl_bundle_diff). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_bundle.h"
#include "pl_bundle_int.h"
#include "pl_env.h"
#include "pl_exec.h"
#include "pl_npy.h"
#include "pl_parse.h"

/* ---- comparisons ---- */

void pl_compare_fini(pl_compare *c)
{
    if (!c) return;
    free(c->sinks);
    free(c->stages);
    free(c->env);
    memset(c, 0, sizeof *c);
    c->first_sink = -1;
}

static json_t *pl__find_named(const json_t *arr, const char *key, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *n = pl_json_str_or(e, key, NULL);
        if (n && strcmp(n, name) == 0) return e;
    }
    return NULL;
}

static uint64_t pl__hex_at(const json_t *arr, size_t i)
{
    uint64_t v = 0;
    pl_json_parse_hex64(json_string_value(json_array_get(arr, i)), &v);
    return v;
}

/* A sink's batch count: "batches" (bundles before it was written: the per-batch array's size). */
static int64_t pl__batches_of(const json_t *e)
{
    json_t *n = json_object_get(e, "batches");
    return json_is_integer(n) ? (int64_t)json_integer_value(n)
                              : (int64_t)json_array_size(json_object_get(e, "batch_checksums"));
}

/* Sinks of a (recorded) against b (now or another bundle): per batch checksums (the first
 * PL_BATCH_CHECKSUMS_MAX batches: what sinks keep), then the whole output's checksum. */
static pl_status pl__cmp_sinks(const json_t *oa, const json_t *ob, pl_compare *c, pl_error *err)
{
    size_t na = json_array_size(oa), nb = json_array_size(ob);
    c->sinks = calloc(na + nb + 1, sizeof *c->sinks);
    if (!c->sinks) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    c->first_sink = -1;
    int64_t first_b = INT64_MAX;
    for (size_t pass = 0; pass < 2; pass++) {
        const json_t *from = pass == 0 ? oa : ob, *other = pass == 0 ? ob : oa;
        size_t i;
        json_t *e;
        json_array_foreach(from, i, e)
        {
            const char *name = pl_json_str_or(e, "stage", "?");
            json_t *f = pl__find_named(other, "stage", name);
            if (pass == 1 && f) continue; /* compared in pass 0 */
            pl_sink_cmp *s = &c->sinks[c->n_sinks++];
            snprintf(s->stage, sizeof s->stage, "%s", name);
            s->first_batch = -1;
            s->rel_err = -1;
            const char *rp = pl_json_str_or(pass == 0 ? e : f, "repro", "exact");
            s->exact = strcmp(rp, "exact") == 0;
            json_t *tol = json_object_get(pass == 0 ? e : f, "tolerance");
            s->tol = json_is_number(tol) ? json_number_value(tol) : 0;
            if (!f) {
                s->verdict = PL_SINK_ABSENT;
                int64_t n = pl__batches_of(e);
                *(pass == 0 ? &s->batches_a : &s->batches_b) = n;
                s->n_differ = n;
                s->first_batch = 0;
            } else {
                json_t *ca = json_object_get(e, "batch_checksums"),
                       *cb = json_object_get(f, "batch_checksums");
                s->batches_a = pl__batches_of(e);
                s->batches_b = pl__batches_of(f);
                int64_t ra = (int64_t)json_array_size(ca), rb = (int64_t)json_array_size(cb);
                int64_t lo = s->batches_a < s->batches_b ? s->batches_a : s->batches_b;
                int64_t n_rec = ra < rb ? ra : rb;
                if (n_rec > lo) n_rec = lo;
                for (int64_t k = 0; k < n_rec; k++) {
                    uint64_t va = pl__hex_at(ca, (size_t)k), vb = pl__hex_at(cb, (size_t)k);
                    if (va == vb) continue;
                    if (s->first_batch < 0) {
                        s->first_batch = k;
                        s->first_a = va;
                        s->first_b = vb;
                    }
                    s->n_differ++;
                }
                /* Batches both ran past the per-batch record (PL_BATCH_CHECKSUMS_MAX): only the
                 * whole output's checksum tells; a difference there counts as one batch, the
                 * first one not recorded. */
                uint64_t wa = 0, wb = 0;
                pl_json_parse_hex64(pl_json_str_or(e, "checksum", ""), &wa);
                pl_json_parse_hex64(pl_json_str_or(f, "checksum", ""), &wb);
                if (n_rec < lo && s->batches_a == s->batches_b && wa != wb && !s->n_differ) {
                    s->first_batch = n_rec;
                    s->first_a = s->first_b = 0;
                    s->n_differ++;
                }
                /* Batches only one of them has. */
                int64_t hi = s->batches_a > s->batches_b ? s->batches_a : s->batches_b;
                if (hi > lo) {
                    if (s->first_batch < 0) {
                        s->first_batch = lo;
                        s->first_a = lo < ra ? pl__hex_at(ca, (size_t)lo) : 0;
                        s->first_b = lo < rb ? pl__hex_at(cb, (size_t)lo) : 0;
                    }
                    s->n_differ += hi - lo;
                }
                s->verdict = s->n_differ ? PL_SINK_DIFFER : PL_SINK_MATCH;
                if (json_is_false(json_object_get(e, "checksummed")) ||
                    json_is_false(json_object_get(f, "checksummed"))) {
                    s->verdict = PL_SINK_UNCHECKED;
                    s->n_differ = 0;
                    s->first_batch = -1;
                }
            }
            if (s->n_differ) {
                c->n_differ += s->n_differ;
                if (s->first_batch < first_b) {
                    first_b = s->first_batch;
                    c->first_sink = c->n_sinks - 1;
                }
            }
        }
    }
    return PL_OK;
}

/* The band a p50 ratio may stray from 1 within noise: twice the recorded spread of the reps'
 * p50s, and never under 5% (2 or 3 reps underestimate the spread). */
static double pl__band(double noise)
{
    if (noise < 0) return -1;
    double b = 2 * noise;
    return b < 0.05 ? 0.05 : b;
}

static pl_status pl__cmp_stages(const json_t *sa, const json_t *sb, pl_compare *c, pl_error *err)
{
    size_t na = json_array_size(sa), nb = json_array_size(sb);
    c->stages = calloc(na + nb + 1, sizeof *c->stages);
    if (!c->stages) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (size_t pass = 0; pass < 2; pass++) {
        const json_t *from = pass == 0 ? sa : sb, *other = pass == 0 ? sb : sa;
        size_t i;
        json_t *e;
        json_array_foreach(from, i, e)
        {
            const char *name = pl_json_str_or(e, "name", "?");
            json_t *f = pl__find_named(other, "name", name);
            if (pass == 1 && f) continue;
            const json_t *a = pass == 0 ? e : NULL, *b = pass == 0 ? f : e;
            pl_stage_cmp *s = &c->stages[c->n_stages++];
            snprintf(s->name, sizeof s->name, "%s", name);
            snprintf(s->engine, sizeof s->engine, "%s", pl_json_str_or(e, "engine", "?"));
            s->in_a = a != NULL;
            s->in_b = b != NULL;
            s->noise = s->band = -1;
            if (a) {
                s->count_a = (int64_t)json_integer_value(json_object_get(a, "count"));
                s->mean_a = json_number_value(json_object_get(a, "mean_s"));
                s->p50_a = json_number_value(json_object_get(a, "p50_s"));
                s->p99_a = json_number_value(json_object_get(a, "p99_s"));
                json_t *nz = json_object_get(a, "noise");
                if (json_is_number(nz)) s->noise = json_number_value(nz);
                s->band = pl__band(s->noise);
            }
            if (b) {
                s->count_b = (int64_t)json_integer_value(json_object_get(b, "count"));
                s->mean_b = json_number_value(json_object_get(b, "mean_s"));
                s->p50_b = json_number_value(json_object_get(b, "p50_s"));
                s->p99_b = json_number_value(json_object_get(b, "p99_s"));
            }
            if (a && b && s->p50_a > 0 && s->p50_b > 0 && s->band >= 0)
                s->beyond = fabs(s->p50_b / s->p50_a - 1) > s->band;
        }
    }
    return PL_OK;
}

/* Leaf values of an object as "a.b.c" = text, appended to keys/vals. */
static void pl__flatten(const json_t *v, const char *prefix, json_t *out)
{
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            char key[96];
            snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", k);
            pl__flatten(x, key, out);
        }
        return;
    }
    char *text = json_is_string(v) ? strdup(json_string_value(v)) : json_dumps(v, JSON_ENCODE_ANY);
    if (text) json_object_set_new(out, prefix, json_string(text));
    free(text);
}

static pl_status pl__add_env(pl_compare *c, int *cap, const char *key, const char *a, const char *b,
                             pl_error *err)
{
    if (c->n_env == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        pl_env_diff *n = realloc(c->env, (size_t)nc * sizeof *n);
        if (!n) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        c->env = n;
        *cap = nc;
    }
    pl_env_diff *d = &c->env[c->n_env++];
    snprintf(d->key, sizeof d->key, "%s", key);
    snprintf(d->a, sizeof d->a, "%s", a ? a : "(none)");
    snprintf(d->b, sizeof d->b, "%s", b ? b : "(none)");
    return PL_OK;
}

/* Environment differences, key by key (hostname and the GPU note left out: they say where, not
 * what), plus the extra pairs given (plan digest, executor, ...). */
static pl_status pl__cmp_env(const json_t *ea, const json_t *eb, pl_compare *c, int *cap,
                             pl_error *err)
{
    json_t *fa = json_object(), *fb = json_object();
    pl_status st = PL_OK;
    if (!fa || !fb) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    pl__flatten(ea, "", fa);
    pl__flatten(eb, "", fb);
    for (int pass = 0; pass < 2 && st == PL_OK; pass++) {
        const char *k;
        json_t *x;
        json_object_foreach(pass == 0 ? fa : fb, k, x)
        {
            if (strcmp(k, "host.hostname") == 0) continue;
            json_t *y = json_object_get(pass == 0 ? fb : fa, k);
            if (pass == 1 && y) continue;
            const char *va = pass == 0 ? json_string_value(x) : NULL;
            const char *vb = pass == 0 ? (y ? json_string_value(y) : NULL) : json_string_value(x);
            if (va && vb && strcmp(va, vb) == 0) continue;
            st = pl__add_env(c, cap, k, va, vb, err);
            if (st != PL_OK) break;
        }
    }
done:
    json_decref(fa);
    json_decref(fb);
    return st;
}

void pl_replay_result_fini(pl_replay_result *r)
{
    if (!r) return;
    free(r->changed);
    for (int i = 0; i < r->n_warnings; i++)
        free(r->warnings[i]);
    free(r->warnings);
    pl_compare_fini(&r->cmp);
    memset(r, 0, sizeof *r);
    r->cmp.first_sink = -1;
}

/* Hashes one input or bundled file against its recorded SHA-256: rel inside the bundle (opened
 * through pl_bundle_file_open: a link, a device or a path out of it fails the replay), or an
 * absolute path outside it (an input not copied). Missing or unreadable: listed as missing. */
static pl_status pl__check_file(const pl_bundle *b, pl_replay_result *r, const char *rel,
                                const char *what, const char *want, pl_error *err)
{
    char got[PL_SHA256_HEX];
    pl_error fe;
    pl_error_clear(&fe);
    pl_status st;
    if (rel[0] == '/') {
        st = pl_sha256_file(rel, got, NULL, &fe);
    } else {
        int fd;
        st = pl_bundle_file_open(b, rel, &fd, NULL, &fe);
        if (st == PL_EINPUT) {
            *err = fe;
            return st;
        }
        if (st == PL_OK) {
            char p[PL__PATH];
            st = pl_sha256_fd(fd, pl_bundle_path(b->dir, rel, p, sizeof p), got, NULL, &fe);
            close(fd);
        }
    }
    bool missing = st != PL_OK;
    if (!missing && strcmp(got, want) == 0) return PL_OK;
    pl_file_check *n = realloc(r->changed, (size_t)(r->n_changed + 1) * sizeof *n);
    if (!n) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    r->changed = n;
    pl_file_check *x = &r->changed[r->n_changed++];
    memset(x, 0, sizeof *x);
    pl__bundle_fmt(x->path, sizeof x->path, "%s", rel);
    pl__bundle_fmt(x->what, sizeof x->what, "%s", what);
    x->missing = missing;
    snprintf(x->want, sizeof x->want, "%s", want);
    snprintf(x->got, sizeof x->got, "%s", missing ? "" : got);
    return PL_OK;
}

static pl_status pl__check_inputs(const pl_bundle *b, pl_replay_result *r, pl_error *err)
{
    char what[160];
    size_t i;
    json_t *e;
    json_t *inputs = json_object_get(b->manifest, "inputs");
    json_array_foreach(inputs, i, e)
    {
        const char *bundled = pl_json_str_or(e, "bundled", NULL);
        const char *path = bundled ? bundled : pl_json_str_or(e, "path", "");
        const char *stage = pl_json_str_or(e, "stage", NULL);
        if (stage)
            snprintf(what, sizeof what, "input of stage '%s' (%s)", stage,
                     pl_json_str_or(e, "key", "?"));
        else
            snprintf(what, sizeof what, "initial contents of buffer '%s'",
                     pl_json_str_or(e, "buffer", "?"));
        PL_CHECK(pl__check_file(b, r, path, what, pl_json_str_or(e, "sha256", ""), err));
    }
    json_array_foreach(json_object_get(b->manifest, "files"), i, e)
    {
        const char *rel = pl_json_str_or(e, "path", "");
        bool is_input = false;
        size_t k;
        json_t *x;
        json_array_foreach(inputs, k, x)
        {
            const char *bd = pl_json_str_or(x, "bundled", NULL);
            if (bd && strcmp(bd, rel) == 0) is_input = true;
        }
        if (is_input) continue;
        /* Every file the bundle holds is inside it: an absolute path here is refused too. */
        if (rel[0] == '/') {
            int fd;
            return pl_bundle_file_open(b, rel, &fd, NULL, err);
        }
        PL_CHECK(pl__check_file(
            b, r, rel, strcmp(rel, "pipeline.yaml") == 0 ? "the bundled pipeline" : "bundled file",
            pl_json_str_or(e, "sha256", ""), err));
    }
    return PL_OK;
}

/* Norm-wise relative difference of two output files of dtype `dt` (.npy headers skipped):
 * ||a - b|| / ||b||, or -1 when they cannot be compared (size, dtype, unreadable). NaN anywhere
 * in one and not the other counts as infinitely far. The recorded one, b, is the bundle's file
 * rel. */
static double pl__rel_diff(const char *pa, const pl_bundle *bundle, const char *rel,
                           const char *dtype)
{
    pl_dtype dt;
    if (!dtype || !pl_dtype_parse(dtype, &dt) || !pl_dtype_is_float(dt)) return -1;
    if (dt != PL_F32 && dt != PL_F64) return -1; /* halves: compared bit for bit only */
    char pb[PL__PATH];
    pl_bundle_path(bundle->dir, rel, pb, sizeof pb);
    int fdb;
    pl_error oe;
    FILE *fa = fopen(pa, "rb"), *fb = NULL;
    if (pl_bundle_file_open(bundle, rel, &fdb, NULL, &oe) == PL_OK && !(fb = fdopen(fdb, "rb")))
        close(fdb);
    double num = 0, den = 0, res = -1;
    if (!fa || !fb) goto done;
    uint64_t off[2] = {0, 0};
    FILE *fs[2] = {fa, fb};
    const char *ps[2] = {pa, pb};
    for (int i = 0; i < 2; i++) {
        size_t l = strlen(ps[i]);
        if (l > 4 && strcmp(ps[i] + l - 4, ".npy") == 0) {
            pl_npy_info info;
            pl_error e;
            if (pl_npy_read_header(fs[i], ps[i], &info, &e) != PL_OK) goto done;
            off[i] = info.data_offset;
        }
        if (fseek(fs[i], (long)off[i], SEEK_SET) != 0) goto done;
    }
    size_t es = pl_dtype_size(dt);
    unsigned char xa[8], xb[8];
    for (;;) {
        size_t ra = fread(xa, 1, es, fa), rb = fread(xb, 1, es, fb);
        if (ra != rb) goto done;
        if (ra == 0) break;
        if (ra != es) goto done;
        double va, vb;
        if (dt == PL_F32) {
            float fa32, fb32;
            memcpy(&fa32, xa, 4);
            memcpy(&fb32, xb, 4);
            va = fa32, vb = fb32;
        } else {
            memcpy(&va, xa, 8);
            memcpy(&vb, xb, 8);
        }
        if (isnan(va) != isnan(vb)) {
            res = INFINITY;
            goto done;
        }
        if (isnan(va)) continue;
        num += (va - vb) * (va - vb);
        den += vb * vb;
    }
    res = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
done:
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return res;
}

static void pl__rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[PL__PATH];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        pl__bundle_fmt(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            pl__rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* What a replay makes and frees (pl__replay_fini): its folder (removed when temporary), the
 * pipeline, the plan, the runs and what they gave. */
typedef struct pl__replay {
    char out_dir[PL__PATH];
    char gdir[PL__PATH]; /* the graphs' DOT files (GPU) */
    bool temp;
    pl_spec *spec;
    pl_plan *plan;
    char digest[PL_SHA256_HEX]; /* the plan's, now */
    int nreps;
    pl_run_result res;   /* the first run */
    pl_run_result *more; /* [nreps]: the other runs, from 1 */
    json_t **reps;       /* [nreps]: each run's stage statistics */
    json_t *now_out, *now_stages, *env;
} pl__replay;

static void pl__replay_fini(pl__replay *x)
{
    pl_run_result_fini(&x->res);
    for (int k = 0; x->more && k < x->nreps; k++) {
        pl_run_result_fini(&x->more[k]);
        if (x->reps) json_decref(x->reps[k]);
    }
    free(x->more);
    free(x->reps);
    json_decref(x->now_out);
    json_decref(x->now_stages);
    json_decref(x->env);
    pl_plan_free(x->plan);
    pl_spec_free(x->spec);
    if (x->temp) pl__rm_tree(x->out_dir);
}

/* The folder the replay writes to: cfg->out_dir, or a temporary one (x->temp) removed at the end;
 * absolute, since the sinks' paths are resolved from the bundled pipeline's folder and a relative
 * one would put the replay's outputs inside the bundle. Nothing to free when it fails. */
static pl_status pl__replay_folder(const pl_replay_cfg *cfg, pl__replay *x, pl_error *err)
{
    const char *t = getenv("TMPDIR");
    const char *where = cfg->out_dir ? cfg->out_dir : t && *t ? t : "/tmp";
    char cwd[PL__PATH];
    bool rel = where[0] != '/' && getcwd(cwd, sizeof cwd);
    pl__bundle_fmt(x->out_dir, sizeof x->out_dir, "%s%s%s%s", rel ? cwd : "", rel ? "/" : "", where,
                   cfg->out_dir ? "" : "/pipectl-replay-XXXXXX");
    if (cfg->out_dir) return pl__bundle_mkdir_p(x->out_dir, err);
    if (!mkdtemp(x->out_dir))
        return pl_error_set(err, PL_EIO, "error: cannot create a temporary folder: %s",
                            strerror(errno));
    x->temp = true;
    return PL_OK;
}

/* A line for the replay's warnings (r->warnings, printed by the CLI). */
static pl_status pl__warn(pl_replay_result *r, pl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static pl_status pl__warn(pl_replay_result *r, pl_error *err, const char *fmt, ...)
{
    char line[2 * PL__PATH];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char **n = realloc(r->warnings, (size_t)(r->n_warnings + 1) * sizeof *n);
    if (!n) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    r->warnings = n;
    if (!(n[r->n_warnings] = strdup(line)))
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    r->n_warnings++;
    return PL_OK;
}

/* path (as the bundled pipeline `file` says it, relative to its folder) relative to the bundle's
 * folder, into buf. */
static const char *pl__from_root(const char *file, const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(file, '/');
    if (path[0] == '/' || !slash)
        pl__bundle_fmt(buf, cap, "%s", path);
    else
        pl__bundle_fmt(buf, cap, "%.*s/%s", (int)(slash - file), file, path);
    return buf;
}

/* The bundled pipeline, read through pl_bundle_file_read (a link or a FIFO there is refused). */
static pl_status pl__load_bundled(const pl_bundle *b, const char *file, pl_spec **spec,
                                  pl_error *err)
{
    char *text = NULL, p[PL__PATH];
    size_t len = 0;
    pl_status st = pl_bundle_file_read(b, file, (size_t)64 << 20, &text, &len, NULL, err);
    if (st == PL_EIO) err->status = st = PL_EINPUT; /* a bundle without its pipeline: a bad one */
    if (st != PL_OK) return st;
    pl_bundle_path(b->dir, file, p, sizeof p);
    size_t n = strlen(file);
    if (n >= 4 && strcmp(file + n - 4, ".lua") == 0)
        st = pl_lua_load_string(p, text, len, spec, err);
    else
        st = pl_yaml_load_string(p, text, len, spec, err);
    free(text);
    return st;
}

/* One file the bundled pipeline reads (what: "stage 'read' (file)"): relative to the bundle's
 * folder, it must stay in it and pass pl__bundle_openat's checks (missing is for the run to say);
 * absolute, it is an input not copied, read where it is, as `pipectl run` would. */
static pl_status pl__read_closed(const pl_bundle *b, const char *file, const char *path,
                                 const char *what, pl_error *err)
{
    if (path[0] == '/') return PL_OK;
    char rel[PL__PATH];
    const char *why = pl__bundle_rel_refusal(pl__from_root(file, path, rel, sizeof rel));
    if (why)
        return pl_error_set(err, PL_EINPUT,
                            "error: bundle %s: %s of the bundled pipeline reads %s, which %s: a "
                            "bundle holds regular files only, under its own folder",
                            b->dir, what, path, why);
    return pl__bundle_check_closed(b->fd, b->dir, rel, err);
}

/* The files the bundled pipeline reads (a stage's path option, a buffer's init file), checked
 * before the run opens them by name (pl__check_inputs has hashed the ones the manifest lists). */
static pl_status pl__pipeline_reads_closed(const pl_bundle *b, const char *file,
                                           const pl_spec *spec, pl_error *err)
{
    char what[PL_MAX_NAME + 64];
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *bf = &spec->buffers[i];
        if (bf->init != PL_INIT_FILE || !bf->init_file) continue;
        snprintf(what, sizeof what, "buffer '%s' (file)", bf->name);
        PL_CHECK(pl__read_closed(b, file, bf->init_file, what, err));
    }
    for (int s = 0; s < spec->n_stages; s++) {
        const pl_stage *sg = &spec->stages[s];
        if (!sg->kind || (sg->kind->role & PL_ROLE_OUTPUT)) continue;
        for (int o = 0; o < sg->n_opts; o++) {
            const pl_key *k = pl_kind_key(sg->kind, sg->opts[o].key);
            if (!k || k->type != PL_KEY_PATH || !sg->opts[o].str) continue;
            snprintf(what, sizeof what, "stage '%s' (%s)", sg->name, k->name);
            PL_CHECK(pl__read_closed(b, file, sg->opts[o].str, what, err));
        }
    }
    return PL_OK;
}

/* Whether path (relative to the bundle's folder) leads out of it: absolute, or more '..' than
 * folders before them. */
static bool pl__leaves(const char *path)
{
    if (path[0] == '/') return true;
    int depth = 0;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0) return true;
        } else if (n > 0 && !(n == 1 && p[0] == '.')) {
            depth++;
        }
        p += n + (p[n] == '/');
    }
    return false;
}

/* A sink's file in the replay folder: the base name of what the pipeline says (the stage's name
 * when that is not a plain name: "..", "." or a path ending in '/'), so the replay writes
 * nothing over the bundle nor outside its folder. Warns (one line a sink) when the bundled
 * pipeline itself writes outside the bundle (an absolute path, or one that climbs out with
 * '..'), and when the file in the replay folder is a link or a special file that would lead the
 * write elsewhere (an --out folder with things in it). */
static pl_status pl__sink_target(const pl_bundle *b, const char *file, const pl_stage *sg,
                                 const char *to, const char *out_dir, char *np, size_t cap,
                                 pl_replay_result *r, pl_error *err)
{
    const char *base = pl__bundle_base(to);
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) base = sg->name;
    pl__bundle_fmt(np, cap, "%s/%s", out_dir, base);
    char rel[PL__PATH];
    if (strcmp(to, "-") != 0 && pl__leaves(pl__from_root(file, to, rel, sizeof rel)))
        PL_CHECK(pl__warn(r, err,
                          "warning: sink '%s' of the bundled pipeline writes %s, outside the "
                          "bundle: replay writes %s instead; a run of %s/%s would write %s (give "
                          "its `to:` a path under outputs/, as capture does, to keep it inside)",
                          sg->name, to, np, b->dir, file, to));
    struct stat sb;
    if (lstat(np, &sb) != 0 || S_ISREG(sb.st_mode)) return PL_OK;
    char target[PL__PATH] = "";
    ssize_t n = S_ISLNK(sb.st_mode) ? readlink(np, target, sizeof target - 1) : -1;
    if (n > 0) target[n] = '\0';
    if (S_ISLNK(sb.st_mode))
        return pl__warn(r, err,
                        "warning: sink '%s' writes %s, a symlink to %s: the replay writes where "
                        "it leads, outside its folder (remove the link, or give --out an empty "
                        "folder)",
                        sg->name, np, n > 0 ? target : "?");
    return pl__warn(r, err,
                    "warning: sink '%s' writes %s, which is %s, not a file of the replay folder "
                    "(remove it, or give --out an empty folder)",
                    sg->name, np, pl__bundle_file_type(sb.st_mode));
}

/* The bundled pipeline, its outputs sent to the replay folder (not over the bundle's copies),
 * checked and compiled. */
static pl_status pl__replay_load(const pl_bundle *b, pl__replay *x, pl_replay_result *r,
                                 pl_error *err)
{
    const char *file =
        pl_json_str_or(json_object_get(b->manifest, "pipeline"), "file", "pipeline.yaml");
    PL_CHECK(pl__load_bundled(b, file, &x->spec, err));
    pl_spec *spec = x->spec;
    PL_CHECK(pl__pipeline_reads_closed(b, file, spec, err));
    for (int s = 0; s < spec->n_stages; s++) {
        pl_stage *sg = &spec->stages[s];
        if (!sg->kind || !(sg->kind->role & PL_ROLE_OUTPUT)) continue;
        for (int o = 0; o < sg->n_opts; o++) {
            const pl_key *k = pl_kind_key(sg->kind, sg->opts[o].key);
            if (!k || k->type != PL_KEY_PATH || !sg->opts[o].str) continue;
            char np[PL__PATH];
            PL_CHECK(
                pl__sink_target(b, file, sg, sg->opts[o].str, x->out_dir, np, sizeof np, r, err));
            sg->opts[o].str = pl_spec_strdup(spec, np);
            if (!sg->opts[o].str) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        }
    }
    PL_CHECK(pl_spec_check(spec, err));
    /* A shard's bundle (capture --shard, --mpi) runs the same shard again: its batches write the
     * same part files. */
    json_t *sh = json_object_get(b->manifest, "shard");
    int64_t n = 0;
    if (json_is_object(sh)) {
        json_int_t k = json_integer_value(json_object_get(sh, "index"));
        json_int_t c = json_integer_value(json_object_get(sh, "count"));
        const char *mode = pl_json_str_or(sh, "mode", "stride");
        if (c < 2 || c > PL_MAX_BATCHES || k < 0 || k >= c)
            return pl_error_set(err, PL_EINPUT,
                                "error: bundle %s: its manifest's shard (%lld of %lld) is not a "
                                "shard; the manifest was edited or is corrupt",
                                b->dir, (long long)k, (long long)c);
        spec->run.shard.index = (int)k;
        spec->run.shard.count = (int)c;
        spec->run.shard.mode = strcmp(mode, "range") == 0 ? PL_SHARD_RANGE : PL_SHARD_STRIDE;
        n = pl_shard_batches(&spec->run.shard, spec->run.batches);
    }
    PL_CHECK(pl_plan_compile_with(spec, n, 0, &x->plan, err));
    return pl_plan_digest(x->plan, x->digest, err);
}

/* The run as recorded (executor unless given, workers unless given, timing period, graphs,
 * graph mode); on the GPU, the graphs' DOT files go to the replay folder. */
static pl_status pl__replay_run_cfg(const pl_bundle *b, const pl_replay_cfg *cfg,
                                    const pl_replay_result *r, pl__replay *x, pl_run_cfg *rc,
                                    pl_error *err)
{
    json_t *run = json_object_get(b->manifest, "run");
    *rc = cfg->run;
    if (rc->executor == PL_EXEC_AUTO)
        rc->executor = strcmp(r->executor_rec, "gpu") == 0 ? PL_EXEC_GPU : PL_EXEC_HOST;
    if (rc->executor == PL_EXEC_GPU && cfg->run.executor == PL_EXEC_AUTO && !pl_gpu_available())
        return pl_error_set(err, PL_ENODEV,
                            "error: the bundle was recorded on the gpu executor and no GPU is "
                            "usable here; 'pipectl replay --executor host %s' replays it on the "
                            "CPU (outputs exact by design must match, the others are compared "
                            "within their tolerance)",
                            b->dir);
    if (!cfg->workers_given) rc->workers = (int)json_integer_value(json_object_get(run, "workers"));
    rc->timing_period = (int)json_integer_value(json_object_get(run, "timing_period"));
    json_t *gr = json_object_get(run, "graphs");
    if (rc->executor == PL_EXEC_GPU && json_is_boolean(gr) && cfg->run.use_graphs)
        rc->use_graphs = json_is_true(gr);
    /* Bundles from before graph_mode ran per-segment graphs, the default then. */
    const char *gm = pl_json_str_or(run, "graph_mode", "segment");
    if (rc->executor == PL_EXEC_GPU && cfg->run.use_graphs && !cfg->graph_mode_given)
        rc->graph_mode = strcmp(gm, "stage") == 0 ? PL_GRAPHS_STAGE : PL_GRAPHS_SEGMENT;
    pl__bundle_fmt(x->gdir, sizeof x->gdir, "%s/graphs", x->out_dir);
    if (rc->executor == PL_EXEC_GPU) {
        PL_CHECK(pl__bundle_mkdir(x->gdir, err));
        rc->dot_dir = x->gdir;
    }
    return PL_OK;
}

/* The runs (the first writes the graphs' DOT files), and what they gave: the outputs' checksums
 * of the first, the stage times over all. */
static pl_status pl__replay_runs(pl__replay *x, pl_run_cfg *rc, pl_replay_result *r, pl_error *err)
{
    x->reps = calloc((size_t)x->nreps, sizeof *x->reps);
    x->more = calloc((size_t)x->nreps, sizeof *x->more);
    if (!x->reps || !x->more) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int k = 0; k < x->nreps; k++) {
        pl_run_result *rr = k == 0 ? &x->res : &x->more[k];
        if (k > 0) rc->dot_dir = NULL;
        PL_CHECK(pl_run(x->plan, rc, rr, err));
        x->reps[k] = pl__bundle_stats_json(x->plan, rr);
        if (!x->reps[k]) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    r->executor = x->res.executor;
    r->batches_done = x->res.batches_done;
    if (strcmp(r->executor_rec, x->res.executor) != 0)
        snprintf(r->note, sizeof r->note,
                 "recorded on %s, replayed on %s: outputs that are exact by design must match; "
                 "the others are compared within their tolerance",
                 r->executor_rec, x->res.executor);
    x->now_out = pl__bundle_outputs_json(x->plan, &x->res);
    x->now_stages = pl__bundle_stages_over_reps(x->reps, x->nreps);
    if (!x->now_out || !x->now_stages) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    return PL_OK;
}

/* The environment now against the recorded one; the plan, the executor and (GPU, when the graphs
 * were written) the graphs' topology belong with it. */
static pl_status pl__replay_env(const pl_bundle *b, pl_replay_result *r, pl__replay *x,
                                bool graphs_written, pl_error *err)
{
    const json_t *m = b->manifest;
    const char *now = x->res.executor;
    PL_CHECK(pl_env_json(strcmp(now, "gpu") == 0, x->spec->run.device, &x->env, err));
    int cap = 0;
    const char *pd = pl_json_str_or(json_object_get(m, "plan"), "digest", "");
    if (strcmp(pd, x->digest) != 0)
        PL_CHECK(pl__add_env(&r->cmp, &cap, "plan.digest", pd, x->digest, err));
    if (strcmp(r->executor_rec, now) != 0)
        PL_CHECK(pl__add_env(&r->cmp, &cap, "run.executor", r->executor_rec, now, err));
    if (graphs_written) {
        pl_status st = PL_OK;
        json_t *files = json_array(), *g = NULL;
        int ng = 0;
        char odir[PL__PATH];
        pl__bundle_fmt(odir, sizeof odir, "%s", x->out_dir);
        if (files && pl__bundle_graphs(odir, files, &g, &ng, err) == PL_OK) {
            const char *ta = pl_json_str_or(json_object_get(m, "graphs"), "topology_digest", NULL);
            const char *tb = pl_json_str_or(g, "topology_digest", NULL);
            if ((ta || tb) && (!ta || !tb || strcmp(ta, tb) != 0))
                st = pl__add_env(&r->cmp, &cap, "graphs.topology_digest", ta, tb, err);
        }
        json_decref(files);
        json_decref(g);
        if (st != PL_OK) return st;
    }
    return pl__cmp_env(json_object_get(m, "environment"), x->env, &r->cmp, &cap, err);
}

/* Sinks that may differ in bits here (not exact, on another executor or GPU): compared within
 * their tolerance where the bundle has a copy of the output; then the batches that differ,
 * counted, and the sink that differs first. */
static void pl__replay_verdicts(const pl_bundle *b, pl_replay_result *r, const pl__replay *x)
{
    const json_t *outs = json_object_get(b->manifest, "outputs");
    bool same_place = strcmp(r->executor_rec, x->res.executor) == 0;
    for (int i = 0; i < r->cmp.n_env; i++)
        if (strncmp(r->cmp.env[i].key, "gpu.", 4) == 0 ||
            strncmp(r->cmp.env[i].key, "libraries.", 10) == 0 ||
            strncmp(r->cmp.env[i].key, "pipectl.", 8) == 0)
            same_place = false;
    r->cmp.n_differ = 0;
    r->cmp.first_sink = -1;
    int64_t first_b = INT64_MAX;
    for (int i = 0; i < r->cmp.n_sinks; i++) {
        pl_sink_cmp *s = &r->cmp.sinks[i];
        if (s->verdict == PL_SINK_DIFFER && !s->exact && !same_place &&
            s->batches_a == s->batches_b) {
            json_t *e = pl__find_named(outs, "stage", s->stage);
            const char *bundled = pl_json_str_or(e, "bundled", NULL);
            json_t *ne = pl__find_named(x->now_out, "stage", s->stage);
            const char *written = pl_json_str_or(ne, "written_to", NULL);
            if (!bundled || !written) {
                s->verdict = PL_SINK_UNVERIFIED;
            } else {
                s->rel_err = pl__rel_diff(written, b, bundled, pl_json_str_or(e, "dtype", NULL));
                s->verdict = s->rel_err >= 0 && s->rel_err <= s->tol ? PL_SINK_WITHIN_TOL
                             : s->rel_err >= 0                       ? PL_SINK_DIFFER
                                                                     : PL_SINK_UNVERIFIED;
            }
        }
        if (s->verdict == PL_SINK_DIFFER || s->verdict == PL_SINK_UNVERIFIED ||
            s->verdict == PL_SINK_ABSENT) {
            r->cmp.n_differ += s->n_differ;
            if (s->first_batch < first_b) {
                first_b = s->first_batch;
                r->cmp.first_sink = i;
            }
        }
    }
}

pl_status pl_bundle_replay(const pl_bundle *b, const pl_replay_cfg *cfg, pl_replay_result *r,
                           pl_error *err)
{
    memset(r, 0, sizeof *r);
    r->cmp.first_sink = -1;
    const json_t *m = b->manifest;
    r->executor_rec = pl_json_str_or(json_object_get(m, "run"), "executor", "?");
    PL_CHECK(pl__check_inputs(b, r, err));
    if (r->n_changed > 0 && !cfg->allow_changed_inputs) {
        const pl_file_check *c = &r->changed[0];
        return pl_error_set(err, PL_EINPUT,
                            "error: %s %s %s since the capture%s; replay refuses to compare "
                            "(--allow-changed-inputs runs it anyway)",
                            c->what, c->path, c->missing ? "is missing" : "changed",
                            r->n_changed > 1 ? " (and others: see the list)" : "");
    }
    pl__replay x;
    memset(&x, 0, sizeof x);
    x.nreps = cfg->reps > 0 ? cfg->reps : 1;
    PL_CHECK(pl__replay_folder(cfg, &x, err));
    pl_status st;
    pl_run_cfg rc;
    PL_CHECK_GOTO(pl__replay_load(b, &x, r, err), st, done);
    PL_CHECK_GOTO(pl__replay_run_cfg(b, cfg, r, &x, &rc, err), st, done);
    PL_CHECK_GOTO(pl__replay_runs(&x, &rc, r, err), st, done);
    PL_CHECK_GOTO(pl__cmp_sinks(json_object_get(m, "outputs"), x.now_out, &r->cmp, err), st, done);
    PL_CHECK_GOTO(pl__cmp_stages(json_object_get(m, "stages"), x.now_stages, &r->cmp, err), st,
                  done);
    PL_CHECK_GOTO(pl__replay_env(b, r, &x, rc.dot_dir != NULL, err), st, done);
    pl__replay_verdicts(b, r, &x);
    st = PL_OK;
done:
    pl__replay_fini(&x);
    return st;
}

pl_status pl_bundle_diff(const pl_bundle *a, const pl_bundle *b, pl_compare *c, pl_error *err)
{
    memset(c, 0, sizeof *c);
    c->first_sink = -1;
    const json_t *ma = a->manifest, *mb = b->manifest;
    PL_CHECK(pl__cmp_sinks(json_object_get(ma, "outputs"), json_object_get(mb, "outputs"), c, err));
    PL_CHECK(pl__cmp_stages(json_object_get(ma, "stages"), json_object_get(mb, "stages"), c, err));
    int cap = 0;
    /* The inputs' hashes, matched by stage and key (or buffer). */
    size_t ii;
    json_t *x;
    json_array_foreach(json_object_get(ma, "inputs"), ii, x)
    {
        const char *stage = pl_json_str_or(x, "stage", NULL),
                   *buf = pl_json_str_or(x, "buffer", NULL);
        const char *key = pl_json_str_or(x, "key", "");
        const char *ha = pl_json_str_or(x, "sha256", ""), *hb = NULL;
        size_t k;
        json_t *y;
        json_array_foreach(json_object_get(mb, "inputs"), k, y)
        {
            const char *s2 = pl_json_str_or(y, "stage", NULL),
                       *b2 = pl_json_str_or(y, "buffer", NULL);
            if (strcmp(pl_json_str_or(y, "key", ""), key) != 0) continue;
            if ((stage && s2 && strcmp(stage, s2) == 0) || (buf && b2 && strcmp(buf, b2) == 0))
                hb = pl_json_str_or(y, "sha256", "");
        }
        if (hb && strcmp(ha, hb) == 0) continue;
        char name[96];
        snprintf(name, sizeof name, "inputs.%s.%s", stage ? stage : buf ? buf : "?", key);
        PL_CHECK(pl__add_env(c, &cap, name, ha, hb, err));
    }
    static const char *const pairs[][2] = {
        {"pipeline", "digest"},  {"plan", "digest"},
        {"run", "executor"},     {"run", "graphs"},
        {"run", "workers"},      {"run", "seed"},
        {"run", "batches_done"}, {"graphs", "topology_digest"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        json_t *va = json_object_get(json_object_get(ma, pairs[i][0]), pairs[i][1]);
        json_t *vb = json_object_get(json_object_get(mb, pairs[i][0]), pairs[i][1]);
        char *ta = !va                  ? NULL
                   : json_is_string(va) ? strdup(json_string_value(va))
                                        : json_dumps(va, JSON_ENCODE_ANY);
        char *tb = !vb                  ? NULL
                   : json_is_string(vb) ? strdup(json_string_value(vb))
                                        : json_dumps(vb, JSON_ENCODE_ANY);
        pl_status st = PL_OK;
        if ((ta || tb) && (!ta || !tb || strcmp(ta, tb) != 0)) {
            char key[96];
            snprintf(key, sizeof key, "%s.%s", pairs[i][0], pairs[i][1]);
            st = pl__add_env(c, &cap, key, ta, tb, err);
        }
        free(ta);
        free(tb);
        PL_CHECK(st);
    }
    return pl__cmp_env(json_object_get(ma, "environment"), json_object_get(mb, "environment"), c,
                       &cap, err);
}
