/* test_safetensors: the safetensors reader and the GPT-2 checkpoint checks on good and bad files,
 * with the exact messages a user sees; and the f32 host reference on a one-layer model whose
 * output is worked out by hand. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "gpt2.h"
#include "pl_half.h"
#include "pl_safetensors.h"
#include "pl_test.h"

static char dir[256];

/* Writes an 8-byte length, `header` and `data_bytes` bytes (0, 1, 2, ... mod 251). */
static const char *write_file(const char *name, const char *header, size_t data_bytes)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(header);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)(n >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, n, f);
    for (size_t i = 0; i < data_bytes; i++)
        fputc((int)(i % 251), f);
    fclose(f);
    return path;
}

static void expect_open_error(const char *name, const char *header, size_t data, pl_status want_st,
                              const char *want_fmt)
{
    const char *p = write_file(name, header, data);
    char want[1024];
    snprintf(want, sizeof want, want_fmt, p);
    pl_st_file *f = NULL;
    pl_error err = {0};
    CHECK_EQ_INT(pl_st_open(p, &f, &err), want_st);
    CHECK(f == NULL);
    CHECK_STR(err.msg, want);
}

static void test_reader(void)
{
    /* Good: three dtypes, metadata ignored. */
    const char *p =
        write_file("good.safetensors",
                   "{\"__metadata__\": {\"format\": \"pt\"}, "
                   "\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                   "\"b\": {\"dtype\": \"F16\", \"shape\": [1, 2], \"data_offsets\": [8, 12]}, "
                   "\"c\": {\"dtype\": \"BF16\", \"shape\": [2], \"data_offsets\": [12, 16]}}",
                   0);
    /* Rewrite the data with known values. */
    FILE *f = fopen(p, "ab");
    float a[2] = {1.5f, -2.25f};
    uint16_t b[2] = {pl_f32_to_f16(0.5f), pl_f32_to_f16(-3.0f)};
    uint16_t c[2] = {pl_f32_to_bf16(7.0f), pl_f32_to_bf16(-0.125f)};
    fwrite(a, 4, 2, f);
    fwrite(b, 2, 2, f);
    fwrite(c, 2, 2, f);
    fclose(f);
    pl_st_file *st = NULL;
    pl_error err = {0};
    CHECK_EQ_INT(pl_st_open(p, &st, &err), PL_OK);
    if (st) {
        CHECK_EQ_INT(pl_st_count(st), 3);
        const pl_st_tensor *tb = pl_st_find(st, "b");
        CHECK(tb && tb->dtype == PL_ST_F16 && tb->rank == 2 && tb->shape[1] == 2);
        float out[2];
        CHECK_EQ_INT(pl_st_read_f32(st, pl_st_find(st, "a"), out, 2, &err), PL_OK);
        CHECK(out[0] == 1.5f && out[1] == -2.25f);
        CHECK_EQ_INT(pl_st_read_f32(st, tb, out, 2, &err), PL_OK);
        CHECK(out[0] == 0.5f && out[1] == -3.0f);
        CHECK_EQ_INT(pl_st_read_f32(st, pl_st_find(st, "c"), out, 2, &err), PL_OK);
        CHECK(out[0] == 7.0f && out[1] == -0.125f);
        CHECK(pl_st_find(st, "__metadata__") == NULL);
        pl_st_close(st);
    }
    pl_error e2 = {0};
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none.safetensors", dir);
    CHECK_EQ_INT(pl_st_open(missing, &st, &e2), PL_EINPUT);
    char want[600];
    snprintf(want, sizeof want,
             "error: cannot open safetensors file '%s': No such file or directory", missing);
    CHECK_STR(e2.msg, want);

    expect_open_error("trunc.safetensors",
                      "{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}",
                      10, PL_EINPUT,
                      "error: safetensors file '%s' is truncated: tensor 'w' needs data bytes "
                      "[0, 16), but the file holds 10 after its header");
    expect_open_error("size.safetensors",
                      "{\"w\": {\"dtype\": \"F16\", \"shape\": [4], \"data_offsets\": [0, 16]}}",
                      16, PL_EINPUT,
                      "error: safetensors file '%s': tensor 'w': data_offsets [0, 16) hold 16 "
                      "bytes, but F16 of 4 elements needs 8");
    expect_open_error("dtype.safetensors",
                      "{\"w\": {\"dtype\": \"Q4\", \"shape\": [4], \"data_offsets\": [0, 2]}}", 2,
                      PL_EINPUT, "error: safetensors file '%s': tensor 'w': unknown dtype 'Q4'");
    expect_open_error("json.safetensors", "{\"w\": {\"dtype\": ", 0, PL_EINPUT,
                      "error: safetensors file '%s': header is not a JSON object: unexpected "
                      "token near end of file");
    expect_open_error("list.safetensors", "[1, 2]", 0, PL_EINPUT,
                      "error: safetensors file '%s': header is not a JSON object");
    expect_open_error("entry.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4,
                      PL_EINPUT,
                      "error: safetensors file '%s': tensor 'w': header entry needs \"dtype\" (a "
                      "string), \"shape\" (a list) and \"data_offsets\" (two integers)");
    /* A header length beyond the file. */
    snprintf(want, sizeof want, "%s/len.safetensors", dir);
    f = fopen(want, "wb");
    unsigned char len8[8] = {0xff, 0xff, 0, 0, 0, 0, 0, 0};
    fwrite(len8, 1, 8, f);
    fwrite("{}", 1, 2, f);
    fclose(f);
    pl_error e3 = {0};
    CHECK_EQ_INT(pl_st_open(want, &st, &e3), PL_EINPUT);
    char want2[800];
    snprintf(want2, sizeof want2,
             "error: safetensors file '%s': header length 65535 does not fit the file (10 bytes); "
             "is it a safetensors file?",
             want);
    CHECK_STR(e3.msg, want2);
}

