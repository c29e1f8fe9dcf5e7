/* pl_sample: what the sample kind computes, as the C reference the host executor runs and the GPU
 * kernels (stages/sample/sample_kernels.cuh) are tested against.
 *
 * One step of generation: for each sequence b of a batch, the token of column c of the tokens
 * buffer [B, N] from its logits [B, V] (c = 0 for the stage after prefill; step + 1 for a decode
 * loop's iteration `step`).
 *
 * Choosing a token from one row of logits l[0..V):
 *   greedy: the largest l (the first index on ties; NaN counts as -inf; all -inf: 0).
 *   sample: z = l / temperature in f32 (NaN: -inf); kept = every v with z > -inf;
 *     top_k > 0: kept = those with z >= the top_k-th largest z (ties at the boundary all kept);
 *     top_p < 1: with e_v = exp(z_v - max z), kept = those with z >= tau, tau the largest value
 *       such that the e of the kept tokens with z >= tau sum to at least top_p times all kept e's
 *       (the most likely tokens whose probability adds up to top_p; ties kept together);
 *     then with u the step's uniform (pl_philox.h: seed, batch, sequence, column), the first v in
 *     index order whose running sum of kept e's passes u times their total (the last kept v when
 *     rounding leaves none).
 * The host sums in double, the GPU in f32 trees: for the same u they pick the same token except
 * where u or top_p falls within rounding of a boundary. Greedy picks the same token on both. */
#ifndef PL_SAMPLE_H
#define PL_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_status.h"

typedef enum pl_sample_method { PL_SAMPLE_GREEDY, PL_SAMPLE_RANDOM } pl_sample_method;

typedef struct pl_sample_params {
    pl_sample_method method;
    float temperature; /* > 0 */
    int top_k;         /* 0: no limit */
    float top_p;       /* (0, 1]; 1: no limit */
    uint64_t seed;
    int eos;     /* the end-of-sequence token, -1: none */
    int pad;     /* what the columns after a sequence's end hold, in [0, V) */
    int max_new; /* tokens a sequence may have, 1..N (a per-sequence limit may lower it) */
} pl_sample_params;

/* The token for one row of f32 logits [V] with uniform u (greedy ignores u). scratch: V pairs
 * (pl_sample_scratch_bytes(V)), or NULL for greedy. */
size_t pl_sample_scratch_bytes(int V);
int32_t pl_sample_row(const pl_sample_params *p, const float *logits, int V, float u,
                      void *scratch);

/* One step on host memory. logits [B, V] (f32; the caller converts 16-bit ones), col: the column
 * (0: the first token, which also fills columns 1.. with pad and reads no finished mask), batch:
 * the RNG's batch index, limits [B] (NULL: max_new for every sequence; each clamped to
 * [1, max_new]). For each sequence b:
 *   finished before (col > 0 and finished[b]): tokens[b, col] = pad, next[b] = pad;
 *   col >= N: nothing is written to tokens, next[b] = pad; the sequence is finished;
 *   else the chosen token t: tokens[b, col] = t, next[b] = t, and finished[b] = 1 when t is eos or
 *   col + 1 reaches its limit, else 0.
 * count[0] (count may be NULL, as may next) = the sequences not finished after the step.
 * PL_ENOMEM when scratch cannot be had. */
pl_status pl_sample_step(const pl_sample_params *p, const float *logits, int B, int V, int N,
                         int col, int64_t batch, const int32_t *limits, int32_t *tokens,
                         int32_t *next, int32_t *finished, int32_t *count, pl_error *err);

#endif
