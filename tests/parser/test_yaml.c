/* test_yaml: the YAML front end on its own (no check, no plan): a full example lands in the spec
 * field by field with 1-based positions, and every parse-level case of the bad corpus
 * (tests/parser/bad/, not check_*) fails with exactly the message in its .expected file. Also keeps
 * docs/pipeline-yaml.md true to the tables (top level, run, buffers, common stage keys, every
 * kind): each key has a row with the table's type and default, and no row names a key the table
 * lacks; every op and dtype is listed.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_parse.h"
#include "pl_schema.h"
#include "pl_stage.h"
#include "pl_test.h"

#define CHECK_POS(p, l, c)                                                                         \
    do {                                                                                           \
        CHECK_EQ_INT((p).line, (l));                                                               \
        CHECK_EQ_INT((p).col, (c));                                                                \
    } while (0)

static const pl_stage *find_stage(const pl_spec *s, const char *name)
{
    int i = pl_spec_find_stage(s, name);
    CHECK(i >= 0);
    return i >= 0 ? &s->stages[i] : NULL;
}

static const pl_buffer *find_buffer(const pl_spec *s, const char *name)
{
    int i = pl_spec_find_buffer(s, name);
    CHECK(i >= 0);
    return i >= 0 ? &s->buffers[i] : NULL;
}

static void test_full_example(void)
{
    pl_error err;
    pl_spec *s = NULL;
    pl_status st = pl_yaml_load_file("tests/parser/good/full.yaml", &s, &err);
    CHECK_EQ_INT(st, PL_OK);
    if (st != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    CHECK_STR(s->name, "full_example");
    CHECK_STR(s->file, "tests/parser/good/full.yaml");
    CHECK_STR(s->dir, "tests/parser/good");

    CHECK_EQ_INT(s->run.batches, 32);
    CHECK_POS(s->run.batches_pos, 3, 16);
    CHECK_EQ_INT(s->run.depth, 4);
    CHECK_POS(s->run.depth_pos, 3, 27);
    CHECK_EQ_INT(s->run.device, 1);
    CHECK_POS(s->run.device_pos, 3, 38);
    CHECK(s->run.seed == UINT64_MAX);
    CHECK_POS(s->run.seed_pos, 3, 47);
    CHECK_STR(s->run.seed_pos.file, "tests/parser/good/full.yaml");

    /* Buffers: declaration order kept, defaults where a key is absent. */
    CHECK_EQ_INT(s->n_buffers, 6);
    const char *order[] = {"x_host", "x_dev", "w", "tab", "y_dev", "y_host"};
    for (int i = 0; i < 6 && i < s->n_buffers; i++) {
        CHECK_STR(s->buffers[i].name, order[i]);
        CHECK_EQ_INT(s->buffers[i].index, i);
    }
    const pl_buffer *b = find_buffer(s, "x_host");
    if (b) {
        CHECK_POS(b->pos, 5, 3);
        CHECK_EQ_INT(b->where, PL_HOST);
        CHECK_POS(b->where_pos, 5, 19);
        CHECK_EQ_INT(b->dtype, PL_F32);
        CHECK_POS(b->dtype_pos, 5, 32);
        CHECK_EQ_INT(b->rank, 1);
        CHECK_EQ_INT(b->shape[0], 1024);
        CHECK_POS(b->shape_pos, 5, 44);
        CHECK(!b->persistent);
        CHECK_EQ_INT(b->init, PL_INIT_NONE);
    }
    b = find_buffer(s, "w");
    if (b) {
        CHECK_POS(b->pos, 7, 3);
        CHECK_EQ_INT(b->where, PL_DEVICE);
        CHECK_POS(b->where_pos, 8, 12);
        CHECK_EQ_INT(b->dtype, PL_BF16);
        CHECK_POS(b->dtype_pos, 9, 12);
        CHECK_EQ_INT(b->rank, 2);
        CHECK_EQ_INT(b->shape[0], 256);
        CHECK_EQ_INT(b->shape[1], 256);
        CHECK_POS(b->shape_pos, 10, 12);
        CHECK(b->persistent);
        CHECK_POS(b->persistent_pos, 11, 17);
        CHECK_EQ_INT(b->init, PL_INIT_RANDOM);
        CHECK_POS(b->init_pos, 12, 11);
    }
    b = find_buffer(s, "tab");
    if (b) {
        CHECK_EQ_INT(b->dtype, PL_I32);
        CHECK_EQ_INT(b->init, PL_INIT_FILE);
        CHECK_STR(b->init_file, "tab.npy");
        CHECK(b->persistent);
    }
    b = find_buffer(s, "y_dev");
    if (b) {
        CHECK_EQ_INT(b->where, PL_DEVICE);
        CHECK_EQ_INT(b->dtype, PL_F32); /* default */
        CHECK_EQ_INT(b->dtype_pos.line, 0);
    }
    b = find_buffer(s, "y_host");
    if (b) {
        CHECK_EQ_INT(b->where, PL_HOST); /* default */
        CHECK_EQ_INT(b->init, PL_INIT_ZEROS);
    }

    /* Stages: common keys stored directly, the rest as options with text verbatim. */
    CHECK_EQ_INT(s->n_stages, 5);
    const pl_stage *g = find_stage(s, "gen");
    if (g) {
        CHECK_EQ_INT(g->index, 0);
        CHECK_EQ_INT(g->kind, pl_kind_find("source"));
        CHECK_POS(g->pos, 17, 12);
        CHECK_POS(g->kind_pos, 17, 23);
        CHECK_EQ_INT(g->n_opts, 4);
        const pl_opt *o = pl_stage_opt(g, "to");
        CHECK(o && !o->is_list);
        if (o) {
            CHECK_STR(o->str, "x_host");
            CHECK_POS(o->pos, 17, 31);
            CHECK_POS(o->val_pos, 17, 35);
        }
        o = pl_stage_opt(g, "min");
        CHECK(o && o->str && strcmp(o->str, "-2.5") == 0);
        o = pl_stage_opt(g, "max");
        CHECK(o && o->str && strcmp(o->str, "3") == 0);
        CHECK_STR(g->opts[0].key, "to"); /* order as written */
        CHECK_STR(g->opts[1].key, "generator");
        CHECK_EQ_INT(g->n_reads + g->n_writes + g->n_after, 0);
    }
    const pl_stage *up = find_stage(s, "up");
    if (up) {
        CHECK_EQ_INT(up->kind, pl_kind_find("h2d"));
        CHECK_POS(up->pos, 18, 11);
        CHECK_POS(up->kind_pos, 19, 11);
        const pl_opt *o = pl_stage_opt(up, "from");
        CHECK(o != NULL);
        if (o) {
            CHECK_POS(o->pos, 20, 5);
            CHECK_POS(o->val_pos, 20, 11);
        }
    }
    const pl_stage *d = find_stage(s, "double");
    if (d) {
        CHECK_EQ_INT(d->kind, pl_kind_find("kernel"));
        CHECK_EQ_INT(d->n_reads, 1);
        CHECK_EQ_INT(d->n_writes, 1);
        CHECK_EQ_INT(d->n_after, 1);
        if (d->n_reads == 1 && d->n_writes == 1 && d->n_after == 1) {
            CHECK_STR(d->reads[0].name, "x_dev");
            CHECK_POS(d->reads[0].pos, 22, 63);
            CHECK_EQ_INT(d->reads[0].index, -1); /* resolved by check */
            CHECK_STR(d->writes[0].name, "y_dev");
            CHECK_POS(d->writes[0].pos, 22, 80);
            CHECK_STR(d->after[0].name, "up");
            CHECK_POS(d->after[0].pos, 22, 96);
        }
        const pl_opt *o = pl_stage_opt(d, "alpha");
        CHECK(o && o->str && strcmp(o->str, "2") == 0);
        CHECK(pl_stage_opt(d, "reads") == NULL); /* common keys are not options */
    }
    const pl_stage *sv = find_stage(s, "save");
    if (sv) {
        const pl_opt *o = pl_stage_opt(sv, "tags");
        CHECK(o && o->is_list && o->str == NULL);
        if (o && o->n_items == 3) {
            CHECK_POS(o->pos, 29, 5);
            CHECK_POS(o->val_pos, 29, 11);
            CHECK_STR(o->items[0], "a");
            CHECK_POS(o->item_pos[0], 29, 12);
            CHECK_STR(o->items[1], "b c");
            CHECK_POS(o->item_pos[1], 29, 15);
            CHECK_STR(o->items[2], "1");
            CHECK_POS(o->item_pos[2], 29, 22);
        } else {
            CHECK(0);
        }
        o = pl_stage_opt(sv, "checksum");
        CHECK(o && o->str && strcmp(o->str, "true") == 0);
    }
    pl_spec_free(s);
}