/* A GPT-2 checkpoint header for cfg; `skip` names a tensor left out, `bad` one given dtype
 * `bad_dtype` or first dimension + 1. Data bytes follow (zeros are fine for checks). */
static const char *write_ckpt(const char *name, const pl_gpt2_cfg *c, const char *prefix,
                              const char *skip, const char *bad, const char *bad_dtype, size_t cut)
{
    static char hdr[65536];
    size_t n = 0, off = 0;
    n += (size_t)snprintf(hdr + n, sizeof hdr - n, "{");
    char names[64][64];
    int64_t shapes[64][2];
    int ranks[64], k = 0;
    int64_t C = c->n_embd;
#define ADD(nm, r, d0, d1)                                                                         \
    do {                                                                                           \
        snprintf(names[k], 64, "%s", nm);                                                          \
        ranks[k] = r;                                                                              \
        shapes[k][0] = d0;                                                                         \
        shapes[k][1] = d1;                                                                         \
        k++;                                                                                       \
    } while (0)
    ADD("wte.weight", 2, c->vocab, C);
    ADD("wpe.weight", 2, c->n_ctx, C);
    for (int l = 0; l < c->n_layer; l++) {
        char b[64];
#define L(sfx, r, d0, d1)                                                                          \
    do {                                                                                           \
        snprintf(b, 64, "h.%d.%s", l, sfx);                                                        \
        ADD(b, r, d0, d1);                                                                         \
    } while (0)
        L("ln_1.weight", 1, C, 0);
        L("ln_1.bias", 1, C, 0);
        L("attn.c_attn.weight", 2, C, 3 * C);
        L("attn.c_attn.bias", 1, 3 * C, 0);
        L("attn.c_proj.weight", 2, C, C);
        L("attn.c_proj.bias", 1, C, 0);
        L("ln_2.weight", 1, C, 0);
        L("ln_2.bias", 1, C, 0);
        L("mlp.c_fc.weight", 2, C, 4 * C);
        L("mlp.c_fc.bias", 1, 4 * C, 0);
        L("mlp.c_proj.weight", 2, 4 * C, C);
        L("mlp.c_proj.bias", 1, C, 0);
#undef L
    }
    ADD("ln_f.weight", 1, C, 0);
    ADD("ln_f.bias", 1, C, 0);
#undef ADD
    int first = 1;
    for (int i = 0; i < k; i++) {
        if (skip && strcmp(names[i], skip) == 0) continue;
        bool isbad = bad && strcmp(names[i], bad) == 0;
        const char *dt = isbad && bad_dtype ? bad_dtype : "F32";
        int64_t d0 = shapes[i][0] + (isbad && !bad_dtype ? 1 : 0);
        int64_t el = ranks[i] == 1 ? d0 : d0 * shapes[i][1];
        size_t es = strcmp(dt, "I64") == 0 ? 8 : 4;
        char shp[64];
        if (ranks[i] == 1)
            snprintf(shp, sizeof shp, "[%lld]", (long long)d0);
        else
            snprintf(shp, sizeof shp, "[%lld, %lld]", (long long)d0, (long long)shapes[i][1]);
        n += (size_t)snprintf(hdr + n, sizeof hdr - n,
                              "%s\"%s%s\": {\"dtype\": \"%s\", \"shape\": %s, \"data_offsets\": "
                              "[%zu, %zu]}",
                              first ? "" : ", ", prefix, names[i], dt, shp, off,
                              off + (size_t)el * es);
        off += (size_t)el * es;
        first = 0;
    }
    snprintf(hdr + n, sizeof hdr - n, "}");
    return write_file(name, hdr, off - cut);
}

