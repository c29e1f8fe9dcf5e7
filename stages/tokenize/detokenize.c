/* detokenize: GPT-2 BPE ids -> text rows, the inverse of tokenize. Reads ids i32 [B, T] (and,
 * optionally, lengths i32 [B]: how many of a row's ids are tokens, on the side `padding` says),
 * writes a host u8 buffer [B, L] of NUL-padded UTF-8 rows. Bytes that do not form a whole
 * character (ids cut inside one) become U+FFFD, as the Hugging Face decoders give them. */
#include <stdlib.h>
#include <string.h>

#include "pl_intr.h"
#include "pl_tok_kind.h"

static const pl_key pl__detokenize_keys[] = {
    {"ids", PL_KEY_NAME, NULL, NULL, "host i32 buffer [B, T]: token ids (required)"},
    {"lengths", PL_KEY_NAME, NULL, NULL,
     "host i32 buffer [B]: how many of each row's ids to decode (none: all T)"},
    {"text", PL_KEY_NAME, NULL, NULL,
     "host u8 buffer [B, L]: each row's text, NUL-padded (required)"},
    {"vocab", PL_KEY_PATH, NULL, NULL,
     "the tokenizer: a Hugging Face GPT-2 folder with tokenizer.json, or vocab.json and "
     "merges.txt; or a tokenizer.json file, which bundles can copy (required)"},
    {"padding", PL_KEY_ENUM, "right|left", "right",
     "with lengths: the tokens are a row's first ids (right) or its last (left)"},
    {"skip_special", PL_KEY_BOOL, NULL, "false",
     "leave out <|endoftext|> (added tokens), e.g. the padding of rows without lengths"},
    PL_KIND_PARALLEL_KEY,
    {NULL, 0, NULL, NULL, NULL},
};

typedef struct pl__detok_opts {
    int ids, lengths, text; /* reads (lengths -1: none); writes */
    int padding;
    bool skip_special;
} pl__detok_opts;

static pl_status pl__detok_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    PL_CHECK(pl_kind_bind_parallel(st, err));
    pl__detok_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    PL_CHECK(pl_kind_bind_ref(spec, st, "ids", false, true, "the i32 ids [B, T]", &o->ids, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "lengths", false, false, "", &o->lengths, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "text", true, true, "a u8 buffer [B, L] for the text",
                              &o->text, err));
    if (!pl_stage_opt(st, "vocab"))
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "detokenize stage '%s' needs 'vocab:' (a GPT-2 tokenizer folder: "
                           "tokenizer.json, or vocab.json and merges.txt)",
                           st->name);
    PL_CHECK(pl_opt_get_enum(st, "padding", 0, &o->padding, err));
    PL_CHECK(pl_opt_get_bool(st, "skip_special", false, &o->skip_special, err));
    st->priv = o;
    return PL_OK;
}

static pl_status pl__detok_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    const pl__detok_opts *o = st->priv;
    const pl_buffer *ids = pl_kind_rbuf(spec, st, o->ids), *t = pl_kind_wbuf(spec, st, o->text);
    PL_CHECK(pl_tok_want(st, ids, st->reads[o->ids].pos, PL_I32, 2, "ids", "i32 [B, T]", err));
    PL_CHECK(pl_tok_want(st, t, st->writes[o->text].pos, PL_U8, 2, "text", "u8 [B, L]", err));
    char s1[96], s2[96];
    if (ids->shape[0] != t->shape[0])
        return pl_error_at(err, PL_EINPUT, st->writes[o->text].pos,
                           "detokenize stage '%s': text '%s' %s needs a row per row of ids '%s' "
                           "%s",
                           st->name, t->name, pl_kind_shape(t, s1, sizeof s1), ids->name,
                           pl_kind_shape(ids, s2, sizeof s2));
    if (o->lengths >= 0) {
        const pl_buffer *l = pl_kind_rbuf(spec, st, o->lengths);
        PL_CHECK(
            pl_tok_want(st, l, st->reads[o->lengths].pos, PL_I32, 1, "lengths", "i32 [B]", err));
        if (l->shape[0] != ids->shape[0])
            return pl_error_at(err, PL_EINPUT, st->reads[o->lengths].pos,
                               "detokenize stage '%s': lengths '%s' %s needs one entry per row "
                               "of ids (%lld)",
                               st->name, l->name, pl_kind_shape(l, s1, sizeof s1),
                               (long long)ids->shape[0]);
    }
    return PL_OK;
}

