/* pl_api: the public C API (pipectl.h), a thin layer over the internals: a handle that keeps the
 * last error record and the in-memory bindings of its next run, and wrappers for load + check,
 * buffers, compile, run, the results and their statistics. With pl_api_io.c (the run driver) and
 * pl_api_stats.c (the summary's figures) it is what libpipectl adds to the internals, and the only
 * symbols it exports. */
#include "pipectl.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_api_int.h"
#include "pl_bundle.h"
#include "pl_exec.h"
#include "pl_intr.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_plan_dump.h"
#include "pl_stage.h"
#include "pl_trace.h"

/* pipectl.h repeats the status table (it includes nothing of ours); the compiler keeps both in
 * step. */
#define PL__SAME_STATUS(name, code, text)                                                          \
    _Static_assert((int)PL_##name == (int)PIPECTL_##name, "PIPECTL_" #name " != PL_" #name);
PL_STATUS_MAP(PL__SAME_STATUS)
#undef PL__SAME_STATUS
_Static_assert(PL_STATUS_COUNT == PIPECTL_EINTR + 1, "a status was added: add it to pipectl.h");
_Static_assert(PIPECTL_VERSION_MAJOR == PL_VERSION_MAJOR &&
                   PIPECTL_VERSION_MINOR == PL_VERSION_MINOR &&
                   PIPECTL_VERSION_PATCH == PL_VERSION_PATCH,
               "pipectl.h's version macros must be CMakeLists.txt's project version");
_Static_assert((int)PL_U8 == PIPECTL_U8 && (int)PL_I32 == PIPECTL_I32 &&
                   (int)PL_I64 == PIPECTL_I64 && (int)PL_F16 == PIPECTL_F16 &&
                   (int)PL_BF16 == PIPECTL_BF16 && (int)PL_F32 == PIPECTL_F32 &&
                   (int)PL_F64 == PIPECTL_F64 && PL_DTYPE_COUNT == PIPECTL_F64 + 1,
               "pipectl.h's dtypes must match pl_dtype");
_Static_assert((int)PL_EXEC_AUTO == PIPECTL_EXECUTOR_AUTO &&
                   (int)PL_EXEC_HOST == PIPECTL_EXECUTOR_HOST &&
                   (int)PL_EXEC_GPU == PIPECTL_EXECUTOR_GPU,
               "pipectl.h's executors must match pl_exec_kind");

struct pipectl {
    pl_error err;               /* the last call's record */
    volatile sig_atomic_t stop; /* pipectl_interrupt; read by the executors through pl_run_cfg */
    pl_api_bind binds[PL_API_MAX_BINDS]; /* for the next run (pipectl_bind_*) */
    int n_binds;
};

struct pipectl_pipeline {
    pl_spec *spec; /* checked; owned */
};

struct pipectl_plan {
    pl_plan *plan; /* owned; borrows the pipeline's spec */
};

struct pipectl_result {
    pl_run_result res;
    pl_api_stats stats; /* the summary's figures, taken when the run returned */
};

/* Starts a call: the record describes this call only. */
static void pl__begin(pipectl *h)
{
    pl_error_clear(&h->err);
}

static int pl__misuse(pipectl *h, const char *fn, const char *what)
{
    return pl_error_set(&h->err, PL_EINPUT, "error: %s: %s", fn, what);
}

const char *pipectl_errname(int code)
{
    return pl_status_name((pl_status)code);
}

const char *pipectl_errstr(int code)
{
    return pl_status_text((pl_status)code);
}

int pipectl_exit_code(int code)
{
    return pl_status_exit_code((pl_status)code);
}

const char *pipectl_version(void)
{
    return PL_VERSION;
}

int pipectl_open(pipectl **out)
{
    if (!out) return PIPECTL_EINPUT;
    *out = calloc(1, sizeof **out);
    if (!*out) return PIPECTL_ENOMEM;
    pl_error_clear(&(*out)->err);
    return PIPECTL_OK;
}

void pipectl_close(pipectl *h)
{
    free(h);
}

int pipectl_errcode(const pipectl *h)
{
    return h ? (int)h->err.status : PIPECTL_ENOMEM;
}

const char *pipectl_errmsg(const pipectl *h)
{
    return h ? h->err.msg : "error: out of memory (no pipectl handle)";
}

const char *pipectl_errfile(const pipectl *h)
{
    return h && h->err.line > 0 ? h->err.file : NULL;
}

int pipectl_errline(const pipectl *h)
{
    return h ? h->err.line : 0;
}

int pipectl_errcol(const pipectl *h)
{
    return h && h->err.line > 0 ? h->err.col : 0;
}

const char *pipectl_errstage(const pipectl *h)
{
    return h && h->err.stage[0] ? h->err.stage : NULL;
}

long long pipectl_errbatch(const pipectl *h)
{
    return h ? (long long)h->err.batch : -1;
}

/* ---- pipelines ------------------------------------------------------------------------------ */

int pipectl_load(pipectl *h, const char *path, pipectl_pipeline **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!path || !out) return pl__misuse(h, "pipectl_load", path ? "out is NULL" : "path is NULL");
    pipectl_pipeline *p = calloc(1, sizeof *p);
    if (!p) return pl_error_set(&h->err, PL_ENOMEM, "error: out of memory loading '%s'", path);
    pl_status st = pl_load_checked(path, &p->spec, &h->err);
    if (st == PL_OK) st = pl_spec_resolve_batches(p->spec, &h->err); /* batches: all */
    if (st != PL_OK) {
        pl_spec_free(p->spec);
        free(p);
        return st;
    }
    *out = p;
    return PIPECTL_OK;
}

