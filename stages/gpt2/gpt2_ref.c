/* gpt2_ref: the GPT-2 forward in plain f32 C, the host executor's implementation of the gpt2
 * kind and the reference the GPU forward is tested against. Straightforward loops in the order
 * of Hugging Face's GPT2LMHeadModel: embeddings, per layer ln_1 -> c_attn -> causal attention ->
 * c_proj -> residual, ln_2 -> c_fc -> GELU (tanh) -> c_proj -> residual; ln_f; logits = x wte^T. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
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

/* out[n, o] = bias[o] + sum_i x[n, i] W[i, o] (W is [in, out], Conv1D's layout). An interrupt
 * (pl_intr) ends it at the next row, the rest left as it was: the caller checks after it. A row is
 * at most 4C x C multiply-adds (2.4 M for GPT-2 124M, about a millisecond). */
static void pl__linear(float *out, const float *x, const float *W, const float *bias, int N, int in,
                       int o_n)
{
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

/* Causal self-attention of one sequence: qkv [T, 3C] -> out [T, C]; att: T floats of scratch. */
static void pl__attention(float *out, const float *qkv, float *att, int T, int C, int H)
{
    int hd = C / H;
    float scale = 1.0f / sqrtf((float)hd);
    for (int h = 0; h < H && !pl_intr_pending(); h++)
        for (int t = 0; t < T; t++) {
            const float *q = qkv + (size_t)t * 3 * C + h * hd;
            float mx = -FLT_MAX;
            for (int s = 0; s <= t; s++) {
                const float *k = qkv + (size_t)s * 3 * C + C + h * hd;
                float d = 0;
                for (int i = 0; i < hd; i++)
                    d += q[i] * k[i];
                att[s] = d * scale;
                if (att[s] > mx) mx = att[s];
            }
            float sum = 0;
            for (int s = 0; s <= t; s++) {
                att[s] = expf(att[s] - mx);
                sum += att[s];
            }
            float *o = out + (size_t)t * C + h * hd;
            for (int i = 0; i < hd; i++)
                o[i] = 0;
            for (int s = 0; s <= t; s++) {
                const float *v = qkv + (size_t)s * 3 * C + 2 * C + h * hd;
                float p = att[s] / sum;
                for (int i = 0; i < hd; i++)
                    o[i] += p * v[i];
            }
        }
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
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t id = ids[(size_t)b * T + t];
            int32_t tg = targets ? targets[(size_t)b * T + t] : 0;
            if (id < 0 || id >= V || tg < 0 || tg >= V)
                return pl_error_set(err, PL_EINPUT,
                                    "error: gpt2: sequence %d, position %d: %s %d is outside the "
                                    "vocabulary [0, %d)",
                                    b, t, id < 0 || id >= V ? "token id" : "target id",
                                    id < 0 || id >= V ? id : tg, V);
        }
    size_t x_n = (size_t)T * C;
    float *x = malloc(x_n * sizeof *x), *h = malloc(x_n * sizeof *h),
          *qkv = malloc(3 * x_n * sizeof *qkv), *a = malloc(x_n * sizeof *a),
          *u = malloc(4 * x_n * sizeof *u), *att = malloc((size_t)T * sizeof *att),
          *logit = malloc((size_t)V * sizeof *logit);
    pl_status st = PL_OK;
    if (!x || !h || !qkv || !a || !u || !att || !logit) {
        st = pl_error_set(err, PL_ENOMEM, "error: gpt2: out of host memory for activations");
        goto done;
    }
    for (int b = 0; b < B; b++) {
        const int32_t *id = ids + (size_t)b * T;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++)
                x[(size_t)t * C + i] = w->wte[(size_t)id[t] * C + i] + w->wpe[(size_t)t * C + i];
        for (int l = 0; l < c->n_layer; l++) {
            const pl_gpt2_layer *L = &w->layers[l];
            for (int t = 0; t < T; t++)
                pl__layernorm(h + (size_t)t * C, x + (size_t)t * C, L->ln1_w, L->ln1_b, C, c->eps);
            pl__linear(qkv, h, L->qkv_w, L->qkv_b, T, C, 3 * C);
            pl__attention(a, qkv, att, T, C, c->n_head);
            pl__linear(h, a, L->proj_w, L->proj_b, T, C, C);
            if (pl_intr_pending()) goto stopped; /* what the three above left is unfinished */
            for (size_t i = 0; i < x_n; i++)
                x[i] += h[i];
            for (int t = 0; t < T; t++)
                pl__layernorm(h + (size_t)t * C, x + (size_t)t * C, L->ln2_w, L->ln2_b, C, c->eps);
            pl__linear(u, h, L->fc_w, L->fc_b, T, C, 4 * C);
            for (size_t i = 0; i < 4 * x_n; i++)
                u[i] = pl__gelu(u[i]);
            pl__linear(h, u, L->out_w, L->out_b, T, 4 * C, C);
            if (pl_intr_pending()) goto stopped;
            for (size_t i = 0; i < x_n; i++)
                x[i] += h[i];
        }
        int t0 = all ? 0 : T - 1, P = all ? T : 1;
        for (int t = t0; t < T; t++) {
            if (pl_intr_pending()) goto stopped; /* a position's logits: V x C multiply-adds */
            float *hn = h + (size_t)t * C;       /* h is free after the last layer */
            pl__layernorm(hn, x + (size_t)t * C, w->lnf_w, w->lnf_b, C, c->eps);
            for (int v = 0; v < V; v++) {
                const float *e = w->wte + (size_t)v * C;
                float d = 0;
                for (int i = 0; i < C; i++)
                    d += hn[i] * e[i];
                logit[v] = d;
            }
            size_t row = (size_t)b * P + (size_t)(t - t0);
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
                int32_t tg = targets[(size_t)b * T + t];
                out_f32[row] = (float)((double)(logit[tg] - mx) - log(s));
            }
        }
    }
    goto done;
stopped:
    st = pl_intr_error(err, "in the GPT-2 reference forward");
done:
    free(x);
    free(h);
    free(qkv);
    free(a);
    free(u);
    free(att);
    free(logit);
    return st;
}
