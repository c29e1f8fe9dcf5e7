/* test_gpt2_gen: generation on the host reference, without a pipeline. The gpt2 kind's prefill and
 * decode (stages/gpt2/gpt2_ref.c) against its full forward over the extended sequence at every
 * step, right-padded prompts against each prompt alone, a 16-bit cache within its rounding, and
 * the refusals; the sample kind's reference (stages/sample/sample_ref.c): Philox4x32-10 against
 * Random123's known answers, greedy ties and NaN, the same tokens for the same seed, the end of a
 * sequence (eos, limits, pad, count), and a chi-square test that temperature, top-k and top-p
 * draws follow the filtered softmax. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "gpt2.h"
#include "pl_philox.h"
#include "pl_sample.h"
#include "pl_test.h"

enum { B = 3, T = 12, P = 40, STEPS = 12 };

static const pl_gpt2_cfg cfg = {2, 4, 64, 512, 64, 1e-5f};

/* Seeded weights scaled up, so the attention is far from uniform and the logits spread. */
static void make_weights(pl_gpt2_weights *w)
{
    pl_error err;
    CHECK(pl_gpt2_weights_alloc(&cfg, w, &err) == PL_OK);
    pl_gpt2_weights_random(w, 42);
    for (int64_t i = 0; i < w->n_params; i++)
        w->mem[i] *= 4.0f;
}

