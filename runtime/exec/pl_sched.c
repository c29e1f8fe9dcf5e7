/* pl_sched: the shared host scheduler (see pl_sched.h): stream cursors, a ready queue, a bounded
 * worker pool, completion counters, and drain on failure. */
#include "pl_sched.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t pl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Every wake-up of the progress waiters goes through here (mu held), so the generation says
 * whether one happened. */
static void pl__progress(pl_sched *s)
{
    /* Atomic: pl_sched_spin_progress_since reads it without mu. */
    __atomic_store_n(&s->progress_gen, s->progress_gen + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->progress);
}

bool pl_sched_ready(const pl_sched *s, int stage, int64_t b)
{
    const pl_plan_stage *ps = &s->plan->stages[stage];
    if (s->is_out[stage] && s->commit < b + 1) return false;
    for (int i = 0; i < ps->n_preds; i++)
        if (s->done[ps->preds[i]] < b + 1) return false;
    for (int i = 0; i < ps->n_xin; i++) {
        const pl_xdep *x = &s->plan->xdeps[ps->xin[i]];
        if (b - x->distance >= 0 && s->done[x->from] < b - x->distance + 1) return false;
    }
    return true;
}

/* Queues stream k if it is owned, idle (a parallel one: has a batch free) and its next stage can
 * start. */
static void pl__recheck(pl_sched *s, int k)
{
    if (!s->owned[k] || s->queued[k] || s->running[k] || s->cur_b[k] >= s->limit) return;
    int stage = s->plan->streams[k].stages[s->cur[k]];
    if (s->plan->streams[k].parallel > 1 && s->cur_b[k] - s->done[stage] >= 64) return;
    if (!pl_sched_ready(s, stage, s->cur_b[k])) return;
    int n = s->plan->n_streams;
    s->queue[(s->q_head + s->q_len) % n] = k;
    s->q_len++;
    s->queued[k] = true;
    pthread_cond_signal(&s->work);
}

static void pl__recheck_deps(pl_sched *s, int stage)
{
    for (int i = 0; i < s->n_dep_streams[stage]; i++)
        pl__recheck(s, s->dep_streams[stage][i]);
}

static void pl__count_live(pl_sched *s)
{
    s->n_live = 0;
    for (int k = 0; k < s->plan->n_streams; k++) {
        s->live[k] = s->owned[k] && s->plan->streams[k].n_stages > 0 && s->cur_b[k] < s->limit;
        s->n_live += s->live[k];
    }
    if (s->n_live == 0) pthread_cond_broadcast(&s->work);
}

/* Counts the non-output stages at the commit point, moving it on while none is. O(stages) per
 * batch the commit point passes, not per completion. */
static void pl__advance_commit(pl_sched *s)
{
    bool moved = false;
    while (s->at_commit == 0) {
        int64_t next = -1;
        for (int v = 0; v < s->n_stages; v++)
            if (!s->is_out[v] && !s->after_out[v] && (next < 0 || s->done[v] < next))
                next = s->done[v];
        if (next < 0 || next <= s->commit) break; /* no non-output stage, or nothing moved */
        s->commit = next;
        moved = true;
        for (int v = 0; v < s->n_stages; v++)
            s->at_commit += !s->is_out[v] && !s->after_out[v] && s->done[v] == s->commit;
    }
    for (int i = 0; moved && i < s->n_out_streams; i++)
        pl__recheck(s, s->out_streams[i]);
}

/* The batches every stage has finished moved on (a stage at all_done moved): recounts, O(stages)
 * per batch, and stamps the completion times. */
static void pl__advance_all(pl_sched *s)
{
    int64_t m = -1;
    for (int v = 0; v < s->n_stages; v++)
        if (m < 0 || s->done[v] < m) m = s->done[v];
    if (m > s->all_done && s->clock) {
        int64_t t = pl_now_ns() - s->t0_ns;
        if (s->clock->mark_b >= s->all_done && s->clock->mark_b < m) s->clock->mark_ns = t;
        s->clock->last_b = m - 1;
        s->clock->last_ns = t;
    }
    if (m > s->all_done) s->all_done = m;
    s->at_all = 0;
    for (int v = 0; v < s->n_stages; v++)
        s->at_all += s->done[v] == s->all_done;
}

