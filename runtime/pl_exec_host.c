/* pl_exec_host: the host executor. It runs the plan as a GPU would, with CPU threads: one thread
 * per plan stream runs that stream's stages for batch 0, 1, 2, ... in order (like a CUDA stream);
 * cross-stream events and cross-batch dependencies become waits on per-stage completion counters
 * under one mutex and condition variable. Device buffers are host memory, copies are memcpy and
 * kernel ops their C reference implementations (each kind's run_host). It is how CI runs every
 * pipeline, and the reference the GPU executor is compared against. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_buffers.h"
#include "pl_exec.h"
#include "pl_stage_rt.h"

typedef struct pl__xwait {
    int from;
    int distance;
} pl__xwait;

typedef struct pl__host {
    const pl_plan *plan;
    const pl_run_cfg *cfg;
    pl_stage_rt rt;
    pl_buffers *bufs;
    int n_stages;
    int64_t batches;

    /* Dependencies per stage, flattened from the plan: event sources and cross-batch deps. */
    int **wait_src;
    int *n_wait_src;
    pl__xwait **xw;
    int *n_xw;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t *done;     /* [stage]: batches completed (a stage runs its batches in order) */
    int64_t issued;    /* batches of which some stage started */
    bool stopping;     /* error or Ctrl-C: start nothing new */
    pl_status status;  /* first error (or PL_EINTR) */
    pl_error err;      /* its message */
    bool *worker_busy; /* [worker] */
    int n_workers;
    int threads_running;

    struct timespec t0;
    pl_span *spans; /* [batch * n_stages + stage] */
} pl__host;

static int64_t pl__now_ns(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec);
}

/* Called with mu held. */
static bool pl__ready(const pl__host *h, int s, int64_t b)
{
    for (int i = 0; i < h->n_wait_src[s]; i++)
        if (h->done[h->wait_src[s][i]] <= b) return false;
    for (int i = 0; i < h->n_xw[s]; i++) {
        int64_t need = b - h->xw[s][i].distance;
        if (need >= 0 && h->done[h->xw[s][i].from] <= need) return false;
    }
    return true;
}

/* Records the first failure and makes every thread stop. Called with mu held. */
static void pl__fail(pl__host *h, pl_status st, const pl_error *e)
{
    if (h->status == PL_OK) {
        h->status = st;
        if (e) h->err = *e;
    }
    h->stopping = true;
    pthread_cond_broadcast(&h->cv);
}

/* Makes sure a stage's failure message says which stage and batch. */
static void pl__name_error(pl_error *e, const pl_stage *st, int64_t b)
{
    char tag[PL_MAX_NAME + 32];
    snprintf(tag, sizeof tag, "stage '%s'", st->name);
    if (strstr(e->msg, tag)) return;
    char old[PL_ERROR_MSG_MAX];
    memcpy(old, e->msg, sizeof old);
    const char *rest = strncmp(old, "error: ", 7) == 0 ? old + 7 : old;
    int n =
        snprintf(e->msg, sizeof e->msg, "error: stage '%s', batch %lld: ", st->name, (long long)b);
    if (n > 0 && (size_t)n < sizeof e->msg)
        memcpy(e->msg + n, rest, strnlen(rest, sizeof e->msg - (size_t)n - 1) + 1);
    e->msg[sizeof e->msg - 1] = '\0';
}

typedef struct pl__thread_arg {
    pl__host *h;
    int stream;
} pl__thread_arg;