static size_t kv_elems(int b)
{
    return (size_t)cfg.n_layer * 2 * (size_t)b * (size_t)P * (size_t)cfg.n_embd;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* ||a - b|| / ||b|| over n values. */
static double rel_diff(const float *a, const float *b, int n)
{
    double d = 0, m = 0;
    for (int i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        m += (double)b[i] * b[i];
    }
    return sqrt(d / (m > 0 ? m : 1));
}

/* Prefill + STEPS greedy decode steps against the forward of each whole sequence so far; with an
 * f32 cache the logits are the forward's bits; a 16-bit cache within tol. */
static void check_decode(const pl_gpt2_weights *w, pl_dtype kv_dtype, double tol)
{
    const int V = cfg.vocab, lens[B] = {T, 7, 3};
    int32_t ids[B * T], seq[B][T + STEPS + 1], next[B], len[B];
    for (int b = 0; b < B; b++) {
        len[b] = lens[b];
        for (int t = 0; t < T; t++)
            ids[b * T + t] = seq[b][t] = t < lens[b] ? (b * 97 + t * 31 + 5) % V : 511;
    }
    size_t es = kv_dtype == PL_F32 ? 4 : 2;
    void *cache = calloc(kv_elems(B), es);
    float *lg = malloc((size_t)B * V * sizeof *lg), *want = malloc((size_t)V * sizeof *want);
    pl_gpt2_kv kv = {cache, kv_dtype, B, P};
    pl_error err;
    CHECK(pl_gpt2_ref_prefill(w, ids, len, B, T, &kv, PL_GPT2_LOGITS, lg, NULL, &err) == PL_OK);
    double worst = 0;
    for (int step = 0; step <= STEPS; step++) {
        for (int b = 0; b < B; b++) {
            int n = lens[b] + step;
            CHECK(pl_gpt2_ref_forward(w, seq[b], NULL, 1, n, PL_GPT2_LOGITS, 0, want, NULL, &err) ==
                  PL_OK);
            double d = rel_diff(lg + (size_t)b * V, want, V);
            worst = fmax(worst, d);
            if (d > tol)
                fprintf(stderr, "%s cache, step %d, sequence %d: logits differ by %.3g (> %.3g)\n",
                        pl_dtype_name(kv_dtype), step, b, d, tol);
            CHECK(d <= tol);
            next[b] = seq[b][n] = argmax(want, V); /* the forward's greedy token */
        }
        if (step == STEPS) break;
        CHECK(pl_gpt2_ref_decode(w, next, len, step, B, &kv, PL_GPT2_LOGITS, lg, NULL, &err) ==
              PL_OK);
    }
    printf("prefill + %d decode steps, %s cache: largest difference from the forward %.3g\n", STEPS,
           pl_dtype_name(kv_dtype), worst);
    /* argmax output: the logits' argmax. */
    int32_t am[B];
    CHECK(pl_gpt2_ref_decode(w, next, len, STEPS, B, &kv, PL_GPT2_ARGMAX, NULL, am, &err) == PL_OK);
    CHECK(pl_gpt2_ref_decode(w, next, len, STEPS, B, &kv, PL_GPT2_LOGITS, lg, NULL, &err) == PL_OK);
    for (int b = 0; b < B; b++)
        CHECK_EQ_INT(am[b], argmax(lg + (size_t)b * V, V));
    free(cache);
    free(lg);
    free(want);
}

/* Padded prompts in one batch give each prompt's bits alone: logits after prefill and after
 * decode steps. */
static void check_padding(const pl_gpt2_weights *w)
{
    const int V = cfg.vocab, lens[B] = {5, T, 1};
    int32_t ids[B * T], len[B];
    for (int b = 0; b < B; b++) {
        len[b] = lens[b];
        for (int t = 0; t < T; t++)
            ids[b * T + t] = t < lens[b] ? (b * 13 + t * 7 + 1) % V : (t * 101) % V;
    }
    float *lg = malloc((size_t)B * V * sizeof *lg), *one = malloc((size_t)V * sizeof *one);
    float *cache = calloc(kv_elems(B), 4), *c1 = calloc(kv_elems(1), 4);
    pl_gpt2_kv kv = {cache, PL_F32, B, P}, kv1 = {c1, PL_F32, 1, P};
    pl_error err;
    int32_t next[B];
    CHECK(pl_gpt2_ref_prefill(w, ids, len, B, T, &kv, PL_GPT2_LOGITS, lg, NULL, &err) == PL_OK);
    for (int b = 0; b < B; b++)
        next[b] = argmax(lg + (size_t)b * V, V);
    for (int b = 0; b < B; b++) {
        int32_t l1 = lens[b], nx = next[b];
        CHECK(pl_gpt2_ref_prefill(w, ids + b * T, &l1, 1, lens[b], &kv1, PL_GPT2_LOGITS, one, NULL,
                                  &err) == PL_OK);
        CHECK(memcmp(one, lg + (size_t)b * V, (size_t)V * sizeof *one) == 0);
        for (int step = 0; step < 4; step++) {
            CHECK(pl_gpt2_ref_decode(w, &nx, &l1, step, 1, &kv1, PL_GPT2_LOGITS, one, NULL, &err) ==
                  PL_OK);
            nx = argmax(one, V);
        }
        next[b] = nx; /* the token sequence b gets alone after 4 steps */
    }
    int32_t nb[B];
    for (int b = 0; b < B; b++)
        nb[b] = argmax(lg + (size_t)b * V, V);
    for (int step = 0; step < 4; step++) {
        CHECK(pl_gpt2_ref_decode(w, nb, len, step, B, &kv, PL_GPT2_LOGITS, lg, NULL, &err) ==
              PL_OK);
        for (int b = 0; b < B; b++)
            nb[b] = argmax(lg + (size_t)b * V, V);
    }
    for (int b = 0; b < B; b++)
        CHECK_EQ_INT(nb[b], next[b]);
    /* Prefill touches no position at or past a prompt's length. */
    size_t hd = (size_t)(cfg.n_embd / cfg.n_head);
    for (int l = 0; l < cfg.n_layer; l++)
        for (int h = 0; h < cfg.n_head; h++) {
            size_t at = ((((size_t)l * 2) * B + 2) * (size_t)cfg.n_head + (size_t)h) * P * hd;
            for (size_t i = 5 * hd; i < P * hd; i++) /* sequence 2: 1 prompt + 4 decoded */
                CHECK(cache[at + i] == 0);
        }
    free(lg);
    free(one);
    free(cache);
    free(c1);
}

static void check_refusals(const pl_gpt2_weights *w)
{
    int32_t ids[B * T] = {0}, len[B] = {T, 0, 3}, next[B] = {1, 2, 3};
    float *lg = malloc((size_t)B * cfg.vocab * sizeof *lg), *cache = calloc(kv_elems(B), 4);
    pl_gpt2_kv kv = {cache, PL_F32, B, P};
    pl_error err;
    CHECK(pl_gpt2_ref_prefill(w, ids, len, B, T, &kv, PL_GPT2_LOGITS, lg, NULL, &err) == PL_EINPUT);
    CHECK_STR(err.msg, "error: gpt2: sequence 1: length 0 is outside [1, 12] (the prompts' "
                       "positions)");
    len[1] = 5;
    CHECK(pl_gpt2_ref_decode(w, next, len, P - 3, B, &kv, PL_GPT2_LOGITS, lg, NULL, &err) ==
          PL_EINPUT);
    CHECK_STR(err.msg, "error: gpt2: decode step 37, sequence 0: prompt length 12 puts the new "
                       "token at position 49, outside the cache's [0, 40); keep lengths + new "
                       "tokens - 1 within the cache's positions");
    next[2] = 512;
    CHECK(pl_gpt2_ref_decode(w, next, len, 0, B, &kv, PL_GPT2_LOGITS, lg, NULL, &err) == PL_EINPUT);
    CHECK_STR(err.msg, "error: gpt2: sequence 2, position 0: token id 512 is outside the "
                       "vocabulary [0, 512)");
    free(lg);
    free(cache);
}

/* ---- sampling ---- */

static void check_philox(void)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int k = 0; k < 3; k++) {
        pl_philox4 c = {{kat[k][0], kat[k][1], kat[k][2], kat[k][3]}};
        pl_philox4 r = pl_philox4x32_10(c, kat[k][4], kat[k][5]);
        for (int i = 0; i < 4; i++)
            CHECK(r.v[i] == kat[k][6 + i]);
    }
    /* Uniforms in [0, 1), different per counter field. */
    float u0 = pl_sample_uniform(1, 0, 0, 0);
    CHECK(u0 >= 0 && u0 < 1);
    CHECK(u0 != pl_sample_uniform(2, 0, 0, 0) && u0 != pl_sample_uniform(1, 1, 0, 0) &&
          u0 != pl_sample_uniform(1, 0, 1, 0) && u0 != pl_sample_uniform(1, 0, 0, 1));
    CHECK(pl_sample_uniform(1, (int64_t)1 << 32, 0, 0) != u0);
}

