/* test_random_dag: random pipelines (chains, diamonds, wide fans, random DAGs of up to 50 stages:
 * sources, h2d, kernel ops, d2h, sinks; persistent weights and accumulators; extra `after:`
 * edges; random depth 1-4, batch count, worker count) built with the builder API, run on the host
 * executor, and every sink output compared byte for byte with a plain sequential evaluation
 * written here (declaration order is topological by construction; batch by batch; each stage's
 * run_host called directly). About one DAG in eight also gets an injected failure: then the run
 * must fail with status 1, every sink file must hold a correct prefix, and no .partial may stay.
 *
 * usage: test_random_dag PIPECTL SOURCE_DIR BUILD_DIR [COUNT [SEED]]   (COUNT default 1000) */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_exec.h"
#include "pl_exec_host.h"
#include "pl_hash.h"
#include "pl_npy.h"
#include "pl_plan.h"
#include "pl_test.h"

#define MAX_VALS 256

typedef struct gen {
    uint64_t rng;
    pl_spec *spec;
    int line;
    int nbuf;
    int R; /* data buffers are f32 [R, R] */
    const char *dir;
    int dag;
    /* device f32 [R,R] values and whether something consumed them */
    char vals[MAX_VALS][16];
    bool used[MAX_VALS];
    int nvals;
    int max_stages;
} gen;

static uint64_t rnd(gen *g)
{
    g->rng += PL_HASH_GOLDEN;
    return pl_mix64(g->rng);
}
static int rndn(gen *g, int n)
{
    return n > 0 ? (int)(rnd(g) % (uint64_t)n) : 0;
}

static pl_pos pos(gen *g)
{
    return (pl_pos){"dag.yaml", ++g->line, 1};
}

/* Adds a buffer; returns its name (arena string). */
static const char *buf(gen *g, const char *prefix, pl_where w, pl_dtype t, int rank, int64_t d0,
                       int64_t d1, bool persistent, pl_init init)
{
    char name[32];
    snprintf(name, sizeof name, "%s%d", prefix, g->nbuf++);
    pl_buffer *b = pl_spec_add_buffer(g->spec, name, pos(g));
    b->where = w;
    b->dtype = t;
    b->rank = rank;
    b->shape[0] = d0;
    b->shape[1] = d1;
    b->persistent = persistent;
    b->init = init;
    return b->name;
}

static const char *data_buf(gen *g, const char *prefix, pl_where w)
{
    return buf(g, prefix, w, PL_F32, 2, g->R, g->R, false, PL_INIT_NONE);
}

static pl_stage *stage(gen *g, const pl_kind *kind)
{
    char name[32];
    snprintf(name, sizeof name, "s%d", g->spec->n_stages);
    pl_stage *st = pl_spec_add_stage(g->spec, name, pos(g));
    st->kind = kind;
    st->kind_pos = st->pos;
    return st;
}

static void opt(gen *g, pl_stage *st, const char *key, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    pl_opt *o = pl_stage_add_opt(g->spec, st, key, pos(g));
    o->str = pl_spec_strdup(g->spec, v);
    o->val_pos = o->pos;
}

static int stages_left(gen *g)
{
    return g->max_stages - g->spec->n_stages;
}

static void add_val(gen *g, const char *name)
{
    if (g->nvals >= MAX_VALS) return;
    snprintf(g->vals[g->nvals], sizeof g->vals[0], "%s", name);
    g->used[g->nvals++] = false;
}

static const char *pick(gen *g, int i)
{
    g->used[i] = true;
    return g->vals[i];
}