static void expect_ckpt_error(const char *path, const pl_gpt2_cfg *c, const char *want_fmt)
{
    char want[1200];
    snprintf(want, sizeof want, want_fmt, path);
    pl_error err = {0};
    CHECK_EQ_INT(pl_gpt2_weights_check(path, c, "gpt2 stage 'lm'", &err), PL_EINPUT);
    CHECK_STR(err.msg, want);
}

static void test_checkpoint(void)
{
    pl_gpt2_cfg c = {1, 2, 4, 8, 4, 1e-5f};
    pl_error err = {0};
    const char *p = write_ckpt("ok.safetensors", &c, "", NULL, NULL, NULL, 0);
    CHECK_EQ_INT(pl_gpt2_weights_check(p, &c, "gpt2 stage 'lm'", &err), PL_OK);
    pl_gpt2_weights w;
    CHECK_EQ_INT(pl_gpt2_weights_alloc(&c, &w, &err), PL_OK);
    CHECK_EQ_INT(pl_gpt2_weights_load(p, &w, "gpt2 stage 'lm'", &err), PL_OK);
    pl_gpt2_weights_free(&w);
    p = write_ckpt("prefix.safetensors", &c, "transformer.", NULL, NULL, NULL, 0);
    CHECK_EQ_INT(pl_gpt2_weights_check(p, &c, "gpt2 stage 'lm'", &err), PL_OK);

    p = write_ckpt("missing.safetensors", &c, "transformer.", "h.0.mlp.c_fc.bias", NULL, NULL, 0);
    expect_ckpt_error(p, &c,
                      "error: gpt2 stage 'lm': weights '%s' have no tensor "
                      "'transformer.h.0.mlp.c_fc.bias' (a GPT-2 checkpoint with n_layer 1 needs "
                      "it)");
    p = write_ckpt("i64.safetensors", &c, "", NULL, "h.0.attn.c_attn.weight", "I64", 0);
    expect_ckpt_error(p, &c,
                      "error: gpt2 stage 'lm': weights '%s': tensor 'h.0.attn.c_attn.weight' is "
                      "I64; expected F32, F16 or BF16");
    p = write_ckpt("shape.safetensors", &c, "", NULL, "wpe.weight", NULL, 0);
    expect_ckpt_error(p, &c,
                      "error: gpt2 stage 'lm': weights '%s': tensor 'wpe.weight' has shape [5, 4], "
                      "but the config (n_layer 1, n_embd 4, vocab 8, n_ctx 4) needs [4, 4]");
    p = write_ckpt("cut.safetensors", &c, "", NULL, NULL, NULL, 4);
    expect_ckpt_error(p, &c,
                      "error: gpt2 stage 'lm': safetensors file '%s' is truncated: tensor "
                      "'ln_f.bias' needs data bytes [1184, 1200), but the file holds 1196 after "
                      "its header");
    /* config.json */
    char cp[300];
    snprintf(cp, sizeof cp, "%s/config.json", dir);
    FILE *f = fopen(cp, "w");
    fputs("{\"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, \"n_positions\": 128}", f);
    fclose(f);
    pl_gpt2_cfg got;
    CHECK_EQ_INT(pl_gpt2_config_read(cp, &got, "gpt2 stage 'lm'", &err), PL_EINPUT);
    char want[600];
    snprintf(want, sizeof want, "error: gpt2 stage 'lm': config '%s' has no \"vocab_size\"", cp);
    CHECK_STR(err.msg, want);
    f = fopen(cp, "w");
    fputs("{\"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, \"n_ctx\": 128, \"vocab_size\": 512, "
          "\"layer_norm_epsilon\": 1e-6}",
          f);
    fclose(f);
    CHECK_EQ_INT(pl_gpt2_config_read(cp, &got, "gpt2 stage 'lm'", &err), PL_OK);
    CHECK(got.n_layer == 2 && got.n_head == 4 && got.n_embd == 64 && got.vocab == 512 &&
          got.n_ctx == 128 && got.eps == 1e-6f);
    f = fopen(cp, "w");
    fputs("{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 64, \"n_ctx\": 128, \"vocab_size\": 512}",
          f);
    fclose(f);
    CHECK_EQ_INT(pl_gpt2_config_read(cp, &got, "gpt2 stage 'lm'", &err), PL_EINPUT);
    CHECK_STR(err.msg, "error: gpt2 stage 'lm': n_embd 64 is not a multiple of n_head 3");
}

