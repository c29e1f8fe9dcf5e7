/* fuzz_tokenizer: libFuzzer target for the GPT-2 tokenizer's files (stages/tokenize/pl_bpe_load.c).
 * Byte 0 of the input picks the layout: even, the rest is a tokenizer.json; odd, the rest is a
 * vocab.json, then (after the first 0xFF byte, which UTF-8 never holds) a merges.txt beside it.
 * What loads encodes a few texts (bytes of every kind, the input's own tail among them) and
 * decodes the ids back: every id it gives is in the vocabulary and decodes; a bad file fails
 * with PL_EINPUT and "error: ..." (pl_fuzz_file.h). */
#include "pl_bpe.h"
#include "pl_fuzz_file.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void pl__use(const pl_bpe *b, const char *text, size_t len)
{
    pl_error err;
    pl_bpe_ids ids = {0};
    pl_status st = pl_bpe_encode(b, text, len, &ids, &err);
    if (st != PL_OK && st != PL_ENOMEM) {
        fprintf(stderr, "encode failed with %s: %s\n", pl_status_name(st), err.msg);
        abort();
    }
    for (int64_t i = 0; st == PL_OK && i < ids.n; i++)
        if (!pl_bpe_has_id(b, ids.v[i])) {
            fprintf(stderr, "encode gave id %d, which is no token\n", (int)ids.v[i]);
            abort();
        }
    pl_bpe_text out = {0};
    if (st == PL_OK) {
        st = pl_bpe_decode(b, ids.v, ids.n, false, &out, &err);
        if (st != PL_OK && st != PL_ENOMEM) {
            fprintf(stderr, "decode of encode's ids failed: %s\n", err.msg);
            abort();
        }
    }
    pl_bpe_text_free(&out);
    pl_bpe_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1) return 0;
    const char *path;
    const unsigned char *rest = data + 1;
    size_t n = size - 1;
    if (data[0] % 2 == 0) {
        path = pl_fuzz_write(0, "tokenizer.json", rest, n);
    } else {
        const unsigned char *sep = memchr(rest, 0xFF, n);
        size_t nv = sep ? (size_t)(sep - rest) : n;
        pl_fuzz_write(1, "pair/vocab.json", rest, nv);
        pl_fuzz_write(2, "pair/merges.txt", sep ? sep + 1 : rest + n, sep ? n - nv - 1 : 0);
        static char dir[300];
        snprintf(dir, sizeof dir, "%s/pair", pl_fuzz_scratch());
        path = dir;
    }
    pl_error err;
    pl_error_clear(&err);
    pl_bpe *b = NULL;
    pl_status st = pl_bpe_load(path, &b, &err);
    if (st != PL_OK) {
        if (b) abort();
        pl_fuzz_want_input_error(&err, st, "pl_bpe_load");
        return 0;
    }
    static const char *const texts[] = {
        "Hello world",       "  a\n\n b\t\tc  ",
        "<|endoftext|>x",    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
        "\xff\xfe bad \xc3", "'s 're 123 4567 !!"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        pl__use(b, texts[i], strlen(texts[i]));
    pl__use(b, (const char *)rest + n / 2, n - n / 2);
    int32_t eos = pl_bpe_eos(b);
    if (eos >= 0 && !pl_bpe_has_id(b, eos)) abort();
    pl_bpe_free(b);
    return 0;
}
