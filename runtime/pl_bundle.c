/* pl_bundle: writing a capture bundle (pl_bundle_capture), reading one (pl_bundle_open), and the
 * comparisons behind `pipectl replay` and `pipectl diff`. docs/bundles.md describes the format. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "pl_bundle.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_canon.h"
#include "pl_env.h"
#include "pl_npy.h"
#include "pl_parse.h"
#include "pl_report.h"
#include "pl_trace.h"

#define PL__PATH 4096

/* ---- paths and files ---- */

/* snprintf that may cut (paths longer than PL__PATH are cut, and then fail to open, named). */
static void pl__fmt(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

const char *pl_bundle_path(const char *dir, const char *rel, char *buf, size_t cap)
{
    if (rel[0] == '/')
        pl__fmt(buf, cap, "%s", rel);
    else
        pl__fmt(buf, cap, "%s/%s", dir, rel);
    return buf;
}

static const char *pl__base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static pl_status pl__mkdir(const char *path, pl_error *err)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return pl_error_set(err, PL_EIO, "error: cannot create the folder %s: %s", path,
                            strerror(errno));
    return PL_OK;
}

static pl_status pl__mkdir_p(const char *path, pl_error *err)
{
    char buf[PL__PATH];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            PL_CHECK(pl__mkdir(buf, err));
            *p = '/';
        }
    return pl__mkdir(buf, err);
}

static pl_status pl__copy_file(const char *from, const char *to, pl_error *err)
{
    FILE *in = fopen(from, "rb");
    if (!in) return pl_error_set(err, PL_EIO, "error: cannot read %s: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", to, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    pl_status st = PL_OK;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) {
            st = pl_error_set(err, PL_EIO, "error: cannot write %s: %s", to, strerror(errno));
            break;
        }
    if (st == PL_OK && ferror(in))
        st = pl_error_set(err, PL_EIO, "error: cannot read %s: %s", from, strerror(errno));
    fclose(in);
    if (fclose(out) != 0 && st == PL_OK)
        st = pl_error_set(err, PL_EIO, "error: cannot write %s: %s", to, strerror(errno));
    return st;
}

static pl_status pl__write_text(const char *path, void (*fn)(const pl_plan *, FILE *),
                                const pl_plan *plan, pl_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f) return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", path, strerror(errno));
    fn(plan, f);
    if (fclose(f) != 0) return pl_error_set(err, PL_EIO, "error: cannot write %s", path);
    return PL_OK;
}

/* ---- the plan as JSON ---- */

static json_t *pl__names(const pl_spec *spec, const int *idx, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(spec->stages[idx[i]].name));
    return a;
}

json_t *pl_plan_json(const pl_plan *plan)
{
    const pl_spec *spec = plan->spec;
    static const char *const why[] = {"slot_reuse", "persistent", "ordered"};
    json_t *j = json_object(), *bufs = json_array(), *stages = json_array(),
           *streams = json_array(), *events = json_array(), *xdeps = json_array(),
           *segs = json_array();
    if (!j || !bufs || !stages || !streams || !events || !xdeps || !segs) goto oom;
    json_object_set_new(j, "depth", json_integer(plan->depth));
    json_object_set_new(j, "batches", json_integer(plan->batches));
    json_object_set_new(j, "buffers", bufs);
    json_object_set_new(j, "stages", stages);
    json_object_set_new(j, "streams", streams);
    json_object_set_new(j, "events", events);
    json_object_set_new(j, "xdeps", xdeps);
    json_object_set_new(j, "segments", segs);
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *b = &spec->buffers[i];
        json_t *shape = json_array();
        for (int d = 0; shape && d < b->rank; d++)
            json_array_append_new(shape, json_integer(b->shape[d]));
        json_array_append_new(bufs,
                              json_pack("{s:s, s:s, s:s, s:o, s:b, s:I}", "name", b->name, "where",
                                        pl_where_name(b->where), "dtype", pl_dtype_name(b->dtype),
                                        "shape", shape ? shape : json_null(), "persistent",
                                        b->persistent, "bytes", (json_int_t)b->bytes));
    }
    for (int i = 0; i < plan->n_stages; i++) {
        int s = plan->order[i];
        const pl_plan_stage *ps = &plan->stages[s];
        json_array_append_new(
            stages,
            json_pack("{s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:b, s:b}", "name", spec->stages[s].name,
                      "kind", spec->stages[s].kind->name, "engine", pl_engine_name(ps->engine),
                      "stream", plan->streams[ps->stream].name, "preds",
                      pl__names(spec, ps->preds, ps->n_preds), "segment", ps->segment, "after",
                      ps->after, "record_end", ps->record_end, "observe", ps->observe));
    }
    for (int k = 0; k < plan->n_streams; k++)
        json_array_append_new(
            streams,
            json_pack("{s:s, s:s, s:o}", "name", plan->streams[k].name, "engine",
                      pl_engine_name(plan->streams[k].engine), "stages",
                      pl__names(spec, plan->streams[k].stages, plan->streams[k].n_stages)));
    for (int e = 0; e < plan->n_events; e++)
        json_array_append_new(
            events,
            json_pack("{s:s, s:o}", "after", spec->stages[plan->events[e].src].name, "waited_by",
                      pl__names(spec, plan->events[e].dsts, plan->events[e].n_dsts)));
    for (int x = 0; x < plan->n_xdeps; x++) {
        const pl_xdep *d = &plan->xdeps[x];
        json_array_append_new(
            xdeps,
            json_pack("{s:s, s:s, s:i, s:o, s:s}", "from", spec->stages[d->from].name, "to",
                      spec->stages[d->to].name, "distance", d->distance, "buffer",
                      d->buffer >= 0 ? json_string(spec->buffers[d->buffer].name) : json_null(),
                      "why", why[d->why]));
    }
    for (int k = 0; k < plan->n_segments; k++)
        json_array_append_new(
            segs,
            json_pack("{s:o, s:o}", "stages",
                      pl__names(spec, plan->segments[k].stages, plan->segments[k].n_stages),
                      "host_deps",
                      pl__names(spec, plan->segments[k].host_deps, plan->segments[k].n_host_deps)));
    json_object_set_new(j, "memory",
                        json_pack("{s:I, s:I, s:I, s:I}", "host_per_slot",
                                  (json_int_t)plan->host_per_slot, "device_per_slot",
                                  (json_int_t)plan->device_per_slot, "host_persistent",
                                  (json_int_t)plan->host_persistent, "device_persistent",
                                  (json_int_t)plan->device_persistent));
    return j;
oom:
    json_decref(j);
    json_decref(bufs);
    json_decref(stages);
    json_decref(streams);
    json_decref(events);
    json_decref(xdeps);
    json_decref(segs);
    return NULL;
}

pl_status pl_plan_digest(const pl_plan *plan, char hex[PL_SHA256_HEX], pl_error *err)
{
    json_t *j = pl_plan_json(plan);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status st = pl_sha256(text, strlen(text), hex, err);
    free(text);
    return st;
}

/* ---- what a run produced, as JSON (the same shape for a bundle and a replay) ---- */