/* source -> host -> h2d -> device value (2 stages). */
static int new_source(gen *g)
{
    const char *h = data_buf(g, "h", PL_HOST), *d = data_buf(g, "d", PL_DEVICE);
    pl_stage *st = stage(g, pl_kind_find("source"));
    opt(g, st, "to", "%s", h);
    int kind = rndn(g, 10);
    if (kind < 6) {
        opt(g, st, "generator", "random");
        if (rndn(g, 2)) opt(g, st, "seed", "%d", rndn(g, 1000));
    } else if (kind < 8) {
        opt(g, st, "generator", "range");
    } else if (kind < 9) {
        opt(g, st, "generator", "constant");
        opt(g, st, "value", "%d", rndn(g, 7) - 3);
    } else {
        /* A raw file of 1-3 batches, read with wrap. */
        char path[512];
        snprintf(path, sizeof path, "%s/in%d_%d.bin", g->dir, g->dag, g->nbuf);
        FILE *f = fopen(path, "wb");
        int nb = 1 + rndn(g, 3);
        for (int i = 0; i < nb * g->R * g->R; i++) {
            float v = (float)(rndn(g, 2001) - 1000) / 100.0f;
            fwrite(&v, sizeof v, 1, f);
        }
        fclose(f);
        opt(g, st, "file", "%s", path);
        opt(g, st, "wrap", "true");
    }
    pl_stage *up = stage(g, pl_kind_find("h2d"));
    opt(g, up, "from", "%s", h);
    opt(g, up, "to", "%s", d);
    add_val(g, d);
    return g->nvals - 1;
}

/* d2h + sink of any device buffer (2 stages). */
static void export(gen *g, const char *dev, pl_dtype t, int rank, int64_t d0, int64_t d1)
{
    const char *h = buf(g, "o", PL_HOST, t, rank, d0, d1, false, PL_INIT_NONE);
    pl_stage *down = stage(g, pl_kind_find("d2h"));
    opt(g, down, "from", "%s", dev);
    opt(g, down, "to", "%s", h);
    pl_stage *sk = stage(g, pl_kind_find("sink"));
    opt(g, sk, "from", "%s", h);
    int f = rndn(g, 5);
    if (f < 4) opt(g, sk, "to", "%s/dag%d_%s.%s", g->dir, g->dag, sk->name, f < 2 ? "npy" : "bin");
}

/* One kernel op over existing values; returns the new value's index (or -1). */
static int new_op(gen *g, int a, int b)
{
    static const char *ops[] = {"scale", "saxpy", "add", "gemm", "fill", "scale"};
    int which = rndn(g, 6);
    const char *out = data_buf(g, "d", PL_DEVICE);
    pl_stage *st = stage(g, pl_kind_find("kernel"));
    opt(g, st, "op", "%s", ops[which]);
    pl_pos p = pos(g);
    switch (which) {
    case 0:
    case 5:
        opt(g, st, "alpha", "%g", (double)(rndn(g, 9) - 4) / 2);
        pl_stage_add_read(g->spec, st, pick(g, a), p);
        break;
    case 1:
    case 2:
    case 3:
        if (which == 1) opt(g, st, "alpha", "%d", rndn(g, 5) - 2);
        pl_stage_add_read(g->spec, st, pick(g, a), p);
        if (b == a || b < 0) {
            /* A persistent random weight as the second operand. */
            const char *w = buf(g, "w", PL_DEVICE, PL_F32, 2, g->R, g->R, true, PL_INIT_RANDOM);
            pl_stage_add_read(g->spec, st, w, p);
        } else {
            pl_stage_add_read(g->spec, st, pick(g, b), p);
        }
        break;
    default:
        opt(g, st, "value", "%d", rndn(g, 11) - 5);
        break;
    }
    pl_stage_add_write(g->spec, st, out, p);
    add_val(g, out);
    return g->nvals - 1;
}

/* A persistent accumulator: acc += v every batch, exported (3 stages). */
static void accumulate(gen *g, int v)
{
    const char *acc = buf(g, "acc", PL_DEVICE, PL_F32, 2, g->R, g->R, true,
                          rndn(g, 2) ? PL_INIT_ZEROS : PL_INIT_RANDOM);
    pl_stage *st = stage(g, pl_kind_find("kernel"));
    opt(g, st, "op", "add");
    pl_pos p = pos(g);
    pl_stage_add_read(g->spec, st, acc, p);
    pl_stage_add_read(g->spec, st, pick(g, v), p);
    pl_stage_add_write(g->spec, st, acc, p);
    export(g, acc, PL_F32, 2, g->R, g->R);
}

