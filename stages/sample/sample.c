/* sample: the token generation's choice of the next token, as one stage kind: logits [B, V] in,
 * one column of the tokens buffer [B, N] out, with the next ids, the finished mask and the count
 * of sequences still going (a loop's condition). Greedy, or sampled with temperature, top-k and
 * top-p from a counter-based RNG (pl_philox.h). The host executor runs the C reference
 * (sample_ref.c, semantics in pl_sample.h); the GPU a block per sequence (sample_gpu.cu).
 *
 * Where the tokens come from: after prefill, a sample stage without `step:` writes column 0 (and
 * fills the columns after it with pad); in a decode loop, iteration i decodes column i's token
 * (the ids the stage before wrote to `next`) at position lengths + i and a sample stage with
 * `step:` (the loop's index i) writes column i + 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pl_half.h"
#include "pl_kind_util.h"
#include "pl_sample.h"
#ifdef PL_WITH_CUDA
#include "pl_gpu.h"
#include "sample_gpu.h"
#endif

static const pl_key pl__sample_keys[] = {
    {"logits", PL_KEY_NAME, NULL, NULL, "device f16|bf16|f32 buffer [B, V] (required)"},
    {"tokens", PL_KEY_NAME, NULL, NULL,
     "device i32 buffer [B, N] (required): column c holds each sequence's token c; after a "
     "sequence's end, pad"},
    {"finished", PL_KEY_NAME, NULL, NULL,
     "device i32 buffer [B] (required): 1 once a sequence has ended (eos, or its limit); the first "
     "stage starts it, a stage with step: reads and updates it"},
    {"step", PL_KEY_NAME, NULL, NULL,
     "device i32 buffer [1]: a decode loop's index i: the stage writes column i + 1 (without: "
     "column 0, the first token, after prefill)"},
    {"next", PL_KEY_NAME, NULL, NULL,
     "device i32 buffer [B]: the tokens just chosen (pad for ended sequences): the next decode's "
     "ids"},
    {"count", PL_KEY_NAME, NULL, NULL,
     "device i32 buffer [1]: the sequences not ended after this step (a loop's while: buffer)"},
    {"batch", PL_KEY_NAME, NULL, NULL,
     "device i32 or i64 buffer [1]: the batch index the RNG is keyed by (a source with "
     "generator: range and an h2d fill it); without it, 0 for every batch"},
    {"limits", PL_KEY_NAME, NULL, NULL,
     "device i32 buffer [B]: each sequence's most new tokens (clamped to [1, max_new_tokens])"},
    {"method", PL_KEY_ENUM, "greedy|sample", "greedy",
     "greedy: the most likely token; sample: drawn from the softmax of the logits"},
    {"temperature", PL_KEY_NUM, NULL, "1", "sample: the logits are divided by it (> 0)"},
    {"top_k", PL_KEY_INT, NULL, "0", "sample: only the k most likely tokens (0: all)"},
    {"top_p", PL_KEY_NUM, NULL, "1",
     "sample: only the most likely tokens whose probabilities add up to top_p (in (0, 1])"},
    {"seed", PL_KEY_INT, NULL, "run seed", "sample: the RNG's seed"},
    {"eos", PL_KEY_INT, NULL, "-1",
     "the end-of-sequence token: a sequence ends after it (-1: none)"},
    {"pad", PL_KEY_INT, NULL, "eos, or 0 without eos",
     "what the columns after a sequence's end hold, and its next ids"},
    {"max_new_tokens", PL_KEY_INT, NULL, "tokens' columns N",
     "a sequence ends once it has this many tokens (1 to N)"},
    {NULL, 0, NULL, NULL, NULL},
};

typedef struct pl__sample_opts {
    pl_sample_params p;
    bool has_seed, has_pad, has_max_new;
    int64_t max_new;
    pl_pos pad_pos, eos_pos, max_new_pos;
    int r_logits, r_step, r_batch, r_limits, r_finished; /* reads; -1 absent */
    int w_tokens, w_finished, w_next, w_count;           /* writes; -1 absent */
} pl__sample_opts;

