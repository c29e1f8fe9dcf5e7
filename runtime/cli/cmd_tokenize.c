/* cmd_tokenize: `pipectl tokenize --vocab DIR [TEXT...]`: GPT-2 BPE ids of each TEXT (or of each
 * line of stdin), or with --decode the text of rows of ids. The tokenizer is
 * stages/tokenize/pl_bpe.h's, the one the tokenize and detokenize kinds run. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pl_bpe.h"
#include "pl_cli.h"
#include "pl_json.h"
#include "pl_pool.h"

enum {
    PL__O_VOCAB = 256,
    PL__O_DECODE,
    PL__O_JSON,
    PL__O_NULL,
    PL__O_SKIP,
    PL__O_THREADS,
    PL__O_STATS,
};

const pl_cli_opt pl_cli_tokenize_opts[] = {
    {"vocab", 0, "DIR", NULL,
     "the tokenizer: a Hugging Face GPT-2 folder with tokenizer.json, or vocab.json and "
     "merges.txt (required); or one of those files (merges.txt beside a vocab.json)",
     PL__O_VOCAB},
    {"decode", 'd', NULL, NULL,
     "each row is ids (separated by spaces or commas; brackets ignored): print its text",
     PL__O_DECODE},
    {"json", 'j', NULL, NULL,
     "encode: print one JSON array of arrays of ids; decode: read one such array (operand or "
     "stdin) and print a JSON array of strings",
     PL__O_JSON},
    {"null", 'z', NULL, NULL,
     "stdin rows end with NUL bytes instead of newlines (a row may hold newlines); --decode "
     "ends each printed text with NUL",
     PL__O_NULL},
    {"skip-special", 0, NULL, NULL, "decode: leave out <|endoftext|> (added tokens)", PL__O_SKIP},
    {"threads", 0, "N", NULL, "encode rows on N threads (default: the cores)", PL__O_THREADS},
    {"stats", 0, NULL, NULL,
     "print rows, bytes, ids and the encode or decode time (the vocabulary's load apart) on "
     "stderr",
     PL__O_STATS},
    {0},
};

static double pl__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rows: operands, or stdin split at `sep` (a last row without its separator counts; sep -1: all
 * of stdin is one row). */
typedef struct pl__rows {
    const char **text;
    size_t *len;
    int64_t n;
    char *input; /* stdin, owned */
} pl__rows;

static pl_status pl__read_stdin(char **out, size_t *len, pl_error *err)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) return pl_error_set(err, PL_ENOMEM, "error: out of memory reading stdin");
        ssize_t got = read(0, buf + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            free(buf);
            return pl_error_set(err, PL_EIO, "error: cannot read stdin: %s", strerror(errno));
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    *out = buf;
    *len = n;
    return PL_OK;
}

static pl_status pl__rows_get(pl__rows *r, char **ops, int n_ops, int sep, pl_error *err)
{
    memset(r, 0, sizeof *r);
    bool from_stdin = n_ops == 0 || (n_ops == 1 && strcmp(ops[0], "-") == 0);
    size_t len = 0;
    int64_t n = n_ops;
    if (from_stdin) {
        PL_CHECK(pl__read_stdin(&r->input, &len, err));
        n = 0;
        for (size_t i = 0; i < len; i++)
            n += r->input[i] == sep;
        n += len > 0 && r->input[len - 1] != sep;
        if (sep < 0) n = 1;
    }
    r->text = malloc(((size_t)n + 1) * sizeof *r->text);
    r->len = malloc(((size_t)n + 1) * sizeof *r->len);
    if (!r->text || !r->len) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    if (!from_stdin) {
        for (int i = 0; i < n_ops; i++) {
            r->text[i] = ops[i];
            r->len[i] = strlen(ops[i]);
        }
    } else {
        size_t start = 0;
        for (size_t i = 0; i <= len; i++)
            if (i == len ? i > start || (sep < 0 && !r->n) : r->input[i] == sep) {
                r->text[r->n] = r->input + start;
                r->len[r->n++] = i - start;
                start = i + 1;
            }
    }
    r->n = n;
    return PL_OK;
}

static void pl__rows_free(pl__rows *r)
{
    free(r->text);
    free(r->len);
    free(r->input);
}

static void pl__print_ids(FILE *out, const pl_bpe_ids *ids, int64_t n, bool json)
{
    if (json) fputc('[', out);
    for (int64_t r = 0; r < n; r++) {
        if (json) fputs(r ? ", [" : "[", out);
        for (int64_t i = 0; i < ids[r].n; i++)
            fprintf(out, i ? (json ? ", %d" : " %d") : "%d", (int)ids[r].v[i]);
        fputs(json ? "]" : "\n", out);
    }
    if (json) fputs("]\n", out);
}