static pl_sample_params params(pl_sample_method m, float temp, int k, float p)
{
    pl_sample_params s = {m, temp, k, p, 7, -1, 0, 8};
    return s;
}

static void check_greedy(void)
{
    pl_sample_params g = params(PL_SAMPLE_GREEDY, 1, 0, 1);
    float x[6] = {0.5f, 2.0f, -1.0f, 2.0f, NAN, 1.0f};
    CHECK_EQ_INT(pl_sample_row(&g, x, 6, 0.3f, NULL), 1); /* the first of the tied largest */
    float y[3] = {NAN, -INFINITY, -3.0f};
    CHECK_EQ_INT(pl_sample_row(&g, y, 3, 0.3f, NULL), 2); /* NaN counts as -inf */
    float z[2] = {-INFINITY, NAN};
    CHECK_EQ_INT(pl_sample_row(&g, z, 2, 0.3f, NULL), 0);
    /* sample with every weight but one's -inf: that one */
    pl_sample_params s = params(PL_SAMPLE_RANDOM, 1, 0, 1);
    double scratch[8];
    float w[4] = {-INFINITY, -INFINITY, 3.0f, NAN};
    CHECK_EQ_INT(pl_sample_row(&s, w, 4, 0.99f, scratch), 2);
}

/* The end of a sequence: eos, a per-sequence limit, the count, pad after the end, and the first
 * step's fill of the later columns. */