static pl_status pl__sample_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    pl__sample_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    memset(o, 0, sizeof *o);
    int method;
    PL_CHECK(pl_opt_get_enum(st, "method", 0, &method, err));
    o->p.method = method == 0 ? PL_SAMPLE_GREEDY : PL_SAMPLE_RANDOM;
    static const char *const sampling[] = {"temperature", "top_k", "top_p", "seed"};
    for (int i = 0; i < 4 && o->p.method == PL_SAMPLE_GREEDY; i++) {
        const pl_opt *k = pl_stage_opt(st, sampling[i]);
        if (k)
            return pl_error_at(err, PL_EINPUT, k->pos,
                               "sample stage '%s': '%s:' is read by method: sample; greedy takes "
                               "the most likely token (add 'method: sample', or drop the key)",
                               st->name, sampling[i]);
    }
    double temp, top_p;
    int64_t top_k, eos, pad, seed;
    PL_CHECK(pl_opt_get_num(st, "temperature", 1.0, &temp, err));
    PL_CHECK(pl_opt_get_int(st, "top_k", 0, 0, INT32_MAX, &top_k, err));
    PL_CHECK(pl_opt_get_num(st, "top_p", 1.0, &top_p, err));
    PL_CHECK(pl_opt_get_int(st, "seed", 0, INT64_MIN, INT64_MAX, &seed, err));
    PL_CHECK(pl_opt_get_int(st, "eos", -1, -1, INT32_MAX, &eos, err));
    PL_CHECK(pl_opt_get_int(st, "pad", 0, 0, INT32_MAX, &pad, err));
    PL_CHECK(pl_opt_get_int(st, "max_new_tokens", 0, 1, INT32_MAX, &o->max_new, err));
    if (!(temp > 0) || !isfinite(temp) || !((float)temp > 0))
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "temperature")->val_pos,
                           "sample stage '%s': temperature %g must be greater than 0 (for the "
                           "most likely token, use method: greedy)",
                           st->name, temp);
    if (!(top_p > 0 && top_p <= 1))
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "top_p")->val_pos,
                           "sample stage '%s': top_p %g must be in (0, 1] (1: no limit)", st->name,
                           top_p);
    o->p.temperature = (float)temp;
    o->p.top_k = (int)top_k;
    o->p.top_p = (float)top_p;
    o->has_seed = pl_stage_opt(st, "seed") != NULL;
    o->p.seed = (uint64_t)seed;
    o->p.eos = (int)eos;
    o->has_pad = pl_stage_opt(st, "pad") != NULL;
    o->p.pad = o->has_pad ? (int)pad : eos >= 0 ? (int)eos : 0;
    o->has_max_new = pl_stage_opt(st, "max_new_tokens") != NULL;
    const pl_opt *k;
    if ((k = pl_stage_opt(st, "pad"))) o->pad_pos = k->val_pos;
    if ((k = pl_stage_opt(st, "eos"))) o->eos_pos = k->val_pos;
    if ((k = pl_stage_opt(st, "max_new_tokens"))) o->max_new_pos = k->val_pos;
    PL_CHECK(
        pl_kind_bind_ref(spec, st, "logits", false, true, "the logits, [B, V]", &o->r_logits, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "step", false, false, "", &o->r_step, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "batch", false, false, "", &o->r_batch, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "limits", false, false, "", &o->r_limits, err));
    o->r_finished = -1;
    if (o->r_step >= 0) /* later steps continue the mask the ones before wrote */
        PL_CHECK(pl_kind_bind_ref(spec, st, "finished", false, true, "", &o->r_finished, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "tokens", true, true,
                              "the generated tokens, i32 [B, max new tokens]", &o->w_tokens, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "finished", true, true,
                              "the sequences that have ended, i32 [B]", &o->w_finished, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "next", true, false, "", &o->w_next, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "count", true, false, "", &o->w_count, err));
    st->priv = o;
    return PL_OK;
}

/* A device i32 buffer of shape [n] (or, with i64_ok, i64), or an error naming the key. */
static pl_status pl__sample_vec(const pl_spec *spec, const pl_stage *st, const pl_ref *ref,
                                const char *key, int64_t n, bool i64_ok, const char *what,
                                pl_error *err)
{
    const pl_buffer *b = &spec->buffers[ref->index];
    if (b->where == PL_DEVICE && (b->dtype == PL_I32 || (i64_ok && b->dtype == PL_I64)) &&
        b->rank == 1 && b->shape[0] == n)
        return PL_OK;
    char s1[96];
    return pl_error_at(err, PL_EINPUT, ref->pos,
                       "sample stage '%s': %s '%s' must be a device i32%s buffer [%lld] (%s), not "
                       "%s %s %s",
                       st->name, key, b->name, i64_ok ? " or i64" : "", (long long)n, what,
                       pl_where_name(b->where), pl_dtype_name(b->dtype),
                       pl_kind_shape(b, s1, sizeof s1));
}