/* Parse `text`; return its error message (static), or "OK". */
static const char *parse(const char *name, const char *text, size_t len, pl_spec **keep)
{
    static pl_error err;
    pl_spec *s = NULL;
    pl_error_clear(&err);
    pl_status st = pl_yaml_load_string(name, text, len, &s, &err);
    if (st == PL_OK) {
        if (keep)
            *keep = s;
        else
            pl_spec_free(s);
        return "OK";
    }
    CHECK(s == NULL);
    CHECK_EQ_INT(st, PL_EINPUT);
    CHECK_EQ_INT(err.status, PL_EINPUT);
    return err.msg;
}

#define P(text) parse("t.yaml", text, strlen(text), NULL)

static void test_strings(void)
{
    /* Defaults: name from the file's base name, run options. */
    pl_spec *s = NULL;
    CHECK_STR(parse("dir/sub/quick.yaml", "stages: []\n", 11, &s), "OK");
    if (s) {
        CHECK_STR(s->name, "quick");
        CHECK_STR(s->dir, "dir/sub");
        CHECK_EQ_INT(s->run.batches, 16);
        CHECK_EQ_INT(s->run.depth, 4); /* the default */
        CHECK_EQ_INT(s->run.device, 0);
        CHECK(s->run.seed == 0);
        CHECK_EQ_INT(s->n_stages, 0);
        CHECK(!s->run.batches_all);
        pl_spec_free(s);
    }
    /* batches: all (quoted or not): counted later, from the source files */
    s = NULL;
    const char *all = "run: {batches: \"all\"}\nstages: []\n";
    CHECK_STR(parse("t.yaml", all, strlen(all), &s), "OK");
    if (s) {
        CHECK(s->run.batches_all);
        CHECK_EQ_INT(s->run.batches, 0);
        CHECK_EQ_INT(s->run.batches_from, -1);
        CHECK_EQ_INT(s->run.batches_pos.line, 1);
        CHECK_EQ_INT(s->run.batches_pos.col, 16);
        pl_spec_free(s);
    }
    CHECK_STR(P("run: {batches: All}\n"),
              "t.yaml:1:16: error: run: 'batches' must be a whole number or 'all', got 'All'");
    /* No name: "<input>". Empty input. */
    CHECK_STR(parse(NULL, "", 0, NULL),
              "<input>:1:1: error: the file is empty; a pipeline needs at least 'stages:' (see "
              "docs/pipeline-yaml.md)");
    CHECK_STR(parse("t.yaml", NULL, 0, NULL),
              "t.yaml:1:1: error: the file is empty; a pipeline needs at least 'stages:' (see "
              "docs/pipeline-yaml.md)");
    /* A NUL inside the given length is junk, even after valid text. */
    CHECK_STR(parse("t.yaml", "stages: []\n\0", 12, NULL),
              "t.yaml:2:1: error: the file contains a NUL byte (offset 11): it is binary, not YAML "
              "text; pass the pipeline's .yaml file");
    /* The length is respected: text after it is not read. */
    CHECK_STR(parse("t.yaml", "stages: []\nbogus: 1", 11, NULL), "OK");
    /* CRLF line ends, no final newline, a UTF-8 BOM. */
    CHECK_STR(P("stages:\r\n  - {name: a, kind: sorce}"),
              "t.yaml:2:21: error: stage 'a': 'kind' is 'sorce' (did you mean 'source'?); it must "
              "be one of: source, search, h2d, kernel, d2h, lua, sink, gpt2, sample, tokenize, "
              "detokenize");
    CHECK_STR(P("\xef\xbb\xbfstages: []\nrun: {depth: 0}\n"),
              "t.yaml:2:14: error: run: 'depth' is 0; it must be between 1 and 64 (PL_MAX_DEPTH)");
    /* Columns count characters, not bytes. */
    CHECK_STR(P("pipeline: \"\xc3\xa9t\xc3\xa9\"\nstages: []\nrun: {x: 1}\n"),
              "t.yaml:3:7: error: run: unknown key 'x'; the keys here are: batches, depth, device, "
              "seed, memory_budget, fault_marks, gpu_wait, confine, shard_mode, loop");
    CHECK_STR(P("pipeline: \xc3\xa9t\xc3\xa9\nstages: [1]\n"),
              "t.yaml:2:10: error: each stage must be a mapping like {name: up, kind: h2d, from: "
              "x, to: y}, not a single value");
    /* Truncated UTF-8 at the very end. */
    CHECK_STR(parse("t.yaml", "stages: []\n\xe2\x82", 13, NULL),
              "t.yaml:2:1: error: the file is not UTF-8 text (byte 0xe2 at offset 11); a pipeline "
              "file is YAML in UTF-8: re-save it as UTF-8 or pass the right file");
    /* Overlong encoding and UTF-16 surrogates are not UTF-8. */
    CHECK(strstr(P("stages: []\n# \xc0\xaf\n"), "not UTF-8 text (byte 0xc0") != NULL);
    CHECK(strstr(P("stages: []\n# \xed\xa0\x80\n"), "not UTF-8 text (byte 0xed") != NULL);
    /* C1 controls and U+FFFE are refused before libyaml sees them; NEL counts as a line break. */
    CHECK_STR(P("stages: []\n# \xc2\x80\n"),
              "t.yaml:2:3: error: control character U+0080 is not allowed in YAML; remove it (only "
              "tab, newline and carriage return may appear)");
    CHECK_STR(P("stages: []\n# \xef\xbf\xbe\n"),
              "t.yaml:2:3: error: control character U+FFFE is not allowed in YAML; remove it (only "
              "tab, newline and carriage return may appear)");
    CHECK_STR(P("# a\xc2\x85\x01"),
              "t.yaml:2:1: error: control character 0x01 is not allowed in YAML; remove it (only "
              "tab, newline and carriage return may appear)");
    /* Long values are clipped in messages. */
    CHECK_STR(
        P("run: {batches: "
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "}\nstages: []\n"),
        "t.yaml:1:16: error: run: 'batches' must be a whole number or 'all', got "
        "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'");
    /* Numbers: int64 edges. */
    CHECK_STR(P("run: {batches: 1099511627776}\nstages: []\n"), "OK");
    CHECK_STR(P("run: {batches: 1099511627777}\nstages: []\n"),
              "t.yaml:1:16: error: run: 'batches' is 1099511627777; it must be between 1 and "
              "1099511627776 (PL_MAX_BATCHES)");
    CHECK_STR(P("run: {device: -1}\nstages: []\n"),
              "t.yaml:1:15: error: run: 'device' is -1; it must be between 0 and 2147483647");
    CHECK_STR(P("run: {seed: 18446744073709551616}\nstages: []\n"),
              "t.yaml:1:13: error: run: 'seed' must be a whole number from 0 to "
              "18446744073709551615, got '18446744073709551616'");
    /* Exactly the cap is allowed; one element more is not. */
    CHECK_STR(P("buffers: {x: {dtype: u8, shape: [65536, 1048576]}}\nstages: []\n"), "OK");
    CHECK_STR(P("buffers: {x: {dtype: u8, shape: [65536, 1048577]}}\nstages: []\n"),
              "t.yaml:1:33: error: buffer 'x': 68719542272 elements of u8 is more than "
              "68719476736 bytes (64 GiB, PL_MAX_BUFFER_BYTES) per buffer: make the shape smaller");
    /* PL_MAX_RANK dims are fine; nesting of exactly PL_MAX_NESTING is fine. */
    CHECK_STR(P("buffers: {x: {shape: [1, 2, 1, 2, 1, 2, 1, 2]}}\nstages: []\n"), "OK");
    CHECK_STR(P("stages: [{name: a, kind: lua, x: [1]}]\n"
                "run: {}\n"),
              "OK");
    {
        char deep[256] = "stages:\n  - {name: a, kind: lua, x: ";
        /* root map, stages list, stage map, then 13 lists: depth 16 */
        for (int i = 0; i < 13; i++)
            strcat(deep, "[");
        strcat(deep, "1");
        for (int i = 0; i < 13; i++)
            strcat(deep, "]");
        strcat(deep, "}\n");
        CHECK(strstr(P(deep), "each item of 'x' must be a single value, not a list") != NULL);
        strcpy(deep, "stages:\n  - {name: a, kind: lua, x: ");
        for (int i = 0; i < 14; i++)
            strcat(deep, "[");
        strcat(deep, "1");
        for (int i = 0; i < 14; i++)
            strcat(deep, "]");
        strcat(deep, "}\n");
        CHECK(strstr(P(deep), "t.yaml:2:42: error: nesting deeper than 16 levels") == P(deep));
    }
    /* Duplicate buffer names are left to pl_spec_check: both land in the spec. */
    s = NULL;
    CHECK_STR(
        parse("t.yaml", "buffers:\n  x: {shape: [1]}\n  x: {shape: [2]}\nstages: []\n", 56, &s),
        "OK");
    if (s) {
        CHECK_EQ_INT(s->n_buffers, 2);
        pl_spec_free(s);
    }
    /* Unknown stage options are stored; pl_stage_check_opts reports them with the kind's keys. */
    s = NULL;
    CHECK_STR(parse("t.yaml", "stages: [{name: a, kind: h2d, form: x, reeds: [y]}]\n", 52, &s),
              "OK");
    if (s) {
        CHECK_EQ_INT(s->stages[0].n_opts, 2);
        pl_spec_free(s);
    }
    /* Null-like stage option values are refused, quoted ones are text. */
    CHECK_STR(P("stages: [{name: a, kind: lua, code: ~}]\n"),
              "t.yaml:1:37: error: stage 'a': 'code' has no value; give it a value or remove the "
              "key");
    CHECK_STR(P("stages: [{name: a, kind: lua, code: \"\"}]\n"), "OK");
    CHECK_STR(P("stages: [{name: a, kind: lua, code: '~'}]\n"), "OK");
    /* Block scalars keep their text. */
    s = NULL;
    CHECK_STR(
        parse("t.yaml", "stages:\n  - name: a\n    kind: lua\n    code: |\n      x = 1\n", 58, &s),
        "OK");
    if (s) {
        CHECK_STR(pl_stage_opt(&s->stages[0], "code")->str, "x = 1\n");
        pl_spec_free(s);
    }
    /* The first repeat in document order is reported, with the first occurrence. */
    CHECK_STR(
        P("stages: [{name: s, kind: lua, a: 1, b: 2, b: 3, a: 4}]\n"),
        "t.yaml:1:43: error: stage 's': duplicate key 'b' (first given at line 1, column 37); "
        "keep only one");
    /* Many keys in one mapping: sorted, not compared pairwise (this would take minutes). */
    {
        size_t cap = 200000 * 16 + 64, n = 0;
        char *big = malloc(cap);
        n += (size_t)sprintf(big + n, "stages:\n  - name: s\n    kind: lua\n");
        for (int i = 0; i < 200000; i++)
            n += (size_t)sprintf(big + n, "    k%d: 1\n", i);
        n += (size_t)sprintf(big + n, "    k7: 2\n");
        CHECK_STR(parse("t.yaml", big, n, NULL),
                  "t.yaml:200004:5: error: stage 's': duplicate key 'k7' (first given at line 11, "
                  "column 5); keep only one");
        free(big);
    }
    CHECK_STR(P("pipeline: ''\nstages: []\n"),
              "t.yaml:1:11: error: 'pipeline' is empty; write pipeline: my_pipeline, or remove the "
              "key to use the file's base name");
    /* PL_MAX_STAGES stages are fine; one more is refused at its position. */
    {
        size_t cap = (size_t)(PL_MAX_STAGES + 1) * 32 + 64, n = 0;
        char *big = malloc(cap);
        n += (size_t)sprintf(big + n, "stages:\n");
        for (int i = 0; i < PL_MAX_STAGES; i++)
            n += (size_t)sprintf(big + n, "- {name: s%d, kind: lua}\n", i);
        CHECK_STR(parse("t.yaml", big, n, NULL), "OK");
        n += (size_t)sprintf(big + n, "- {name: t, kind: lua}\n");
        CHECK_STR(parse("t.yaml", big, n, NULL),
                  "t.yaml:100002:3: error: more than 100000 stages (PL_MAX_STAGES); split the "
                  "pipeline into several");
        free(big);
    }
    /* A key that is a mapping; an empty key. */
    CHECK_STR(P("{a: 1}: 2\nstages: []\n"),
              "t.yaml:1:1: error: a key must be a single word, not a mapping; write 'key: value'");
    CHECK_STR(P("\"\": 2\nstages: []\n"), "t.yaml:1:1: error: empty key; write 'key: value'");
    /* Explicit document markers around one document are fine. */
    CHECK_STR(P("%YAML 1.1\n---\nstages: []\n...\n"), "OK");
    CHECK_STR(P("stages: []\n...\n---\nstages: []\n"),
              "t.yaml:3:1: error: a second YAML document starts here; a pipeline file holds one "
              "document: remove this '---' and what follows, or split the file");
    CHECK_STR(P("stages: !custom [a]\n"),
              "t.yaml:1:9: error: tag '!custom': pipectl files do not use YAML tags; remove it");
}