static pl_status pl__detok_open(const pl_run_env *env, const pl_stage *st, void **state,
                                pl_error *err)
{
    pl_tok_state *s = NULL;
    pl_status ps = pl_tok_open(env, st, 1, &s, err);
    *state = s;
    return ps;
}

static pl_status pl__detok_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_spec *spec = ctx->spec;
    const pl_stage *st = ctx->stage;
    const pl__detok_opts *o = st->priv;
    const pl_tok_state *s = ctx->state;
    const pl_buffer *ib = pl_kind_rbuf(spec, st, o->ids), *tb = pl_kind_wbuf(spec, st, o->text);
    int64_t B = ib->shape[0], T = ib->shape[1], L = tb->shape[1];
    const int32_t *ids = ctx->bufs[ib->index];
    const int32_t *lengths =
        o->lengths >= 0 ? ctx->bufs[pl_kind_rbuf(spec, st, o->lengths)->index] : NULL;
    char *text = ctx->bufs[tb->index];
    pl_bpe_text raw = {0}, row = {0};
    pl_status ps = PL_OK;
    for (int64_t b = 0; ps == PL_OK && b < B; b++) {
        if (pl_intr_pending()) { /* between rows, as tokenize */
            ps = pl_intr_error(err, "detokenizing");
            break;
        }
        int64_t n = lengths ? lengths[b] : T;
        if (n < 0 || n > T) {
            ps = pl_error_set(err, PL_EINPUT,
                              "error: row %lld: lengths says %lld ids, outside 0..%lld (the ids' "
                              "T)",
                              (long long)b, (long long)n, (long long)T);
            break;
        }
        const int32_t *r = ids + b * T + (o->padding == 1 ? T - n : 0);
        raw.n = row.n = 0;
        ps = pl_bpe_decode(s->bpe, r, n, o->skip_special, &raw, err);
        if (ps != PL_OK) {
            pl_bpe_error_row(err, b);
            break;
        }
        ps = pl_bpe_utf8_replace(raw.v, (size_t)raw.n, &row, err);
        if (ps == PL_OK && row.n > L)
            ps = pl_error_set(err, PL_EINPUT,
                              "error: row %lld decodes to %lld bytes, more than the %lld of text "
                              "'%s' (give it a longer row)",
                              (long long)b, (long long)row.n, (long long)L, tb->name);
        if (ps != PL_OK) break;
        char *dst = text + b * L;
        memcpy(dst, row.v, (size_t)row.n);
        memset(dst + row.n, 0, (size_t)(L - row.n));
    }
    pl_bpe_text_free(&raw);
    pl_bpe_text_free(&row);
    return ps;
}

static void pl__detok_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap)
{
    const pl__detok_opts *o = st->priv;
    const pl_buffer *ids = pl_kind_rbuf(spec, st, o->ids), *t = pl_kind_wbuf(spec, st, o->text);
    char s[96];
    snprintf(buf, cap, "%s -> %s %s (GPT-2 BPE%s)", ids->name, t->name,
             pl_kind_shape(t, s, sizeof s), o->skip_special ? ", specials skipped" : "");
}

const pl_kind pl_kind_detokenize = {
    .name = "detokenize",
    .engine = PL_ENGINE_HOST,
    .keys = pl__detokenize_keys,
    .doc = "GPT-2 BPE ids [B, T] (and lengths) to text rows (u8 [B, L], NUL-padded)",
    .bind = pl__detok_bind,
    .validate = pl__detok_validate,
    .check_files = pl_tok_check_files,
    .open = pl__detok_open,
    .close = pl_tok_close,
    .run_host = pl__detok_run,
    .describe = pl__detok_describe,
};
