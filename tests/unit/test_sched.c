/* test_sched: the host scheduler's start protocol. Workers (no more than the streams) are spawned
 * before the run's clock and run nothing until pl_sched_start; a scheduler spawned and never
 * started is freed without running anything; a started one runs every batch and stamps batch
 * completions (the clock behind steady_per_batch_s); the progress generation lets a waiter that let
 * go of the mutex miss no wake-up (pl_sched_wait_progress_since returns at once once the generation
 * moved: a broken one would sit out its minute-long wait and the test would time out); a helper
 * thread (the GPU executor's issue loop at a run's tail) runs queued stages beside the workers
 * under an index of its own, and the run's work is over (pl_sched_finished) with every batch
 * done, before the workers leave; the spinning wait misses no progress either. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_buffers.h"
#include "pl_exec.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_sched.h"
#include "pl_stage_rt.h"
#include "pl_test.h"

static const char *yaml = "pipeline: t\n"
                          "run: {batches: 6, depth: 2, seed: 1}\n"
                          "buffers:\n"
                          "  a: {where: host, dtype: f32, shape: [64]}\n"
                          "stages:\n"
                          "  - {name: src, kind: source, to: a, generator: random}\n"
                          "  - {name: snk, kind: sink, from: a, to: /dev/null}\n";

typedef struct t_run {
    pl_plan *plan;
    pl_buffers *bufs;
    pl_stage_rt rt;
    pl_sched sched;
    pl_run_cfg cfg;
} t_run;

static void t_open_with(t_run *r, pl_spec *spec, int rt_workers, int workers)
{
    pl_error err;
    memset(r, 0, sizeof *r);
    pl_run_cfg_init(&r->cfg);
    CHECK(pl_plan_compile(spec, &r->plan, &err) == PL_OK);
    CHECK(pl_buffers_new(spec, r->plan->depth, NULL, true, 1, &r->bufs, &err) == PL_OK);
    CHECK(pl_stage_rt_open(&r->rt, r->plan, NULL, rt_workers, pl_buffers_slot(r->bufs, 0), NULL,
                           &err) == PL_OK);
    CHECK(pl_sched_init(&r->sched, r->plan, &r->cfg, &r->rt, r->bufs, NULL, workers, NULL, &err) ==
          PL_OK);
}

static void t_open(t_run *r, pl_spec *spec, int workers)
{
    t_open_with(r, spec, workers, workers);
}

static void t_close(t_run *r)
{
    pl_error err;
    pl_sched_fini(&r->sched);
    pl_stage_rt_close(&r->rt, NULL, true, NULL, &err);
    pl_buffers_free(r->bufs);
    pl_plan_free(r->plan);
}

static int64_t t_started(pl_sched *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t v = s->started;
    for (int i = 0; i < s->n_stages; i++)
        v += s->done[i];
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* Spawned, then started: nothing before the start, every batch after it. */
static void test_spawn_then_start(pl_spec *spec)
{
    t_run r;
    t_open(&r, spec, 3);
    pl_sched_spawn(&r.sched);
    pl_sched_spawn(&r.sched);           /* a second spawn is a no-op */
    CHECK_EQ_INT(r.sched.n_threads, 2); /* 3 asked, 2 streams: no idle thread */
    CHECK_EQ_INT(t_started(&r.sched), 0);
    pl_batch_clock clock = {2, -1, -1, 0};
    pl_sched_set_clock(&r.sched, &clock);
    pl_sched_start(&r.sched, pl_now_ns());
    pthread_mutex_lock(&r.sched.mu);
    while (!pl_sched_idle(&r.sched))
        pl_sched_wait_progress(&r.sched, 1000000);
    CHECK_EQ_INT(pl_sched_batches_done(&r.sched), 6);
    CHECK(!r.sched.failed);
    /* Batch completions stamped: batch 2 (the mark) and the last, in order. */
    CHECK(clock.mark_ns >= 0);
    CHECK_EQ_INT(clock.last_b, 5);
    CHECK(clock.last_ns >= clock.mark_ns);
    pthread_mutex_unlock(&r.sched.mu);
    pl_sched_join(&r.sched);
    t_close(&r);
}

/* Spawned and never started (an error between setup and the clock): fini aborts and joins the
 * workers; no stage ran. */
static void test_spawn_no_start(pl_spec *spec)
{
    t_run r;
    t_open(&r, spec, 4);
    pl_sched_spawn(&r.sched);
    CHECK_EQ_INT(t_started(&r.sched), 0);
    pl_sched_fini(&r.sched);
    CHECK_EQ_INT(r.sched.n_threads, 0);
    t_close(&r);
}