void pipectl_pipeline_free(pipectl_pipeline *p)
{
    if (!p) return;
    pl_spec_free(p->spec);
    free(p);
}

const char *pipectl_pipeline_name(const pipectl_pipeline *p)
{
    return p && p->spec->name ? p->spec->name : "";
}

int pipectl_pipeline_stages(const pipectl_pipeline *p)
{
    return p ? p->spec->n_stages : 0;
}

/* The fields of a caller's options struct that its `size` covers (see pipectl.h, "Options"): a
 * copy with the defaults (zeroes) past them. */
#define PL__OPTS(type, dst, src)                                                                   \
    do {                                                                                           \
        memset(&(dst), 0, sizeof(dst));                                                            \
        if (src) {                                                                                 \
            size_t n_ = (src)->size < sizeof(dst) ? (src)->size : sizeof(dst);                     \
            memcpy(&(dst), (src), n_);                                                             \
        }                                                                                          \
        (dst).size = sizeof(type);                                                                 \
    } while (0)

/* pipectl_load_options into the loader's, checking what a caller can get wrong. */
static int pl__load_opts(pipectl *h, const char *fn, const pipectl_load_options *given,
                         pipectl_load_options *o, pl_load_opts *lo)
{
    PL__OPTS(pipectl_load_options, *o, given);
    memset(lo, 0, sizeof *lo);
    if (given && given->size < sizeof(size_t))
        return pl__misuse(h, fn, "opts->size is not set: use PIPECTL_LOAD_OPTIONS_INIT");
    if (o->n_set < 0 || (o->n_set > 0 && !o->set))
        return pl__misuse(h, fn, "opts->set is NULL or n_set is negative");
    for (int i = 0; i < o->n_set; i++)
        if (!o->set[i]) return pl__misuse(h, fn, "an entry of opts->set is NULL");
    lo->sets = o->set;
    lo->n_sets = o->n_set;
    lo->out_dir = o->out_dir;
    lo->confine = o->confine != 0;
    return PIPECTL_OK;
}

/* The loaded spec into a new pipeline (*out), its `batches: all` counted; frees spec on error. */
static int pl__pipeline(pipectl *h, pl_spec *spec, pipectl_pipeline **out)
{
    pl_status st = pl_spec_resolve_batches(spec, &h->err); /* batches: all */
    pipectl_pipeline *p = st == PL_OK ? calloc(1, sizeof *p) : NULL;
    if (st == PL_OK && !p) st = pl_error_set(&h->err, PL_ENOMEM, "error: out of memory");
    if (st != PL_OK) {
        pl_spec_free(spec);
        return st;
    }
    p->spec = spec;
    *out = p;
    return PIPECTL_OK;
}

