/* pl_bpe_load: reads a Hugging Face GPT-2 tokenizer folder (tokenizer.json, or vocab.json +
 * merges.txt) into pl_bpe's tables. Every failure is PL_EINPUT naming the file (line:col for
 * JSON, the line for merges.txt), so `pipectl tokenize` and the kinds exit 2 on bad files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pl_bpe_int.h"
#include "pl_json.h"

static bool pl__is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Code point at s (valid UTF-8, as jansson's strings are); *len gets its bytes. */
static uint32_t pl__cp(const unsigned char *s, int *len)
{
    if (s[0] < 0x80) {
        *len = 1;
        return s[0];
    }
    if (s[0] < 0xE0) {
        *len = 2;
        return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (s[0] < 0xF0) {
        *len = 3;
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

static int pl__utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* The byte each code point of the byte-to-unicode map stands for (-1: none), made once. */
static int pl__inv[324];
static pthread_once_t pl__inv_once = PTHREAD_ONCE_INIT;

static void pl__inv_init(void)
{
    for (int i = 0; i < 324; i++)
        pl__inv[i] = -1;
    for (int b = 0; b < 256; b++)
        pl__inv[pl__bpe_byte_cp(b)] = b;
}

static int pl__cp_byte(uint32_t cp)
{
    pthread_once(&pl__inv_once, pl__inv_init);
    return cp < 324 ? pl__inv[cp] : -1;
}

/* The bytes token string `s` stands for: its characters' bytes when every one is in the byte
 * map, else its own UTF-8 (the ByteLevel decoder's rule). Writes at most strlen(s) bytes. */
static size_t pl__token_bytes(const char *s, char *out)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int len;
        int b = pl__cp_byte(pl__cp(p, &len));
        if (b < 0) {
            size_t all = strlen(s);
            memcpy(out, s, all);
            return all;
        }
        out[n++] = (char)b;
        p += len;
    }
    return n;
}

/* A token (string, id) for the tables: the vocabulary's and the added ones. */
typedef struct pl__tok {
    const char *s;
    int32_t id;
    bool special;
} pl__tok;

/* Fills n_vocab and the token tables from toks; `file` names the source in messages. */
static pl_status pl__build_tokens(pl_bpe *b, const pl__tok *toks, size_t n, const char *file,
                                  pl_error *err)
{
    int32_t max = -1;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (toks[i].id > max) max = toks[i].id;
        bytes += strlen(toks[i].s);
    }
    b->n_vocab = max + 1;
    size_t nv = (size_t)b->n_vocab + 1;
    b->tok_bytes = malloc(bytes + 1);
    b->tok_off = calloc(nv, sizeof *b->tok_off);
    b->tok_len = malloc(nv * sizeof *b->tok_len);
    b->tok_special = calloc(nv, 1);
    if (!b->tok_bytes || !b->tok_off || !b->tok_len || !b->tok_special)
        return pl_error_set(err, PL_ENOMEM, "error: out of memory loading %s", file);
    for (size_t i = 0; i < nv; i++)
        b->tok_len[i] = -1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = toks[i].id;
        if (b->tok_len[id] >= 0) {
            /* added tokens restate vocabulary entries (tokenizer.json lists <|endoftext|> in
             * both); the first word on the bytes stands */
            b->tok_special[id] |= toks[i].special;
            continue;
        }
        size_t len = pl__token_bytes(toks[i].s, b->tok_bytes + at);
        b->tok_off[id] = (uint32_t)at;
        b->tok_len[id] = (int32_t)len;
        b->tok_special[id] = toks[i].special;
        at += len;
    }
    return PL_OK;
}

/* The id of token string `s` in the vocabulary object, or -1. */
static int32_t pl__vocab_id(const json_t *vocab, const char *s)
{
    const json_t *v = json_object_get(vocab, s);
    return v && json_is_integer(v) ? (int32_t)json_integer_value(v) : -1;
}

/* The vocabulary object's entries as tokens, checked: ids are whole numbers 0..2^31-2 and no
 * two tokens share one. *out is malloc'ed. */
static pl_status pl__vocab_tokens(const json_t *vocab, const char *file, pl__tok **out, size_t *n,
                                  pl_error *err)
{
    *out = NULL;
    *n = 0;
    if (!json_is_object(vocab))
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: the vocabulary is not a JSON object of token: id", file);
    size_t cap = json_object_size(vocab) + 64;
    pl__tok *t = malloc(cap * sizeof *t);
    if (!t) return pl_error_set(err, PL_ENOMEM, "error: out of memory loading %s", file);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val)
    {
        json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
        if (id < 0 || id >= INT32_MAX - 1) {
            free(t);
            return pl_error_set(err, PL_EINPUT,
                                "%s: error: token '%s' has id %s; ids are whole numbers from 0 "
                                "to 2147483645",
                                file, key, json_is_integer(val) ? "out of range" : "not a number");
        }
        t[*n].s = key;
        t[*n].id = (int32_t)id;
        t[*n].special = false;
        (*n)++;
    }
    *out = t;
    return PL_OK;
}

