/* tokenize: text rows -> GPT-2 BPE ids. Reads a host u8 buffer [B, L] whose row b is text up to
 * its first NUL byte (or all L bytes), writes ids i32 [B, T] (T from the buffer's shape), padded
 * and truncated as the keys say, and the ids' count per row. Rows are encoded on the run's
 * thread pool (pl_bpe_encode_batch); the ids do not depend on the thread count. */
#include <stdlib.h>
#include <string.h>

#include "pl_tok_kind.h"

static const pl_key pl__tokenize_keys[] = {
    {"text", PL_KEY_NAME, NULL, NULL,
     "host u8 buffer [B, L]: one row of UTF-8 text per sequence, ended by its first NUL byte "
     "(required)"},
    {"ids", PL_KEY_NAME, NULL, NULL, "host i32 buffer [B, T]: the token ids, padded (required)"},
    {"lengths", PL_KEY_NAME, NULL, NULL,
     "host i32 buffer [B]: how many of each row's T ids are tokens (the rest is padding)"},
    {"vocab", PL_KEY_PATH, NULL, NULL,
     "the tokenizer: a Hugging Face GPT-2 folder with tokenizer.json, or vocab.json and "
     "merges.txt; or a tokenizer.json file, which bundles can copy (required)"},
    {"padding", PL_KEY_ENUM, "right|left", "right",
     "where the padding goes: after the tokens (right) or before them (left, for generation)"},
    {"pad_id", PL_KEY_INT, NULL, "the eos id",
     "the id that fills the rest of a row: <|endoftext|>'s (50256), or 0 when the vocabulary "
     "has none"},
    {"truncation", PL_KEY_ENUM, "right|left|error", "right",
     "a row with more than T ids (bos and eos counted): keep its first ids (right), its last "
     "(left), or fail naming the row (error)"},
    {"add_bos", PL_KEY_BOOL, NULL, "false", "start each row with <|endoftext|> (GPT-2's bos)"},
    {"add_eos", PL_KEY_BOOL, NULL, "false", "end each row with <|endoftext|> (GPT-2's eos)"},
    {"threads", PL_KEY_INT, NULL, "0 (the run's host workers, at most the cores)",
     "threads to encode a batch's rows with, from the run's thread pool"},
    PL_KIND_PARALLEL_KEY,
    {NULL, 0, NULL, NULL, NULL},
};

enum { PL__PAD_RIGHT, PL__PAD_LEFT };
enum { PL__TRUNC_RIGHT, PL__TRUNC_LEFT, PL__TRUNC_ERROR };

typedef struct pl__tokenize_opts {
    int text, ids, lengths; /* reads index; writes indices (lengths -1: none) */
    int padding, truncation;
    bool add_bos, add_eos, has_pad;
    int64_t pad_id, threads;
} pl__tokenize_opts;

static pl_status pl__tokenize_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    PL_CHECK(pl_kind_bind_parallel(st, err));
    pl__tokenize_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    PL_CHECK(
        pl_kind_bind_ref(spec, st, "text", false, true, "the u8 text rows [B, L]", &o->text, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "ids", true, true, "an i32 buffer [B, T] for the ids",
                              &o->ids, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "lengths", true, false, "", &o->lengths, err));
    if (!pl_stage_opt(st, "vocab"))
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "tokenize stage '%s' needs 'vocab:' (a GPT-2 tokenizer folder: "
                           "tokenizer.json, or vocab.json and merges.txt)",
                           st->name);
    PL_CHECK(pl_opt_get_enum(st, "padding", PL__PAD_RIGHT, &o->padding, err));
    PL_CHECK(pl_opt_get_enum(st, "truncation", PL__TRUNC_RIGHT, &o->truncation, err));
    PL_CHECK(pl_opt_get_bool(st, "add_bos", false, &o->add_bos, err));
    PL_CHECK(pl_opt_get_bool(st, "add_eos", false, &o->add_eos, err));
    o->has_pad = pl_stage_opt(st, "pad_id") != NULL;
    PL_CHECK(pl_opt_get_int(st, "pad_id", 0, INT32_MIN, INT32_MAX, &o->pad_id, err));
    PL_CHECK(pl_opt_get_int(st, "threads", 0, 0, 1024, &o->threads, err));
    st->priv = o;
    return PL_OK;
}

static pl_status pl__tokenize_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl__tokenize_opts *o = st->priv;
    const pl_buffer *t = pl_kind_rbuf(spec, st, o->text), *ids = pl_kind_wbuf(spec, st, o->ids);
    PL_CHECK(pl_tok_want(st, t, st->reads[o->text].pos, PL_U8, 2, "text", "u8 [B, L]", err));
    PL_CHECK(pl_tok_want(st, ids, st->writes[o->ids].pos, PL_I32, 2, "ids", "i32 [B, T]", err));
    char s1[96], s2[96];
    if (ids->shape[0] != t->shape[0])
        return pl_error_at(err, PL_EINPUT, st->writes[o->ids].pos,
                           "tokenize stage '%s': ids '%s' %s needs a row per text row: text '%s' "
                           "is %s",
                           st->name, ids->name, pl_kind_shape(ids, s1, sizeof s1), t->name,
                           pl_kind_shape(t, s2, sizeof s2));
    int64_t specials = (int64_t)o->add_bos + (int64_t)o->add_eos;
    if (ids->shape[1] < specials)
        return pl_error_at(err, PL_EINPUT, st->writes[o->ids].pos,
                           "tokenize stage '%s': ids '%s' has room for %lld ids a row, fewer than "
                           "add_bos and add_eos take",
                           st->name, ids->name, (long long)ids->shape[1]);
    if (o->lengths >= 0) {
        const pl_buffer *l = pl_kind_wbuf(spec, st, o->lengths);
        PL_CHECK(
            pl_tok_want(st, l, st->writes[o->lengths].pos, PL_I32, 1, "lengths", "i32 [B]", err));
        if (l->shape[0] != t->shape[0])
            return pl_error_at(err, PL_EINPUT, st->writes[o->lengths].pos,
                               "tokenize stage '%s': lengths '%s' %s needs one entry per text row "
                               "(%lld)",
                               st->name, l->name, pl_kind_shape(l, s1, sizeof s1),
                               (long long)t->shape[0]);
    }
    return PL_OK;
}