int pipectl_load_with(pipectl *h, const char *path, const pipectl_load_options *opts,
                      pipectl_pipeline **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!path || !out)
        return pl__misuse(h, "pipectl_load_with", path ? "out is NULL" : "path is NULL");
    pipectl_load_options o;
    pl_load_opts lo;
    int rc = pl__load_opts(h, "pipectl_load_with", opts, &o, &lo);
    if (rc != PIPECTL_OK) return rc;
    pl_spec *spec = NULL;
    pl_status st = pl_load_checked_opts(path, &lo, &spec, &h->err);
    return st == PL_OK ? pl__pipeline(h, spec, out) : (int)st;
}

int pipectl_loads(pipectl *h, const char *text, size_t len, const pipectl_load_options *opts,
                  pipectl_pipeline **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!text || !out) return pl__misuse(h, "pipectl_loads", text ? "out is NULL" : "text is NULL");
    pipectl_load_options o;
    pl_load_opts lo;
    int rc = pl__load_opts(h, "pipectl_loads", opts, &o, &lo);
    if (rc != PIPECTL_OK) return rc;
    pl_spec *spec = NULL;
    pl_status st = pl_load_string_checked(o.name ? o.name : "<string>", text, len, o.lua != 0,
                                          o.dir, &lo, &spec, &h->err);
    return st == PL_OK ? pl__pipeline(h, spec, out) : (int)st;
}

int pipectl_check(pipectl *h, const pipectl_pipeline *p, long long batches)
{
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!p) return pl__misuse(h, "pipectl_check", "the pipeline is NULL");
    if (batches < 0 || batches > PL_MAX_BATCHES)
        return pl_error_set(&h->err, PL_EINPUT,
                            "error: pipectl_check: batches is %lld; it must be 0 (the pipeline's) "
                            "or between 1 and 2^40",
                            batches);
    return pl_spec_check_files(p->spec, batches > 0 ? batches : p->spec->run.batches, NULL,
                               &h->err);
}

int pipectl_pipeline_buffers(const pipectl_pipeline *p)
{
    return p ? p->spec->n_buffers : 0;
}

int pipectl_pipeline_find_buffer(const pipectl_pipeline *p, const char *name)
{
    return p && name ? pl_spec_find_buffer(p->spec, name) : -1;
}

/* The first stage of kind role `role` (PL_ROLE_INPUT: among its writes, else its reads) that
 * touches buffer b, which the in-memory bindings replace; NULL when none. */
static const char *pl__io_stage(const pl_spec *spec, int b, unsigned role)
{
    for (int s = 0; s < spec->n_stages; s++) {
        const pl_stage *st = &spec->stages[s];
        if (!(st->kind->role & role)) continue;
        const pl_ref *refs = role == PL_ROLE_INPUT ? st->writes : st->reads;
        int n = role == PL_ROLE_INPUT ? st->n_writes : st->n_reads;
        for (int k = 0; k < n; k++)
            if (refs[k].index == b) return st->name;
    }
    return NULL;
}

int pipectl_pipeline_buffer(const pipectl_pipeline *p, int i, pipectl_buffer_info *out)
{
    if (!p || !out || i < 0 || i >= p->spec->n_buffers ||
        out->size < offsetof(pipectl_buffer_info, sink) + sizeof out->sink)
        return PIPECTL_EINPUT;
    const pl_buffer *b = &p->spec->buffers[i];
    pipectl_buffer_info info = {
        .size = out->size,
        .name = b->name,
        .device = b->where == PL_DEVICE,
        .persistent = b->persistent,
        .dtype = (int)b->dtype,
        .dtype_name = pl_dtype_name(b->dtype),
        .rank = b->rank,
        .bytes = b->bytes,
        .source = pl__io_stage(p->spec, i, PL_ROLE_INPUT),
        .sink = pl__io_stage(p->spec, i, PL_ROLE_OUTPUT),
    };
    for (int d = 0; d < b->rank && d < 8; d++)
        info.shape[d] = b->shape[d];
    memcpy(out, &info, out->size < sizeof info ? out->size : sizeof info);
    return PIPECTL_OK;
}

/* ---- plans ---------------------------------------------------------------------------------- */