/* Every byte's token: the vocabulary must have all 256 (a byte-level vocabulary does). */
static pl_status pl__byte_ids(pl_bpe *b, const json_t *vocab, const char *file, pl_error *err)
{
    for (int x = 0; x < 256; x++) {
        char s[4];
        int len = pl__utf8_put(pl__bpe_byte_cp(x), s);
        s[len] = 0;
        b->byte_id[x] = pl__vocab_id(vocab, s);
        if (b->byte_id[x] < 0)
            return pl_error_set(err, PL_EINPUT,
                                "%s: error: no token for byte 0x%02X ('%s'); a byte-level BPE "
                                "vocabulary has one for each of the 256 bytes",
                                file, x, s);
    }
    return PL_OK;
}

static pl_status pl__merges_alloc(pl_bpe *b, size_t n, pl_error *err)
{
    size_t slots = 1024;
    while (slots < 2 * n)
        slots *= 2;
    b->merges = malloc(slots * sizeof *b->merges);
    if (!b->merges) return pl_error_set(err, PL_ENOMEM, "error: out of memory for the merges");
    for (size_t i = 0; i < slots; i++)
        b->merges[i].key = PL__BPE_EMPTY;
    b->mmask = slots - 1;
    return PL_OK;
}

/* Adds merge (l, r) -> id at `rank`; a pair given twice keeps its later rank (as the tokenizers
 * crate's map does). */
static void pl__merges_put(pl_bpe *b, int32_t l, int32_t r, int32_t id, uint32_t rank)
{
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    uint64_t i = pl__bpe_slot(key) & b->mmask;
    while (b->merges[i].key != PL__BPE_EMPTY && b->merges[i].key != key)
        i = (i + 1) & b->mmask;
    b->merges[i] = (pl__bpe_merge){key, rank, id};
}

/* One merge "a b" (a and b NUL-terminated here): its ids from the vocabulary, or an error at
 * `pos` saying which part is missing. */
static pl_status pl__merge_add(pl_bpe *b, const json_t *vocab, const char *a, const char *c,
                               uint32_t rank, pl_pos pos, const char *vocab_file, pl_error *err)
{
    int32_t ia = pl__vocab_id(vocab, a), ic = pl__vocab_id(vocab, c);
    pl_pos second = pos; /* pos.col: where c starts; the line's start for the rest */
    pos.col = pos.line ? 1 : 0;
    if (ia < 0 || ic < 0)
        return pl_error_at(err, PL_EINPUT, ia < 0 ? pos : second,
                           "merge '%s %s': token '%s' is not in %s", a, c, ia < 0 ? a : c,
                           vocab_file);
    size_t la = strlen(a), lc = strlen(c);
    char stack[256], *both = la + lc < sizeof stack ? stack : malloc(la + lc + 1);
    if (!both) return pl_error_set(err, PL_ENOMEM, "error: out of memory for the merges");
    memcpy(both, a, la);
    memcpy(both + la, c, lc + 1);
    int32_t id = pl__vocab_id(vocab, both);
    pl_status st = PL_OK;
    if (id < 0)
        st = pl_error_at(err, PL_EINPUT, pos, "merge '%s %s' gives '%s', which is not in %s", a, c,
                         both, vocab_file);
    else
        pl__merges_put(b, ia, ic, id, rank);
    if (both != stack) free(both);
    return st;
}