static void check_step(void)
{
    enum { SB = 3, SV = 5, SN = 4 };
    pl_sample_params g = params(PL_SAMPLE_GREEDY, 1, 0, 1);
    g.eos = 4;
    g.pad = 4;
    g.max_new = SN;
    float lg[SB * SV] = {0};
    int32_t tokens[SB * SN], next[SB], fin[SB], count = -1, limits[SB] = {9, 2, 9};
    memset(tokens, 0x7f, sizeof tokens);
    pl_error err;
    /* column 0: sequence 0 picks 1, sequence 1 picks 2, sequence 2 picks eos */
    lg[1] = 1, lg[SV + 2] = 1, lg[2 * SV + 4] = 1;
    CHECK(pl_sample_step(&g, lg, SB, SV, SN, 0, 0, limits, tokens, next, fin, &count, &err) ==
          PL_OK);
    int32_t want0[SB * SN] = {1, 4, 4, 4, 2, 4, 4, 4, 4, 4, 4, 4};
    CHECK(memcmp(tokens, want0, sizeof want0) == 0);
    CHECK(next[0] == 1 && next[1] == 2 && next[2] == 4);
    CHECK(fin[0] == 0 && fin[1] == 0 && fin[2] == 1);
    CHECK_EQ_INT(count, 2);
    /* column 1: sequence 1 reaches its limit of 2, sequence 2 stays ended */
    memset(lg, 0, sizeof lg);
    lg[3] = 1, lg[SV + 3] = 1, lg[2 * SV + 0] = 1;
    CHECK(pl_sample_step(&g, lg, SB, SV, SN, 1, 0, limits, tokens, next, fin, &count, &err) ==
          PL_OK);
    int32_t want1[SB * SN] = {1, 3, 4, 4, 2, 3, 4, 4, 4, 4, 4, 4};
    CHECK(memcmp(tokens, want1, sizeof want1) == 0);
    CHECK(next[0] == 3 && next[1] == 3 && next[2] == 4);
    CHECK(fin[0] == 0 && fin[1] == 1 && fin[2] == 1);
    CHECK_EQ_INT(count, 1);
    /* a column past the tokens: nothing written, every sequence ended */
    CHECK(pl_sample_step(&g, lg, SB, SV, SN, SN, 0, NULL, tokens, next, fin, &count, &err) ==
          PL_OK);
    CHECK(memcmp(tokens, want1, sizeof want1) == 0);
    CHECK_EQ_INT(count, 0);
}

/* The same seed gives the same draws, for any order of the calls; another seed others. */
static void check_seeds(void)
{
    enum { SB = 8, SV = 64 };
    float lg[SB * SV];
    for (int i = 0; i < SB * SV; i++)
        lg[i] = (float)((i * 37) % 11) * 0.3f;
    pl_sample_params s = params(PL_SAMPLE_RANDOM, 0.8f, 20, 0.95f);
    s.max_new = 6;
    int32_t t1[SB * 6], t2[SB * 6], t3[SB * 6], n[SB], f[SB];
    pl_error err;
    for (int c = 0; c < 6; c++)
        CHECK(pl_sample_step(&s, lg, SB, SV, 6, c, 5, NULL, t1, n, f, NULL, &err) == PL_OK);
    for (int c = 0; c < 6; c++)
        CHECK(pl_sample_step(&s, lg, SB, SV, 6, c, 5, NULL, t2, n, f, NULL, &err) == PL_OK);
    CHECK(memcmp(t1, t2, sizeof t1) == 0);
    s.seed = 8;
    for (int c = 0; c < 6; c++)
        CHECK(pl_sample_step(&s, lg, SB, SV, 6, c, 5, NULL, t3, n, f, NULL, &err) == PL_OK);
    CHECK(memcmp(t1, t3, sizeof t1) != 0);
}

