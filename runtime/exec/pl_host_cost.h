/* pl_host_cost: about how long the host executor would take for a plan, so that a pipeline sized
 * for a GPU (a GPT-2 forward, large GEMMs) is not started on a machine without one by accident,
 * and so that one started there anyway shows an ETA before its first batch ends.
 *
 * The work is the kinds' own count (pl_kind.host_flops: FLOPs per batch, through BLAS or plain
 * C loops); the speed is this host's, measured once per process by a short probe of each path
 * (20 ms of the thread's CPU time each: a matmul written as the GPT-2 reference's loops, and a
 * 256^3 sgemm), so it is the speed of an idle core (on a loaded machine the run takes longer), and
 * only when the work could matter: a plan that would take less than PL_HOST_COST_MIN_S even at
 * PL_HOST_COST_FAST_FLOPS a thread is not probed and counts as cheap. The stages' times add up
 * (an upper bound where host stages of one batch overlap; the big ones are one stage in
 * practice). */
#ifndef PL_HOST_COST_H
#define PL_HOST_COST_H

#include <stdbool.h>

#include "pl_plan.h"

/* `pipectl run --executor auto` on a machine without a GPU refuses a plan whose estimate is above
 * this (10 minutes), unless --executor host insists. */
#define PL_HOST_GPU_SIZED_S 600.0
/* Work below this many seconds at PL_HOST_COST_FAST_FLOPS per thread is not measured. */
#define PL_HOST_COST_MIN_S 10.0
/* A rate no host thread reaches with f32 (an AVX-512 core at 4 GHz with two FMA units peaks at
 * 256 GFLOP/s; OpenBLAS sustains about 60-70% of that). */
#define PL_HOST_COST_FAST_FLOPS 200e9

typedef struct pl_host_cost {
    double seconds;         /* the plan's batches on the host executor; 0: cheap (not measured) */
    double flops_per_batch; /* every stage's */
    int stage;              /* the stage that costs most, -1 when none counts */
    double stage_flops;     /* its FLOPs per batch */
    double stage_rate;      /* the FLOP/s assumed for it (measured here) */
    bool stage_blas;        /* through BLAS (rate for every thread it gets), else C loops */
} pl_host_cost;

/* The estimate for `plan` with `workers` host workers (0: the default). Measures the rates the
 * first time it needs them (a BLAS probe loads OpenBLAS; a failure to load leaves that path at
 * PL_HOST_COST_FAST_FLOPS a thread: the estimate then errs short). */
void pl_host_cost_estimate(const pl_plan *plan, int workers, pl_host_cost *out);

/* "5.3 hours", "12 minutes", "40 seconds" into buf. */
const char *pl_host_cost_duration(double seconds, char *buf, size_t cap);

#endif