static pl_status pl__read_all(const char *path, char **out, size_t *len, pl_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_error_set(err, PL_EINPUT, "error: cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) free(buf);
        buf = nb;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf) return pl_error_set(err, PL_ENOMEM, "error: out of memory reading '%s'", path);
    if (bad) {
        free(buf);
        return pl_error_set(err, PL_EINPUT, "error: cannot read '%s'", path);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return PL_OK;
}

/* merges.txt: "#version" lines skipped, every other line "a b" (a CR before the newline is
 * dropped, as Rust's lines() does); rank = order among the merges. */
static pl_status pl__load_merges_txt(pl_bpe *b, const json_t *vocab, const char *path,
                                     const char *vocab_file, pl_error *err)
{
    char *text;
    size_t len = 0;
    PL_CHECK(pl__read_all(path, &text, &len, err));
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    pl_status st = pl__merges_alloc(b, lines, err);
    uint32_t rank = 0;
    int line = 0;
    for (char *p = text; st == PL_OK && p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        if (!end) end = text + len;
        char *next = end < text + len ? end + 1 : end;
        line++;
        if (end > p && end[-1] == '\r') end--;
        *end = 0;
        pl_pos pos = {path, line, 1};
        if (strncmp(p, "#version", 8) == 0) {
            p = next;
            continue;
        }
        char *sp = strchr(p, ' ');
        if (!sp || sp == p || !sp[1] || strchr(sp + 1, ' ') || memchr(p, 0, (size_t)(end - p))) {
            st = pl_error_at(err, PL_EINPUT, pos,
                             "merges line %d is '%.80s': a merge is two tokens separated by one "
                             "space, as 'Ġ t'",
                             line, p);
            break;
        }
        *sp = 0;
        pos.col = (int)(sp - p) + 2;
        st = pl__merge_add(b, vocab, p, sp + 1, rank++, pos, vocab_file, err);
        p = next;
    }
    free(text);
    return st;
}

static pl_status pl__add_added(pl_bpe *b, const char *text, int32_t id, bool special, pl_error *err)
{
    pl__bpe_added *na = realloc(b->added, ((size_t)b->n_added + 1) * sizeof *na);
    if (!na) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    b->added = na;
    pl__bpe_added *a = &b->added[b->n_added];
    a->len = strlen(text);
    a->text = malloc(a->len + 1);
    if (!a->text) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    memcpy(a->text, text, a->len + 1);
    a->id = id;
    a->special = special;
    b->n_added++;
    if (strcmp(text, "<|endoftext|>") == 0) b->eos = id;
    return PL_OK;
}

static pl_status pl__load_pair(pl_bpe *b, const char *dir, pl_error *err)
{
    char vpath[4200], mpath[4200];
    snprintf(vpath, sizeof vpath, "%s/vocab.json", dir);
    snprintf(mpath, sizeof mpath, "%s/merges.txt", dir);
    snprintf(b->source, sizeof b->source, "%s + merges.txt", vpath);
    json_t *vocab = NULL;
    pl__tok *toks = NULL;
    size_t n = 0;
    pl_status st = pl_json_read_file(vpath, "GPT-2 vocabulary", &vocab, err);
    if (st == PL_EIO) st = err->status = PL_EINPUT; /* unreadable: bad input, exit 2 */
    if (st == PL_OK) st = pl__vocab_tokens(vocab, vpath, &toks, &n, err);
    if (st == PL_OK) {
        /* GPT2TokenizerFast adds <|endoftext|> as its one special token. */
        for (size_t i = 0; i < n; i++)
            if (strcmp(toks[i].s, "<|endoftext|>") == 0) toks[i].special = true;
        st = pl__build_tokens(b, toks, n, vpath, err);
    }
    if (st == PL_OK) st = pl__byte_ids(b, vocab, vpath, err);
    if (st == PL_OK) st = pl__load_merges_txt(b, vocab, mpath, "vocab.json", err);
    int32_t eot = st == PL_OK ? pl__vocab_id(vocab, "<|endoftext|>") : -1;
    if (eot >= 0) st = pl__add_added(b, "<|endoftext|>", eot, true, err);
    free(toks);
    json_decref(vocab);
    return st;
}

/* tokenizer.json's parts pipectl does not implement are refused, not ignored. */
static pl_status pl__check_tokenizer_json(pl_bpe *b, const json_t *root, const char *path,
                                          pl_error *err)
{
    const json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm))
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: it has a normalizer ('%s'); GPT-2's byte-level BPE has "
                            "none, and pipectl implements that tokenizer only",
                            path, pl_json_str_or(norm, "type", "?"));
    const json_t *pre = json_object_get(root, "pre_tokenizer");
    const char *pt = pl_json_str_or(pre, "type", "none");
    if (strcmp(pt, "ByteLevel") != 0)
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: pre_tokenizer is '%s', not ByteLevel; pipectl implements "
                            "GPT-2's byte-level BPE only",
                            path, pt);
    b->add_prefix_space = json_is_true(json_object_get(pre, "add_prefix_space"));
    const json_t *ur = json_object_get(pre, "use_regex");
    b->use_regex = !ur || json_is_true(ur);
    const json_t *model = json_object_get(root, "model");
    const char *mt = pl_json_str_or(model, "type", "BPE");
    if (!json_is_object(model) || strcmp(mt, "BPE") != 0)
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: model is '%s', not BPE; pipectl implements GPT-2's "
                            "byte-level BPE only",
                            path, json_is_object(model) ? mt : "missing");
    const json_t *drop = json_object_get(model, "dropout");
    const char *sfx[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *v = pl_json_str_or(model, sfx[i], "");
        if (*v)
            return pl_error_set(err, PL_EINPUT, "%s: error: model.%s is '%s'; GPT-2's BPE has none",
                                path, sfx[i], v);
    }
    if ((drop && json_is_number(drop) && json_number_value(drop) != 0) ||
        json_is_true(json_object_get(model, "ignore_merges")) ||
        json_is_true(json_object_get(model, "byte_fallback")))
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: model sets dropout, ignore_merges or byte_fallback, "
                            "which GPT-2's BPE does not use",
                            path);
    return PL_OK;
}

