/* gpt2_ref: the GPT-2 forward in plain f32 C, the host executor's implementation of the gpt2
 * kind and the reference the GPU forward is tested against. Straightforward loops in the order
 * of Hugging Face's GPT2LMHeadModel: embeddings, per layer ln_1 -> c_attn -> causal attention ->
 * c_proj -> residual, ln_2 -> c_fc -> GELU (tanh) -> c_proj -> residual; ln_f; logits = x wte^T.
 * Prefill and decode run the same arithmetic with a KV cache: decode's keys and values come from
 * the cache, so with an f32 cache its logits are the forward's bits at the last position. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "pl_half.h"
#include "pl_intr.h"

static void pl__layernorm(float *out, const float *x, const float *w, const float *b, int C,
                          float eps)
{
    double mean = 0, var = 0;
    for (int i = 0; i < C; i++)
        mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= C;
    float rstd = (float)(1.0 / sqrt(var + eps));
    for (int i = 0; i < C; i++)
        out[i] = ((float)(x[i] - mean)) * rstd * w[i] + b[i];
}

/* out[n, o] = bias[o] + sum_i x[n, i] W[i, o] (W is [in, out], Conv1D's layout). */
static void pl__linear(float *out, const float *x, const float *W, const float *bias, int N, int in,
                       int o_n)
{
    /* An interrupt (pl_intr) ends it at the next row, the rest left as it was: the callers check
     * after each layer. A row is at most 4C x C multiply-adds (2.4 M for GPT-2 124M, about a
     * millisecond). */
    for (int n = 0; n < N && !pl_intr_pending(); n++) {
        float *y = out + (size_t)n * o_n;
        for (int o = 0; o < o_n; o++)
            y[o] = bias ? bias[o] : 0;
        const float *xr = x + (size_t)n * in;
        for (int i = 0; i < in; i++) {
            float a = xr[i];
            const float *wr = W + (size_t)i * o_n;
            for (int o = 0; o < o_n; o++)
                y[o] += a * wr[o];
        }
    }
}

static float pl__gelu(float x)
{
    const float s = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));
}

/* One query's attention over n keys and values (rows `ks` and `vs` floats apart), hd wide, into
 * o: the scores, their softmax and the weighted sum in one fixed order, so the forward (keys from
 * the sequence's QKV rows) and decode (keys from the cache) give the same bits. att: n floats. */
static void pl__attend(float *o, const float *q, const float *k, size_t ks, const float *v,
                       size_t vs, int n, int hd, float *att)
{
    float scale = 1.0f / sqrtf((float)hd);
    float mx = -FLT_MAX;
    for (int s = 0; s < n; s++) {
        const float *kr = k + (size_t)s * ks;
        float d = 0;
        for (int i = 0; i < hd; i++)
            d += q[i] * kr[i];
        att[s] = d * scale;
        if (att[s] > mx) mx = att[s];
    }
    float sum = 0;
    for (int s = 0; s < n; s++) {
        att[s] = expf(att[s] - mx);
        sum += att[s];
    }
    for (int i = 0; i < hd; i++)
        o[i] = 0;
    for (int s = 0; s < n; s++) {
        const float *vr = v + (size_t)s * vs;
        float p = att[s] / sum;
        for (int i = 0; i < hd; i++)
            o[i] += p * vr[i];
    }
}

/* Causal self-attention of one sequence: qkv [T, 3C] -> out [T, C]; att: T floats of scratch. */
static void pl__attention(float *out, const float *qkv, float *att, int T, int C, int H)
{
    int hd = C / H;
    for (int h = 0; h < H && !pl_intr_pending(); h++)
        for (int t = 0; t < T; t++)
            pl__attend(out + (size_t)t * C + h * hd, qkv + (size_t)t * 3 * C + h * hd,
                       qkv + C + h * hd, 3 * (size_t)C, qkv + 2 * C + h * hd, 3 * (size_t)C, t + 1,
                       hd, att);
}

/* ---- the KV cache ---- */