/* How reproducible sink `s`'s data is: the worst of the stages its data comes from (the writers of
 * the buffers it reads, transitively), as their kinds say. */
static pl_repro pl__sink_repro(const pl_spec *spec, int s, double *tol)
{
    pl_repro worst = PL_REPRO_EXACT;
    *tol = 0;
    int n = spec->n_stages;
    char *seen = calloc((size_t)n, 1);
    int *todo = malloc((size_t)n * sizeof *todo);
    if (!seen || !todo) {
        free(seen);
        free(todo);
        *tol = 1e-5;
        return PL_REPRO_SAME_GPU; /* out of memory: the cautious answer */
    }
    int nt = 0;
    todo[nt++] = s;
    seen[s] = 1;
    while (nt > 0) {
        const pl_stage *st = &spec->stages[todo[--nt]];
        if (st->kind->repro) {
            double t = 0;
            if (st->kind->repro(spec, st, &t) == PL_REPRO_SAME_GPU) {
                worst = PL_REPRO_SAME_GPU;
                if (t > *tol) *tol = t;
            }
        }
        for (int r = 0; r < st->n_reads; r++)
            for (int w = 0; w < n; w++) {
                if (seen[w]) continue;
                const pl_stage *ws = &spec->stages[w];
                for (int k = 0; k < ws->n_writes; k++)
                    if (ws->writes[k].index == st->reads[r].index) {
                        seen[w] = 1;
                        todo[nt++] = w;
                        break;
                    }
            }
    }
    free(seen);
    free(todo);
    return worst;
}

static json_t *pl__outputs_json(const pl_plan *plan, const pl_run_result *res)
{
    const pl_spec *spec = plan->spec;
    json_t *a = json_array();
    for (int i = 0; a && i < res->n_outputs; i++) {
        const pl_output *o = &res->outputs[i];
        json_t *bc = json_array();
        for (int64_t b = 0; bc && o->batch_checksums && b < o->batches; b++)
            json_array_append_new(bc, pl_json_hex64(o->batch_checksums[b]));
        int s = pl_spec_find_stage(spec, o->stage);
        double tol = 0;
        pl_repro rp = s >= 0 ? pl__sink_repro(spec, s, &tol) : PL_REPRO_EXACT;
        json_t *e = json_pack("{s:s, s:I, s:I, s:o, s:s, s:f, s:o}", "stage", o->stage, "batches",
                              (json_int_t)o->batches, "bytes_per_batch", (json_int_t)o->batch_bytes,
                              "checksum", pl_json_hex64(o->checksum), "repro",
                              rp == PL_REPRO_EXACT ? "exact" : "same_gpu", "tolerance", tol,
                              "batch_checksums", bc ? bc : json_array());
        if (e && o->path) json_object_set_new(e, "written_to", pl_json_str(o->path));
        if (e && s >= 0 && spec->stages[s].n_reads > 0) {
            const pl_buffer *buf = &spec->buffers[spec->stages[s].reads[0].index];
            json_object_set_new(e, "dtype", json_string(pl_dtype_name(buf->dtype)));
        }
        if (!e || json_array_append_new(a, e) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *pl__stats_json(const pl_plan *plan, const pl_run_result *res)
{
    const pl_spec *spec = plan->spec;
    pl_stage_stats *st = calloc((size_t)(plan->n_stages > 0 ? plan->n_stages : 1), sizeof *st);
    json_t *a = json_array();
    if (!st || !a) {
        free(st);
        json_decref(a);
        return NULL;
    }
    int bs;
    pl_report_stats(plan, res, st, &bs);
    for (int i = 0; i < plan->n_stages; i++) {
        int s = plan->order[i];
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I, s:f, s:f, s:f}", "name",
                                           spec->stages[s].name, "kind", spec->stages[s].kind->name,
                                           "engine", pl_engine_name(plan->stages[s].engine),
                                           "count", (json_int_t)st[s].count, "mean_s", st[s].mean_s,
                                           "p50_s", st[s].p50_s, "p99_s", st[s].p99_s));
    }
    free(st);
    return a;
}

static int pl__cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pl__median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, pl__cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Per stage over reps runs: the median of each statistic, the reps' p50s, and the noise:
 * (max - min) / median of the reps' p50s (null with one rep). The p50 rather than the mean: one
 * stalled batch (a page fault, a busy neighbour) moves a mean of 16 batches a lot and a median
 * hardly at all. */
static json_t *pl__stages_over_reps(json_t *const *reps, int n)
{
    json_t *out = json_array();
    size_t ns = json_array_size(reps[0]);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!out || !v) {
        free(v);
        json_decref(out);
        return NULL;
    }
    static const char *const keys[] = {"mean_s", "p50_s", "p99_s"};
    for (size_t i = 0; i < ns; i++) {
        json_t *first = json_array_get(reps[0], i);
        json_t *e =
            json_pack("{s:O, s:O, s:O, s:O}", "name", json_object_get(first, "name"), "kind",
                      json_object_get(first, "kind"), "engine", json_object_get(first, "engine"),
                      "count", json_object_get(first, "count"));
        if (!e) continue;
        double p50_med = 0, lo = INFINITY, hi = -INFINITY;
        for (int k = 0; k < 3; k++) {
            for (int r = 0; r < n; r++)
                v[r] = json_number_value(json_object_get(json_array_get(reps[r], i), keys[k]));
            if (k == 1)
                for (int r = 0; r < n; r++) {
                    if (v[r] < lo) lo = v[r];
                    if (v[r] > hi) hi = v[r];
                }
            double m = pl__median(v, n);
            if (k == 1) p50_med = m;
            json_object_set_new(e, keys[k], json_real(m));
        }
        json_object_set_new(e, "noise",
                            n > 1 && p50_med > 0 ? json_real((hi - lo) / p50_med) : json_null());
        json_t *per = json_array();
        for (int r = 0; per && r < n; r++)
            json_array_append_new(per, json_real(json_number_value(
                                           json_object_get(json_array_get(reps[r], i), "p50_s"))));
        json_object_set_new(e, "rep_p50s_s", per ? per : json_null());
        json_array_append_new(out, e);
    }
    free(v);
    return out;
}

/* ---- capture ---- */

/* One file the pipeline reads: a stage's path option (not an output kind's) or a buffer's
 * init file. */
typedef struct pl__input {
    int stage;  /* -1: buffer */
    int buffer; /* -1: stage */
    const char *key;
    char as_written[PL__PATH];
    char resolved[PL__PATH];
    char bundled[PL__PATH]; /* relative to the bundle, "" when not copied */
    char canon[PL__PATH];   /* what pipeline.yaml says */
    bool code;              /* a script or kernel source: always copied */
} pl__input;

typedef struct pl__capture {
    const pl_capture_cfg *cfg;
    pl_spec *raw;  /* as loaded: written as pipeline.yaml */
    pl_spec *spec; /* checked: run */
    pl_plan *plan;
    pl__input *in;
    int n_in;
    char (*out_canon)[PL__PATH]; /* [stage]: canonical path of an output kind's path option */
    struct {
        int stage;
        const char *key; /* static, from the kind's key table */
    } * omit;            /* defaults left out of the canonical file */
    int n_omit;
} pl__capture;