/* tokenizer.json's merges: strings "a b" (tokenizers before 0.20) or pairs ["a", "b"]. */
static pl_status pl__load_merges_json(pl_bpe *b, const json_t *vocab, const json_t *merges,
                                      const char *path, pl_error *err)
{
    if (!json_is_array(merges))
        return pl_error_set(err, PL_EINPUT, "%s: error: model.merges is missing or not a list",
                            path);
    PL_CHECK(pl__merges_alloc(b, json_array_size(merges), err));
    size_t i;
    const json_t *m;
    pl_pos nopos = {NULL, 0, 0};
    json_array_foreach(merges, i, m)
    {
        char buf[1024];
        const char *a = NULL, *c = NULL;
        if (json_is_string(m) && json_string_length(m) < sizeof buf) {
            memcpy(buf, json_string_value(m), json_string_length(m) + 1);
            char *sp = strchr(buf, ' ');
            if (sp && sp != buf && sp[1] && !strchr(sp + 1, ' ')) {
                *sp = 0;
                a = buf;
                c = sp + 1;
            }
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            c = json_string_value(json_array_get(m, 1));
        }
        if (!a)
            return pl_error_set(err, PL_EINPUT,
                                "%s: error: model.merges[%zu] is no merge: a merge is \"a b\" or "
                                "[\"a\", \"b\"]",
                                path, i);
        pl_status st = pl__merge_add(b, vocab, a, c, (uint32_t)i, nopos, "model.vocab", err);
        if (st != PL_OK) {
            char msg[PL_ERROR_MSG_MAX];
            snprintf(msg, sizeof msg, "%s",
                     strncmp(err->msg, "error: ", 7) ? err->msg : err->msg + 7);
            return pl_error_set(err, st, "%s: error: model.merges[%zu]: %s", path, i, msg);
        }
    }
    return PL_OK;
}

static pl_status pl__load_tokenizer_json(pl_bpe *b, const char *path, pl_error *err)
{
    snprintf(b->source, sizeof b->source, "%s", path);
    json_t *root = NULL;
    pl__tok *toks = NULL;
    size_t n = 0;
    pl_status st = pl_json_read_file(path, "tokenizer", &root, err);
    if (st == PL_EIO) st = err->status = PL_EINPUT;
    if (st == PL_OK && !json_is_object(root))
        st = pl_error_set(err, PL_EINPUT, "%s: error: not a JSON object", path);
    if (st == PL_OK) st = pl__check_tokenizer_json(b, root, path, err);
    const json_t *model = st == PL_OK ? json_object_get(root, "model") : NULL;
    const json_t *vocab = model ? json_object_get(model, "vocab") : NULL;
    const json_t *added = root ? json_object_get(root, "added_tokens") : NULL;
    if (st == PL_OK) st = pl__vocab_tokens(vocab, path, &toks, &n, err);
    size_t n_added = json_is_array(added) ? json_array_size(added) : 0;
    if (st == PL_OK && n_added) {
        pl__tok *more = realloc(toks, (n + n_added) * sizeof *more);
        if (!more)
            st = pl_error_set(err, PL_ENOMEM, "error: out of memory loading %s", path);
        else
            toks = more;
    }
    for (size_t i = 0; st == PL_OK && i < n_added; i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= INT32_MAX - 1 || !json_is_string(content) ||
            !json_string_length(content)) {
            st = pl_error_set(err, PL_EINPUT,
                              "%s: error: added_tokens[%zu] needs an 'id' (a whole number) and a "
                              "'content' (text)",
                              path, i);
            break;
        }
        const char *flags[] = {"single_word", "lstrip", "rstrip"};
        for (int f = 0; f < 3 && st == PL_OK; f++)
            if (json_is_true(json_object_get(a, flags[f])))
                st = pl_error_set(err, PL_EINPUT,
                                  "%s: error: added token '%s' sets %s, which pipectl does not "
                                  "implement (GPT-2's <|endoftext|> does not)",
                                  path, json_string_value(content), flags[f]);
        bool special = json_is_true(json_object_get(a, "special"));
        toks[n++] = (pl__tok){json_string_value(content), (int32_t)json_integer_value(id), special};
        if (st == PL_OK)
            st = pl__add_added(b, json_string_value(content), (int32_t)json_integer_value(id),
                               special, err);
    }
    if (st == PL_OK) st = pl__build_tokens(b, toks, n, path, err);
    if (st == PL_OK) st = pl__byte_ids(b, vocab, path, err);
    if (st == PL_OK)
        st = pl__load_merges_json(b, vocab, json_object_get(model, "merges"), path, err);
    free(toks);
    json_decref(root);
    return st;
}