/* done[stage] = count (count > done[stage]), with the commit point and the waiters. */
static void pl__set_done(pl_sched *s, int stage, int64_t count)
{
    int64_t old = s->done[stage];
    s->done[stage] = count;
    if (old == s->all_done && --s->at_all == 0) pl__advance_all(s);
    if (!s->is_out[stage] && !s->after_out[stage] && old == s->commit && --s->at_commit == 0)
        pl__advance_commit(s);
    pl__recheck_deps(s, stage);
    /* A loop's body stages ran inside it: they finish their batches with it. */
    const pl_plan_loop *lp = pl_plan_loop_of(s->plan, stage);
    for (int i = 0; lp && i < lp->n_body; i++)
        if (s->done[lp->body[i]] < count) pl__set_done(s, lp->body[i], count);
}

void pl_sched_set_done(pl_sched *s, int stage, int64_t count)
{
    if (count <= s->done[stage]) return;
    pl__set_done(s, stage, count);
    pl__progress(s);
}

void pl_sched_set_limit(pl_sched *s, int64_t limit)
{
    if (limit >= s->limit) return;
    s->limit = limit < 0 ? 0 : limit;
    pl__count_live(s);
    pl__progress(s);
}

void pl_sched_fail(pl_sched *s, int64_t batch, pl_status st, const pl_error *e)
{
    if (!s->failed || batch < s->err_batch) {
        s->status = st;
        if (e) s->err = *e;
        s->err_batch = batch;
    }
    s->failed = true;
    pl_sched_set_limit(s, batch);
    pl__progress(s);
}

void pl_sched_abort(pl_sched *s)
{
    __atomic_store_n(&s->abort, true, __ATOMIC_RELEASE); /* read by spinning workers */
    pthread_cond_broadcast(&s->work);
    pl__progress(s);
}

int64_t pl_sched_batches_done(const pl_sched *s)
{
    int64_t m = s->plan->batches;
    for (int i = 0; i < s->n_stages; i++)
        if (s->done[i] < m) m = s->done[i];
    return m;
}

uint64_t pl_sched_progress_gen(const pl_sched *s)
{
    return s->progress_gen;
}

void pl_sched_notify_progress(pl_sched *s)
{
    pl__progress(s);
}

void pl_sched_wait_progress_since(pl_sched *s, uint64_t gen, long us)
{
    if (s->progress_gen == gen) pl_sched_wait_progress(s, us);
}

void pl_sched_wait_progress(pl_sched *s, long us)
{
    if (us < 0) {
        pthread_cond_wait(&s->progress, &s->mu);
        return;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until); /* the condvar's clock (pl_sched_init) */
    until.tv_sec += us / 1000000L;
    until.tv_nsec += (us % 1000000L) * 1000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->progress, &s->mu, &until);
}

bool pl_sched_idle(const pl_sched *s)
{
    return s->n_running == 0;
}

bool pl_sched_finished(const pl_sched *s)
{
    return s->n_live == 0 && s->q_len == 0 && s->n_busy == 0;
}

void pl_sched_spin_progress_since(pl_sched *s, uint64_t gen, long spin_us, long us)
{
    if (s->progress_gen != gen) return;
    bool moved = false;
    if (spin_us > 0) {
        pthread_mutex_unlock(&s->mu);
        int64_t until = pl_now_ns() + (int64_t)spin_us * 1000;
        for (int i = 0; !moved; i++) {
            moved = __atomic_load_n(&s->progress_gen, __ATOMIC_ACQUIRE) != gen;
            if (!moved && (i & 63) == 63 && pl_now_ns() >= until) break;
        }
        pthread_mutex_lock(&s->mu);
    }
    if (!moved) pl_sched_wait_progress_since(s, gen, us);
}

typedef struct pl__worker_arg {
    pl_sched *s;
    int worker;
} pl__worker_arg;

/* A parallel stream's batch was taken: its cursor moves on at once (its one stage, the next
 * batch), so another worker may take that batch while this one runs. */