int pipectl_compile(pipectl *h, const pipectl_pipeline *p, long long batches, int depth,
                    pipectl_plan **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!p || !out)
        return pl__misuse(h, "pipectl_compile", p ? "out is NULL" : "the pipeline is NULL");
    pipectl_plan *pp = calloc(1, sizeof *pp);
    if (!pp) return pl_error_set(&h->err, PL_ENOMEM, "error: out of memory compiling the plan");
    pl_status st = pl_plan_compile_with(p->spec, (int64_t)batches, depth, &pp->plan, &h->err);
    if (st != PL_OK) {
        free(pp);
        return st;
    }
    *out = pp;
    return PIPECTL_OK;
}

void pipectl_plan_free(pipectl_plan *plan)
{
    if (!plan) return;
    pl_plan_free(plan->plan);
    free(plan);
}

long long pipectl_plan_batches(const pipectl_plan *plan)
{
    return plan ? (long long)plan->plan->batches : 0;
}

int pipectl_plan_depth(const pipectl_plan *plan)
{
    return plan ? plan->plan->depth : 0;
}

/* *out = what dump writes of the plan, as text (malloc'd: pipectl_free). */
static int pl__plan_text(pipectl *h, const pipectl_plan *plan,
                         void (*dump)(const pl_plan *, FILE *), char **out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return pl_error_set(&h->err, PL_ENOMEM, "error: out of memory describing the plan");
    dump(plan->plan, f);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || !text) {
        free(text);
        return pl_error_set(&h->err, PL_ENOMEM, "error: out of memory describing the plan");
    }
    *out = text;
    return PIPECTL_OK;
}

int pipectl_plan_describe(pipectl *h, const pipectl_plan *plan, char **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!plan || !out)
        return pl__misuse(h, "pipectl_plan_describe", plan ? "out is NULL" : "the plan is NULL");
    return pl__plan_text(h, plan, pl_plan_dump, out);
}

int pipectl_plan_dump(pipectl *h, const pipectl_plan *plan, int format, char **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!plan || !out)
        return pl__misuse(h, "pipectl_plan_dump", plan ? "out is NULL" : "the plan is NULL");
    if (format == PIPECTL_PLAN_TEXT) return pipectl_plan_describe(h, plan, out);
    if (format == PIPECTL_PLAN_JSON) {
        json_t *o = pl_plan_json(plan->plan);
        char *text = o ? json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
        json_decref(o);
        if (!text) return pl_error_set(&h->err, PL_ENOMEM, "error: out of memory");
        /* jansson's allocator is malloc's: pipectl_free frees it. */
        *out = text;
        return PIPECTL_OK;
    }
    if (format != PIPECTL_PLAN_DOT)
        return pl_error_set(&h->err, PL_EINPUT,
                            "error: pipectl_plan_dump: format is %d; use PIPECTL_PLAN_TEXT, _DOT "
                            "or _JSON",
                            format);
    return pl__plan_text(h, plan, pl_plan_dump_dot, out);
}

void pipectl_free(void *mem)
{
    free(mem);
}

/* ---- running -------------------------------------------------------------------------------- */

/* pipectl_run_options.on_batch and .on_note, from the run's own callbacks. */
typedef struct pl__run_cb {
    const pipectl_run_options *o;
} pl__run_cb;

static void pl__on_batch(void *user, int64_t done, int64_t total)
{
    const pl__run_cb *cb = user;
    cb->o->on_batch(cb->o->user, (long long)done, (long long)total);
}

static void pl__on_depth(void *user, const pl_depth_choice *c)
{
    const pl__run_cb *cb = user;
    cb->o->on_note(cb->o->user, c->why);
}

