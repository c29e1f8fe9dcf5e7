/* pl_pool: a fixed set of helper threads taking tasks from the jobs in flight (pl_pool.h). One
 * mutex guards the job list and every job's counters: tasks are coarse (a corpus tile, a block of
 * gemm rows: milliseconds), so the lock is cheap next to them and easy to reason about. */
#include "pl_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct pl__job {
    pl_pool_fn fn;
    void *arg;
    int64_t n_tasks;
    int64_t next; /* next task to hand out */
    int parallel; /* most threads at once, the submitter included */
    int joined;   /* slots handed out (the submitter holds slot 0) */
    int active;   /* threads working on it now */
    bool listed;  /* in the pool's job list (tasks or slots left) */
    struct pl__job *link;
} pl__job;

struct pl_pool {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job was listed, or stop */
    pthread_cond_t done; /* a helper left a job */
    pl__job *jobs;       /* listed jobs, oldest first */
    bool stop;
    int n_threads, cap;
    pthread_t *threads;
};

static void pl__unlist(pl_pool *p, pl__job *j)
{
    if (!j->listed) return;
    for (pl__job **pp = &p->jobs; *pp; pp = &(*pp)->link)
        if (*pp == j) {
            *pp = j->link;
            break;
        }
    j->listed = false;
}

/* Takes the next task of j (mutex held); false when none is left. */
static bool pl__take(pl_pool *p, pl__job *j, int64_t *task)
{
    if (j->next >= j->n_tasks) {
        pl__unlist(p, j);
        return false;
    }
    *task = j->next++;
    if (j->next >= j->n_tasks) pl__unlist(p, j);
    return true;
}

/* Runs tasks of j until none is left (mutex held on entry and on return). */
static void pl__work(pl_pool *p, pl__job *j, int slot)
{
    int64_t t;
    while (pl__take(p, j, &t)) {
        pthread_mutex_unlock(&p->mu);
        j->fn(j->arg, t, slot);
        pthread_mutex_lock(&p->mu);
    }
}

static void *pl__helper(void *arg)
{
    pl_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        pl__job *j = p->jobs;
        while (j && j->joined >= j->parallel)
            j = j->link;
        if (!j) {
            if (p->stop) break;
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        int slot = j->joined++;
        if (j->joined >= j->parallel) pl__unlist(p, j); /* no slot left for anyone else */
        j->active++;
        pl__work(p, j, slot);
        if (--j->active == 0) pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static pl_status pl__grow(pl_pool *p, int threads, pl_error *err)
{
    if (threads <= p->n_threads) return PL_OK;
    if (threads > p->cap) {
        pthread_t *t = realloc(p->threads, (size_t)threads * sizeof *t);
        if (!t) return pl_error_set(err, PL_ENOMEM, "error: out of memory starting host threads");
        p->threads = t;
        p->cap = threads;
    }
    while (p->n_threads < threads) {
        int rc = pthread_create(&p->threads[p->n_threads], NULL, pl__helper, p);
        /* EAGAIN: no room for its stack (an address-space limit) or a limit on threads. */
        if (rc == EAGAIN || rc == ENOMEM)
            return pl_error_set(err, PL_ENOMEM,
                                "error: out of memory starting host thread %d of %d (its stack, "
                                "or a limit on threads); use fewer --workers",
                                p->n_threads + 1, threads);
        if (rc != 0)
            return pl_error_set(err, PL_ERUNTIME,
                                "error: cannot start host thread %d of %d; use fewer --workers",
                                p->n_threads + 1, threads);
        p->n_threads++;
    }
    return PL_OK;
}

pl_status pl_pool_new(int threads, pl_pool **out, pl_error *err)
{
    *out = NULL;
    pl_pool *p = calloc(1, sizeof *p);
    if (!p) return pl_error_set(err, PL_ENOMEM, "error: out of memory starting host threads");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    pthread_mutex_lock(&p->mu);
    pl_status st = pl__grow(p, threads, err);
    pthread_mutex_unlock(&p->mu);
    if (st != PL_OK) {
        pl_pool_free(p);
        return st;
    }
    *out = p;
    return PL_OK;
}

void pl_pool_free(pl_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

int pl_pool_threads(const pl_pool *p)
{
    return p ? p->n_threads : 0;
}

pl_status pl_pool_reserve(pl_pool *p, int threads, pl_error *err)
{
    pthread_mutex_lock(&p->mu);
    pl_status st = pl__grow(p, threads, err);
    pthread_mutex_unlock(&p->mu);
    return st;
}

void pl_pool_run(pl_pool *p, int64_t n_tasks, int parallel, pl_pool_fn fn, void *arg)
{
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 0 || parallel <= 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(arg, t, 0);
        return;
    }
    if (parallel > p->n_threads + 1) parallel = p->n_threads + 1;
    if ((int64_t)parallel > n_tasks) parallel = (int)n_tasks;
    pl__job j = {.fn = fn,
                 .arg = arg,
                 .n_tasks = n_tasks,
                 .parallel = parallel,
                 .joined = 1,
                 .active = 1,
                 .listed = true};
    pthread_mutex_lock(&p->mu);
    pl__job **tail = &p->jobs;
    while (*tail)
        tail = &(*tail)->link;
    *tail = &j;
    /* Wake as many helpers as the job can take, not all: the others would only take the lock to
     * find no slot left. A helper busy elsewhere looks at the list before it waits again. When
     * it can take them all (the search on every core), one broadcast: waking 15 waiting threads
     * took 50-66 us as 15 signals, 29-32 us as one broadcast (2-core host, mutex held), time the
     * submitter spends before its own first task. */
    if (parallel - 1 >= p->n_threads)
        pthread_cond_broadcast(&p->work);
    else
        for (int i = 1; i < parallel; i++)
            pthread_cond_signal(&p->work);
    pl__work(p, &j, 0);
    pl__unlist(p, &j); /* no helper may join once the submitter has finished its share */
    j.active--;
    while (j.active > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