static void pl__take_parallel(pl_sched *s, int k)
{
    s->running[k] = ++s->in_flight[k] >= s->plan->streams[k].parallel;
    s->cur_b[k]++;
    if (s->live[k] && s->cur_b[k] >= s->limit) {
        s->live[k] = false;
        if (--s->n_live == 0) pthread_cond_broadcast(&s->work);
    }
    pl__recheck(s, k);
}

/* A parallel stream's batch b of `stage` finished: done[] moves over the finished prefix. */
static void pl__done_parallel(pl_sched *s, int k, int stage, int64_t b)
{
    int64_t off = b - s->done[stage];
    s->fin[k] |= UINT64_C(1) << off; /* off < 64: pl__recheck keeps it so */
    int64_t n = 0;
    while (n < 64 && (s->fin[k] >> n & 1))
        n++;
    s->fin[k] = n == 64 ? 0 : s->fin[k] >> n;
    if (n > 0) pl__set_done(s, stage, s->done[stage] + n);
}

/* Takes the next queued stream for a thread about to run its stage (mu held): false when none
 * is queued, or when the limit fell below its batch after it was queued (it is done). */
static bool pl__take(pl_sched *s, int *k_out, int64_t *b_out, int *stage_out)
{
    const pl_plan *plan = s->plan;
    while (s->q_len > 0) {
        int k = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % plan->n_streams;
        s->q_len--;
        s->queued[k] = false;
        int64_t b = s->cur_b[k];
        if (b >= s->limit) continue; /* the limit fell after it was queued */
        s->n_busy++;
        if (b + 1 > s->started) s->started = b + 1;
        *k_out = k;
        *b_out = b;
        *stage_out = plan->streams[k].stages[s->cur[k]];
        if (plan->streams[k].parallel > 1)
            pl__take_parallel(s, k);
        else
            s->running[k] = true;
        return true;
    }
    return false;
}

/* Runs the taken stage as `worker` (mu held on entry and on return, let go while it runs) and
 * moves its stream on. */
static void pl__run_taken(pl_sched *s, int k, int64_t b, int stage, int worker)
{
    const pl_plan *plan = s->plan;
    pthread_mutex_unlock(&s->mu);
    /* No lock held while the stage runs: stages on other streams run at the same time. */
    pl_error e;
    pl_error_clear(&e);
    int64_t t_start = pl_now_ns() - s->t0_ns;
    pl_status st = pl_stage_rt_run_host(s->rt, s->cfg, stage, b, worker,
                                        pl_buffers_slot(s->bufs, (int)(b % plan->depth)), &e);
    int64_t t_end = pl_now_ns() - s->t0_ns;
    /* Before the stage is marked done, so its batch's row is complete when the batch is. */
    if (st == PL_OK) pl_timing_record(s->timing, stage, b, (pl_span){t_start, t_end});

    pthread_mutex_lock(&s->mu);
    bool par = plan->streams[k].parallel > 1;
    s->running[k] = false;
    if (par) s->in_flight[k]--;
    s->n_busy--;
    if (st != PL_OK) {
        /* pl_stage_rt_run_host attached the stage and batch to the record. */
        pl_sched_fail(s, b, st, &e); /* the stream stays at (stage, b) >= limit: it is done */
        return;
    }
    int64_t all_before = s->all_done;
    if (par) {
        pl__done_parallel(s, k, stage, b); /* the cursor moved when it was taken */
    } else {
        if (++s->cur[k] == plan->streams[k].n_stages) {
            s->cur[k] = 0;
            s->cur_b[k]++;
        }
        if (s->live[k] && s->cur_b[k] >= s->limit) {
            s->live[k] = false;
            if (--s->n_live == 0) pthread_cond_broadcast(&s->work);
        }
        pl__set_done(s, stage, b + 1);
    }
    pl__recheck(s, k);
    /* A helper's caller waits on progress for pl_sched_finished: the run's last stage wakes it. */
    if (!s->batch_progress || s->all_done != all_before || s->n_live == 0) pl__progress(s);
}

