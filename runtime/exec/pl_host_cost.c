/* pl_host_cost: the host executor's time estimate for a plan (see pl_host_cost.h). */
#include "pl_host_cost.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pl_blas.h"
#include "pl_sched.h"
#include "pl_stage_rt.h"

/* The probes run for at least this long, so a clock's resolution and a first call's warm-up are
 * a small part of the figure. */
#define PL__PROBE_NS 20000000

/* The calling thread's CPU time: the probes measure a core's speed, not how many other processes
 * share it at that moment (on a loaded machine the run is slower than the estimate says). */
static int64_t pl__cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The GPT-2 reference's matmul (gpt2_ref.c's pl__linear: y[o] += x[i] W[i, o], W row-major),
 * written the same way so the compiler makes the same loop of it. */
static void pl__probe_linear(float *y, const float *x, const float *w, int n, int in, int out)
{
    for (int r = 0; r < n; r++) {
        float *yr = y + (size_t)r * out;
        for (int o = 0; o < out; o++)
            yr[o] = 0;
        for (int i = 0; i < in; i++) {
            float a = x[(size_t)r * in + i];
            const float *wr = w + (size_t)i * out;
            for (int o = 0; o < out; o++)
                yr[o] += a * wr[o];
        }
    }
}

/* FLOP/s of one thread through `blas` or the loops; 0 when it cannot be measured. The loops'
 * weights are 16 MiB, larger than a core's share of the caches, as a GPT-2 layer's (9 MiB for
 * the 124M model's MLP, 25 MiB for gpt2-xl's): the reference reads them once per row, so memory
 * sets its pace, not the arithmetic (a 1 MiB one measured 6x faster than the forward). */
static double pl__probe(bool blas)
{
    enum { N = 4, K = 1024, M = 4096, G = 256 };
    size_t nx = blas ? (size_t)G * G : (size_t)N * K, nw = blas ? (size_t)G * G : (size_t)K * M,
           ny = blas ? (size_t)G * G : (size_t)N * M;
    float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *y = malloc(ny * sizeof *y);
    double rate = 0;
    if (x && w && y && (!blas || pl_blas_load(NULL) == PL_OK)) {
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)(i % 7) * 0.25f;
        for (size_t i = 0; i < nw; i++)
            w[i] = (float)(i % 5) * 0.5f;
        double per = blas ? 2.0 * G * G * G : 2.0 * N * K * M;
        int64_t t0 = pl__cpu_ns(), t = t0;
        long reps = 0;
        while (t - t0 < PL__PROBE_NS) {
            if (blas)
                pl_blas_sgemm(false, G, G, G, 1.0f, x, G, w, G, 0.0f, y, G);
            else
                pl__probe_linear(y, x, w, N, K, M);
            reps++;
            t = pl__cpu_ns();
        }
        volatile float sink = y[ny - 1]; /* the result is used: the loops stay */
        (void)sink;
        rate = per * (double)reps / ((double)(t - t0) * 1e-9);
    }
    free(x);
    free(w);
    free(y);
    return rate;
}

static pthread_once_t pl__once[2] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
static double pl__rate[2]; /* [blas]: FLOP/s of one thread */

static void pl__probe_loops(void)
{
    pl__rate[0] = pl__probe(false);
}

static void pl__probe_blas(void)
{
    pl__rate[1] = pl__probe(true);
}

/* One thread's rate on a path, measured on first use. */
static double pl__thread_rate(bool blas)
{
    pthread_once(&pl__once[blas], blas ? pl__probe_blas : pl__probe_loops);
    return pl__rate[blas] > 0 ? pl__rate[blas] : PL_HOST_COST_FAST_FLOPS;
}

/* A stage's FLOPs a batch: its kind's, times its loop's iterations (the fixed count, else the
 * bound: an estimate that errs long for a loop that ends early). */
static double pl__stage_flops(const pl_spec *spec, const pl_stage *st, bool *blas)
{
    double f = st->kind->host_flops ? st->kind->host_flops(spec, st, blas) : 0;
    if (f > 0 && st->parent >= 0 && spec->stages[st->parent].loop) {
        const pl_loop *l = spec->stages[st->parent].loop;
        f *= (double)(l->count > 0 ? l->count : l->max);
    }
    return f;
}

void pl_host_cost_estimate(const pl_plan *plan, int workers, pl_host_cost *out)
{
    *out = (pl_host_cost){0, 0, -1, 0, 0, false};
    const pl_spec *spec = plan->spec;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int w = workers > 0 ? workers : pl_default_workers(plan);
    /* BLAS work is split over the pool: as many threads as workers, at most the cores. */
    int threads = cpus > 0 && cpus < w ? (int)cpus : w;
    double fast = 0; /* seconds per batch at a rate no host reaches */
    for (int i = 0; i < plan->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        bool blas = false;
        double f = pl__stage_flops(spec, st, &blas);
        if (f <= 0) continue;
        out->flops_per_batch += f;
        fast += f / (PL_HOST_COST_FAST_FLOPS * (blas ? threads : 1));
        if (f > out->stage_flops) {
            out->stage = i;
            out->stage_flops = f;
            out->stage_blas = blas;
        }
    }
    if (fast * (double)plan->batches < PL_HOST_COST_MIN_S) return; /* cheap: nothing measured */
    double per_batch = 0;
    for (int i = 0; i < plan->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        bool blas = false;
        double f = pl__stage_flops(spec, st, &blas);
        if (f <= 0) continue;
        double rate = pl__thread_rate(blas) * (blas ? threads : 1);
        per_batch += f / rate;
        if (i == out->stage) out->stage_rate = rate;
    }
    out->seconds = per_batch * (double)plan->batches;
}

const char *pl_host_cost_duration(double s, char *buf, size_t cap)
{
    if (s >= 5400)
        snprintf(buf, cap, "%.1f hours", s / 3600);
    else if (s >= 90)
        snprintf(buf, cap, "%.0f minutes", s / 60);
    else
        snprintf(buf, cap, "%.0f seconds", s);
    return buf;
}