static void test_files(void)
{
    pl_error err;
    pl_spec *s = (pl_spec *)&err; /* must be reset to NULL */
    pl_status st = pl_yaml_load_file("tests/parser/no-such-file.yaml", &s, &err);
    CHECK_EQ_INT(st, PL_EINPUT);
    CHECK(s == NULL);
    CHECK_STR(err.msg, "error: cannot read 'tests/parser/no-such-file.yaml': No such file or "
                       "directory");
    st = pl_yaml_load_file("tests/parser", &s, &err);
    CHECK_EQ_INT(st, PL_EINPUT);
    CHECK_STR(err.msg, "error: cannot read 'tests/parser': Is a directory");
    CHECK_EQ_INT(pl_status_exit_code(st), 2);
}

/* The whole file, NUL-terminated (docs/pipeline-yaml.md is longer than 64 KiB). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    *len = 0;
    while (buf) {
        *len += fread(buf + *len, 1, cap - 1 - *len, f);
        if (*len < cap - 1) break;
        char *more = realloc(buf, cap *= 2);
        if (!more) free(buf);
        buf = more;
    }
    if (buf) buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* Every parse-level case of the bad corpus, loaded by base name from inside the folder (with its
 * --set arguments), as tests/parser/run_bad.sh does through `pipectl check`. */