bool pl_sched_help(pl_sched *s, int worker)
{
    int k, stage;
    int64_t b;
    if (worker < 0 || !s->go || s->abort || !pl__take(s, &k, &b, &stage)) return false;
    pl__run_taken(s, k, b, stage, worker);
    return true;
}

int pl_sched_help_worker(const pl_sched *s, int of)
{
    return s->n_workers < of ? s->n_workers : -1;
}

static void *pl__worker_main(void *p)
{
    pl__worker_arg *a = p;
    pl_sched *s = a->s;
    /* Spawned before the run's clock: spin until pl_sched_start (at most 2 ms, then sleep on the
     * condition variable), so the first stage starts without a wake-up (19-38 us on the H200
     * host, the first batch's time before its upload). */
    int64_t until = pl_now_ns() + 2000000;
    for (int i = 0; !__atomic_load_n(&s->go_spin, __ATOMIC_ACQUIRE); i++)
        if ((i & 63) == 63 &&
            (pl_now_ns() >= until || __atomic_load_n(&s->abort, __ATOMIC_RELAXED)))
            break;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        /* Spawned before the run's clock: nothing is taken before pl_sched_start. */
        while (!s->abort && (!s->go || (s->q_len == 0 && s->n_live > 0)))
            pthread_cond_wait(&s->work, &s->mu);
        if (s->abort || (s->q_len == 0 && s->n_live == 0)) break;
        int k, stage;
        int64_t b;
        if (!pl__take(s, &k, &b, &stage)) continue;
        pl__run_taken(s, k, b, stage, a->worker);
    }
    s->n_running--;
    pl__progress(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

pl_status pl_sched_init(pl_sched *s, const pl_plan *plan, const pl_run_cfg *cfg,
                        const pl_stage_rt *rt, pl_buffers *bufs, const bool *owned, int workers,
                        pl_timing *timing, pl_error *err)
{
    memset(s, 0, sizeof *s);
    s->plan = plan;
    s->cfg = cfg;
    s->rt = rt;
    s->bufs = bufs;
    s->timing = timing;
    s->n_stages = plan->n_stages;
    s->n_workers = workers > 0 ? workers : 1;
    /* No more threads than streams it runs: a stream runs one stage at a time, so the others
     * would only wait, and the stages would wander over more threads (each thread's first run of
     * a stage pays for its per-thread state: an OpenBLAS sgemm's first call on a thread, measured
     * at 50-270 us against 32-37 after, and the search's scratch). */
    int n_run = 0; /* a parallel stream counts as its batches at once */
    for (int k = 0; k < plan->n_streams; k++)
        n_run += ((owned ? owned[k] : true) && plan->streams[k].n_stages > 0) *
                 (plan->streams[k].parallel > 1 ? plan->streams[k].parallel : 1);
    if (n_run >= 1 && s->n_workers > n_run) s->n_workers = n_run;
    s->limit = plan->batches;
    int n = plan->n_stages, nstr = plan->n_streams;
    size_t ns = (size_t)(n > 0 ? n : 1), nk = (size_t)(nstr > 0 ? nstr : 1);
    s->done = calloc(ns, sizeof *s->done);
    s->owned = calloc(nk, sizeof *s->owned);
    s->cur = calloc(nk, sizeof *s->cur);
    s->cur_b = calloc(nk, sizeof *s->cur_b);
    s->queued = calloc(nk, sizeof *s->queued);
    s->running = calloc(nk, sizeof *s->running);
    s->in_flight = calloc(nk, sizeof *s->in_flight);
    s->fin = calloc(nk, sizeof *s->fin);
    s->live = calloc(nk, sizeof *s->live);
    s->queue = calloc(nk, sizeof *s->queue);
    s->dep_streams = calloc(ns, sizeof *s->dep_streams);
    s->n_dep_streams = calloc(ns, sizeof *s->n_dep_streams);
    s->threads = calloc((size_t)s->n_workers, sizeof *s->threads);
    s->is_out = calloc(ns, sizeof *s->is_out);
    s->after_out = calloc(ns, sizeof *s->after_out);
    s->out_streams = calloc(nk, sizeof *s->out_streams);
    if (!s->done || !s->owned || !s->cur || !s->cur_b || !s->queued || !s->running ||
        !s->in_flight || !s->fin || !s->live || !s->queue || !s->dep_streams || !s->n_dep_streams ||
        !s->threads || !s->is_out || !s->after_out || !s->out_streams)
        goto oom;
    for (int k = 0; k < nstr; k++)
        s->owned[k] = owned ? owned[k] : true;
    /* Output stages and the commit point; without non-output stages there is nothing to wait
     * for. */
    /* The commit set is every stage that is not an output nor runs after one within the batch,
     * by data or by stream order: a stage after a sink (after: [save]), or behind such a stage on
     * a shared copy stream, cannot finish batch b before that sink does. Streams are filled in
     * plan order, so a stream predecessor comes first in plan order too. */
    int *sprev = malloc(ns * sizeof *sprev);
    if (!sprev) goto oom;
    for (int v = 0; v < n; v++)
        sprev[v] = -1;
    for (int k = 0; k < nstr; k++)
        for (int j = 1; j < plan->streams[k].n_stages; j++)
            sprev[plan->streams[k].stages[j]] = plan->streams[k].stages[j - 1];
    for (int k = 0; k < n; k++) {
        int v = plan->order[k];
        s->is_out[v] = (plan->spec->stages[v].kind->role & PL_ROLE_OUTPUT) != 0;
        const pl_plan_stage *ps = &plan->stages[v];
        for (int i = 0; i <= ps->n_preds; i++) {
            int u = i < ps->n_preds ? ps->preds[i] : sprev[v];
            if (u >= 0 && (s->is_out[u] || s->after_out[u])) s->after_out[v] = true;
        }
        s->at_commit += !s->is_out[v] && !s->after_out[v];
    }
    free(sprev);
    if (s->at_commit == 0) s->commit = plan->batches;
    for (int k = 0; k < nstr; k++)
        for (int j = 0; j < plan->streams[k].n_stages; j++)
            if (s->is_out[plan->streams[k].stages[j]]) {
                s->out_streams[s->n_out_streams++] = k;
                break;
            }
    /* Who waits on whom: for each stage, the streams of the stages that wait for it (its
     * intra-batch successors, the `to` of its cross-batch deps). A repeat of the last entry is
     * skipped; other repeats are harmless (a queued stream is not queued twice). */
    int *cnt = calloc(ns, sizeof *cnt);
    if (!cnt) goto oom;
    for (int v = 0; v < n; v++) {
        const pl_plan_stage *ps = &plan->stages[v];
        for (int i = 0; i < ps->n_preds; i++)
            cnt[ps->preds[i]]++;
        for (int i = 0; i < ps->n_xin; i++)
            cnt[plan->xdeps[ps->xin[i]].from]++;
    }
    bool ok = true;
    for (int v = 0; v < n && ok; v++)
        ok = (s->dep_streams[v] = malloc(((size_t)cnt[v] + 1) * sizeof(int))) != NULL;
    free(cnt);
    if (!ok) goto oom;
    for (int v = 0; v < n; v++) {
        const pl_plan_stage *ps = &plan->stages[v];
        for (int i = 0; i < ps->n_preds + ps->n_xin; i++) {
            int u = i < ps->n_preds ? ps->preds[i] : plan->xdeps[ps->xin[i - ps->n_preds]].from;
            int m = s->n_dep_streams[u];
            if (m == 0 || s->dep_streams[u][m - 1] != ps->stream)
                s->dep_streams[u][s->n_dep_streams[u]++] = ps->stream;
        }
    }
    pthread_condattr_t ca;
    if (pthread_mutex_init(&s->mu, NULL) != 0 || pthread_condattr_init(&ca) != 0)
        return pl_error_set(err, PL_ERUNTIME, "error: cannot create a mutex");
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&s->work, &ca) | pthread_cond_init(&s->progress, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) return pl_error_set(err, PL_ERUNTIME, "error: cannot create a condition variable");
    s->init = true;
    s->at_all = n;
    pl__count_live(s);
    return PL_OK;
oom:
    return pl_error_set(err, PL_ENOMEM, "error: out of memory preparing the host scheduler");
}