static void *pl__stream_main(void *p)
{
    pl__thread_arg *a = p;
    pl__host *h = a->h;
    const pl_stream *str = &h->plan->streams[a->stream];
    const pl_spec *spec = h->plan->spec;
    for (int64_t b = 0; b < h->batches; b++) {
        for (int k = 0; k < str->n_stages; k++) {
            int s = str->stages[k];
            pthread_mutex_lock(&h->mu);
            while (!h->stopping && !pl__ready(h, s, b))
                pthread_cond_wait(&h->cv, &h->mu);
            int w = -1;
            while (!h->stopping) {
                for (int i = 0; i < h->n_workers && w < 0; i++)
                    if (!h->worker_busy[i]) w = i;
                if (w >= 0) break;
                pthread_cond_wait(&h->cv, &h->mu);
            }
            if (h->stopping) {
                pthread_mutex_unlock(&h->mu);
                goto out;
            }
            h->worker_busy[w] = true;
            if (b + 1 > h->issued) h->issued = b + 1;
            pthread_mutex_unlock(&h->mu);

            /* No lock held while the stage runs: stages on other streams run at the same time. */
            pl_error e;
            pl_error_clear(&e);
            int64_t t_start = pl__now_ns(&h->t0);
            pl_status st = pl_stage_rt_run_host(
                &h->rt, h->cfg, s, b, w, pl_buffers_slot(h->bufs, (int)(b % h->plan->depth)), &e);
            int64_t t_end = pl__now_ns(&h->t0);

            pthread_mutex_lock(&h->mu);
            h->worker_busy[w] = false;
            if (st != PL_OK) {
                pl__name_error(&e, &spec->stages[s], b);
                pl__fail(h, st, &e);
                pthread_mutex_unlock(&h->mu);
                goto out;
            }
            h->spans[b * h->n_stages + s] = (pl_span){t_start, t_end};
            h->done[s] = b + 1;
            pthread_cond_broadcast(&h->cv);
            pthread_mutex_unlock(&h->mu);
        }
    }
out:
    pthread_mutex_lock(&h->mu);
    h->threads_running--;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static int64_t pl__batches_done(const pl__host *h)
{
    int64_t m = h->batches;
    for (int s = 0; s < h->n_stages; s++)
        if (h->done[s] < m) m = h->done[s];
    return m;
}

/* Flattens the plan's event waits and cross-batch deps into per-stage lists. */
static pl_status pl__deps_new(pl__host *h, pl_error *err)
{
    const pl_plan *plan = h->plan;
    int n = h->n_stages ? h->n_stages : 1;
    h->wait_src = calloc((size_t)n, sizeof *h->wait_src);
    h->n_wait_src = calloc((size_t)n, sizeof *h->n_wait_src);
    h->xw = calloc((size_t)n, sizeof *h->xw);
    h->n_xw = calloc((size_t)n, sizeof *h->n_xw);
    if (!h->wait_src || !h->n_wait_src || !h->xw || !h->n_xw) goto oom;
    for (int s = 0; s < h->n_stages; s++) {
        const pl_plan_stage *ps = &plan->stages[s];
        if (ps->n_waits) {
            h->wait_src[s] = malloc((size_t)ps->n_waits * sizeof **h->wait_src);
            if (!h->wait_src[s]) goto oom;
            for (int i = 0; i < ps->n_waits; i++)
                h->wait_src[s][i] = plan->events[ps->waits[i]].src;
            h->n_wait_src[s] = ps->n_waits;
        }
    }
    for (int i = 0; i < plan->n_xdeps; i++) {
        const pl_xdep *x = &plan->xdeps[i];
        pl__xwait *nw = realloc(h->xw[x->to], (size_t)(h->n_xw[x->to] + 1) * sizeof *nw);
        if (!nw) goto oom;
        nw[h->n_xw[x->to]++] = (pl__xwait){x->from, x->distance};
        h->xw[x->to] = nw;
    }
    return PL_OK;
oom:
    return pl_error_set(err, PL_ENOMEM, "error: out of memory preparing the host executor");
}

static void pl__deps_free(pl__host *h)
{
    for (int s = 0; s < h->n_stages; s++) {
        if (h->wait_src) free(h->wait_src[s]);
        if (h->xw) free(h->xw[s]);
    }
    free(h->wait_src);
    free(h->n_wait_src);
    free(h->xw);
    free(h->n_xw);
}

pl_status pl_exec_host_run(const pl_plan *plan, const pl_run_cfg *cfg, pl_run_result *res,
                           pl_error *err)
{
    pl_run_cfg def;
    if (!cfg) {
        pl_run_cfg_init(&def);
        cfg = &def;
    }
    memset(res, 0, sizeof *res);
    res->executor = "host";
    res->graphs = false;
    res->n_stages = plan->n_stages;
    res->batches_planned = plan->batches;
    snprintf(res->device_name, sizeof res->device_name, "CPU");

    pl__host hh, *h = &hh;
    memset(h, 0, sizeof *h);
    h->plan = plan;
    h->cfg = cfg;
    h->n_stages = plan->n_stages;
    h->batches = plan->batches;
    h->n_workers = cfg->workers > 0 ? cfg->workers : pl_default_workers(plan);
    res->workers = h->n_workers;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    clock_gettime(CLOCK_MONOTONIC, &h->t0);

    pl_status st = PL_OK;
    bool rt_open = false;
    pthread_t *threads = NULL;
    pl__thread_arg *args = NULL;
    int n_threads = 0;
    size_t n_spans = (size_t)plan->batches * (size_t)(plan->n_stages ? plan->n_stages : 1);
    if (plan->batches > 0 &&
        n_spans / (size_t)plan->batches != (size_t)(plan->n_stages ? plan->n_stages : 1)) {
        st = pl_error_set(err, PL_ENOMEM, "error: too many batches to time; run fewer batches");
        goto done;
    }
    h->done = calloc((size_t)(h->n_stages ? h->n_stages : 1), sizeof *h->done);
    h->worker_busy = calloc((size_t)h->n_workers, sizeof *h->worker_busy);
    h->spans = calloc(n_spans ? n_spans : 1, sizeof *h->spans);
    threads = calloc((size_t)(plan->n_streams ? plan->n_streams : 1), sizeof *threads);
    args = calloc((size_t)(plan->n_streams ? plan->n_streams : 1), sizeof *args);
    if (!h->done || !h->worker_busy || !h->spans || !threads || !args) {
        st = pl_error_set(err, PL_ENOMEM,
                          "error: out of memory setting up the run (%lld batches x %d stages of "
                          "timing); run fewer batches",
                          (long long)plan->batches, plan->n_stages);
        goto done;
    }
    PL_CHECK_GOTO(pl__deps_new(h, err), st, done);
    PL_CHECK_GOTO(
        pl_buffers_new(plan->spec, plan->depth, NULL, true, plan->spec->run.seed, &h->bufs, err),
        st, done);
    PL_CHECK_GOTO(pl_stage_rt_open(&h->rt, plan, h->n_workers, NULL, err), st, done);
    rt_open = true;
    /* The run's clock starts after setup (buffers, initial contents, stages' open: Lua states,
     * files), as on the GPU executor, so per-batch figures describe the steady state. */
    clock_gettime(CLOCK_MONOTONIC, &h->t0);

    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < plan->n_streams; i++) {
        args[i] = (pl__thread_arg){h, i};
        h->threads_running++;
        if (pthread_create(&threads[i], NULL, pl__stream_main, &args[i]) != 0) {
            h->threads_running--;
            pl_error e;
            pl_error_set(&e, PL_ERUNTIME, "error: cannot start a thread for stream '%s'",
                         plan->streams[i].name);
            pl__fail(h, PL_ERUNTIME, &e);
            break;
        }
        n_threads++;
    }
    /* The calling thread reports progress in batch order and turns Ctrl-C into a stop. */
    int64_t reported = 0;
    while (h->threads_running > 0) {
        int64_t d = pl__batches_done(h);
        while (reported < d) {
            reported++;
            if (cfg->on_batch) {
                pthread_mutex_unlock(&h->mu);
                cfg->on_batch(cfg->user, reported, plan->batches);
                pthread_mutex_lock(&h->mu);
            }
        }
        if (cfg->stop && *cfg->stop && !h->stopping) {
            pl_error e;
            pl_error_set(&e, PL_EINTR, "error: interrupted (Ctrl-C)");
            pl__fail(h, PL_EINTR, &e);
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 20 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        if (h->threads_running > 0) pthread_cond_timedwait(&h->cv, &h->mu, &until);
    }
    int64_t d = pl__batches_done(h);
    while (reported < d && cfg->on_batch)
        cfg->on_batch(cfg->user, ++reported, plan->batches);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < n_threads; i++)
        pthread_join(threads[i], NULL);

    st = h->status;
    if (st != PL_OK && err) *err = h->err;
    res->batches_done = pl__batches_done(h);
    res->batches_issued = h->issued;

done:
    if (rt_open) {
        pl_error cerr;
        pl_error_clear(&cerr);
        pl_status cs = pl_stage_rt_close(&h->rt, h->done, st != PL_OK, res, &cerr);
        if (cs != PL_OK && st == PL_OK) {
            st = cs;
            if (err) *err = cerr;
        }
    }
    res->wall_ns = pl__now_ns(&h->t0);
    if (st == PL_OK || rt_open) {
        res->spans = h->spans;
        h->spans = NULL;
    }
    pl_buffers_free(h->bufs);
    pl__deps_free(h);
    free(h->done);
    free(h->worker_busy);
    free(h->spans);
    free(threads);
    free(args);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    return st;
}