static void test_bad_corpus(void)
{
    if (chdir("tests/parser/bad") != 0) {
        CHECK(!"cannot enter tests/parser/bad");
        return;
    }
    DIR *dir = opendir(".");
    CHECK(dir != NULL);
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0) continue;
        if (strncmp(e->d_name, "check_", 6) == 0) continue; /* check-level: run_bad.sh */
        char expected_path[512];
        snprintf(expected_path, sizeof expected_path, "%.*s.expected", (int)(len - 5), e->d_name);
        size_t elen = 0;
        char *expected = slurp(expected_path, &elen);
        if (!expected) {
            fprintf(stderr, "%s: no %s\n", e->d_name, expected_path);
            CHECK(expected != NULL);
            continue;
        }
        char *nl = strchr(expected, '\n');
        if (nl) *nl = '\0'; /* the first line is the message */
        /* NAME.args: the --set arguments run_bad.sh gives `pipectl check` ("--set" and the
         * KEY=VALUE on the next line), given to the front end as the command line gives them. */
        char args_path[512], *args = NULL, *sets[16];
        pl_load_opts opts = {.sets = (const char *const *)sets};
        snprintf(args_path, sizeof args_path, "%.*s.args", (int)(len - 5), e->d_name);
        size_t alen = 0;
        if ((args = slurp(args_path, &alen)) != NULL) {
            bool set = false;
            for (char *line = strtok(args, "\n"); line; line = strtok(NULL, "\n")) {
                if (set && opts.n_sets < 16) sets[opts.n_sets++] = line;
                set = strcmp(line, "--set") == 0;
            }
        }
        pl_error err;
        pl_spec *s = NULL;
        pl_status st = pl_yaml_load_file_opts(e->d_name, &opts, &s, &err);
        free(args);
        CHECK_EQ_INT(st, PL_EINPUT);
        if (st == PL_OK) {
            fprintf(stderr, "%s: parsed, expected: %s\n", e->d_name, expected);
            pl_spec_free(s);
        } else {
            CHECK_STR(err.msg, expected);
        }
        free(expected);
        n++;
    }
    if (dir) closedir(dir);
    CHECK(n >= 40);
    printf("bad corpus: %d parse-level cases\n", n);
    CHECK(chdir("../../..") == 0);
}