/* What `path` names: a folder (its tokenizer.json, else its vocab.json and merges.txt), a
 * vocab.json (merges.txt beside it) or any other file, read as a tokenizer.json. *file gets the
 * tokenizer.json to read, or "" and *dir the folder of vocab.json and merges.txt. */
static pl_status pl__find_files(const char *path, char *file, char *dir, size_t cap, pl_error *err)
{
    struct stat sb;
    file[0] = dir[0] = 0;
    if (stat(path, &sb) != 0)
        return pl_error_set(err, PL_EINPUT,
                            "error: vocab '%s' does not exist (%s); give a Hugging Face GPT-2 "
                            "snapshot folder with tokenizer.json, or vocab.json and merges.txt, "
                            "or one of those files",
                            path, strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        if (strcmp(base, "vocab.json") != 0) {
            snprintf(file, cap, "%s", path);
            return PL_OK;
        }
        snprintf(dir, cap, "%.*s", base > path ? (int)(base - path - 1) : 1,
                 base > path ? path : ".");
        char mt[4096];
        snprintf(mt, sizeof mt, "%s/merges.txt", dir);
        if (pl__is_file(mt)) return PL_OK;
        return pl_error_set(err, PL_EINPUT,
                            "error: vocab '%s' has no merges.txt beside it; a GPT-2 tokenizer is "
                            "tokenizer.json, or vocab.json and merges.txt",
                            path);
    }
    char tj[4096], vj[4096], mt[4096];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", path);
    snprintf(vj, sizeof vj, "%s/vocab.json", path);
    snprintf(mt, sizeof mt, "%s/merges.txt", path);
    bool has_tj = pl__is_file(tj), has_vj = pl__is_file(vj), has_mt = pl__is_file(mt);
    if (!S_ISDIR(sb.st_mode))
        return pl_error_set(err, PL_EINPUT,
                            "error: vocab '%s' is neither a folder nor a file; give a Hugging Face "
                            "GPT-2 snapshot folder with tokenizer.json, or vocab.json and "
                            "merges.txt",
                            path);
    if (has_tj) {
        snprintf(file, cap, "%s", tj);
        return PL_OK;
    }
    if (has_vj && has_mt) {
        snprintf(dir, cap, "%s", path);
        return PL_OK;
    }
    return pl_error_set(err, PL_EINPUT,
                        "error: vocab folder '%s' has %s; a GPT-2 tokenizer is tokenizer.json, or "
                        "vocab.json and merges.txt",
                        path,
                        has_vj   ? "vocab.json but no merges.txt"
                        : has_mt ? "merges.txt but no vocab.json"
                                 : "no tokenizer.json, vocab.json or merges.txt");
}

pl_status pl_bpe_check_path(const char *path, pl_error *err)
{
    char file[4096], dir[4096];
    return pl__find_files(path, file, dir, sizeof file, err);
}

pl_status pl_bpe_load(const char *path, pl_bpe **out, pl_error *err)
{
    *out = NULL;
    char file[4096], dir[4096];
    PL_CHECK(pl__find_files(path, file, dir, sizeof file, err));
    pl_bpe *b = calloc(1, sizeof *b);
    if (!b) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pthread_mutex_init(&b->mu, NULL);
    b->eos = -1;
    b->use_regex = true;
    b->heap_min = 48;
    pl_status st = file[0] ? pl__load_tokenizer_json(b, file, err) : pl__load_pair(b, dir, err);
    if (st != PL_OK) {
        pl_bpe_free(b);
        return st;
    }
    *out = b;
    return PL_OK;
}