int pipectl_run_with(pipectl *h, const pipectl_plan *plan, const pipectl_run_options *opts,
                     pipectl_result **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    int st;
    pipectl_run_options o;
    PL__OPTS(pipectl_run_options, o, opts);
    if (!plan || !out) {
        st = pl__misuse(h, "pipectl_run", plan ? "out is NULL" : "the plan is NULL");
        goto done;
    }
    if (opts && opts->size < sizeof(size_t)) {
        st = pl__misuse(h, "pipectl_run_with",
                        "opts->size is not set: use PIPECTL_RUN_OPTIONS_INIT");
        goto done;
    }
    if (o.executor < PIPECTL_EXECUTOR_AUTO || o.executor > PIPECTL_EXECUTOR_GPU) {
        st = pl_error_set(&h->err, PL_EINPUT,
                          "error: pipectl_run: executor is %d; use PIPECTL_EXECUTOR_AUTO, _HOST "
                          "or _GPU",
                          o.executor);
        goto done;
    }
    if (o.workers < 0 || o.workers > 64) {
        st = pl_error_set(&h->err, PL_EINPUT,
                          "error: pipectl_run: workers is %d; it must be 0 (the default) or "
                          "between 1 and 64",
                          o.workers);
        goto done;
    }
    if (o.graphs < PIPECTL_GRAPHS_AUTO || o.graphs > PIPECTL_GRAPHS_NONE ||
        o.timing < PIPECTL_TIMING_SAMPLE || o.timing > PIPECTL_TIMING_OFF) {
        st = pl_error_set(&h->err, PL_EINPUT,
                          "error: pipectl_run_with: %s is %d; use one of PIPECTL_%s_*",
                          o.timing < 0 || o.timing > 2 ? "timing" : "graphs",
                          o.timing < 0 || o.timing > 2 ? o.timing : o.graphs,
                          o.timing < 0 || o.timing > 2 ? "TIMING" : "GRAPHS");
        goto done;
    }
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.executor = (pl_exec_kind)o.executor;
    cfg.workers = o.workers;
    static const int modes[] = {PL_GRAPHS_AUTO, PL_GRAPHS_STAGE, PL_GRAPHS_SEGMENT,
                                PL_GRAPHS_SEGMENT};
    cfg.use_graphs = o.graphs != PIPECTL_GRAPHS_NONE;
    cfg.graph_mode = modes[o.graphs];
    static const int periods[] = {16, 0, -1}; /* sample, all, off: as `pipectl run --timing` */
    cfg.timing_period = periods[o.timing];
    cfg.stop = &h->stop;
    pl__run_cb cb = {&o};
    if (o.on_batch) {
        cfg.on_batch = pl__on_batch;
        cfg.user = &cb;
    }
    if (o.on_note) {
        cfg.on_depth = pl__on_depth;
        cfg.depth_user = &cb;
    }
    if (o.trace) cfg.trace_batches = pl_trace_batches_for(plan->plan);
    if (o.fail_stage) {
        cfg.fail_stage = pl_spec_find_stage(plan->plan->spec, o.fail_stage);
        cfg.fail_batch = o.fail_batch;
        if (cfg.fail_stage < 0 || o.fail_batch < 0) {
            st = pl_error_set(&h->err, PL_EINPUT, "error: pipectl_run_with: fail_stage '%s' %s",
                              o.fail_stage,
                              cfg.fail_stage < 0 ? "is not a stage of the pipeline"
                                                 : "needs a fail_batch of 0 or more");
            goto done;
        }
    }
    pipectl_result *r = calloc(1, sizeof *r);
    if (!r) {
        st = pl_error_set(&h->err, PL_ENOMEM, "error: out of memory starting the run");
        goto done;
    }
    st = pl_api_run(plan->plan, &cfg, h->binds, h->n_binds, &r->res, &h->err);
    if (!r->res.executor) {
        pl_run_result_fini(&r->res);
        free(r);
        goto done;
    }
    /* An executor started: the result says what completed, also after an error. */
    if (o.trace) {
        pl_error te;
        pl_error_clear(&te);
        if (pl_trace_write(o.trace, plan->plan, &r->res, &te) != PL_OK && st == PL_OK) {
            st = te.status;
            h->err = te;
        }
    }
    pl_error se;
    if (r->res.timing && pl_api_stats_fill(plan->plan, &r->res, &r->stats, &se) != PL_OK &&
        st == PL_OK) {
        st = se.status;
        h->err = se;
    }
    *out = r;
done:
    h->stop = 0;
    h->n_binds = 0;
    return st;
}

int pipectl_run(pipectl *h, const pipectl_plan *plan, int executor, int workers,
                pipectl_result **out)
{
    pipectl_run_options o = PIPECTL_RUN_OPTIONS_INIT;
    o.executor = executor;
    o.workers = workers;
    return pipectl_run_with(h, plan, &o, out);
}

/* ---- in-memory bindings --------------------------------------------------------------------- */