/* A reduction of a value, exported (3 stages). */
static void reduce(gen *g, int v)
{
    int which = rndn(g, 3);
    const char *out;
    pl_stage *st = stage(g, pl_kind_find("kernel"));
    pl_pos p = pos(g);
    pl_stage_add_read(g->spec, st, pick(g, v), p);
    if (which == 0) {
        opt(g, st, "op", "sum");
        pl_dtype t = rndn(g, 2) ? PL_F64 : PL_F32;
        out = buf(g, "r", PL_DEVICE, t, 1, 1, 0, false, PL_INIT_NONE);
        pl_stage_add_write(g->spec, g->spec->stages + g->spec->n_stages - 1, out, p);
        export(g, out, t, 1, 1, 0);
    } else if (which == 1) {
        opt(g, st, "op", "checksum");
        out = buf(g, "r", PL_DEVICE, PL_I64, 1, 1, 0, false, PL_INIT_NONE);
        pl_stage_add_write(g->spec, g->spec->stages + g->spec->n_stages - 1, out, p);
        export(g, out, PL_I64, 1, 1, 0);
    } else {
        opt(g, st, "op", "argmax");
        out = buf(g, "r", PL_DEVICE, PL_I32, 1, g->R, 0, false, PL_INIT_NONE);
        pl_stage_add_write(g->spec, g->spec->stages + g->spec->n_stages - 1, out, p);
        export(g, out, PL_I32, 1, g->R, 0);
    }
}

static const char *family_name[] = {"chain", "diamond", "fan", "random"};

static pl_spec *generate(gen *g, int family)
{
    pl_error err;
    pl_spec_new("dag.yaml", &g->spec, &err);
    g->R = 1 + rndn(g, 6);
    g->spec->run.batches = 1 + rndn(g, 12);
    g->spec->run.depth = 1 + rndn(g, 4);
    g->spec->run.seed = rnd(g) % 100000;
    g->max_stages = 6 + rndn(g, 45); /* <= 50 */
    int cur = new_source(g);
    /* Keep room for exporting the leaves (2 stages each) and a reduction (3). */
    while (stages_left(g) > 12) {
        int unused = 0;
        for (int i = 0; i < g->nvals; i++)
            unused += !g->used[i];
        if (2 * unused + 10 > stages_left(g)) break;
        switch (family) {
        case 0: /* chain */
            cur = new_op(g, cur, rndn(g, 3) ? -1 : new_source(g));
            break;
        case 1: { /* diamond: v -> a, b -> add */
            int a = new_op(g, cur, -1), b = new_op(g, cur, -1);
            pl_stage *st = stage(g, pl_kind_find("kernel"));
            opt(g, st, "op", "add");
            const char *out = data_buf(g, "d", PL_DEVICE);
            pl_pos p = pos(g);
            pl_stage_add_read(g->spec, st, pick(g, a), p);
            pl_stage_add_read(g->spec, st, pick(g, b), p);
            pl_stage_add_write(g->spec, st, out, p);
            add_val(g, out);
            cur = g->nvals - 1;
            break;
        }
        case 2: /* wide fan from one value */
            new_op(g, cur, -1);
            break;
        default: { /* random DAG */
            int r = rndn(g, 10);
            if (r == 0)
                new_source(g);
            else if (r == 1)
                accumulate(g, rndn(g, g->nvals));
            else
                new_op(g, rndn(g, g->nvals), rndn(g, 4) ? rndn(g, g->nvals) : -1);
            break;
        }
        }
    }
    if (stages_left(g) >= 3 + 2) reduce(g, rndn(g, g->nvals));
    if (family != 3 && stages_left(g) >= 3 + 2 && rndn(g, 2)) accumulate(g, rndn(g, g->nvals));
    /* Export every value nothing consumed, while room lasts; at least one export. */
    int exported = 0;
    for (int i = 0; i < g->nvals && stages_left(g) >= 2; i++)
        if (!g->used[i] || (rndn(g, 8) == 0)) {
            export(g, g->vals[i], PL_F32, 2, g->R, g->R);
            g->used[i] = true;
            exported++;
        }
    if (!exported) export(g, g->vals[g->nvals - 1], PL_F32, 2, g->R, g->R);
    /* Extra ordering edges: later stage after an earlier one (never a cycle). */
    int n_after = rndn(g, 3) ? 0 : 1 + rndn(g, 3);
    for (int k = 0; k < n_after && g->spec->n_stages > 2; k++) {
        int j = 1 + rndn(g, g->spec->n_stages - 1), i = rndn(g, j);
        pl_stage_add_after(g->spec, &g->spec->stages[j], g->spec->stages[i].name, pos(g));
    }
    return g->spec;
}