static pl_status pl__sample_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    pl__sample_opts *o = st->priv;
    char s1[96];
    const pl_buffer *lg = pl_kind_rbuf(spec, st, o->r_logits),
                    *tk = pl_kind_wbuf(spec, st, o->w_tokens);
    if (lg->where != PL_DEVICE || lg->rank != 2 ||
        (lg->dtype != PL_F32 && lg->dtype != PL_F16 && lg->dtype != PL_BF16) ||
        lg->shape[1] > INT32_MAX)
        return pl_error_at(err, PL_EINPUT, st->reads[o->r_logits].pos,
                           "sample stage '%s': logits '%s' must be a device f16, bf16 or f32 "
                           "buffer [B, V], not %s %s %s",
                           st->name, lg->name, pl_where_name(lg->where), pl_dtype_name(lg->dtype),
                           pl_kind_shape(lg, s1, sizeof s1));
    int64_t B = lg->shape[0], V = lg->shape[1];
    if (tk->where != PL_DEVICE || tk->dtype != PL_I32 || tk->rank != 2 || tk->shape[0] != B ||
        tk->shape[1] > INT32_MAX)
        return pl_error_at(err, PL_EINPUT, st->writes[o->w_tokens].pos,
                           "sample stage '%s': tokens '%s' must be a device i32 buffer [%lld, N] "
                           "(a column per new token of the %lld sequences of logits '%s'), not %s "
                           "%s %s",
                           st->name, tk->name, (long long)B, (long long)B, lg->name,
                           pl_where_name(tk->where), pl_dtype_name(tk->dtype),
                           pl_kind_shape(tk, s1, sizeof s1));
    int64_t N = tk->shape[1];
    o->p.max_new = o->has_max_new ? (int)o->max_new : (int)N;
    if (o->max_new > N)
        return pl_error_at(err, PL_EINPUT, o->max_new_pos,
                           "sample stage '%s': max_new_tokens %lld is more than tokens '%s' has "
                           "columns (%lld); make it at most %lld, or widen '%s'",
                           st->name, (long long)o->max_new, tk->name, (long long)N, (long long)N,
                           tk->name);
    if (o->p.eos >= V)
        return pl_error_at(err, PL_EINPUT, o->eos_pos,
                           "sample stage '%s': eos %d is outside the vocabulary [0, %lld) of "
                           "logits '%s' (-1: no end-of-sequence token)",
                           st->name, o->p.eos, (long long)V, lg->name);
    if (o->p.pad >= V)
        return pl_error_at(err, PL_EINPUT, o->has_pad ? o->pad_pos : o->eos_pos,
                           "sample stage '%s': pad %d is outside the vocabulary [0, %lld) of "
                           "logits '%s' (a decode step reads it as an id)",
                           st->name, o->p.pad, (long long)V, lg->name);
    if (o->r_step >= 0)
        PL_CHECK(pl__sample_vec(spec, st, &st->reads[o->r_step], "step", 1, false,
                                "a decode loop's index", err));
    if (o->r_batch >= 0)
        PL_CHECK(pl__sample_vec(spec, st, &st->reads[o->r_batch], "batch", 1, true,
                                "the batch index", err));
    if (o->r_limits >= 0)
        PL_CHECK(pl__sample_vec(spec, st, &st->reads[o->r_limits], "limits", B, false,
                                "each sequence's most new tokens", err));
    PL_CHECK(pl__sample_vec(spec, st, &st->writes[o->w_finished], "finished", B, false,
                            "1 once a sequence has ended", err));
    if (o->w_next >= 0)
        PL_CHECK(pl__sample_vec(spec, st, &st->writes[o->w_next], "next", B, false,
                                "the next decode's ids", err));
    if (o->w_count >= 0)
        PL_CHECK(pl__sample_vec(spec, st, &st->writes[o->w_count], "count", 1, false,
                                "the sequences still going", err));
    return PL_OK;
}

/* The seed: the stage's, or the run's. */
static pl_sample_params pl__params(const pl__sample_opts *o, uint64_t run_seed)
{
    pl_sample_params p = o->p;
    if (!o->has_seed) p.seed = run_seed;
    return p;
}

static pl_status pl__sample_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__sample_opts *o = st->priv;
    const pl_buffer *lg = pl_kind_rbuf(ctx->spec, st, o->r_logits),
                    *tk = pl_kind_wbuf(ctx->spec, st, o->w_tokens);
    int B = (int)lg->shape[0], V = (int)lg->shape[1], N = (int)tk->shape[1];
    const void *lp = ctx->bufs[lg->index];
    float *f = NULL;
    if (lg->dtype != PL_F32) {
        f = malloc((size_t)lg->count * sizeof *f);
        if (!f) return pl_error_set(err, PL_ENOMEM, "error: out of memory for logits");
        for (int64_t i = 0; i < lg->count; i++) {
            uint16_t h = ((const uint16_t *)lp)[i];
            f[i] = lg->dtype == PL_F16 ? pl_f16_to_f32(h) : pl_bf16_to_f32(h);
        }
    }