static int pl__find_input(const pl__capture *c, int stage, int buffer, const char *key)
{
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i].stage == stage && c->in[i].buffer == buffer && strcmp(c->in[i].key, key) == 0)
            return i;
    return -1;
}

static const char *pl__canon_map(void *user, const pl_stage *st, const char *key, const char *path)
{
    pl__capture *c = user;
    (void)path;
    if (!st) {
        /* buffers are written in order: find the buffer by its init file pointer */
        for (int i = 0; i < c->raw->n_buffers; i++)
            if (c->raw->buffers[i].init_file == path) {
                int k = pl__find_input(c, -1, i, "file");
                return k >= 0 ? c->in[k].canon : NULL;
            }
        return NULL;
    }
    if (st->kind->role & PL_ROLE_OUTPUT) return c->out_canon[st->index];
    int k = pl__find_input(c, st->index, -1, key);
    return k >= 0 ? c->in[k].canon : NULL;
}

static pl_status pl__add_input(pl__capture *c, int stage, int buffer, const char *key,
                               const char *written, pl_error *err)
{
    pl__input *n = realloc(c->in, (size_t)(c->n_in + 1) * sizeof *n);
    if (!n) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    c->in = n;
    pl__input *x = &c->in[c->n_in++];
    memset(x, 0, sizeof *x);
    x->stage = stage;
    x->buffer = buffer;
    x->key = key;
    pl__fmt(x->as_written, sizeof x->as_written, "%s", written);
    char p[PL__PATH];
    pl_spec_path(c->spec, written, p, sizeof p);
    if (!realpath(p, x->resolved)) pl__fmt(x->resolved, sizeof x->resolved, "%s", p);
    /* Code (a lua stage's script, a kernel's source: path options of kinds that are not data
     * sources) is always copied; data (source files, init files) with --copy-inputs. */
    x->code = stage >= 0 && !(c->spec->stages[stage].kind->role & PL_ROLE_INPUT);
    if (c->cfg->copy_inputs || x->code)
        pl__fmt(x->bundled, sizeof x->bundled, "inputs/%d-%s", c->n_in - 1, pl__base(written));
    pl__fmt(x->canon, sizeof x->canon, "%s", x->bundled[0] ? x->bundled : x->resolved);
    return PL_OK;
}

static pl_status pl__collect_inputs(pl__capture *c, pl_error *err)
{
    const pl_spec *sp = c->spec;
    for (int i = 0; i < sp->n_buffers; i++)
        if (sp->buffers[i].init == PL_INIT_FILE && sp->buffers[i].init_file)
            PL_CHECK(pl__add_input(c, -1, i, "file", sp->buffers[i].init_file, err));
    c->out_canon = calloc((size_t)(sp->n_stages > 0 ? sp->n_stages : 1), sizeof *c->out_canon);
    if (!c->out_canon) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int s = 0; s < sp->n_stages; s++) {
        const pl_stage *st = &sp->stages[s];
        for (int o = 0; o < st->n_opts; o++) {
            const pl_opt *op = &st->opts[o];
            const pl_key *k = pl_kind_key(st->kind, op->key);
            if (!k || k->type != PL_KEY_PATH || !op->str) continue;
            if (st->kind->role & PL_ROLE_OUTPUT)
                pl__fmt(c->out_canon[s], sizeof c->out_canon[s], "outputs/%s-%s", st->name,
                        pl__base(op->str));
            else
                PL_CHECK(pl__add_input(c, s, -1, k->name, op->str, err));
        }
    }
    return PL_OK;
}

static bool pl__canon_omit(void *user, const pl_stage *st, const char *key)
{
    const pl__capture *c = user;
    for (int i = 0; i < c->n_omit; i++)
        if (c->omit[i].stage == st->index && strcmp(c->omit[i].key, key) == 0) return true;
    return false;
}

/* Writes the canonical pipeline to path. A default the kind refuses next to the keys given (a
 * source with `file` refuses `generator`, even the default one) fails the check at that key's
 * line: it is then left out (written as a comment) and the file written again. */
static pl_status pl__write_canon(pl__capture *c, const char *path, pl_error *err)
{
    for (int attempt = 0;; attempt++) {
        FILE *f = fopen(path, "w");
        if (!f)
            return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", path, strerror(errno));
        pl_status st = pl_canon_write(c->raw, f, pl__canon_map, pl__canon_omit, c, err);
        if (fclose(f) != 0 && st == PL_OK)
            st = pl_error_set(err, PL_EIO, "error: cannot write %s", path);
        if (st != PL_OK) return st;
        pl_spec *cs = NULL;
        pl_error ce;
        pl_error_clear(&ce);
        st = pl_load_checked(path, &cs, &ce);
        pl_spec_free(cs);
        if (st == PL_OK) return PL_OK;
        /* Which defaulted key is at the error's line? */
        int stage = -1;
        const char *key = NULL;
        cs = NULL;
        if (ce.line > 0 && attempt < 256 && pl_load_file(path, &cs, NULL) == PL_OK) {
            for (int s = 0; s < cs->n_stages && !key; s++)
                for (int o = 0; o < cs->stages[s].n_opts && !key; o++)
                    if (cs->stages[s].opts[o].pos.line == ce.line && s < c->raw->n_stages &&
                        !pl_stage_opt(&c->raw->stages[s], cs->stages[s].opts[o].key)) {
                        stage = s;
                        key = pl_kind_key(c->raw->stages[s].kind, cs->stages[s].opts[o].key)->name;
                    }
        }
        pl_spec_free(cs);
        if (!key) {
            *err = ce;
            return pl_error_prefix(err,
                                   "error: the canonical pipeline %s does not load (a pipectl "
                                   "bug)",
                                   path);
        }
        void *n = realloc(c->omit, (size_t)(c->n_omit + 1) * sizeof *c->omit);
        if (!n) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        c->omit = n;
        c->omit[c->n_omit].stage = stage;
        c->omit[c->n_omit].key = key;
        c->n_omit++;
    }
}

static pl_status pl__file_entry(const char *dir, const char *rel, json_t *files, pl_error *err)
{
    char p[PL__PATH], hex[PL_SHA256_HEX];
    unsigned long long bytes = 0;
    PL_CHECK(pl_sha256_file(pl_bundle_path(dir, rel, p, sizeof p), hex, &bytes, err));
    return pl_json_append(
        files, json_pack("{s:s, s:s, s:I}", "path", rel, "sha256", hex, "bytes", (json_int_t)bytes),
        err);
}