/* The plain sequential evaluation: one copy of every buffer, stages in declaration order, batch
 * after batch. expected[s] collects the bytes each sink s receives. */
typedef struct expect {
    unsigned char *data;
    size_t len;
} expect;

static pl_status reference(const pl_spec *spec, expect *expected, pl_error *err)
{
    pl_status st = PL_OK;
    int n = spec->n_stages;
    pl_buffers *bufs = NULL;
    void **state = calloc((size_t)n, sizeof *state);
    bool *opened = calloc((size_t)n, sizeof *opened);
    pl_run_env env = {.spec = spec,
                      .batches = spec->run.batches,
                      .depth = 1,
                      .workers = 1,
                      .seed = spec->run.seed};
    PL_CHECK_GOTO(pl_buffers_new(spec, 1, NULL, true, spec->run.seed, &bufs, err), st, done);
    for (int s = 0; s < n; s++) {
        const pl_kind *k = (spec->stages[s].kind);
        if (spec->stages[s].kind == pl_kind_find("sink") || !k->open) continue;
        PL_CHECK_GOTO(k->open(&env, &spec->stages[s], &state[s], err), st, done);
        opened[s] = true;
    }
    for (int64_t b = 0; b < spec->run.batches; b++)
        for (int s = 0; s < n; s++) {
            const pl_stage *sg = &spec->stages[s];
            void *const *row = pl_buffers_slot(bufs, 0);
            if (sg->kind == pl_kind_find("sink")) {
                const pl_buffer *in = &spec->buffers[sg->reads[0].index];
                expect *e = &expected[s];
                e->data = realloc(e->data, e->len + in->bytes);
                memcpy(e->data + e->len, row[in->index], in->bytes);
                e->len += in->bytes;
                continue;
            }
            pl_stage_ctx ctx = {.spec = spec,
                                .stage = sg,
                                .env = &env,
                                .batch = b,
                                .slot = 0,
                                .worker = 0,
                                .bufs = row,
                                .state = state[s]};
            PL_CHECK_GOTO((sg->kind)->run_host(&ctx, err), st, done);
        }
done:
    for (int s = 0; s < n; s++)
        if (opened[s])
            (spec->stages[s].kind)->close(&env, &spec->stages[s], state[s], 0, false, NULL);
    pl_buffers_free(bufs);
    free(state);
    free(opened);
    return st;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
}

/* Prints the spec as YAML, to reproduce a failing DAG with `pipectl run`. */
static void dump_yaml(const pl_spec *spec, FILE *out)
{
    fprintf(out, "run: {batches: %lld, depth: %d, seed: %llu}\nbuffers:\n",
            (long long)spec->run.batches, spec->run.depth, (unsigned long long)spec->run.seed);
    static const char *inits[] = {"", "zeros", "random", "file"};
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *b = &spec->buffers[i];
        fprintf(out, "  %s: {where: %s, dtype: %s, shape: [%lld", b->name, pl_where_name(b->where),
                pl_dtype_name(b->dtype), (long long)b->shape[0]);
        if (b->rank == 2) fprintf(out, ", %lld", (long long)b->shape[1]);
        fprintf(out, "]%s%s%s}\n", b->persistent ? ", persistent: true" : "",
                b->init ? ", init: " : "", inits[b->init]);
    }
    fprintf(out, "stages:\n");
    for (int s = 0; s < spec->n_stages; s++) {
        const pl_stage *st = &spec->stages[s];
        fprintf(out, "  - {name: %s, kind: %s", st->name, (st->kind)->name);
        for (int i = 0; i < st->n_opts; i++)
            fprintf(out, ", %s: %s", st->opts[i].key, st->opts[i].str);
        if (st->kind == pl_kind_find("kernel")) {
            fprintf(out, ", reads: [");
            for (int i = 0; i < st->n_reads; i++)
                fprintf(out, "%s%s", i ? ", " : "", st->reads[i].name);
            fprintf(out, "], writes: [");
            for (int i = 0; i < st->n_writes; i++)
                fprintf(out, "%s%s", i ? ", " : "", st->writes[i].name);
            fprintf(out, "]");
        }
        if (st->n_after) {
            fprintf(out, ", after: [");
            for (int i = 0; i < st->n_after; i++)
                fprintf(out, "%s%s", i ? ", " : "", st->after[i].name);
            fprintf(out, "]");
        }
        fprintf(out, "}\n");
    }
}