static pl_status pl__tokenize_open(const pl_run_env *env, const pl_stage *st, void **state,
                                   pl_error *err)
{
    const pl__tokenize_opts *o = st->priv;
    pl_tok_state *s = NULL;
    pl_status ps = pl_tok_open(env, st, o->threads, &s, err);
    *state = s;
    PL_CHECK(ps);
    if ((o->add_bos || o->add_eos) && pl_bpe_eos(s->bpe) < 0)
        return pl_error_at(err, PL_EINPUT,
                           pl_stage_opt(st, o->add_bos ? "add_bos" : "add_eos")->val_pos,
                           "tokenize stage '%s': %s needs <|endoftext|>, which %s does not have",
                           st->name, o->add_bos ? "add_bos" : "add_eos", pl_bpe_source(s->bpe));
    return PL_OK;
}

static pl_status pl__tokenize_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_spec *spec = ctx->spec;
    const pl_stage *st = ctx->stage;
    const pl__tokenize_opts *o = st->priv;
    const pl_tok_state *s = ctx->state;
    const pl_buffer *tb = pl_kind_rbuf(spec, st, o->text), *ib = pl_kind_wbuf(spec, st, o->ids);
    int64_t B = tb->shape[0], L = tb->shape[1], T = ib->shape[1];
    const char *text = ctx->bufs[tb->index];
    int32_t *ids = ctx->bufs[ib->index];
    int32_t *lengths =
        o->lengths >= 0 ? ctx->bufs[pl_kind_wbuf(spec, st, o->lengths)->index] : NULL;
    int32_t eos = pl_bpe_eos(s->bpe);
    int32_t pad = o->has_pad ? (int32_t)o->pad_id : eos >= 0 ? eos : 0;
    const char **rows = malloc((size_t)B * sizeof *rows);
    size_t *lens = malloc((size_t)B * sizeof *lens);
    pl_bpe_ids *out = calloc((size_t)B, sizeof *out);
    pl_status ps = PL_OK;
    if (!rows || !lens || !out) ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int64_t b = 0; ps == PL_OK && b < B; b++) {
        rows[b] = text + b * L;
        const char *nul = memchr(rows[b], 0, (size_t)L);
        lens[b] = nul ? (size_t)(nul - rows[b]) : (size_t)L;
    }
    if (ps == PL_OK)
        ps = pl_bpe_encode_batch(s->bpe, ctx->env->pool, s->parallel, B, rows, lens, out, err);
    int64_t room = T - o->add_bos - o->add_eos;
    for (int64_t b = 0; ps == PL_OK && b < B; b++) {
        int64_t n = out[b].n, skip = 0;
        if (n > room) {
            if (o->truncation == PL__TRUNC_ERROR) {
                ps = pl_error_set(err, PL_EINPUT,
                                  "error: row %lld has %lld ids%s, more than the %lld of ids '%s' "
                                  "(truncation: error; truncation: right or left cuts it)",
                                  (long long)b, (long long)(n + T - room),
                                  T > room ? " with bos/eos" : "", (long long)T, ib->name);
                break;
            }
            if (o->truncation == PL__TRUNC_LEFT) skip = n - room;
            n = room;
        }
        int64_t k = n + o->add_bos + o->add_eos;
        int32_t *row = ids + b * T, *at = o->padding == PL__PAD_LEFT ? row + (T - k) : row;
        for (int64_t i = 0; i < T - k; i++)
            (o->padding == PL__PAD_LEFT ? row : row + k)[i] = pad;
        if (o->add_bos) *at++ = eos;
        memcpy(at, out[b].v + skip, (size_t)n * sizeof *at);
        at += n;
        if (o->add_eos) *at = eos;
        if (lengths) lengths[b] = (int32_t)k;
    }
    for (int64_t b = 0; out && b < B; b++)
        pl_bpe_ids_free(&out[b]);
    free(out);
    free(lens);
    free(rows);
    return ps;
}

static void pl__tokenize_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap)
{
    const pl__tokenize_opts *o = st->priv;
    const pl_buffer *t = pl_kind_rbuf(spec, st, o->text), *ids = pl_kind_wbuf(spec, st, o->ids);
    char s[96];
    snprintf(buf, cap, "%s -> %s %s (GPT-2 BPE, %s padding%s%s)", t->name, ids->name,
             pl_kind_shape(ids, s, sizeof s), o->padding == PL__PAD_LEFT ? "left" : "right",
             o->add_bos ? ", bos" : "", o->add_eos ? ", eos" : "");
}

const pl_kind pl_kind_tokenize = {
    .name = "tokenize",
    .engine = PL_ENGINE_HOST,
    .keys = pl__tokenize_keys,
    .doc = "text rows (u8 [B, L], NUL-ended) to GPT-2 BPE ids [B, T] and their lengths",
    .bind = pl__tokenize_bind,
    .validate = pl__tokenize_validate,
    .check_files = pl_tok_check_files,
    .open = pl__tokenize_open,
    .close = pl_tok_close,
    .run_host = pl__tokenize_run,
    .describe = pl__tokenize_describe,
};