void pl_sched_begin_at(pl_sched *s, int64_t first)
{
    if (first <= 0) return;
    for (int v = 0; v < s->n_stages; v++)
        s->done[v] = first;
    for (int k = 0; k < s->plan->n_streams; k++) {
        s->cur[k] = 0;
        s->cur_b[k] = first;
        s->fin[k] = 0;
    }
    s->started = first;
    s->all_done = first;
    s->at_all = s->n_stages;
    /* Every stage is at the commit point again, as at batch 0. */
    if (s->commit < first) s->commit = first;
    pl__count_live(s);
}

void pl_sched_set_clock(pl_sched *s, pl_batch_clock *clock)
{
    s->clock = clock;
}

void pl_sched_set_batch_progress(pl_sched *s)
{
    s->batch_progress = true;
}

void pl_sched_spawn(pl_sched *s)
{
    pthread_mutex_lock(&s->mu);
    if (s->spawned) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->spawned = true;
    pl__worker_arg *args = calloc((size_t)s->n_workers, sizeof *args);
    if (!args) {
        pl_error e;
        pl_error_set(&e, PL_ENOMEM, "error: out of memory starting host workers");
        pl_sched_fail(s, 0, PL_ENOMEM, &e);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->worker_args = args; /* they live until join */
    pthread_mutex_unlock(&s->mu);
    /* Without mu: a started worker waits for `go` under it. */
    for (int i = 0; i < s->n_workers; i++) {
        args[i] = (pl__worker_arg){s, i};
        pthread_mutex_lock(&s->mu);
        s->n_running++;
        pthread_mutex_unlock(&s->mu);
        int rc = pthread_create(&s->threads[i], NULL, pl__worker_main, &args[i]);
        if (rc != 0) {
            pthread_mutex_lock(&s->mu);
            s->n_running--;
            if (i == 0) {
                /* EAGAIN: no room for its stack (an address-space limit) or a limit on threads. */
                pl_status st = rc == EAGAIN || rc == ENOMEM ? PL_ENOMEM : PL_ERUNTIME;
                pl_error e;
                pl_error_set(&e, st, "error: %s a host worker thread",
                             st == PL_ENOMEM ? "out of memory starting" : "cannot start");
                pl_sched_fail(s, 0, st, &e);
            }
            pthread_mutex_unlock(&s->mu);
            break; /* fewer workers: the run goes on with those that started */
        }
        s->n_threads++;
    }
}

void pl_sched_start(pl_sched *s, int64_t t0_ns)
{
    pl_sched_spawn(s);
    pthread_mutex_lock(&s->mu);
    s->t0_ns = t0_ns;
    s->go = true;
    /* Each stream queued wakes one worker (pl__recheck); with nothing live they all leave. */
    for (int k = 0; k < s->plan->n_streams; k++)
        if (s->plan->streams[k].n_stages > 0) pl__recheck(s, k);
    if (s->n_live == 0) pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    /* After mu is let go: a spinning worker that sees it takes mu at once. */
    __atomic_store_n(&s->go_spin, true, __ATOMIC_RELEASE);
}

void pl_sched_join(pl_sched *s)
{
    for (int i = 0; i < s->n_threads; i++)
        pthread_join(s->threads[i], NULL);
    s->n_threads = 0;
}

void pl_sched_fini(pl_sched *s)
{
    if (s->init && s->n_threads > 0) { /* spawned, never joined: an error before the run */
        pthread_mutex_lock(&s->mu);
        pl_sched_abort(s);
        pthread_mutex_unlock(&s->mu);
        pl_sched_join(s);
    }
    for (int v = 0; s->dep_streams && v < s->n_stages; v++)
        free(s->dep_streams[v]);
    free(s->dep_streams);
    free(s->n_dep_streams);
    free(s->done);
    free(s->owned);
    free(s->cur);
    free(s->cur_b);
    free(s->queued);
    free(s->running);
    free(s->in_flight);
    free(s->fin);
    free(s->queue);
    free(s->threads);
    free(s->worker_args);
    free(s->is_out);
    free(s->after_out);
    free(s->out_streams);
    free(s->live);
    if (s->init) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->progress);
    }
    memset(s, 0, sizeof *s);
}