static int partial_files(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".partial") != NULL;
    if (d) closedir(d);
    return n;
}

/* Runs DAG number `idx`; returns the number of mismatching outputs (or failed checks). */
static int run_one(const char *dir, uint64_t seed, int idx, int *n_stages_out, bool *injected)
{
    gen g;
    memset(&g, 0, sizeof g);
    g.rng = pl_mix64(seed * 1000003u + (uint64_t)idx);
    g.dir = dir;
    g.dag = idx;
    int family = idx % 4;
    pl_spec *spec = generate(&g, family);
    *n_stages_out = spec->n_stages;
    int bad = 0;
    pl_error err;
    pl_plan *plan = NULL;
    pl_run_result res;
    memset(&res, 0, sizeof res);
    expect *expected = calloc((size_t)spec->n_stages, sizeof *expected);
    if (pl_spec_check(spec, &err) != PL_OK || pl_plan_compile(spec, &plan, &err) != PL_OK) {
        fprintf(stderr, "DAG %d (%s): does not check/plan: %s\n", idx, family_name[family],
                err.msg);
        dump_yaml(spec, stderr);
        bad = 1;
        goto out;
    }
    if (reference(spec, expected, &err) != PL_OK) {
        fprintf(stderr, "DAG %d: reference failed: %s\n", idx, err.msg);
        bad = 1;
        goto out;
    }
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.executor = PL_EXEC_HOST;
    cfg.workers = 1 + rndn(&g, 4);
    *injected = rndn(&g, 8) == 0;
    if (*injected) {
        cfg.fail_stage = rndn(&g, spec->n_stages);
        cfg.fail_batch = rndn(&g, (int)spec->run.batches);
    }
    pl_status st = pl_exec_host_run(plan, &cfg, &res, &err);
    if (*injected) {
        /* The record says where (the fields), the message says what. */
        if (st != PL_ERUNTIME || !strstr(err.msg, "injected failure") ||
            strcmp(err.stage, spec->stages[cfg.fail_stage].name) != 0 ||
            err.batch != cfg.fail_batch || res.batches_done > cfg.fail_batch) {
            fprintf(stderr,
                    "DAG %d: injected failure at %s:%lld not reported right: status %d, "
                    "batches_done %lld: %s\n",
                    idx, spec->stages[cfg.fail_stage].name, (long long)cfg.fail_batch, st,
                    (long long)res.batches_done, err.msg);
            bad++;
        }
    } else if (st != PL_OK) {
        fprintf(stderr, "DAG %d: run failed: %s\n", idx, err.msg);
        bad++;
    } else if (res.batches_done != spec->run.batches) {
        fprintf(stderr, "DAG %d: %lld of %lld batches done\n", idx, (long long)res.batches_done,
                (long long)spec->run.batches);
        bad++;
    }
    /* Compare every sink's output with the reference (a prefix after a failure). */
    int oi = 0;
    for (int s = 0; s < spec->n_stages; s++) {
        const pl_stage *sg = &spec->stages[s];
        if (sg->kind != pl_kind_find("sink")) continue;
        const pl_output *o = oi < res.n_outputs ? &res.outputs[oi] : NULL;
        oi++;
        if (!o || strcmp(o->stage, sg->name) != 0) {
            fprintf(stderr, "DAG %d: no output record for sink %s\n", idx, sg->name);
            bad++;
            continue;
        }
        const pl_buffer *in = &spec->buffers[sg->reads[0].index];
        int64_t want_batches = *injected ? o->batches : spec->run.batches;
        if (o->batches > spec->run.batches || o->batches != want_batches) {
            fprintf(stderr, "DAG %d: sink %s wrote %lld batches, expected %lld\n", idx, sg->name,
                    (long long)o->batches, (long long)want_batches);
            bad++;
            continue;
        }
        size_t want_len = (size_t)o->batches * in->bytes;
        const unsigned char *want = expected[s].data;
        /* Checksums: the per-batch ones and the whole-output one. */
        pl_hash_stream hs = {0};
        for (int64_t b = 0; b < o->batches; b++) {
            if (o->batch_checksums[b] != pl_hash(want + b * in->bytes, in->bytes)) {
                fprintf(stderr, "DAG %d: sink %s batch %lld checksum differs\n", idx, sg->name,
                        (long long)b);
                bad++;
                break;
            }
            pl_hash_stream_update(&hs, want + b * in->bytes, in->bytes);
        }
        if (o->checksum != pl_hash_stream_final(&hs)) {
            fprintf(stderr, "DAG %d: sink %s output checksum differs\n", idx, sg->name);
            bad++;
        }
        if (!o->path) continue;
        size_t len = 0;
        unsigned char *got = slurp(o->path, &len);
        if (o->batches == 0 && *injected) {
            if (got) {
                fprintf(stderr, "DAG %d: sink %s wrote nothing but left %s\n", idx, sg->name,
                        o->path);
                bad++;
            }
            free(got);
            continue;
        }
        size_t off = 0;
        bool npy = strstr(o->path, ".npy") != NULL;
        if (got && npy) {
            FILE *f = fopen(o->path, "rb");
            pl_npy_info info;
            if (pl_npy_read_header(f, o->path, &info, &err) != PL_OK ||
                info.shape[0] != o->batches || info.rank != in->rank + 1 ||
                info.data_bytes != want_len) {
                fprintf(stderr, "DAG %d: sink %s: bad .npy header\n", idx, sg->name);
                bad++;
            }
            fclose(f);
            off = info.data_offset;
        }
        if (!got || len - off != want_len || memcmp(got + off, want, want_len) != 0) {
            fprintf(stderr,
                    "DAG %d (%s, depth %d, %lld batches, %d workers): sink %s output differs "
                    "from the sequential evaluation (%zu vs %zu bytes)\n",
                    idx, family_name[family], spec->run.depth, (long long)spec->run.batches,
                    cfg.workers, sg->name, got ? len - off : 0, want_len);
            bad++;
        }
        free(got);
        unlink(o->path);
    }
    if (partial_files(dir)) {
        fprintf(stderr, "DAG %d: .partial files left in %s\n", idx, dir);
        bad++;
    }
    if (bad) dump_yaml(spec, stderr);
out:
    for (int s = 0; s < spec->n_stages; s++)
        free(expected[s].data);
    free(expected);
    pl_run_result_fini(&res);
    pl_plan_free(plan);
    pl_spec_free(spec);
    /* Input files of this DAG. */
    DIR *d = opendir(dir);
    struct dirent *e;
    char prefix[32], path[1400];
    snprintf(prefix, sizeof prefix, "in%d_", idx);
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    return bad;
}

int main(int argc, char **argv)
{
    const char *build = argc > 3 ? argv[3] : ".";
    int count = argc > 4 ? atoi(argv[4]) : 1000;
    uint64_t seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 1;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/random_dag", build);
    mkdir(dir, 0777);
    int mismatches = 0, total_stages = 0, max_stages = 0, injected_n = 0, families[4] = {0},
        ran = 0;
    for (int i = 0; i < count; i++, ran++) {
        int ns = 0;
        bool inj = false;
        int bad = run_one(dir, seed, i, &ns, &inj);
        mismatches += bad;
        total_stages += ns;
        if (ns > max_stages) max_stages = ns;
        injected_n += inj;
        families[i % 4]++;
        if (mismatches > 20) {
            fprintf(stderr, "too many mismatches, stopping\n");
            ran++;
            break;
        }
    }
    printf("random DAGs: %d run (chains %d, diamonds %d, fans %d, random %d; %d with an injected "
           "failure), %d stages in all, largest %d; seed %llu; mismatches: %d\n",
           ran, families[0], families[1], families[2], families[3], injected_n, total_stages,
           max_stages, (unsigned long long)seed, mismatches);
    CHECK_EQ_INT(mismatches, 0);
    PL_TEST_DONE();
}