static int pl__encode(const pl_bpe *bpe, pl__rows *rows, bool json, int64_t threads, bool stats)
{
    pl_error err;
    pl_error_clear(&err);
    pl_bpe_ids *ids = calloc((size_t)rows->n + 1, sizeof *ids);
    pl_pool *pool = NULL;
    pl_status st = ids ? PL_OK : pl_error_set(&err, PL_ENOMEM, "error: out of memory");
    if (st == PL_OK && threads > 1) st = pl_pool_new((int)threads - 1, &pool, &err);
    double t0 = pl__now();
    if (st == PL_OK)
        st =
            pl_bpe_encode_batch(bpe, pool, (int)threads, rows->n, rows->text, rows->len, ids, &err);
    double dt = pl__now() - t0;
    pl_pool_free(pool);
    if (st == PL_OK) {
        pl__print_ids(stdout, ids, rows->n, json);
        if (stats) {
            int64_t bytes = 0, n_ids = 0;
            for (int64_t r = 0; r < rows->n; r++) {
                bytes += (int64_t)rows->len[r];
                n_ids += ids[r].n;
            }
            fprintf(stderr,
                    "tokenize: %lld rows, %lld bytes, %lld ids in %.6f s: %.2f MB/s, %.0f ids/s "
                    "on %lld thread%s\n",
                    (long long)rows->n, (long long)bytes, (long long)n_ids, dt,
                    dt > 0 ? (double)bytes / dt / 1e6 : 0.0, dt > 0 ? (double)n_ids / dt : 0.0,
                    (long long)threads, threads == 1 ? "" : "s");
        }
    }
    for (int64_t r = 0; ids && r < rows->n; r++)
        pl_bpe_ids_free(&ids[r]);
    free(ids);
    return st == PL_OK ? 0 : pl_cli_fail(&err);
}

/* Ids of one row of text ("15496 995", "[15496, 995]"). */
static pl_status pl__parse_ids(const char *s, size_t len, int64_t row, pl_bpe_ids *out,
                               pl_error *err)
{
    size_t i = 0;
    while (i < len) {
        char c = s[i];
        if (c == ' ' || c == ',' || c == '\t' || c == '[' || c == ']' || c == '\r' || c == '\n') {
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && !strchr(" ,\t[]\r\n", s[j]))
            j++;
        char tok[32];
        char *end = NULL;
        long long v = -1;
        if (j - i < sizeof tok) {
            memcpy(tok, s + i, j - i);
            tok[j - i] = 0;
            errno = 0;
            v = strtoll(tok, &end, 10);
            if (errno || *end || v < 0 || v > INT32_MAX) v = -1;
        }
        if (v < 0)
            return pl_error_set(err, PL_EINPUT,
                                "error: row %lld: '%.*s' is not an id (a whole number from 0)",
                                (long long)row + 1, (int)(j - i < 40 ? j - i : 40), s + i);
        if (out->n == out->cap) {
            int64_t cap = out->cap ? 2 * out->cap : 64;
            int32_t *nv = realloc(out->v, (size_t)cap * sizeof *nv);
            if (!nv) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
            out->v = nv;
            out->cap = cap;
        }
        out->v[out->n++] = (int32_t)v;
        i = j;
    }
    return PL_OK;
}

/* Decodes one row into `text` (lossy: U+FFFD for bytes that are no whole character). */
static pl_status pl__decode_row(const pl_bpe *bpe, const pl_bpe_ids *ids, bool skip, int64_t row,
                                pl_bpe_text *raw, pl_bpe_text *text, pl_error *err)
{
    raw->n = text->n = 0;
    pl_status st = pl_bpe_decode(bpe, ids->v, ids->n, skip, raw, err);
    if (st != PL_OK) return pl_bpe_error_row(err, row + 1);
    return pl_bpe_utf8_replace(raw->v, (size_t)raw->n, text, err);
}