static int pl__cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The graphs' files (sorted) into files, and the digest of their topologies. */
static pl_status pl__graphs(const char *dir, json_t *files, json_t **out, int *n_graphs,
                            pl_error *err)
{
    char gdir[PL__PATH];
    pl_bundle_path(dir, "graphs", gdir, sizeof gdir);
    DIR *d = opendir(gdir);
    *out = json_null();
    *n_graphs = 0;
    if (!d) return PL_OK;
    char *names[1024];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 1024)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, pl__cmp_str);
    pl_status st = PL_OK;
    char *topo = NULL;
    size_t tlen = 0;
    FILE *mem = open_memstream(&topo, &tlen);
    json_t *dots = json_array();
    for (int i = 0; i < n; i++) {
        char rel[PL__PATH];
        pl__fmt(rel, sizeof rel, "graphs/%s", names[i]);
        if (st == PL_OK) st = pl__file_entry(dir, rel, files, err);
        size_t l = strlen(names[i]);
        if (st == PL_OK && l > 4 && strcmp(names[i] + l - 4, ".dot") == 0) {
            json_array_append_new(dots, json_string(rel));
            (*n_graphs)++;
        }
        if (st == PL_OK && l > 5 && strcmp(names[i] + l - 5, ".topo") == 0 && mem) {
            char p[PL__PATH];
            FILE *f = fopen(pl_bundle_path(dir, rel, p, sizeof p), "r");
            char buf[4096];
            size_t k;
            fprintf(mem, "%s\n", names[i]);
            while (f && (k = fread(buf, 1, sizeof buf, f)) > 0)
                fwrite(buf, 1, k, mem);
            if (f) fclose(f);
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    if (mem) fclose(mem);
    if (st == PL_OK && *n_graphs > 0 && topo) {
        char hex[PL_SHA256_HEX];
        st = pl_sha256(topo, tlen, hex, err);
        if (st == PL_OK) *out = json_pack("{s:o, s:s}", "dot", dots, "topology_digest", hex);
        dots = NULL;
    }
    json_decref(dots);
    free(topo);
    return st;
}

static pl_status pl__bundle_empty(const char *dir, pl_error *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return pl__mkdir_p(dir, err);
        return pl_error_set(err, PL_EIO, "error: cannot use %s as the bundle folder: %s", dir,
                            strerror(errno));
    }
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
    closedir(d);
    if (!empty)
        return pl_error_set(err, PL_EINPUT,
                            "error: the bundle folder %s is not empty; remove it or choose "
                            "another with -o",
                            dir);
    return PL_OK;
}