/* The filtered softmax, computed independently: sort, keep the top k, then the smallest set of
 * the most likely whose mass reaches p (ties together), renormalise. */
static void filtered(const float *lg, int V, float temp, int k, float p, double *prob)
{
    int order[64];
    double z[64];
    for (int v = 0; v < V; v++) {
        z[v] = (double)(lg[v] / temp);
        order[v] = v;
    }
    for (int i = 0; i < V; i++) /* selection sort: descending z, ascending index */
        for (int j = i + 1; j < V; j++)
            if (z[order[j]] > z[order[i]] || (z[order[j]] == z[order[i]] && order[j] < order[i])) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    double tau = z[order[V - 1]];
    if (k > 0 && k < V) tau = z[order[k - 1]];
    double tot = 0;
    for (int v = 0; v < V; v++)
        if (z[v] >= tau) tot += exp(z[v] - z[order[0]]);
    if (p < 1) {
        double acc = 0;
        for (int i = 0; i < V && z[order[i]] >= tau; i++) {
            acc += exp(z[order[i]] - z[order[0]]);
            if (acc >= p * tot) {
                tau = z[order[i]];
                break;
            }
        }
    }
    tot = 0;
    for (int v = 0; v < V; v++)
        tot += prob[v] = z[v] >= tau ? exp(z[v] - z[order[0]]) : 0;
    for (int v = 0; v < V; v++)
        prob[v] /= tot;
}

/* Chi-square of M draws (uniforms of distinct sequences) against the filtered softmax, at
 * p = 0.001: the draws are fixed by the seed, so the outcome is too. */
static void check_chi2(float temp, int k, float p)
{
    enum { V = 16, M = 40000 };
    static const double crit[16] = {0,     10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32,
                                    26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70};
    const float lg[V] = {2.0f,  1.5f,  1.5f,  1.0f,  0.8f,  0.5f,  0.2f,  0.0f,
                         -0.3f, -0.5f, -0.8f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f};
    double prob[V];
    filtered(lg, V, temp, k, p, prob);
    pl_sample_params s = params(PL_SAMPLE_RANDOM, temp, k, p);
    double scratch[V];
    long count[V] = {0};
    for (int i = 0; i < M; i++)
        count[pl_sample_row(&s, lg, V, pl_sample_uniform(99, 3, i, 0), scratch)]++;
    double chi = 0;
    int kept = 0;
    for (int v = 0; v < V; v++) {
        if (prob[v] == 0) {
            CHECK_EQ_INT(count[v], 0); /* filtered out: never drawn */
            continue;
        }
        kept++;
        double e = prob[v] * M;
        chi += (count[v] - e) * (count[v] - e) / e;
    }
    printf("chi-square temperature %g, top_k %d, top_p %g: %d tokens kept, chi2 %.2f (df %d, "
           "critical %.2f at p 0.001)\n",
           (double)temp, k, (double)p, kept, chi, kept - 1, crit[kept - 1]);
    CHECK(kept >= 2 && chi < crit[kept - 1]);
}

int main(void)
{
    pl_gpt2_weights w;
    make_weights(&w);
    check_decode(&w, PL_F32, 1e-6);
    check_decode(&w, PL_F16, 2e-2);
    check_decode(&w, PL_BF16, 5e-2);
    check_padding(&w);
    check_refusals(&w);
    pl_gpt2_weights_free(&w);
    check_philox();
    check_greedy();
    check_step();
    check_seeds();
    check_chi2(1.0f, 0, 1.0f);
    check_chi2(0.7f, 0, 1.0f);
    check_chi2(1.0f, 5, 1.0f);
    check_chi2(1.0f, 0, 0.8f);
    check_chi2(1.3f, 8, 0.9f);
    check_chi2(1.0f, 2, 1.0f); /* top_k at a tie (1.5, 1.5): both kept */
    PL_TEST_DONE();
}