/* The handle's binding for `buffer` in that direction (a buffer may be an input and an output):
 * the existing one (replaced) or a new one. */
static int pl__bind(pipectl *h, const char *fn, const char *buffer, bool output, void *data,
                    size_t bytes, pipectl_batch_fn cb, void *user)
{
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!buffer) return pl__misuse(h, fn, "the buffer name is NULL");
    if (strlen(buffer) > PL_MAX_NAME)
        return pl_error_set(&h->err, PL_EINPUT,
                            "error: %s: '%.64s...' is longer than a buffer "
                            "name can be (%d bytes)",
                            fn, buffer, PL_MAX_NAME);
    if (!cb && (!data || bytes == 0))
        return pl__misuse(h, fn, data ? "bytes is 0" : "data is NULL");
    pl_api_bind *b = NULL;
    for (int i = 0; i < h->n_binds && !b; i++)
        if (h->binds[i].output == output && strcmp(h->binds[i].name, buffer) == 0) b = &h->binds[i];
    if (!b && h->n_binds == PL_API_MAX_BINDS)
        return pl_error_set(&h->err, PL_EINPUT, "error: %s: more than %d buffers bound", fn,
                            PL_API_MAX_BINDS);
    if (!b) b = &h->binds[h->n_binds++];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", buffer);
    b->output = output;
    b->data = data;
    b->bytes = bytes;
    b->fn = cb;
    b->user = user;
    return PIPECTL_OK;
}

int pipectl_bind_input(pipectl *h, const char *buffer, const void *data, size_t bytes)
{
    return pl__bind(h, "pipectl_bind_input", buffer, false, (void *)data, bytes, NULL, NULL);
}

int pipectl_bind_output(pipectl *h, const char *buffer, void *data, size_t bytes)
{
    return pl__bind(h, "pipectl_bind_output", buffer, true, data, bytes, NULL, NULL);
}

int pipectl_bind_output_fn(pipectl *h, const char *buffer, pipectl_batch_fn fn, void *user)
{
    if (h && !fn) {
        pl__begin(h);
        return pl__misuse(h, "pipectl_bind_output_fn", "fn is NULL");
    }
    return pl__bind(h, "pipectl_bind_output_fn", buffer, true, NULL, 0, fn, user);
}

void pipectl_unbind(pipectl *h)
{
    if (h) h->n_binds = 0;
}

void pipectl_interrupt(pipectl *h)
{
    if (h) h->stop = 1;
    pl_intr_wake(); /* the host executor sleeps until told */
}

void pipectl_result_free(pipectl_result *r)
{
    if (!r) return;
    pl_run_result_fini(&r->res);
    pl_api_stats_fini(&r->stats);
    free(r);
}

const char *pipectl_result_executor(const pipectl_result *r)
{
    return r && r->res.executor ? r->res.executor : "";
}

const char *pipectl_result_note(const pipectl_result *r)
{
    return r ? r->res.note : "";
}

long long pipectl_result_batches(const pipectl_result *r)
{
    return r ? (long long)r->res.batches_done : 0;
}

double pipectl_result_seconds(const pipectl_result *r)
{
    return r ? (double)r->res.wall_ns * 1e-9 : 0.0;
}

int pipectl_result_outputs(const pipectl_result *r)
{
    return r ? r->res.n_outputs : 0;
}

static const pl_output *pl__output(const pipectl_result *r, int i)
{
    return r && i >= 0 && i < r->res.n_outputs ? &r->res.outputs[i] : NULL;
}

const char *pipectl_output_stage(const pipectl_result *r, int i)
{
    const pl_output *o = pl__output(r, i);
    return o ? o->stage : NULL;
}

const char *pipectl_output_path(const pipectl_result *r, int i)
{
    const pl_output *o = pl__output(r, i);
    return o ? o->path : NULL;
}

long long pipectl_output_batches(const pipectl_result *r, int i)
{
    const pl_output *o = pl__output(r, i);
    return o ? (long long)o->batches : -1;
}

unsigned long long pipectl_output_checksum(const pipectl_result *r, int i)
{
    const pl_output *o = pl__output(r, i);
    return o ? (unsigned long long)o->checksum : 0;
}

