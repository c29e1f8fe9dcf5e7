/* sample_ref: the sample kind's C reference (definitions in pl_sample.h): the token of one row
 * (greedy, or temperature, top-k and top-p by sorting the row), and one step over a batch. */
#include "pl_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pl_philox.h"

typedef struct pl__zi {
    float z;
    int32_t i;
} pl__zi;

/* Descending z, then ascending index: a total order, so the sort is deterministic. */
static int pl__zi_cmp(const void *a, const void *b)
{
    const pl__zi *x = a, *y = b;
    if (x->z != y->z) return x->z > y->z ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

size_t pl_sample_scratch_bytes(int V)
{
    return (size_t)(V > 0 ? V : 1) * sizeof(pl__zi);
}

static float pl__unnan(float v)
{
    return isnan(v) ? -INFINITY : v;
}

int32_t pl_sample_row(const pl_sample_params *p, const float *logits, int V, float u, void *scratch)
{
    int32_t best = 0;
    float bv = pl__unnan(logits[0]);
    for (int v = 1; v < V; v++) {
        float x = pl__unnan(logits[v]);
        if (x > bv) bv = x, best = v;
    }
    if (p->method == PL_SAMPLE_GREEDY || bv == -INFINITY) return best;
    pl__zi *zs = scratch;
    int n = 0;
    for (int v = 0; v < V; v++) {
        float z = pl__unnan(logits[v]) / p->temperature;
        if (z > -INFINITY) zs[n++] = (pl__zi){z, v};
    }
    qsort(zs, (size_t)n, sizeof *zs, pl__zi_cmp);
    float zmax = zs[0].z, tau = zs[n - 1].z; /* kept: z >= tau */
    if (p->top_k > 0 && p->top_k < n) tau = zs[p->top_k - 1].z;
    if (p->top_p < 1.0f) {
        double total = 0, acc = 0;
        for (int j = 0; j < n && zs[j].z >= tau; j++)
            total += exp((double)zs[j].z - zmax);
        for (int j = 0; j < n && zs[j].z >= tau; j++) {
            acc += exp((double)zs[j].z - zmax);
            if (acc >= (double)p->top_p * total) {
                tau = zs[j].z;
                break;
            }
        }
    }
    /* The draw, in index order over the kept tokens. */
    double total = 0;
    int32_t last = best;
    for (int v = 0; v < V; v++) {
        float z = pl__unnan(logits[v]) / p->temperature;
        if (z > -INFINITY && z >= tau) {
            total += exp((double)z - zmax);
            last = v;
        }
    }
    double r = (double)u * total, acc = 0;
    for (int v = 0; v < V; v++) {
        float z = pl__unnan(logits[v]) / p->temperature;
        if (!(z > -INFINITY && z >= tau)) continue;
        acc += exp((double)z - zmax);
        if (acc > r) return v;
    }
    return last;
}

pl_status pl_sample_step(const pl_sample_params *p, const float *logits, int B, int V, int N,
                         int col, int64_t batch, const int32_t *limits, int32_t *tokens,
                         int32_t *next, int32_t *finished, int32_t *count, pl_error *err)
{
    void *scratch = NULL;
    if (p->method != PL_SAMPLE_GREEDY) {
        scratch = malloc(pl_sample_scratch_bytes(V));
        if (!scratch)
            return pl_error_set(err, PL_ENOMEM, "error: sample: out of host memory for a row of %d",
                                V);
    }
    int32_t live = 0;
    for (int b = 0; b < B; b++) {
        int32_t *row = tokens + (size_t)b * (size_t)N;
        bool done = col > 0 && finished[b];
        int limit = p->max_new;
        if (limits) limit = limits[b] < 1 ? 1 : limits[b] < p->max_new ? limits[b] : p->max_new;
        int32_t t = p->pad;
        if (col >= N) {
            done = true;
        } else if (!done) {
            float u = pl_sample_uniform(p->seed, batch, b, col);
            t = pl_sample_row(p, logits + (size_t)b * (size_t)V, V, u, scratch);
            done = (p->eos >= 0 && t == p->eos) || col + 1 >= limit;
            row[col] = t;
        } else {
            row[col] = p->pad;
        }
        if (col == 0)
            for (int c = 1; c < N; c++)
                row[c] = p->pad;
        if (next) next[b] = t;
        finished[b] = done;
        live += !done;
    }
    if (count) count[0] = live;
    free(scratch);
    return PL_OK;
}