static void pl__now_iso(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char pl__readme[] =
    "This folder is a pipectl capture bundle: everything that made a run's result what it was.\n"
    "\n"
    "  pipectl replay .                      run it again; checks the inputs, compares every\n"
    "                                        batch's checksum and the stage times (exit 0: all\n"
    "                                        outputs match; 1: one differs; 2: bad bundle/input)\n"
    "  pipectl replay --executor host .      the same on the CPU (bit-identical where the ops\n"
    "                                        are, within stated tolerances where they are not)\n"
    "  pipectl diff . OTHER_BUNDLE           compare two bundles\n"
    "  pipectl run pipeline.yaml             just run the canonical pipeline\n"
    "\n"
    "manifest.json lists every file with its SHA-256; docs/bundles.md describes each field.\n"
    "Paths inside are relative to this folder: it may be moved, tarred and sent. Inputs that were\n"
    "not copied (capture without --copy-inputs) are referred to by absolute path.\n";

static pl_status pl__capture_write(pl__capture *c, pl_capture_info *info, pl_error *err)
{
    const pl_capture_cfg *cfg = c->cfg;
    const char *dir = cfg->dir;
    char p[PL__PATH], hex[PL_SHA256_HEX];
    pl_status st = PL_OK;
    pl_run_result *res = NULL;
    json_t **rep_stats = NULL;
    json_t *m = json_object(), *files = json_array(), *inputs = json_array();
    json_t *rep_walls = json_array();
    if (!m || !files || !inputs || !rep_walls) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    static const char *const sub[] = {"original", "inputs", "outputs", "graphs"};
    for (int i = 0; i < 4; i++)
        PL_CHECK_GOTO(pl__mkdir(pl_bundle_path(dir, sub[i], p, sizeof p), err), st, done);

    /* The original file, and the inputs (hashed; copied with --copy-inputs). */
    char orig_rel[PL__PATH];
    pl__fmt(orig_rel, sizeof orig_rel, "original/%s", pl__base(cfg->file));
    PL_CHECK_GOTO(pl__copy_file(cfg->file, pl_bundle_path(dir, orig_rel, p, sizeof p), err), st,
                  done);
    PL_CHECK_GOTO(pl__file_entry(dir, orig_rel, files, err), st, done);
    PL_CHECK_GOTO(pl__collect_inputs(c, err), st, done);
    for (int i = 0; i < c->n_in; i++) {
        pl__input *x = &c->in[i];
        unsigned long long bytes = 0;
        PL_CHECK_GOTO(pl_sha256_file(x->resolved, hex, &bytes, err), st, done);
        if (x->bundled[0])
            PL_CHECK_GOTO(
                pl__copy_file(x->resolved, pl_bundle_path(dir, x->bundled, p, sizeof p), err), st,
                done);
        json_t *e =
            json_pack("{s:s, s:s, s:s, s:s, s:I}", "key", x->key, "as_written", x->as_written,
                      "path", x->resolved, "sha256", hex, "bytes", (json_int_t)bytes);
        if (e && x->stage >= 0)
            json_object_set_new(e, "stage", json_string(c->spec->stages[x->stage].name));
        if (e && x->buffer >= 0)
            json_object_set_new(e, "buffer", json_string(c->spec->buffers[x->buffer].name));
        json_object_set_new(e, "bundled", x->bundled[0] ? json_string(x->bundled) : json_null());
        json_object_set_new(e, "code", json_boolean(x->code));
        PL_CHECK_GOTO(pl_json_append(inputs, e, err), st, done);
    }

    /* The canonical pipeline; loading it must give the plan the original gives. */
    FILE *f = NULL;
    PL_CHECK_GOTO(pl__write_canon(c, pl_bundle_path(dir, "pipeline.yaml", p, sizeof p), err), st,
                  done);
    PL_CHECK_GOTO(pl__file_entry(dir, "pipeline.yaml", files, err), st, done);
    PL_CHECK_GOTO(pl_plan_digest(c->plan, info->plan_digest, err), st, done);
    {
        pl_spec *cs = NULL;
        pl_plan *cp = NULL;
        char chex[PL_SHA256_HEX];
        st = pl_load_checked(p, &cs, err);
        if (st == PL_OK) st = pl_plan_compile(cs, &cp, err);
        if (st == PL_OK) st = pl_plan_digest(cp, chex, err);
        pl_plan_free(cp);
        pl_spec_free(cs);
        if (st != PL_OK) {
            pl_error_prefix(err, "error: the canonical pipeline %s does not load (a pipectl bug)",
                            p);
            goto done;
        }
        if (strcmp(chex, info->plan_digest) != 0) {
            st = pl_error_set(err, PL_ERUNTIME,
                              "error: the canonical pipeline %s gives another plan than %s (a "
                              "pipectl bug; please report it with both files)",
                              p, cfg->file);
            goto done;
        }
    }
    PL_CHECK_GOTO(pl_sha256_file(p, info->spec_digest, NULL, err), st, done);

    /* The plan: text, DOT, JSON. */
    PL_CHECK_GOTO(
        pl__write_text(pl_bundle_path(dir, "plan.txt", p, sizeof p), pl_plan_dump, c->plan, err),
        st, done);
    PL_CHECK_GOTO(pl__write_text(pl_bundle_path(dir, "plan.dot", p, sizeof p), pl_plan_dump_dot,
                                 c->plan, err),
                  st, done);
    {
        json_t *pj = pl_plan_json(c->plan);
        if (!pj) {
            st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
            goto done;
        }
        st = pl_json_write_file(pl_bundle_path(dir, "plan.json", p, sizeof p), pj, err);
        json_decref(pj);
        if (st != PL_OK) goto done;
    }
    PL_CHECK_GOTO(pl__file_entry(dir, "plan.txt", files, err), st, done);
    PL_CHECK_GOTO(pl__file_entry(dir, "plan.dot", files, err), st, done);
    PL_CHECK_GOTO(pl__file_entry(dir, "plan.json", files, err), st, done);

    /* The runs. */
    int reps = cfg->reps > 0 ? cfg->reps : 1;
    res = calloc((size_t)reps, sizeof *res);
    rep_stats = calloc((size_t)reps, sizeof *rep_stats);
    if (!res || !rep_stats) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    pl_run_cfg rc = cfg->run;
    rc.executor = pl_exec_pick(c->plan, cfg->run.executor, info->note, sizeof info->note);
    char gdir[PL__PATH];
    pl_bundle_path(dir, "graphs", gdir, sizeof gdir);
    for (int r = 0; r < reps; r++) {
        rc.dot_dir = r == 0 ? gdir : NULL;
        st = pl_run(c->plan, &rc, &res[r], err);
        if (st != PL_OK) {
            if (r > 0) pl_error_prefix(err, "capture run %d of %d", r + 1, reps);
            goto done;
        }
        rep_stats[r] = pl__stats_json(c->plan, &res[r]);
        if (!rep_stats[r]) {
            st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
            goto done;
        }
        json_array_append_new(rep_walls, json_real((double)res[r].wall_ns * 1e-9));
    }
    const pl_run_result *r0 = &res[0], *last = &res[reps - 1];
    info->executor = r0->executor;
    info->batches_done = r0->batches_done;
    info->reps = reps;
    info->reps_identical = true;
    info->reps_batch = -1;
    for (int r = 1; r < reps && info->reps_identical; r++)
        for (int i = 0; i < r0->n_outputs && info->reps_identical; i++) {
            const pl_output *a = &r0->outputs[i], *b = &res[r].outputs[i];
            for (int64_t k = 0; k < a->batches && a->batch_checksums && b->batch_checksums; k++)
                if (k >= b->batches || a->batch_checksums[k] != b->batch_checksums[k]) {
                    info->reps_identical = false;
                    snprintf(info->reps_sink, sizeof info->reps_sink, "%s", a->stage);
                    info->reps_batch = k;
                    break;
                }
        }

    /* Outputs: the first run's checksums; the last run's files, copied with --copy-outputs. */
    json_t *outs = pl__outputs_json(c->plan, r0);
    if (!outs) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    PL_CHECK_GOTO(pl_json_set(m, "outputs_tmp", outs, err), st, done);
    for (int i = 0; i < last->n_outputs; i++) {
        const pl_output *o = &last->outputs[i];
        json_t *e = json_array_get(outs, (size_t)i);
        json_object_set_new(e, "identical_in_every_run", json_boolean(info->reps_identical));
        int s = pl_spec_find_stage(c->spec, o->stage);
        if (!o->path || s < 0 || !c->out_canon[s][0] || !cfg->copy_outputs || !o->finalized) {
            json_object_set_new(e, "bundled", json_null());
            continue;
        }
        PL_CHECK_GOTO(
            pl__copy_file(o->path, pl_bundle_path(dir, c->out_canon[s], p, sizeof p), err), st,
            done);
        PL_CHECK_GOTO(pl__file_entry(dir, c->out_canon[s], files, err), st, done);
        json_object_set_new(e, "bundled", json_string(c->out_canon[s]));
    }
    info->n_outputs = last->n_outputs;
    info->n_inputs = c->n_in;

    /* The timeline and the summary of the last run. */
    PL_CHECK_GOTO(
        pl_trace_write(pl_bundle_path(dir, "trace.json", p, sizeof p), c->plan, last, err), st,
        done);
    PL_CHECK_GOTO(pl__file_entry(dir, "trace.json", files, err), st, done);
    f = fopen(pl_bundle_path(dir, "summary.json", p, sizeof p), "w");
    if (!f) {
        st = pl_error_set(err, PL_EIO, "error: cannot write %s: %s", p, strerror(errno));
        goto done;
    }
    pl_report_json(f, c->plan, last, PL_OK, NULL);
    if (fclose(f) != 0) {
        st = pl_error_set(err, PL_EIO, "error: cannot write %s", p);
        goto done;
    }
    PL_CHECK_GOTO(pl__file_entry(dir, "summary.json", files, err), st, done);
    json_t *graphs = NULL;
    PL_CHECK_GOTO(pl__graphs(dir, files, &graphs, &info->n_graphs, err), st, done);
    /* Folders with nothing in them (no graphs on the host, no copies) are not kept. */
    static const char *const maybe_empty[] = {"graphs", "inputs", "outputs"};
    for (int i = 0; i < 3; i++)
        rmdir(pl_bundle_path(dir, maybe_empty[i], p, sizeof p)); /* fails when not empty */

    json_t *env = NULL;
    PL_CHECK_GOTO(pl_env_json(strcmp(r0->executor, "gpu") == 0, c->spec->run.device, &env, err), st,
                  done);

    /* The manifest, written last. */
    char created[32];
    pl__now_iso(created, sizeof created);
    PL_CHECK_GOTO(pl_json_set(m, "schema", json_string(PL_BUNDLE_SCHEMA), err), st, done);
    PL_CHECK_GOTO(pl_json_set(m, "schema_version", json_integer(PL_BUNDLE_SCHEMA_VERSION), err), st,
                  done);
    PL_CHECK_GOTO(pl_json_set(m, "created", json_string(created), err), st, done);
    PL_CHECK_GOTO(pl_json_set(m, "command", pl_json_str(cfg->command), err), st, done);
    PL_CHECK_GOTO(pl_json_set(m, "pipeline",
                              json_pack("{s:s, s:s, s:s, s:o, s:s}", "name", c->spec->name, "file",
                                        "pipeline.yaml", "digest", info->spec_digest, "original",
                                        pl_json_str(orig_rel), "original_path", cfg->file),
                              err),
                  st, done);
    PL_CHECK_GOTO(
        pl_json_set(m, "plan",
                    json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:i, s:i}", "text", "plan.txt",
                              "json", "plan.json", "dot", "plan.dot", "digest", info->plan_digest,
                              "depth", c->plan->depth, "batches", (json_int_t)c->plan->batches,
                              "stages", c->plan->n_stages, "streams", c->plan->n_streams),
                    err),
        st, done);
    PL_CHECK_GOTO(
        pl_json_set(m, "run",
                    json_pack("{s:s, s:b, s:i, s:i, s:I, s:I, s:i, s:o}", "executor", r0->executor,
                              "graphs", r0->graphs, "timing_period", cfg->run.timing_period,
                              "workers", r0->workers, "seed", (json_int_t)c->spec->run.seed,
                              "batches_done", (json_int_t)r0->batches_done, "reps", reps, "wall_s",
                              rep_walls),
                    err),
        st, done);
    rep_walls = NULL;
    if (r0->device_name[0])
        json_object_set_new(json_object_get(m, "run"), "device", pl_json_str(r0->device_name));
    PL_CHECK_GOTO(pl_json_set(m, "inputs", inputs, err), st, done);
    inputs = NULL;
    json_incref(outs);
    json_object_del(m, "outputs_tmp");
    PL_CHECK_GOTO(pl_json_set(m, "outputs", outs, err), st, done);
    json_t *stages = pl__stages_over_reps(rep_stats, reps);
    PL_CHECK_GOTO(pl_json_set(m, "stages", stages, err), st, done);
    PL_CHECK_GOTO(
        pl_json_set(
            m, "noise",
            json_pack("{s:i, s:s}", "reps", reps, "method",
                      reps > 1
                          ? "per stage: (max - min) / median of the reps' p50 times; replay calls "
                            "a p50 ratio beyond noise outside 1 +- max(2 noise, 0.05)"
                          : "none recorded: one run (capture with --reps N, N >= 2)"),
            err),
        st, done);
    PL_CHECK_GOTO(pl_json_set(m, "graphs", graphs, err), st, done);
    PL_CHECK_GOTO(pl_json_set(m, "timeline", json_string("trace.json"), err), st, done);
    PL_CHECK_GOTO(pl_json_set(m, "summary", json_string("summary.json"), err), st, done);
    PL_CHECK_GOTO(pl_json_set(m, "environment", env, err), st, done);
    f = fopen(pl_bundle_path(dir, "README.txt", p, sizeof p), "w");
    if (!f || fputs(pl__readme, f) == EOF || fclose(f) != 0) {
        st = pl_error_set(err, PL_EIO, "error: cannot write %s", p);
        goto done;
    }
    PL_CHECK_GOTO(pl__file_entry(dir, "README.txt", files, err), st, done);
    PL_CHECK_GOTO(pl_json_set(m, "files", files, err), st, done);
    files = NULL;
    st = pl_json_write_file(pl_bundle_path(dir, "manifest.json", p, sizeof p), m, err);