unsigned long long pipectl_output_batch_checksum(const pipectl_result *r, int i, long long batch)
{
    const pl_output *o = pl__output(r, i);
    if (!o || !o->batch_checksums || batch < 0 || batch >= o->n_batch_checksums) return 0;
    return (unsigned long long)o->batch_checksums[batch];
}

int pipectl_output_complete(const pipectl_result *r, int i)
{
    const pl_output *o = pl__output(r, i);
    return o && o->finalized;
}

const char *pipectl_output_buffer(const pipectl_result *r, int i)
{
    const pl_output *o = pl__output(r, i);
    return o && o->buffer[0] ? o->buffer : NULL;
}

int pipectl_output_in_memory(const pipectl_result *r, int i)
{
    const pl_output *o = pl__output(r, i);
    return o && o->memory;
}

/* ---- statistics ----------------------------------------------------------------------------- */

/* The caller's struct is at least the first version (every field up to `last`). */
#define PL__FITS(out, type, last) ((out)->size >= offsetof(type, last) + sizeof((out)->last))

int pipectl_result_stats(const pipectl_result *r, pipectl_stats *out)
{
    if (!r || !out || !PL__FITS(out, pipectl_stats, engines)) return PIPECTL_EINPUT;
    const pl_run_result *res = &r->res;
    const pl_api_stats *s = &r->stats;
    bool timed = res->timing != NULL;
    pipectl_stats v = {
        .size = out->size,
        .batches = (long long)res->batches_done,
        .batches_planned = (long long)res->batches_planned,
        .depth = s->depth,
        .workers = res->workers,
        .executor = res->executor ? res->executor : "",
        .graph_mode = res->graph_mode ? res->graph_mode : "none",
        .device = res->device_name,
        .wall_s = (double)res->wall_ns * 1e-9,
        .per_batch_s = timed ? s->per_batch_s : -1,
        .steady_per_batch_s = timed ? s->steady_per_batch_s : -1,
        .batches_per_s = s->batches_per_s,
        .bytes_in_per_batch = s->bytes_in,
        .bytes_out_per_batch = s->bytes_out,
        .bound_s = timed ? s->bound_s : -1,
        .bound_engine = s->bound_engine[0] ? s->bound_engine : NULL,
        .bound_stage = s->bound_stage[0] ? s->bound_stage : NULL,
        .achieved = timed ? s->achieved : -1,
        .stages = s->n_stages,
        .engines = s->n_engines,
    };
    memcpy(out, &v, out->size < sizeof v ? out->size : sizeof v);
    return PIPECTL_OK;
}

int pipectl_result_stage_stats(const pipectl_result *r, int i, pipectl_stage_stats *out)
{
    if (!r || !out || i < 0 || i >= r->stats.n_stages || !PL__FITS(out, pipectl_stage_stats, busy))
        return PIPECTL_EINPUT;
    const pl_api_stage_stats *s = &r->stats.stages[i];
    pipectl_stage_stats v = {
        .size = out->size,
        .name = s->name,
        .kind = s->kind,
        .engine = s->engine,
        .stream = s->stream,
        .count = (long long)s->count,
        .mean_s = s->mean_s,
        .p50_s = s->p50_s,
        .p99_s = s->p99_s,
        .min_s = s->min_s,
        .max_s = s->max_s,
        .total_s = s->total_s,
        .busy = s->busy,
    };
    memcpy(out, &v, out->size < sizeof v ? out->size : sizeof v);
    return PIPECTL_OK;
}

int pipectl_result_engine_stats(const pipectl_result *r, int i, pipectl_engine_stats *out)
{
    if (!r || !out || i < 0 || i >= r->stats.n_engines ||
        !PL__FITS(out, pipectl_engine_stats, occupancy))
        return PIPECTL_EINPUT;
    const pl_api_engine_stats *e = &r->stats.engines[i];
    pipectl_engine_stats v = {
        .size = out->size,
        .name = e->name,
        .engine = e->engine,
        .stages = e->stages,
        .timed_batches = (long long)e->timed,
        .busy_s = e->busy_s,
        .busy_per_batch_s = e->per_batch_s,
        .occupancy = e->occupancy,
    };
    memcpy(out, &v, out->size < sizeof v ? out->size : sizeof v);
    return PIPECTL_OK;
}