#define PL__BUF(refs, i) ((i) >= 0 ? ctx->bufs[st->refs[i].index] : NULL)
    int col = 0;
    if (o->r_step >= 0) {
        int32_t step = *(const int32_t *)PL__BUF(reads, o->r_step);
        col = step < 0 ? INT32_MAX : step >= INT32_MAX ? INT32_MAX : step + 1; /* < 0: no column */
    }
    int64_t batch = 0;
    if (o->r_batch >= 0) {
        const pl_buffer *bb = pl_kind_rbuf(ctx->spec, st, o->r_batch);
        const void *bp = PL__BUF(reads, o->r_batch);
        batch = bb->dtype == PL_I64 ? *(const int64_t *)bp : *(const int32_t *)bp;
    }
    pl_sample_params p = pl__params(o, ctx->env->seed);
    pl_status ps = pl_sample_step(&p, f ? f : lp, B, V, N, col, batch, PL__BUF(reads, o->r_limits),
                                  PL__BUF(writes, o->w_tokens), PL__BUF(writes, o->w_next),
                                  PL__BUF(writes, o->w_finished), PL__BUF(writes, o->w_count), err);
#undef PL__BUF
    free(f);
    return ps;
}

#ifdef PL_WITH_CUDA
static pl_status pl__sample_record(const pl_dev_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__sample_opts *o = st->priv;
    const pl_buffer *lg = pl_kind_rbuf(ctx->spec, st, o->r_logits),
                    *tk = pl_kind_wbuf(ctx->spec, st, o->w_tokens);
#define PL__DBUF(refs, i) ((i) >= 0 ? ctx->dev_bufs[st->refs[i].index] : NULL)
    const pl_buffer *bb = o->r_batch >= 0 ? pl_kind_rbuf(ctx->spec, st, o->r_batch) : NULL;
    pl_sample_params p = pl__params(o, ctx->env->seed);
    int rc = pl_sample_gpu_launch(
        &p, (int)lg->dtype, PL__DBUF(reads, o->r_logits), (int)lg->shape[0], (int)lg->shape[1],
        (int)tk->shape[1], PL__DBUF(reads, o->r_step), PL__DBUF(reads, o->r_batch),
        bb && bb->dtype == PL_I64, PL__DBUF(reads, o->r_limits), PL__DBUF(writes, o->w_tokens),
        PL__DBUF(writes, o->w_next), PL__DBUF(writes, o->w_finished), PL__DBUF(writes, o->w_count),
        ctx->stream);
#undef PL__DBUF
    return rc ? pl_cuda_check(rc, "sample kernel launch", st->name, ctx->batch, err) : PL_OK;
}
#define PL__SAMPLE_RECORD pl__sample_record
#else
#define PL__SAMPLE_RECORD NULL
#endif

static void pl__sample_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap)
{
    const pl__sample_opts *o = st->priv;
    const pl_buffer *tk = pl_kind_wbuf(spec, st, o->w_tokens);
    int n = o->r_step >= 0 ? snprintf(buf, cap, "sample column step + 1 of '%s'", tk->name)
                           : snprintf(buf, cap, "sample column 0 of '%s'", tk->name);
    if (n < 0 || (size_t)n >= cap) return;
    if (o->p.method == PL_SAMPLE_GREEDY)
        n += snprintf(buf + n, cap - (size_t)n, ", greedy");
    else
        n += snprintf(buf + n, cap - (size_t)n, ", temperature %g, top_k %d, top_p %g",
                      (double)o->p.temperature, o->p.top_k, (double)o->p.top_p);
    if (n >= 0 && (size_t)n < cap && o->p.eos >= 0)
        snprintf(buf + n, cap - (size_t)n, ", eos %d", o->p.eos);
}

/* Greedy gives the host's token on the GPU (the same first-index argmax of the same logits);
 * sampling compares sums the GPU forms in another order than the reference, so a draw within
 * rounding of a boundary may differ across executors (never run to run on one GPU). */
static pl_repro pl__sample_repro(const pl_spec *spec, const pl_stage *st, double *tol)
{
    (void)spec;
    const pl__sample_opts *o = st->priv;
    if (!o || o->p.method == PL_SAMPLE_GREEDY) return PL_REPRO_EXACT;
    *tol = 0;
    return PL_REPRO_SAME_GPU;
}

const pl_kind pl_kind_sample = {
    .name = "sample",
    .engine = PL_ENGINE_COMPUTE,
    .keys = pl__sample_keys,
    .doc = "the next token of each sequence from its logits (greedy, or sampled with temperature, "
           "top-k and top-p), written into a tokens buffer column by column, with the finished "
           "mask and the count a generation loop stops on",
    .bind = pl__sample_bind,
    .validate = pl__sample_validate,
    .run_host = pl__sample_run,
    .record = PL__SAMPLE_RECORD,
    .describe = pl__sample_describe,
    .repro = pl__sample_repro,
};