done:
    for (int r = 0; res && r < (cfg->reps > 0 ? cfg->reps : 1); r++) {
        pl_run_result_fini(&res[r]);
        if (rep_stats) json_decref(rep_stats[r]);
    }
    free(res);
    free(rep_stats);
    json_decref(m);
    json_decref(files);
    json_decref(inputs);
    json_decref(rep_walls);
    return st;
}

pl_status pl_bundle_capture(const pl_capture_cfg *cfg, pl_capture_info *info, pl_error *err)
{
    memset(info, 0, sizeof *info);
    info->reps_batch = -1;
    pl__capture c;
    memset(&c, 0, sizeof c);
    c.cfg = cfg;
    pl_status st;
    PL_CHECK_GOTO(pl_load_checked(cfg->file, &c.spec, err), st, done);
    PL_CHECK_GOTO(pl_load_file(cfg->file, &c.raw, err), st, done);
    if (cfg->batches > 0) c.spec->run.batches = c.raw->run.batches = cfg->batches;
    if (cfg->depth > 0) c.spec->run.depth = c.raw->run.depth = cfg->depth;
    PL_CHECK_GOTO(pl_plan_compile(c.spec, &c.plan, err), st, done);
    /* Refused before the folder is made: a run that cannot start leaves nothing behind. */
    if (cfg->run.executor == PL_EXEC_GPU && !pl_gpu_available()) {
        pl_run_result none;
        memset(&none, 0, sizeof none);
        st = pl_exec_gpu_run(c.plan, &cfg->run, &none, err);
        pl_run_result_fini(&none);
        if (st == PL_OK) st = pl_error_set(err, PL_ENODEV, "error: no usable GPU");
        goto done;
    }
    PL_CHECK_GOTO(pl__bundle_empty(cfg->dir, err), st, done);
    st = pl__capture_write(&c, info, err);
done:
    free(c.in);
    free(c.out_canon);
    free(c.omit);
    pl_plan_free(c.plan);
    pl_spec_free(c.spec);
    pl_spec_free(c.raw);
    return st;
}

/* ---- reading ---- */

pl_status pl_bundle_open(const char *dir, pl_bundle **out, pl_error *err)
{
    *out = NULL;
    char p[PL__PATH];
    pl_bundle_path(dir, "manifest.json", p, sizeof p);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return pl_error_set(err, PL_EINPUT, "error: %s is not a bundle folder (%s)", dir,
                            stat(dir, &sb) != 0 ? strerror(errno) : "not a folder");
    if (stat(p, &sb) != 0)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s is not a bundle: it has no manifest.json (an interrupted "
                            "capture leaves none; capture it again)",
                            dir);
    json_t *m = NULL;
    pl_status st = pl_json_read_file(p, "corrupt bundle manifest", &m, err);
    if (st != PL_OK) return PL_EINPUT;
    char what[PL__PATH + 32];
    pl__fmt(what, sizeof what, "corrupt bundle manifest %s", p);
    const char *schema = pl_json_str_or(m, "schema", NULL);
    json_t *ver = json_object_get(m, "schema_version");
    if (!json_is_object(m) || !schema || strcmp(schema, PL_BUNDLE_SCHEMA) != 0) {
        json_decref(m);
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: not a pipectl bundle manifest (no \"schema\": \"%s\")", p,
                            PL_BUNDLE_SCHEMA);
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != PL_BUNDLE_SCHEMA_VERSION) {
        char v[32] = "missing";
        if (json_is_integer(ver))
            snprintf(v, sizeof v, "%" JSON_INTEGER_FORMAT, json_integer_value(ver));
        json_decref(m);
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: manifest version %s; this pipectl (%s) reads version %d "
                            "only: replay it with the pipectl that wrote it, or capture it again",
                            p, v, PL_VERSION, PL_BUNDLE_SCHEMA_VERSION);
    }
    /* What replay and diff need, checked once so later code may rely on it. */
    json_t *x;
    const char *s;
    int64_t i;
    if ((st = pl_json_get_obj(m, "pipeline", what, &x, err)) != PL_OK ||
        (st = pl_json_get_str(x, "file", what, &s, err)) != PL_OK ||
        (st = pl_json_get_obj(m, "plan", what, &x, err)) != PL_OK ||
        (st = pl_json_get_str(x, "digest", what, &s, err)) != PL_OK ||
        (st = pl_json_get_obj(m, "run", what, &x, err)) != PL_OK ||
        (st = pl_json_get_str(x, "executor", what, &s, err)) != PL_OK ||
        (st = pl_json_get_int(x, "workers", what, &i, err)) != PL_OK ||
        (st = pl_json_get_int(x, "timing_period", what, &i, err)) != PL_OK ||
        (st = pl_json_get_arr(m, "inputs", what, &x, err)) != PL_OK ||
        (st = pl_json_get_arr(m, "outputs", what, &x, err)) != PL_OK ||
        (st = pl_json_get_arr(m, "stages", what, &x, err)) != PL_OK ||
        (st = pl_json_get_arr(m, "files", what, &x, err)) != PL_OK ||
        (st = pl_json_get_obj(m, "environment", what, &x, err)) != PL_OK) {
        json_decref(m);
        return PL_EINPUT;
    }
    size_t k;
    json_t *o;
    json_array_foreach(json_object_get(m, "outputs"), k, o)
    {
        json_t *bc;
        if ((st = pl_json_get_str(o, "stage", what, &s, err)) != PL_OK ||
            (st = pl_json_get_arr(o, "batch_checksums", what, &bc, err)) != PL_OK) {
            json_decref(m);
            return PL_EINPUT;
        }
        size_t b;
        json_t *c;
        json_array_foreach(bc, b, c)
        {
            uint64_t v;
            if (!json_is_string(c) || !pl_json_parse_hex64(json_string_value(c), &v)) {
                json_decref(m);
                return pl_error_set(err, PL_EINPUT,
                                    "error: %s: sink '%s', batch %zu: checksum must be \"0x\" "
                                    "and 16 hex digits",
                                    what, s, b);
            }
        }
    }
    pl_bundle *b = calloc(1, sizeof *b);
    if (!b || !(b->dir = strdup(dir))) {
        free(b);
        json_decref(m);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    b->manifest = m;
    *out = b;
    return PL_OK;
}