/* Element (layer l, keys or values kv, sequence b, head h, position t, dim 0) of the cache. */
static size_t pl__kv_at(const pl_gpt2_cfg *c, const pl_gpt2_kv *kv, int l, int which, int b, int h,
                        int t)
{
    size_t hd = (size_t)(c->n_embd / c->n_head);
    return ((((size_t)l * 2 + (size_t)which) * (size_t)kv->B + (size_t)b) * (size_t)c->n_head +
            (size_t)h) *
               (size_t)kv->P * hd +
           (size_t)t * hd;
}

static void pl__kv_put(const pl_gpt2_kv *kv, size_t at, const float *src, int n)
{
    for (int i = 0; i < n; i++) {
        if (kv->dtype == PL_F32)
            ((float *)kv->mem)[at + (size_t)i] = src[i];
        else if (kv->dtype == PL_F16)
            ((uint16_t *)kv->mem)[at + (size_t)i] = pl_f32_to_f16(src[i]);
        else
            ((uint16_t *)kv->mem)[at + (size_t)i] = pl_f32_to_bf16(src[i]);
    }
}

static void pl__kv_get(const pl_gpt2_kv *kv, size_t at, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (kv->dtype == PL_F32)
            dst[i] = ((const float *)kv->mem)[at + i];
        else if (kv->dtype == PL_F16)
            dst[i] = pl_f16_to_f32(((const uint16_t *)kv->mem)[at + i]);
        else
            dst[i] = pl_bf16_to_f32(((const uint16_t *)kv->mem)[at + i]);
    }
}

/* Positions [t0, t0 + n) of sequence b, layer l: their keys and values from qkv rows [n, 3C]. */
static void pl__kv_store(const pl_gpt2_cfg *c, const pl_gpt2_kv *kv, int l, int b, int t0, int n,
                         const float *qkv)
{
    int C = c->n_embd, hd = C / c->n_head;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < c->n_head; h++)
            for (int which = 0; which < 2; which++)
                pl__kv_put(kv, pl__kv_at(c, kv, l, which, b, h, t0 + t),
                           qkv + (size_t)t * 3 * C + (size_t)(1 + which) * C + h * hd, hd);
}

/* ---- the model ---- */

/* Activations of one sequence of up to T positions. */
typedef struct pl__act {
    float *x, *h, *qkv, *a, *u, *att, *logit;
    float *kf, *vf; /* decode: one head's keys and values as f32, [P, hd] each */
} pl__act;

static void pl__act_free(pl__act *s)
{
    free(s->x);
    free(s->h);
    free(s->qkv);
    free(s->a);
    free(s->u);
    free(s->att);
    free(s->logit);
    free(s->kf);
    free(s->vf);
}

/* Scratch for T positions (att: P scores); P > 0 also gets decode's per-head key/value rows. */
static pl_status pl__act_alloc(const pl_gpt2_cfg *c, int T, int P, pl__act *s, pl_error *err)
{
    size_t x_n = (size_t)T * (size_t)c->n_embd, hd = (size_t)(c->n_embd / c->n_head);
    int na = T > P ? T : P;
    memset(s, 0, sizeof *s);
    s->x = malloc(x_n * sizeof *s->x);
    s->h = malloc(x_n * sizeof *s->h);
    s->qkv = malloc(3 * x_n * sizeof *s->qkv);
    s->a = malloc(x_n * sizeof *s->a);
    s->u = malloc(4 * x_n * sizeof *s->u);
    s->att = malloc((size_t)na * sizeof *s->att);
    s->logit = malloc((size_t)c->vocab * sizeof *s->logit);
    if (P > 0) {
        s->kf = malloc((size_t)P * hd * sizeof *s->kf);
        s->vf = malloc((size_t)P * hd * sizeof *s->vf);
    }
    if (!s->x || !s->h || !s->qkv || !s->a || !s->u || !s->att || !s->logit ||
        (P > 0 && (!s->kf || !s->vf))) {
        pl__act_free(s);
        return pl_error_set(err, PL_ENOMEM, "error: gpt2: out of host memory for activations");
    }
    return PL_OK;
}