/* One layer, width 2, one head, vocab 2, with weights chosen so the forward can be followed by
 * hand: every matrix is zero, so attention and MLP add only their biases, and the residual
 * stream is wte[id] + wpe[t] + proj_b + out_b. */
static void test_reference_by_hand(void)
{
    pl_gpt2_cfg c = {1, 1, 2, 2, 4, 1e-5f};
    pl_gpt2_weights w;
    pl_error err = {0};
    CHECK_EQ_INT(pl_gpt2_weights_alloc(&c, &w, &err), PL_OK);
    memset(w.mem, 0, (size_t)w.n_params * sizeof(float));
    /* wte: token 0 = (1, 0), token 1 = (0, 1); wpe all zero except position 1 = (0.5, 0). */
    w.wte[0] = 1, w.wte[3] = 1;
    w.wpe[2] = 0.5f;
    w.layers[0].ln1_w[0] = w.layers[0].ln1_w[1] = 1;
    w.layers[0].ln2_w[0] = w.layers[0].ln2_w[1] = 1;
    w.layers[0].proj_b[0] = 1;    /* attention adds (1, 0) */
    w.layers[0].out_b[1] = 0.25f; /* the MLP adds (0, 0.25) */
    w.lnf_w[0] = 2, w.lnf_w[1] = 2;
    w.lnf_b[0] = 0.5f, w.lnf_b[1] = 0;
    /* ids (0, 1): x0 = (1,0)+(1,0)+(0,.25) = (2, .25); x1 = (0,1)+(.5,0)+(1,0)+(0,.25) =
     * (1.5, 1.25). Layernorm of (a, b) with a > b is (1, -1) * |a-b|/sqrt((a-b)^2/4 + eps) / 2
     * ~ (1, -1); times 2 plus (0.5, 0): h0 ~ (2.5, -2), h1 ~ (2.5, -2). Logits = h wte^T = h. */
    int32_t ids[2] = {0, 1}, tg[2] = {0, 1};
    float lg[4], lp[2];
    int32_t nx[2];
    CHECK_EQ_INT(pl_gpt2_ref_forward(&w, ids, NULL, 1, 2, PL_GPT2_LOGITS, 1, lg, NULL, &err),
                 PL_OK);
    double d0 = 1.75, s0 = d0 / sqrt(d0 * d0 / 4 + 1e-5) / 2; /* x0: a - b = 1.75 */
    double d1 = 0.25, s1 = d1 / sqrt(d1 * d1 / 4 + 1e-5) / 2;
    CHECK(fabs(lg[0] - (2 * s0 + 0.5)) < 1e-5 && fabs(lg[1] + 2 * s0) < 1e-5);
    CHECK(fabs(lg[2] - (2 * s1 + 0.5)) < 1e-5 && fabs(lg[3] + 2 * s1) < 1e-5);
    CHECK_EQ_INT(pl_gpt2_ref_forward(&w, ids, NULL, 1, 2, PL_GPT2_ARGMAX, 1, NULL, nx, &err),
                 PL_OK);
    CHECK(nx[0] == 0 && nx[1] == 0);
    CHECK_EQ_INT(pl_gpt2_ref_forward(&w, ids, tg, 1, 2, PL_GPT2_LOGPROB, 0, lp, NULL, &err), PL_OK);
    double l0 = 2 * s1 + 0.5, l1 = -2 * s1; /* last position, target 1 */
    CHECK(fabs(lp[0] - (l1 - log(exp(l0) + exp(l1)))) < 1e-5);
    int32_t bad[2] = {0, 2};
    CHECK_EQ_INT(pl_gpt2_ref_forward(&w, bad, NULL, 1, 2, PL_GPT2_ARGMAX, 1, NULL, nx, &err),
                 PL_EINPUT);
    CHECK_STR(err.msg, "error: gpt2: sequence 0, position 1: token id 2 is outside the "
                       "vocabulary [0, 2)");
    pl_gpt2_weights_free(&w);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/pl_test_safetensors_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd) != 0) return 1;
    test_reader();
    test_checkpoint();
    test_reference_by_hand();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) pl_test_failures++;
    if (pl_test_failures) fprintf(stderr, "%d check(s) failed\n", pl_test_failures);
    return pl_test_failures ? 1 : 0;
}