/* The text of `doc` from the line `heading` to the next heading, or NULL. */
static char *doc_section_at(const char *doc, const char *heading)
{
    const char *a = strstr(doc, heading);
    while (a && a != doc && a[-1] != '\n')
        a = strstr(a + 1, heading);
    if (!a) return NULL;
    const char *b = strstr(a + strlen(heading), "\n#");
    size_t n = b ? (size_t)(b - a) : strlen(a);
    char *s = malloc(n + 1);
    memcpy(s, a, n);
    s[n] = '\0';
    return s;
}

/* The text of `doc` between "### <kind> (" and the next heading, or NULL. */
static char *doc_section(const char *doc, const char *kind)
{
    char head[64];
    snprintf(head, sizeof head, "### %s (", kind);
    return doc_section_at(doc, head);
}

/* "`a` x" -> "a x" into out (cells compare without the code marks). */
static void strip_ticks(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        if (s[i] != '`') out[k++] = s[i];
    out[k] = '\0';
    while (k > 0 && out[k - 1] == ' ')
        out[--k] = '\0';
}

/* Whether a type cell of the docs says the table's type. */
static bool doc_type_agrees(const pl_key *k, const char *cell, const char *section)
{
    switch (k->type) {
    case PL_KEY_STR:
        if (strcmp(k->name, "kind") == 0) { /* the common key: one of the kinds */
            int n;
            const char *const *kinds = pl_kind_names(&n);
            for (int i = 0; i < n; i++)
                if (!strstr(cell, kinds[i])) return false;
            return true;
        }
        return strstr(cell, "text") != NULL;
    case PL_KEY_PATH:
        return strstr(cell, "path") != NULL;
    case PL_KEY_INT: /* and the words it takes besides a number (run.batches: all) */
        for (const char *p = k->values; p && *p;) {
            const char *bar = strchr(p, '|');
            char word[80];
            snprintf(word, sizeof word, "or %.*s", (int)(bar ? (size_t)(bar - p) : strlen(p)), p);
            if (!strstr(cell, word)) return false;
            p = bar ? bar + 1 : NULL;
        }
        return strstr(cell, "integer") != NULL;
    case PL_KEY_NUM:
        return strstr(cell, "number") != NULL;
    case PL_KEY_BOOL:
        return strstr(cell, "true") && strstr(cell, "false");
    case PL_KEY_ENUM:
        /* every value in the cell, or (kernel ops) as a row of the section */
        for (const char *p = k->values; p && *p;) {
            const char *bar = strchr(p, '|');
            size_t n = bar ? (size_t)(bar - p) : strlen(p);
            char word[80], row[96];
            snprintf(word, sizeof word, "%.*s", (int)n, p);
            snprintf(row, sizeof row, "| `%s` |", word);
            if (!strstr(cell, word) && !strstr(section, row)) return false;
            p = bar ? bar + 1 : NULL;
        }
        return true;
    case PL_KEY_NAME:
        return strstr(cell, "buffer name") != NULL;
    case PL_KEY_NAMES:
        return strstr(cell, "list of") && strstr(cell, "names");
    case PL_KEY_INTS:
        return strstr(cell, "list of integers") != NULL;
    case PL_KEY_INT_OR_INTS:
        return strstr(cell, "integer or list of integers") != NULL;
    case PL_KEY_SIZE:
        return strstr(cell, "size") != NULL;
    case PL_KEY_FUNC:
        return strstr(cell, "Lua function") != NULL;
    case PL_KEY_MAP:
        return strstr(cell, "mapping") != NULL;
    case PL_KEY_LIST:
    case PL_KEY_ITEMS:
        return strstr(cell, "list") != NULL;
    }
    return false;
}