/* x [T, C] = the embeddings of ids at positions t0, t0 + 1, ... */
static void pl__embed(const pl_gpt2_weights *w, const int32_t *ids, int T, int t0, float *x)
{
    int C = w->cfg.n_embd;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++)
            x[(size_t)t * C + i] =
                w->wte[(size_t)ids[t] * C + i] + w->wpe[(size_t)(t0 + t) * C + i];
}

/* The MLP half of layer L on T rows: x += c_proj(GELU(c_fc(ln_2(x)))). */
static void pl__mlp(const pl_gpt2_cfg *c, const pl_gpt2_layer *L, pl__act *s, int T)
{
    int C = c->n_embd;
    size_t x_n = (size_t)T * C;
    for (int t = 0; t < T; t++)
        pl__layernorm(s->h + (size_t)t * C, s->x + (size_t)t * C, L->ln2_w, L->ln2_b, C, c->eps);
    pl__linear(s->u, s->h, L->fc_w, L->fc_b, T, C, 4 * C);
    for (size_t i = 0; i < 4 * x_n; i++)
        s->u[i] = pl__gelu(s->u[i]);
    pl__linear(s->h, s->u, L->out_w, L->out_b, T, 4 * C, C);
    for (size_t i = 0; i < x_n; i++)
        s->x[i] += s->h[i];
}

/* The layers over one sequence of T positions from 0 (s->x holds its embeddings and gets the
 * residual stream after the last layer). kv: each layer's keys and values also go into the cache
 * as sequence b. */
static void pl__layers(const pl_gpt2_weights *w, pl__act *s, int T, const pl_gpt2_kv *kv, int b)
{
    const pl_gpt2_cfg *c = &w->cfg;
    int C = c->n_embd;
    size_t x_n = (size_t)T * C;
    for (int l = 0; l < c->n_layer && !pl_intr_pending(); l++) {
        const pl_gpt2_layer *L = &w->layers[l];
        for (int t = 0; t < T; t++)
            pl__layernorm(s->h + (size_t)t * C, s->x + (size_t)t * C, L->ln1_w, L->ln1_b, C,
                          c->eps);
        pl__linear(s->qkv, s->h, L->qkv_w, L->qkv_b, T, C, 3 * C);
        if (kv) pl__kv_store(c, kv, l, b, 0, T, s->qkv);
        pl__attention(s->a, s->qkv, s->att, T, C, c->n_head);
        pl__linear(s->h, s->a, L->proj_w, L->proj_b, T, C, C);
        for (size_t i = 0; i < x_n; i++)
            s->x[i] += s->h[i];
        pl__mlp(c, L, s, T);
    }
}

/* logit [V] = ln_f(xr) wte^T for one row of the residual stream; hn: C floats of scratch. */
static void pl__head(const pl_gpt2_weights *w, const float *xr, float *hn, float *logit)
{
    int C = w->cfg.n_embd;
    pl__layernorm(hn, xr, w->lnf_w, w->lnf_b, C, w->cfg.eps);
    for (int v = 0; v < w->cfg.vocab; v++) {
        const float *e = w->wte + (size_t)v * C;
        float d = 0;
        for (int i = 0; i < C; i++)
            d += hn[i] * e[i];
        logit[v] = d;
    }
}

/* Output row `row` from one position's logits: the logits, their argmax (first on ties) or the
 * log-probability of target tg. */
static void pl__emit(pl_gpt2_output output, const float *logit, int V, size_t row, int32_t tg,
                     float *out_f32, int32_t *out_i32)
{
    if (output == PL_GPT2_LOGITS) {
        memcpy(out_f32 + row * V, logit, (size_t)V * sizeof *logit);
    } else if (output == PL_GPT2_ARGMAX) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (logit[v] > logit[best]) best = v;
        out_i32[row] = best;
    } else {
        float mx = -FLT_MAX;
        for (int v = 0; v < V; v++)
            if (logit[v] > mx) mx = logit[v];
        double s = 0;
        for (int v = 0; v < V; v++)
            s += exp((double)(logit[v] - mx));
        out_f32[row] = (float)((double)(logit[tg] - mx) - log(s));
    }
}