/* Start without spawn spawns; a limit of 0 set before the start: the workers leave at once. */
static void test_start_nothing_live(pl_spec *spec)
{
    t_run r;
    t_open(&r, spec, 2);
    pl_sched_spawn(&r.sched);
    pthread_mutex_lock(&r.sched.mu);
    pl_sched_set_limit(&r.sched, 0);
    pthread_mutex_unlock(&r.sched.mu);
    pl_sched_start(&r.sched, pl_now_ns());
    pl_sched_join(&r.sched);
    CHECK(pl_sched_idle(&r.sched));
    CHECK_EQ_INT(t_started(&r.sched), 0);
    t_close(&r);

    t_open(&r, spec, 2);
    pl_sched_start(&r.sched, pl_now_ns()); /* spawns */
    pl_sched_join(&r.sched);
    CHECK_EQ_INT(pl_sched_batches_done(&r.sched), 6);
    t_close(&r);
}

/* The generation: a notify between reading it and waiting is not lost. */
static void test_progress_gen(pl_spec *spec)
{
    t_run r;
    t_open(&r, spec, 1);
    pthread_mutex_lock(&r.sched.mu);
    uint64_t g = pl_sched_progress_gen(&r.sched);
    pl_sched_notify_progress(&r.sched);
    CHECK(pl_sched_progress_gen(&r.sched) != g);
    pl_sched_wait_progress_since(&r.sched, g, 60L * 1000000L); /* returns at once */
    g = pl_sched_progress_gen(&r.sched);
    pl_sched_set_limit(&r.sched, 3); /* a lowered limit wakes the waiters too */
    pl_sched_wait_progress_since(&r.sched, g, 60L * 1000000L);
    pthread_mutex_unlock(&r.sched.mu);
    t_close(&r);
}

/* A helper beside one worker: it may use index 1 of the stage runtime's 3 (none is spare when the
 * workers take them all); it runs nothing before the start; with it the run completes every
 * batch, and pl_sched_finished holds once it has, before the join. */
static void test_help_finished(pl_spec *spec)
{
    t_run r;
    t_open_with(&r, spec, 3, 1);
    CHECK_EQ_INT(pl_sched_help_worker(&r.sched, 3), 1);
    CHECK_EQ_INT(pl_sched_help_worker(&r.sched, 1), -1);
    pl_sched_spawn(&r.sched);
    pthread_mutex_lock(&r.sched.mu);
    CHECK(!pl_sched_help(&r.sched, 1)); /* not started */
    CHECK(!pl_sched_finished(&r.sched));
    pthread_mutex_unlock(&r.sched.mu);
    pl_sched_start(&r.sched, pl_now_ns());
    pthread_mutex_lock(&r.sched.mu);
    int helped = 0;
    while (!pl_sched_finished(&r.sched)) {
        if (pl_sched_help(&r.sched, 1)) {
            helped++;
            continue;
        }
        pl_sched_spin_progress_since(&r.sched, pl_sched_progress_gen(&r.sched), 200, 1000000);
    }
    CHECK_EQ_INT(pl_sched_batches_done(&r.sched), 6);
    CHECK(!r.sched.failed);
    CHECK(helped <= 12); /* 6 batches of 2 stages, shared with the worker */
    pthread_mutex_unlock(&r.sched.mu);
    pl_sched_join(&r.sched);
    CHECK(pl_sched_idle(&r.sched));
    t_close(&r);
}

/* The spinning wait: at once when the generation moved; after the spin and the timed wait when
 * nothing happens (a 60 s wait here would time the test out); woken by progress made while it
 * spins, on another thread. */
static void *t_notify_later(void *p)
{
    pl_sched *s = p;
    struct timespec d = {0, 2000000};
    nanosleep(&d, NULL);
    pthread_mutex_lock(&s->mu);
    pl_sched_notify_progress(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void test_spin_progress(pl_spec *spec)
{
    t_run r;
    t_open(&r, spec, 1);
    pthread_mutex_lock(&r.sched.mu);
    uint64_t g = pl_sched_progress_gen(&r.sched);
    pl_sched_notify_progress(&r.sched);
    pl_sched_spin_progress_since(&r.sched, g, 60L * 1000000L, 60L * 1000000L); /* at once */
    g = pl_sched_progress_gen(&r.sched);
    int64_t t0 = pl_now_ns();
    pl_sched_spin_progress_since(&r.sched, g, 100, 1000); /* nothing comes: about 1.1 ms */
    CHECK(pl_now_ns() - t0 >= 100000);
    CHECK(pl_sched_progress_gen(&r.sched) == g);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, t_notify_later, &r.sched) == 0);
    pl_sched_spin_progress_since(&r.sched, g, 60L * 1000000L, 60L * 1000000L); /* woken */
    CHECK(pl_sched_progress_gen(&r.sched) != g);
    pthread_mutex_unlock(&r.sched.mu);
    pthread_join(th, NULL);
    t_close(&r);
}

int main(void)
{
    pl_spec *spec = NULL;
    pl_error err;
    if (pl_yaml_load_string("t.yaml", yaml, strlen(yaml), &spec, &err) != PL_OK ||
        pl_spec_check(spec, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    test_spawn_then_start(spec);
    test_spawn_no_start(spec);
    test_start_nothing_live(spec);
    test_progress_gen(spec);
    test_help_finished(spec);
    test_spin_progress(spec);
    pl_spec_free(spec);
    PL_TEST_DONE();
}