/* Whether a default cell says the table's default: it starts with the table's text; without one,
 * it says "required" (the key's doc says "(required)"), "none", or nothing. */
static bool doc_default_agrees(const pl_key *k, const char *cell)
{
    if (k->def) return strncmp(cell, k->def, strlen(k->def)) == 0;
    if (k->doc && strstr(k->doc, "(required)")) return strncmp(cell, "required", 8) == 0;
    return !*cell || strncmp(cell, "none", 4) == 0;
}

/* The key table (| key | type | default | meaning |) of `section` against `keys`: a row for
 * every key with the same type and default, and no row for a key the table does not have. */
static void check_doc_keys(const char *what, const char *section, const pl_key *const *keys, int n)
{
    const char *t = strstr(section, "| key | type | default | meaning |");
    CHECK(t != NULL);
    if (!t) {
        fprintf(stderr, "docs/pipeline-yaml.md: %s has no key table\n", what);
        return;
    }
    int found = 0;
    for (const char *line = strchr(t, '\n'); line && line[1] == '|';
         line = strchr(line + 1, '\n')) {
        const char *c[5];
        c[0] = line + 1;
        for (int i = 1; i < 5; i++)
            c[i] = c[i - 1] ? strstr(c[i - 1] + 1, " | ") : NULL;
        if (!c[3] || strncmp(c[0], "| --- |", 7) == 0) continue;
        char name[80], type[256], def[256];
        /* an empty cell is "| |": its closing " | " overlaps the opening one */
        strip_ticks(c[0] + 2, c[1] > c[0] + 2 ? (size_t)(c[1] - c[0] - 2) : 0, name, sizeof name);
        strip_ticks(c[1] + 3, c[2] > c[1] + 3 ? (size_t)(c[2] - c[1] - 3) : 0, type, sizeof type);
        strip_ticks(c[2] + 3, c[3] > c[2] + 3 ? (size_t)(c[3] - c[2] - 3) : 0, def, sizeof def);
        const pl_key *k = NULL;
        for (int i = 0; i < n && !k; i++)
            if (strcmp(keys[i]->name, name) == 0) k = keys[i];
        if (!k) {
            fprintf(stderr, "docs/pipeline-yaml.md: %s: row for '%s', which is no key\n", what,
                    name);
            CHECK(k != NULL);
            continue;
        }
        found++;
        if (!doc_type_agrees(k, type, section))
            fprintf(stderr, "docs/pipeline-yaml.md: %s: '%s' has type '%s'; the table says %s\n",
                    what, name, type, pl_key_type_name(k->type));
        CHECK(doc_type_agrees(k, type, section));
        if (!doc_default_agrees(k, def))
            fprintf(stderr,
                    "docs/pipeline-yaml.md: %s: '%s' has default '%s'; the table says '%s'\n", what,
                    name, def, k->def ? k->def : "(none)");
        CHECK(doc_default_agrees(k, def));
    }
    int want = 0;
    for (int i = 0; i < n; i++) {
        char row[96];
        snprintf(row, sizeof row, "| `%s` |", keys[i]->name);
        if (!strstr(t, row))
            fprintf(stderr, "docs/pipeline-yaml.md: %s: no row for '%s'\n", what, keys[i]->name);
        CHECK(strstr(t, row) != NULL);
        want++;
    }
    CHECK_EQ_INT(found, want);
}