/* Ids (and targets) of sequences b0.. (B of them, rows T apart) at positions [0, n). */
static pl_status pl__check_ids(const int32_t *ids, const int32_t *targets, int b0, int B, int T,
                               int n, int V, pl_error *err)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < n; t++) {
            int32_t id = ids[(size_t)b * T + t];
            int32_t tg = targets ? targets[(size_t)b * T + t] : 0;
            if (id < 0 || id >= V || tg < 0 || tg >= V)
                return pl_error_set(err, PL_EINPUT,
                                    "error: gpt2: sequence %d, position %d: %s %d is outside the "
                                    "vocabulary [0, %d)",
                                    b0 + b, t, id < 0 || id >= V ? "token id" : "target id",
                                    id < 0 || id >= V ? id : tg, V);
        }
    return PL_OK;
}

pl_status pl_gpt2_ref_forward(const pl_gpt2_weights *w, const int32_t *ids, const int32_t *targets,
                              int B, int T, pl_gpt2_output output, int all, float *out_f32,
                              int32_t *out_i32, pl_error *err)
{
    const pl_gpt2_cfg *c = &w->cfg;
    int C = c->n_embd, V = c->vocab;
    if (T > c->n_ctx || T < 1)
        return pl_error_set(err, PL_EINPUT,
                            "error: gpt2: %d positions per sequence, but the model has n_ctx %d", T,
                            c->n_ctx);
    PL_CHECK(pl__check_ids(ids, targets, 0, B, T, T, V, err));
    pl__act s;
    PL_CHECK(pl__act_alloc(c, T, 0, &s, err));
    for (int b = 0; b < B; b++) {
        pl__embed(w, ids + (size_t)b * T, T, 0, s.x);
        pl__layers(w, &s, T, NULL, b);
        int t0 = all ? 0 : T - 1, P = all ? T : 1;
        for (int t = t0; t < T; t++) {
            if (pl_intr_pending()) { /* the layers' last rows, or a position's V x C logits */
                pl__act_free(&s);
                return pl_intr_error(err, "in the GPT-2 reference forward");
            }
            pl__head(w, s.x + (size_t)t * C, s.h + (size_t)t * C, s.logit); /* h is free now */
            pl__emit(output, s.logit, V, (size_t)b * P + (size_t)(t - t0),
                     targets ? targets[(size_t)b * T + t] : 0, out_f32, out_i32);
        }
    }
    pl__act_free(&s);
    return PL_OK;
}

pl_status pl_gpt2_ref_prefill(const pl_gpt2_weights *w, const int32_t *ids, const int32_t *lengths,
                              int B, int T, const pl_gpt2_kv *kv, pl_gpt2_output output,
                              float *out_f32, int32_t *out_i32, pl_error *err)
{
    const pl_gpt2_cfg *c = &w->cfg;
    int V = c->vocab;
    if (T < 1 || T > kv->P || kv->P > c->n_ctx || kv->B != B)
        return pl_error_set(err, PL_EINPUT,
                            "error: gpt2: prefill of %d x %d positions into a cache of %d x %d "
                            "(the model's n_ctx %d)",
                            B, T, kv->B, kv->P, c->n_ctx);
    for (int b = 0; b < B; b++) {
        int n = lengths ? lengths[b] : T;
        if (n < 1 || n > T)
            return pl_error_set(err, PL_EINPUT,
                                "error: gpt2: sequence %d: length %d is outside [1, %d] (the "
                                "prompts' positions)",
                                b, n, T);
        PL_CHECK(pl__check_ids(ids + (size_t)b * T, NULL, b, 1, T, n, V, err));
    }
    pl__act s;
    PL_CHECK(pl__act_alloc(c, T, 0, &s, err));
    for (int b = 0; b < B; b++) {
        int n = lengths ? lengths[b] : T;
        pl__embed(w, ids + (size_t)b * T, n, 0, s.x);
        pl__layers(w, &s, n, kv, b);
        if (pl_intr_pending()) {
            pl__act_free(&s);
            return pl_intr_error(err, "in the GPT-2 reference prefill");
        }
        pl__head(w, s.x + (size_t)(n - 1) * c->n_embd, s.h, s.logit);
        pl__emit(output, s.logit, V, (size_t)b, 0, out_f32, out_i32);
    }
    pl__act_free(&s);
    return PL_OK;
}