void pl_bundle_free(pl_bundle *b)
{
    if (!b) return;
    json_decref(b->manifest);
    free(b->dir);
    free(b);
}

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

/* Sinks of a (recorded) against b (now or another bundle): per batch checksums. */
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
                json_t *bc = json_object_get(e, "batch_checksums");
                *(pass == 0 ? &s->batches_a : &s->batches_b) = (int64_t)json_array_size(bc);
                s->n_differ = (int64_t)json_array_size(bc);
                s->first_batch = 0;
            } else {
                json_t *ca = json_object_get(e, "batch_checksums"),
                       *cb = json_object_get(f, "batch_checksums");
                s->batches_a = (int64_t)json_array_size(ca);
                s->batches_b = (int64_t)json_array_size(cb);
                int64_t n = s->batches_a > s->batches_b ? s->batches_a : s->batches_b;
                for (int64_t k = 0; k < n; k++) {
                    bool in_a = k < s->batches_a, in_b = k < s->batches_b;
                    uint64_t va = in_a ? pl__hex_at(ca, (size_t)k) : 0,
                             vb = in_b ? pl__hex_at(cb, (size_t)k) : 0;
                    if (in_a && in_b && va == vb) continue;
                    if (s->first_batch < 0) {
                        s->first_batch = k;
                        s->first_a = va;
                        s->first_b = vb;
                    }
                    s->n_differ++;
                }
                s->verdict = s->n_differ ? PL_SINK_DIFFER : PL_SINK_MATCH;
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
    pl_compare_fini(&r->cmp);
    memset(r, 0, sizeof *r);
    r->cmp.first_sink = -1;
}

static pl_status pl__check_file(pl_replay_result *r, const char *path, const char *shown,
                                const char *what, const char *want, pl_error *err)
{
    char got[PL_SHA256_HEX];
    pl_error fe;
    bool missing = pl_sha256_file(path, got, NULL, &fe) != PL_OK;
    if (!missing && strcmp(got, want) == 0) return PL_OK;
    pl_file_check *n = realloc(r->changed, (size_t)(r->n_changed + 1) * sizeof *n);
    if (!n) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    r->changed = n;
    pl_file_check *x = &r->changed[r->n_changed++];
    memset(x, 0, sizeof *x);
    pl__fmt(x->path, sizeof x->path, "%s", shown);
    pl__fmt(x->what, sizeof x->what, "%s", what);
    x->missing = missing;
    snprintf(x->want, sizeof x->want, "%s", want);
    snprintf(x->got, sizeof x->got, "%s", missing ? "" : got);
    return PL_OK;
}

static pl_status pl__check_inputs(const pl_bundle *b, pl_replay_result *r, pl_error *err)
{
    char p[PL__PATH], what[160];
    size_t i;
    json_t *e;
    json_t *inputs = json_object_get(b->manifest, "inputs");
    json_array_foreach(inputs, i, e)
    {
        const char *bundled = pl_json_str_or(e, "bundled", NULL);
        const char *path =
            bundled ? pl_bundle_path(b->dir, bundled, p, sizeof p) : pl_json_str_or(e, "path", "");
        const char *stage = pl_json_str_or(e, "stage", NULL);
        if (stage)
            snprintf(what, sizeof what, "input of stage '%s' (%s)", stage,
                     pl_json_str_or(e, "key", "?"));
        else
            snprintf(what, sizeof what, "initial contents of buffer '%s'",
                     pl_json_str_or(e, "buffer", "?"));
        PL_CHECK(pl__check_file(r, path, bundled ? bundled : path, what,
                                pl_json_str_or(e, "sha256", ""), err));
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
        PL_CHECK(pl__check_file(r, pl_bundle_path(b->dir, rel, p, sizeof p), rel,
                                strcmp(rel, "pipeline.yaml") == 0 ? "the bundled pipeline"
                                                                  : "bundled file",
                                pl_json_str_or(e, "sha256", ""), err));
    }
    return PL_OK;
}

/* Norm-wise relative difference of two output files of dtype `dt` (.npy headers skipped):
 * ||a - b|| / ||b||, or -1 when they cannot be compared (size, dtype, unreadable). NaN anywhere
 * in one and not the other counts as infinitely far. */