static void check_doc_section(const char *doc, const pl_section *sec)
{
    const pl_key *keys[64];
    int n = 0;
    for (const pl_field *f = sec->fields; f->key.name && n < 64; f++)
        keys[n++] = &f->key;
    char *text = doc_section_at(doc, sec->heading);
    if (!text) fprintf(stderr, "docs/pipeline-yaml.md: no section '%s'\n", sec->heading);
    CHECK(text != NULL);
    if (text) check_doc_keys(sec->name, text, keys, n);
    free(text);
}

/* docs/pipeline-yaml.md against every table: the top level, run, buffers, the common stage keys
 * and each kind's keys (type and default of each), the ops, the dtypes. */
static void test_docs(void)
{
    size_t len = 0;
    char *doc = slurp("docs/pipeline-yaml.md", &len);
    CHECK(doc != NULL);
    if (!doc) return;
    check_doc_section(doc, &pl_schema_top);
    check_doc_section(doc, &pl_schema_run);
    check_doc_section(doc, &pl_schema_budget);
    check_doc_section(doc, &pl_schema_buffer);
    check_doc_section(doc, &pl_schema_loop);
    check_doc_section(doc, &pl_schema_loop_stream);
    const pl_key *keys[64];
    int nk = 0;
    for (const pl_key *k = pl_common_stage_keys; k->name && nk < 64; k++)
        keys[nk++] = k;
    char *common = doc_section_at(doc, "## `stages`");
    CHECK(common != NULL);
    if (common) check_doc_keys("stages (common keys)", common, keys, nk);
    free(common);
    int n;
    const char *const *kinds = pl_kind_names(&n);
    for (int i = 0; i < n; i++) {
        char *sec = doc_section(doc, kinds[i]);
        if (!sec) fprintf(stderr, "docs/pipeline-yaml.md: no section '### %s ('\n", kinds[i]);
        CHECK(sec != NULL);
        nk = 0;
        for (const pl_key *k = pl_kind_find(kinds[i])->keys; k->name && nk < 64; k++)
            keys[nk++] = k;
        if (sec) check_doc_keys(kinds[i], sec, keys, nk);
        free(sec);
    }
    char row[512];
    /* A kind's documented values (the kernel's ops): its section has exactly their rows, as
     * "| `name` | reads | writes | doc |" ("none" for no operand, "any" for any). */
    for (int i = 0; i < n; i++) {
        const pl_kind *kind = pl_kind_find(kinds[i]);
        if (!kind->values) continue;
        char *sec = doc_section(doc, kinds[i]);
        CHECK(sec != NULL);
        if (!sec) continue;
        int want = 0, rows = 0;
        for (const pl_key_value *v = kind->values; v->name; v++, want++) {
            const char *r = !v->reads ? "any" : *v->reads ? v->reads : "none";
            const char *w = !v->writes ? "any" : *v->writes ? v->writes : "none";
            snprintf(row, sizeof row, "\n| `%s` | %s | %s | %s |\n", v->name, r, w, v->doc);
            if (!strstr(sec, row))
                fprintf(stderr, "docs/pipeline-yaml.md: %s: no row %s", kinds[i], row + 1);
            CHECK(strstr(sec, row) != NULL);
        }
        char head[128];
        snprintf(head, sizeof head, "| %s | reads | writes |", kind->values_key);
        const char *t = strstr(sec, head);
        if (!t) fprintf(stderr, "docs/pipeline-yaml.md: %s: no table '%s'\n", kinds[i], head);
        CHECK(t != NULL);
        for (const char *line = t ? strchr(t, '\n') : NULL; line && line[1] == '|';
             line = strchr(line + 1, '\n'))
            rows += strncmp(line + 1, "| `", 3) == 0;
        if (rows != want)
            fprintf(stderr, "docs/pipeline-yaml.md: %s: %d rows of '%s', the table has %d\n",
                    kinds[i], rows, kind->values_key, want);
        CHECK_EQ_INT(rows, want);
        free(sec);
    }
    for (int i = 0; i < PL_DTYPE_COUNT; i++) {
        snprintf(row, sizeof row, "`%s`", pl_dtype_name((pl_dtype)i));
        CHECK(strstr(doc, row) != NULL);
    }
    free(doc);
}

/* The buffer table's dtype values are pl_dtype_name's, in order (the walker maps one to the
 * other by name, the schema and help list them from the table). */
static void test_tables(void)
{
    const pl_key *dt = NULL;
    for (const pl_field *f = pl_schema_buffer.fields; f->key.name; f++)
        if (strcmp(f->key.name, "dtype") == 0) dt = &f->key;
    CHECK(dt != NULL);
    char want[128] = "";
    for (int i = 0; i < PL_DTYPE_COUNT; i++) {
        strcat(want, pl_dtype_name((pl_dtype)i));
        if (i + 1 < PL_DTYPE_COUNT) strcat(want, "|");
    }
    if (dt) CHECK_STR(dt->values, want);
}

int main(void)
{
    test_docs();
    test_tables();
    test_full_example();
    test_strings();
    test_files();
    test_bad_corpus();
    PL_TEST_DONE();
}