static int pl__decode_json(const pl_bpe *bpe, pl__rows *rows, bool skip, pl_error *err)
{
    /* the JSON is the rows joined: one array of arrays */
    json_t *all = NULL, *outs = json_array();
    pl_bpe_ids ids = {0};
    pl_bpe_text raw = {0}, text = {0};
    pl_status st = PL_OK;
    for (int64_t r = 0; r < rows->n && st == PL_OK; r++) {
        json_error_t je;
        all = json_loadb(rows->text[r], rows->len[r], 0, &je);
        if (!all || !json_is_array(all)) {
            st = pl_error_set(err, PL_EINPUT,
                              "error: row %lld: %d:%d: not a JSON array of arrays of ids%s%s",
                              (long long)r + 1, all ? 1 : je.line, all ? 1 : je.column,
                              all ? "" : ": ", all ? "" : je.text);
            break;
        }
        size_t i;
        json_t *row;
        json_array_foreach(all, i, row)
        {
            ids.n = 0;
            size_t k;
            json_t *v;
            if (!json_is_array(row))
                st = pl_error_set(err, PL_EINPUT, "error: item %zu: not a list of ids", i);
            json_array_foreach(row, k, v)
            {
                if (st != PL_OK) break;
                json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
                if (x < 0 || x > INT32_MAX) {
                    st = pl_error_set(err, PL_EINPUT, "error: item %zu, position %zu: not an id", i,
                                      k);
                    break;
                }
                if (ids.n == ids.cap) {
                    int64_t cap = ids.cap ? 2 * ids.cap : 64;
                    int32_t *nv = realloc(ids.v, (size_t)cap * sizeof *nv);
                    if (!nv) {
                        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
                        break;
                    }
                    ids.v = nv;
                    ids.cap = cap;
                }
                ids.v[ids.n++] = (int32_t)x;
            }
            if (st == PL_OK) st = pl__decode_row(bpe, &ids, skip, (int64_t)i, &raw, &text, err);
            if (st != PL_OK) break;
            json_array_append_new(outs, json_stringn(text.v ? text.v : "", (size_t)text.n));
        }
        json_decref(all);
        all = NULL;
    }
    if (st == PL_OK && pl_json_print(stdout, outs) != 0)
        st = pl_error_set(err, PL_EIO, "error: cannot write stdout");
    json_decref(outs);
    pl_bpe_ids_free(&ids);
    pl_bpe_text_free(&raw);
    pl_bpe_text_free(&text);
    return st == PL_OK ? 0 : pl_cli_fail(err);
}

static int pl__decode(const pl_bpe *bpe, pl__rows *rows, bool json, bool skip, char end, bool stats)
{
    pl_error err;
    pl_error_clear(&err);
    if (json) return pl__decode_json(bpe, rows, skip, &err);
    pl_bpe_ids ids = {0};
    pl_bpe_text raw = {0}, text = {0};
    pl_status st = PL_OK;
    int64_t n_ids = 0, bytes = 0;
    double t0 = pl__now();
    for (int64_t r = 0; r < rows->n && st == PL_OK; r++) {
        ids.n = 0;
        st = pl__parse_ids(rows->text[r], rows->len[r], r, &ids, &err);
        if (st == PL_OK) st = pl__decode_row(bpe, &ids, skip, r, &raw, &text, &err);
        if (st == PL_OK) {
            fwrite(text.v ? text.v : "", 1, (size_t)text.n, stdout);
            fputc(end, stdout);
            n_ids += ids.n;
            bytes += text.n;
        }
    }
    double dt = pl__now() - t0;
    if (st == PL_OK && stats)
        fprintf(stderr, "tokenize --decode: %lld rows, %lld ids, %lld bytes in %.6f s\n",
                (long long)rows->n, (long long)n_ids, (long long)bytes, dt);
    pl_bpe_ids_free(&ids);
    pl_bpe_text_free(&raw);
    pl_bpe_text_free(&text);
    return st == PL_OK ? 0 : pl_cli_fail(&err);
}

int pl_cmd_tokenize(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("tokenize", NULL);
    const char *vocab = NULL;
    bool decode = false, json = false, nul = false, skip = false, stats = false;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t threads = cpus > 0 ? cpus : 1;
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id;
    while ((id = pl_cli_next(&a, &v)) > 0) {
        if (id == PL__O_VOCAB)
            vocab = v;
        else if (id == PL__O_DECODE)
            decode = true;
        else if (id == PL__O_JSON)
            json = true;
        else if (id == PL__O_NULL)
            nul = true;
        else if (id == PL__O_SKIP)
            skip = true;
        else if (id == PL__O_STATS)
            stats = true;
        else if (id == PL__O_THREADS && pl_cli_int(cmd, id, v, 1, 1024, &threads))
            return 2;
    }
    if (id < 0) return a.rc;
    if (!vocab)
        return pl_cli_usage_error(cmd, "'pipectl tokenize' needs --vocab DIR (a GPT-2 tokenizer "
                                       "folder: tokenizer.json, or vocab.json and merges.txt)");
    if (skip && !decode) return pl_cli_usage_error(cmd, "--skip-special goes with --decode");
    pl_error err;
    pl_error_clear(&err);
    pl_bpe *bpe = NULL;
    if (pl_bpe_load(vocab, &bpe, &err) != PL_OK) return pl_cli_fail(&err);
    pl__rows rows;
    int rc;
    int sep = decode && json ? -1 : nul ? '\0' : '\n'; /* decode --json: stdin is one array */
    if (pl__rows_get(&rows, a.operands, a.n_operands, sep, &err) != PL_OK)
        rc = pl_cli_fail(&err);
    else if (decode)
        rc = pl__decode(bpe, &rows, json, skip, nul ? '\0' : '\n', stats);
    else
        rc = pl__encode(bpe, &rows, json, threads, stats);
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        pl_error_set(&err, PL_EIO, "error: cannot write stdout");
        rc = pl_cli_fail(&err);
    }
    pl__rows_free(&rows);
    pl_bpe_free(bpe);
    return rc;
}