static double pl__rel_diff(const char *pa, const char *pb, const char *dtype)
{
    pl_dtype dt;
    if (!dtype || !pl_dtype_parse(dtype, &dt) || !pl_dtype_is_float(dt)) return -1;
    if (dt != PL_F32 && dt != PL_F64) return -1; /* halves: compared bit for bit only */
    FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
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
        pl__fmt(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            pl__rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

pl_status pl_bundle_replay(const pl_bundle *b, const pl_replay_cfg *cfg, pl_replay_result *r,
                           pl_error *err)
{
    memset(r, 0, sizeof *r);
    r->cmp.first_sink = -1;
    const json_t *m = b->manifest;
    json_t *run = json_object_get(m, "run");
    r->executor_rec = pl_json_str_or(run, "executor", "?");
    PL_CHECK(pl__check_inputs(b, r, err));
    if (r->n_changed > 0 && !cfg->allow_changed_inputs) {
        const pl_file_check *x = &r->changed[0];
        return pl_error_set(err, PL_EINPUT,
                            "error: %s %s %s since the capture%s; replay refuses to compare "
                            "(--allow-changed-inputs runs it anyway)",
                            x->what, x->path, x->missing ? "is missing" : "changed",
                            r->n_changed > 1 ? " (and others: see the list)" : "");
    }

    char out_dir[PL__PATH], p[PL__PATH];
    bool temp = !cfg->out_dir;
    if (temp) {
        const char *t = getenv("TMPDIR");
        pl__fmt(out_dir, sizeof out_dir, "%s/pipectl-replay-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(out_dir))
            return pl_error_set(err, PL_EIO, "error: cannot create a temporary folder: %s",
                                strerror(errno));
    } else {
        pl__fmt(out_dir, sizeof out_dir, "%s", cfg->out_dir);
        PL_CHECK(pl__mkdir_p(out_dir, err));
    }
    pl_spec *spec = NULL;
    pl_plan *plan = NULL;
    pl_run_result res;
    memset(&res, 0, sizeof res);
    pl_run_result *more = NULL;
    json_t *now_out = NULL, *now_stages = NULL, *env = NULL, **reps = NULL;
    pl_status st;
    const char *file = pl_json_str_or(json_object_get(m, "pipeline"), "file", "pipeline.yaml");
    PL_CHECK_GOTO(pl_load_file(pl_bundle_path(b->dir, file, p, sizeof p), &spec, err), st, done);
    /* Outputs go to the replay folder, not over the bundle's copies. */
    for (int s = 0; s < spec->n_stages; s++) {
        pl_stage *sg = &spec->stages[s];
        if (!sg->kind || !(sg->kind->role & PL_ROLE_OUTPUT)) continue;
        for (int o = 0; o < sg->n_opts; o++) {
            const pl_key *k = pl_kind_key(sg->kind, sg->opts[o].key);
            if (!k || k->type != PL_KEY_PATH || !sg->opts[o].str) continue;
            char np[PL__PATH];
            pl__fmt(np, sizeof np, "%s/%s", out_dir, pl__base(sg->opts[o].str));
            sg->opts[o].str = pl_spec_strdup(spec, np);
            if (!sg->opts[o].str) {
                st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
                goto done;
            }
        }
    }
    PL_CHECK_GOTO(pl_spec_check(spec, err), st, done);
    PL_CHECK_GOTO(pl_plan_compile(spec, &plan, err), st, done);
    char digest[PL_SHA256_HEX];
    PL_CHECK_GOTO(pl_plan_digest(plan, digest, err), st, done);

    pl_run_cfg rc = cfg->run;
    if (rc.executor == PL_EXEC_AUTO)
        rc.executor = strcmp(r->executor_rec, "gpu") == 0 ? PL_EXEC_GPU : PL_EXEC_HOST;
    if (!cfg->workers_given) rc.workers = (int)json_integer_value(json_object_get(run, "workers"));
    rc.timing_period = (int)json_integer_value(json_object_get(run, "timing_period"));
    json_t *gr = json_object_get(run, "graphs");
    if (rc.executor == PL_EXEC_GPU && json_is_boolean(gr) && cfg->run.use_graphs)
        rc.use_graphs = json_is_true(gr);
    char gdir[PL__PATH];
    pl__fmt(gdir, sizeof gdir, "%s/graphs", out_dir);
    if (rc.executor == PL_EXEC_GPU) {
        PL_CHECK_GOTO(pl__mkdir(gdir, err), st, done);
        rc.dot_dir = gdir;
    }
    int nreps = cfg->reps > 0 ? cfg->reps : 1;
    reps = calloc((size_t)nreps, sizeof *reps);
    more = calloc((size_t)nreps, sizeof *more);
    if (!reps || !more) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    for (int k = 0; k < nreps; k++) {
        pl_run_result *rr = k == 0 ? &res : &more[k];
        if (k > 0) rc.dot_dir = NULL;
        PL_CHECK_GOTO(pl_run(plan, &rc, rr, err), st, done);
        reps[k] = pl__stats_json(plan, rr);
        if (!reps[k]) {
            st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
            goto done;
        }
    }
    r->executor = res.executor;
    r->batches_done = res.batches_done;
    if (strcmp(r->executor_rec, res.executor) != 0)
        snprintf(r->note, sizeof r->note,
                 "recorded on %s, replayed on %s: outputs that are exact by design must match; "
                 "the others are compared within their tolerance",
                 r->executor_rec, res.executor);
    now_out = pl__outputs_json(plan, &res);
    now_stages = pl__stages_over_reps(reps, nreps);
    if (!now_out || !now_stages) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    PL_CHECK_GOTO(pl__cmp_sinks(json_object_get(m, "outputs"), now_out, &r->cmp, err), st, done);
    PL_CHECK_GOTO(pl__cmp_stages(json_object_get(m, "stages"), now_stages, &r->cmp, err), st, done);
    PL_CHECK_GOTO(pl_env_json(strcmp(res.executor, "gpu") == 0, spec->run.device, &env, err), st,
                  done);
    /* The plan, the executor and (GPU) the graphs' topology belong with the environment. */
    int cap = 0;
    const char *pd = pl_json_str_or(json_object_get(m, "plan"), "digest", "");
    if (strcmp(pd, digest) != 0)
        PL_CHECK_GOTO(pl__add_env(&r->cmp, &cap, "plan.digest", pd, digest, err), st, done);
    if (strcmp(r->executor_rec, res.executor) != 0)
        PL_CHECK_GOTO(
            pl__add_env(&r->cmp, &cap, "run.executor", r->executor_rec, res.executor, err), st,
            done);
    if (rc.dot_dir) {
        json_t *files = json_array(), *g = NULL;
        int ng = 0;
        char odir[PL__PATH];
        pl__fmt(odir, sizeof odir, "%s", out_dir);
        if (files && pl__graphs(odir, files, &g, &ng, err) == PL_OK) {
            const char *ta = pl_json_str_or(json_object_get(m, "graphs"), "topology_digest", NULL);
            const char *tb = pl_json_str_or(g, "topology_digest", NULL);
            if ((ta || tb) && (!ta || !tb || strcmp(ta, tb) != 0))
                st = pl__add_env(&r->cmp, &cap, "graphs.topology_digest", ta, tb, err);
        }
        json_decref(files);
        json_decref(g);
        if (st != PL_OK) goto done;
    }
    PL_CHECK_GOTO(pl__cmp_env(json_object_get(m, "environment"), env, &r->cmp, &cap, err), st,
                  done);

    /* Sinks that may differ in bits here (not exact, on another executor or GPU): compared within
     * their tolerance where the bundle has a copy of the output. */
    bool same_place = strcmp(r->executor_rec, res.executor) == 0;
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
            json_t *e = pl__find_named(json_object_get(m, "outputs"), "stage", s->stage);
            const char *bundled = pl_json_str_or(e, "bundled", NULL);
            json_t *ne = pl__find_named(now_out, "stage", s->stage);
            const char *written = pl_json_str_or(ne, "written_to", NULL);
            if (!bundled || !written) {
                s->verdict = PL_SINK_UNVERIFIED;
            } else {
                char pa[PL__PATH];
                s->rel_err = pl__rel_diff(written, pl_bundle_path(b->dir, bundled, pa, sizeof pa),
                                          pl_json_str_or(e, "dtype", NULL));
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
    st = PL_OK;
done:
    pl_run_result_fini(&res);
    for (int k = 0; more && k < (cfg->reps > 0 ? cfg->reps : 1); k++) {
        pl_run_result_fini(&more[k]);
        if (reps) json_decref(reps[k]);
    }
    free(more);
    free(reps);
    json_decref(now_out);
    json_decref(now_stages);
    json_decref(env);
    pl_plan_free(plan);
    pl_spec_free(spec);
    if (temp) pl__rm_tree(out_dir);
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
