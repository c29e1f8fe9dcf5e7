/* test_pool: the run's host thread pool (runtime/base/pl_pool.c): every task runs exactly once, no
 * two threads hold one slot of a job at once, slots stay below `parallel`, several threads submit
 * jobs at the same time, the pool grows on reserve, and a pool of no helpers (or parallel 1)
 * runs everything on the caller in order. Runs under ThreadSanitizer in CI (.ci/run). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "pl_pool.h"
#include "pl_test.h"

enum { TASKS = 2000, SLOTS = 8 };

typedef struct job {
    atomic_int runs[TASKS];
    atomic_int in_slot[SLOTS]; /* threads inside a task with that slot now */
    atomic_int bad;
    int parallel;
    int64_t order[TASKS]; /* parallel 1: the order tasks ran in */
    int n_order;
} job;

static void task(void *arg, int64_t t, int slot)
{
    job *j = arg;
    if (slot < 0 || slot >= j->parallel || slot >= SLOTS) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    if (atomic_fetch_add(&j->in_slot[slot], 1) != 0) atomic_fetch_add(&j->bad, 1);
    atomic_fetch_add(&j->runs[t], 1);
    volatile double x = 0;
    for (int i = 0; i < (int)(t % 7) * 50; i++)
        x += i;
    if (j->parallel == 1) j->order[j->n_order++] = t;
    atomic_fetch_sub(&j->in_slot[slot], 1);
}

static void check_job(job *j, int64_t n)
{
    CHECK_EQ_INT(atomic_load(&j->bad), 0);
    for (int64_t t = 0; t < n; t++)
        CHECK_EQ_INT(atomic_load(&j->runs[t]), 1);
}

static job *job_new(int parallel)
{
    job *j = calloc(1, sizeof *j);
    j->parallel = parallel;
    return j;
}

typedef struct submitter {
    pl_pool *pool;
    int parallel;
    int rounds;
} submitter;

static void *submit(void *arg)
{
    submitter *s = arg;
    for (int r = 0; r < s->rounds; r++) {
        job *j = job_new(s->parallel);
        int64_t n = 1 + (r * 37) % TASKS;
        pl_pool_run(s->pool, n, s->parallel, task, j);
        check_job(j, n);
        free(j);
    }
    return NULL;
}

int main(void)
{
    pl_error err;
    pl_pool *pool = NULL;
    CHECK(pl_pool_new(3, &pool, &err) == PL_OK);
    CHECK_EQ_INT(pl_pool_threads(pool), 3);

    /* One job, parallel up to the pool and beyond it (capped: slots stay < helpers + 1). */
    for (int par = 1; par <= 6; par++) {
        job *j = job_new(par > 4 ? 4 : par);
        pl_pool_run(pool, TASKS, par, task, j);
        check_job(j, TASKS);
        if (par == 1)
            for (int t = 0; t < TASKS; t++)
                CHECK_EQ_INT(j->order[t], t);
        free(j);
    }
    pl_pool_run(pool, 0, 4, task, NULL); /* no tasks: nothing runs */

    /* Four threads submitting at once, with different parallelism. */
    pthread_t th[4];
    submitter sub[4];
    for (int i = 0; i < 4; i++) {
        sub[i] = (submitter){pool, 1 + i, 40};
        CHECK(pthread_create(&th[i], NULL, submit, &sub[i]) == 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);

    /* Growing: reserve more helpers, then a job may use them. */
    CHECK(pl_pool_reserve(pool, 6, &err) == PL_OK);
    CHECK_EQ_INT(pl_pool_threads(pool), 6);
    CHECK(pl_pool_reserve(pool, 2, &err) == PL_OK); /* never shrinks */
    CHECK_EQ_INT(pl_pool_threads(pool), 6);
    job *j = job_new(7);
    pl_pool_run(pool, TASKS, 7, task, j);
    check_job(j, TASKS);
    free(j);
    pl_pool_free(pool);

    /* No helpers, and no pool at all: the caller runs every task in order. */
    CHECK(pl_pool_new(0, &pool, &err) == PL_OK);
    j = job_new(1);
    pl_pool_run(pool, 100, 8, task, j);
    check_job(j, 100);
    for (int t = 0; t < 100; t++)
        CHECK_EQ_INT(j->order[t], t);
    free(j);
    pl_pool_free(pool);
    j = job_new(1);
    pl_pool_run(NULL, 10, 8, task, j);
    check_job(j, 10);
    free(j);
    pl_pool_free(NULL);

    if (pl_test_failures) fprintf(stderr, "%d check(s) failed\n", pl_test_failures);
    return pl_test_failures ? 1 : 0;
}
