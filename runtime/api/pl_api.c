/* pl_api: the public C API (pipectl.h), a thin layer over the internals: a handle that keeps the
 * last error record, and wrappers for load + check, compile, run and the results. It is the only
 * file built into libpipectl beyond the internals, and the only one whose symbols it exports. */
#include "pipectl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_exec.h"
#include "pl_intr.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_plan_dump.h"

/* pipectl.h repeats the status table (it includes nothing of ours); the compiler keeps both in
 * step. */
#define PL__SAME_STATUS(name, code, text)                                                          \
    _Static_assert((int)PL_##name == (int)PIPECTL_##name, "PIPECTL_" #name " != PL_" #name);
PL_STATUS_MAP(PL__SAME_STATUS)
#undef PL__SAME_STATUS
_Static_assert(PL_STATUS_COUNT == PIPECTL_EINTR + 1, "a status was added: add it to pipectl.h");
_Static_assert((int)PL_EXEC_AUTO == PIPECTL_EXECUTOR_AUTO &&
                   (int)PL_EXEC_HOST == PIPECTL_EXECUTOR_HOST &&
                   (int)PL_EXEC_GPU == PIPECTL_EXECUTOR_GPU,
               "pipectl.h's executors must match pl_exec_kind");

struct pipectl {
    pl_error err;               /* the last call's record */
    volatile sig_atomic_t stop; /* pipectl_interrupt; read by the executors through pl_run_cfg */
};

struct pipectl_pipeline {
    pl_spec *spec; /* checked; owned */
};

struct pipectl_plan {
    pl_plan *plan; /* owned; borrows the pipeline's spec */
};

struct pipectl_result {
    pl_run_result res;
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

int pipectl_plan_describe(pipectl *h, const pipectl_plan *plan, char **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    if (!plan || !out)
        return pl__misuse(h, "pipectl_plan_describe", plan ? "out is NULL" : "the plan is NULL");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return pl_error_set(&h->err, PL_ENOMEM, "error: out of memory describing the plan");
    pl_plan_dump(plan->plan, f);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || !text) {
        free(text);
        return pl_error_set(&h->err, PL_ENOMEM, "error: out of memory describing the plan");
    }
    *out = text;
    return PIPECTL_OK;
}

void pipectl_free(void *mem)
{
    free(mem);
}

/* ---- running -------------------------------------------------------------------------------- */

int pipectl_run(pipectl *h, const pipectl_plan *plan, int executor, int workers,
                pipectl_result **out)
{
    if (out) *out = NULL;
    if (!h) return PIPECTL_EINPUT;
    pl__begin(h);
    int st;
    if (!plan || !out) {
        st = pl__misuse(h, "pipectl_run", plan ? "out is NULL" : "the plan is NULL");
        goto done;
    }
    if (executor < PIPECTL_EXECUTOR_AUTO || executor > PIPECTL_EXECUTOR_GPU) {
        st = pl_error_set(&h->err, PL_EINPUT,
                          "error: pipectl_run: executor is %d; use PIPECTL_EXECUTOR_AUTO, _HOST "
                          "or _GPU",
                          executor);
        goto done;
    }
    if (workers < 0 || workers > 64) {
        st = pl_error_set(&h->err, PL_EINPUT,
                          "error: pipectl_run: workers is %d; it must be 0 (the default) or "
                          "between 1 and 64",
                          workers);
        goto done;
    }
    pipectl_result *r = calloc(1, sizeof *r);
    if (!r) {
        st = pl_error_set(&h->err, PL_ENOMEM, "error: out of memory starting the run");
        goto done;
    }
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.executor = (pl_exec_kind)executor;
    cfg.workers = workers;
    cfg.stop = &h->stop;
    st = pl_run(plan->plan, &cfg, &r->res, &h->err);
    if (r->res.executor) {
        *out = r; /* an executor started: the result says what completed, also after an error */
    } else {
        pl_run_result_fini(&r->res);
        free(r);
    }
done:
    h->stop = 0;
    return st;
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