pl_status pl_gpt2_ref_decode(const pl_gpt2_weights *w, const int32_t *ids, const int32_t *lengths,
                             int32_t step, int B, const pl_gpt2_kv *kv, pl_gpt2_output output,
                             float *out_f32, int32_t *out_i32, pl_error *err)
{
    const pl_gpt2_cfg *c = &w->cfg;
    int C = c->n_embd, V = c->vocab, H = c->n_head, hd = C / H;
    if (kv->B != B || kv->P > c->n_ctx)
        return pl_error_set(err, PL_EINPUT,
                            "error: gpt2: decode of %d sequences with a cache of %d x %d (the "
                            "model's n_ctx %d)",
                            B, kv->B, kv->P, c->n_ctx);
    for (int b = 0; b < B; b++) {
        int64_t pos = (int64_t)lengths[b] + step;
        if (lengths[b] < 1 || step < 0 || pos >= kv->P)
            return pl_error_set(err, PL_EINPUT,
                                "error: gpt2: decode step %d, sequence %d: prompt length %d puts "
                                "the new token at position %lld, outside the cache's [0, %d); "
                                "keep lengths + new tokens - 1 within the cache's positions",
                                step, b, lengths[b], (long long)pos, kv->P);
        PL_CHECK(pl__check_ids(ids + b, NULL, b, 1, 1, 1, V, err));
    }
    pl__act s;
    PL_CHECK(pl__act_alloc(c, 1, kv->P, &s, err));
    for (int b = 0; b < B; b++) {
        if (pl_intr_pending()) { /* a sequence's step is about a forward position's work */
            pl__act_free(&s);
            return pl_intr_error(err, "in the GPT-2 reference decode");
        }
        int pos = lengths[b] + step;
        pl__embed(w, ids + b, 1, pos, s.x);
        for (int l = 0; l < c->n_layer; l++) {
            const pl_gpt2_layer *L = &w->layers[l];
            pl__layernorm(s.h, s.x, L->ln1_w, L->ln1_b, C, c->eps);
            pl__linear(s.qkv, s.h, L->qkv_w, L->qkv_b, 1, C, 3 * C);
            pl__kv_store(c, kv, l, b, pos, 1, s.qkv);
            /* Each head's keys and values as they are stored (rounded to the cache's dtype). */
            for (int h = 0; h < H; h++) {
                pl__kv_get(kv, pl__kv_at(c, kv, l, 0, b, h, 0), s.kf, (size_t)(pos + 1) * hd);
                pl__kv_get(kv, pl__kv_at(c, kv, l, 1, b, h, 0), s.vf, (size_t)(pos + 1) * hd);
                pl__attend(s.a + h * hd, s.qkv + h * hd, s.kf, (size_t)hd, s.vf, (size_t)hd,
                           pos + 1, hd, s.att);
            }
            pl__linear(s.h, s.a, L->proj_w, L->proj_b, 1, C, C);
            for (int i = 0; i < C; i++)
                s.x[i] += s.h[i];
            pl__mlp(c, L, &s, 1);
        }
        pl__head(w, s.x, s.h, s.logit);
        pl__emit(output, s.logit, V, (size_t)b, 0, out_f32, out_i32);
    }
    pl__act_free(&s);
    return PL_OK;
}
