/* pl_bundle_capture: runs a pipeline and writes its bundle (pl_bundle_capture): inputs hashed
 * (and copied), the canonical pipeline checked to give the same plan, the plan, the runs, the
 * outputs' checksums (and copies), the timeline, the environment, the manifest last. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_bundle.h"
#include "pl_bundle_int.h"
#include "pl_canon.h"
#include "pl_env.h"
#include "pl_exec.h"
#include "pl_parse.h"
#include "pl_plan_dump.h"
#include "pl_report.h"
#include "pl_trace.h"

/* ---- capture ---- */

/* One file the pipeline reads: a stage's path option (not an output kind's) or a buffer's
 * init file. */
typedef struct pl__input {
    int stage;  /* -1: buffer */
    int buffer; /* -1: stage */
    const char *key;
    char as_written[PL__PATH];
    char resolved[PL__PATH];
    char bundled[PL__PATH]; /* relative to the bundle, "" when not copied */
    char canon[PL__PATH];   /* what pipeline.yaml says */
    bool code;              /* a script or kernel source: always copied */
} pl__input;

typedef struct pl__capture {
    const pl_capture_cfg *cfg;
    pl_spec *raw;  /* as loaded: written as pipeline.yaml */
    pl_spec *spec; /* checked: run */
    pl_plan *plan;
    pl__input *in;
    int n_in;
    char (*out_canon)[PL__PATH]; /* [stage]: canonical path of an output kind's path option */
    struct {
        int stage;
        const char *key; /* static, from the kind's key table */
    } * omit;            /* defaults left out of the canonical file */
    int n_omit;
} pl__capture;

static int pl__find_input(const pl__capture *c, int stage, int buffer, const char *key)
{
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i].stage == stage && c->in[i].buffer == buffer && strcmp(c->in[i].key, key) == 0)
            return i;
    return -1;
}

static const char *pl__canon_map(void *user, const pl_stage *st, const char *key, const char *path)
{
    pl__capture *c = user;
    (void)path;
    if (!st) {
        /* buffers are written in order: find the buffer by its init file pointer */
        for (int i = 0; i < c->raw->n_buffers; i++)
            if (c->raw->buffers[i].init_file == path) {
                int k = pl__find_input(c, -1, i, "file");
                return k >= 0 ? c->in[k].canon : NULL;
            }
        return NULL;
    }
    if ((st->kind->role & PL_ROLE_OUTPUT) || strcmp(key, "stream.to") == 0)
        return c->out_canon[st->index][0] ? c->out_canon[st->index] : NULL;
    int k = pl__find_input(c, st->index, -1, key);
    return k >= 0 ? c->in[k].canon : NULL;
}

static pl_status pl__add_input(pl__capture *c, int stage, int buffer, const char *key,
                               const char *written, pl_error *err)
{
    pl__input *n = realloc(c->in, (size_t)(c->n_in + 1) * sizeof *n);
    if (!n) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    c->in = n;
    pl__input *x = &c->in[c->n_in++];
    memset(x, 0, sizeof *x);
    x->stage = stage;
    x->buffer = buffer;
    x->key = key;
    pl__bundle_fmt(x->as_written, sizeof x->as_written, "%s", written);
    char p[PL__PATH];
    pl_spec_path(c->spec, written, p, sizeof p);
    if (!realpath(p, x->resolved)) pl__bundle_fmt(x->resolved, sizeof x->resolved, "%s", p);
    /* Code (a lua stage's script, a kernel's source: path options of kinds that are not data
     * sources) is always copied; data (source files, init files) with --copy-inputs. */
    x->code = stage >= 0 && !(c->spec->stages[stage].kind->role & PL_ROLE_INPUT);
    if (c->cfg->copy_inputs || x->code)
        pl__bundle_fmt(x->bundled, sizeof x->bundled, "inputs/%d-%s", c->n_in - 1,
                       pl__bundle_base(written));
    pl__bundle_fmt(x->canon, sizeof x->canon, "%s", x->bundled[0] ? x->bundled : x->resolved);
    return PL_OK;
}

static pl_status pl__collect_inputs(pl__capture *c, pl_error *err)
{
    const pl_spec *sp = c->spec;
    for (int i = 0; i < sp->n_buffers; i++)
        if (sp->buffers[i].init == PL_INIT_FILE && sp->buffers[i].init_file)
            PL_CHECK(pl__add_input(c, -1, i, "file", sp->buffers[i].init_file, err));
    c->out_canon = calloc((size_t)(sp->n_stages > 0 ? sp->n_stages : 1), sizeof *c->out_canon);
    if (!c->out_canon) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int s = 0; s < sp->n_stages; s++) {
        const pl_stage *st = &sp->stages[s];
        /* A loop's stream is an output of the loop stage; its tokenizer is code, copied. */
        const pl_loop_stream *ls = st->loop ? st->loop->stream : NULL;
        if (ls && strcmp(ls->to, "-") != 0)
            pl__bundle_fmt(c->out_canon[s], sizeof c->out_canon[s], "outputs/%s-%s", st->name,
                           pl__bundle_base(ls->to));
        if (ls && ls->vocab) PL_CHECK(pl__add_input(c, s, -1, "stream.vocab", ls->vocab, err));
        for (int o = 0; o < st->n_opts; o++) {
            const pl_opt *op = &st->opts[o];
            const pl_key *k = pl_kind_key(st->kind, op->key);
            if (!k || k->type != PL_KEY_PATH || !op->str) continue;
            if (st->kind->role & PL_ROLE_OUTPUT)
                pl__bundle_fmt(c->out_canon[s], sizeof c->out_canon[s], "outputs/%s-%s", st->name,
                               pl__bundle_base(op->str));
            else
                PL_CHECK(pl__add_input(c, s, -1, k->name, op->str, err));
        }
    }
    return PL_OK;
}

static bool pl__canon_omit(void *user, const pl_stage *st, const char *key)
{
    const pl__capture *c = user;
    for (int i = 0; i < c->n_omit; i++)
        if (c->omit[i].stage == st->index && strcmp(c->omit[i].key, key) == 0) return true;
    return false;
}

/* Writes the canonical pipeline to path. A default the kind refuses next to the keys given (a
 * source with `file` refuses `generator`, even the default one) fails the check at that key's
 * line: it is then left out (written as a comment) and the file written again. */
static pl_status pl__write_canon(pl__capture *c, const char *path, pl_error *err)
{
    for (int attempt = 0;; attempt++) {
        FILE *f = fopen(path, "w");
        if (!f)
            return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", path, strerror(errno));
        pl_status st = pl_canon_write(c->raw, f, pl__canon_map, pl__canon_omit, c, err);
        if (fclose(f) != 0 && st == PL_OK)
            st = pl_error_set(err, PL_EIO, "error: cannot write %s", path);
        if (st != PL_OK) return st;
        pl_spec *cs = NULL;
        pl_error ce;
        pl_error_clear(&ce);
        st = pl_load_checked(path, &cs, &ce);
        pl_spec_free(cs);
        if (st == PL_OK) return PL_OK;
        /* Which defaulted key is at the error's line? */
        int stage = -1;
        const char *key = NULL;
        cs = NULL;
        if (ce.line > 0 && attempt < 256 && pl_load_file(path, &cs, NULL) == PL_OK) {
            for (int s = 0; s < cs->n_stages && !key; s++)
                for (int o = 0; o < cs->stages[s].n_opts && !key; o++)
                    if (cs->stages[s].opts[o].pos.line == ce.line && s < c->raw->n_stages &&
                        !pl_stage_opt(&c->raw->stages[s], cs->stages[s].opts[o].key)) {
                        stage = s;
                        key = pl_kind_key(c->raw->stages[s].kind, cs->stages[s].opts[o].key)->name;
                    }
        }
        pl_spec_free(cs);
        if (!key) {
            *err = ce;
            return pl_error_prefix(err,
                                   "error: the canonical pipeline %s does not load (a pipectl "
                                   "bug)",
                                   path);
        }
        void *n = realloc(c->omit, (size_t)(c->n_omit + 1) * sizeof *c->omit);
        if (!n) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        c->omit = n;
        c->omit[c->n_omit].stage = stage;
        c->omit[c->n_omit].key = key;
        c->n_omit++;
    }
}

static pl_status pl__bundle_empty(const char *dir, pl_error *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return pl__bundle_mkdir_p(dir, err);
        return pl_error_set(err, PL_EIO, "error: cannot use %s as the bundle folder: %s", dir,
                            strerror(errno));
    }
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
    closedir(d);
    if (!empty)
        return pl_error_set(err, PL_EINPUT,
                            "error: the bundle folder %s is not empty; remove it or choose "
                            "another with -o",
                            dir);
    return PL_OK;
}

static void pl__now_iso(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char pl__readme[] =
    "This folder is a pipectl capture bundle: everything that made a run's result what it was.\n"
    "\n"
    "  pipectl replay .                      run it again; checks the inputs, compares every\n"
    "                                        batch's checksum and the stage times (exit 0: all\n"
    "                                        outputs match; 1: one differs; 2: bad bundle/input)\n"
    "  pipectl replay --executor host .      the same on the CPU (bit-identical where the ops\n"
    "                                        are, within stated tolerances where they are not)\n"
    "  pipectl diff . OTHER_BUNDLE           compare two bundles\n"
    "  pipectl run pipeline.yaml             just run the canonical pipeline\n"
    "\n"
    "manifest.json lists every file with its SHA-256; docs/bundles.md describes each field.\n"
    "Paths inside are relative to this folder: it may be moved, tarred and sent. Inputs that were\n"
    "not copied (capture without --copy-inputs) are referred to by absolute path.\n";

/* What the bundle's files give the manifest, gathered while they are written, and the runs'
 * results; all owned here (the manifest takes references of its own). */
typedef struct pl__parts {
    char orig_rel[PL__PATH]; /* the original file, relative to the bundle */
    json_t *m;               /* the manifest */
    json_t *files, *inputs;
    json_t *outs, *graphs, *env, *stages;
    int reps;
    pl_run_result *res; /* [reps] */
    json_t **rep_stats; /* [reps] */
    json_t *rep_walls;
} pl__parts;

static void pl__parts_fini(pl__parts *b)
{
    for (int r = 0; b->res && r < b->reps; r++) {
        pl_run_result_fini(&b->res[r]);
        if (b->rep_stats) json_decref(b->rep_stats[r]);
    }
    free(b->res);
    free(b->rep_stats);
    json_decref(b->m);
    json_decref(b->files);
    json_decref(b->inputs);
    json_decref(b->rep_walls);
    json_decref(b->outs);
    json_decref(b->graphs);
    json_decref(b->env);
    json_decref(b->stages);
}

/* The folders, the original file, and the inputs (hashed; copied with --copy-inputs). */
static pl_status pl__write_sources(pl__capture *c, pl__parts *b, pl_error *err)
{
    const char *dir = c->cfg->dir;
    char p[PL__PATH], hex[PL_SHA256_HEX];
    static const char *const sub[] = {"original", "inputs", "outputs", "graphs"};
    for (int i = 0; i < 4; i++)
        PL_CHECK(pl__bundle_mkdir(pl_bundle_path(dir, sub[i], p, sizeof p), err));
    pl__bundle_fmt(b->orig_rel, sizeof b->orig_rel, "original/%s", pl__bundle_base(c->cfg->file));
    PL_CHECK(
        pl__bundle_copy_file(c->cfg->file, pl_bundle_path(dir, b->orig_rel, p, sizeof p), err));
    PL_CHECK(pl__bundle_file_entry(dir, b->orig_rel, b->files, err));
    PL_CHECK(pl__collect_inputs(c, err));
    for (int i = 0; i < c->n_in; i++) {
        pl__input *x = &c->in[i];
        unsigned long long bytes = 0;
        PL_CHECK(pl_sha256_file(x->resolved, hex, &bytes, err));
        if (x->bundled[0])
            PL_CHECK(pl__bundle_copy_file(x->resolved, pl_bundle_path(dir, x->bundled, p, sizeof p),
                                          err));
        json_t *e =
            json_pack("{s:s, s:s, s:s, s:s, s:I}", "key", x->key, "as_written", x->as_written,
                      "path", x->resolved, "sha256", hex, "bytes", (json_int_t)bytes);
        if (e && x->stage >= 0)
            json_object_set_new(e, "stage", json_string(c->spec->stages[x->stage].name));
        if (e && x->buffer >= 0)
            json_object_set_new(e, "buffer", json_string(c->spec->buffers[x->buffer].name));
        json_object_set_new(e, "bundled", x->bundled[0] ? json_string(x->bundled) : json_null());
        json_object_set_new(e, "code", json_boolean(x->code));
        PL_CHECK(pl_json_append(b->inputs, e, err));
    }
    return PL_OK;
}

/* The plan of spec as this capture runs it: a shard's batches (and its rank's device) when the
 * capture is a shard (cfg->adjust set them on c->spec). */
static pl_status pl__compile_as_run(const pl__capture *c, pl_spec *spec, pl_plan **out,
                                    pl_error *err)
{
    spec->run.shard = c->spec->run.shard;
    spec->run.device = c->spec->run.device;
    int64_t n =
        pl_shard_on(&spec->run.shard) ? pl_shard_batches(&spec->run.shard, spec->run.batches) : 0;
    return pl_plan_compile_with(spec, n, 0, out, err);
}

/* The canonical pipeline; loading it must give the plan the original gives. */
static pl_status pl__write_pipeline(pl__capture *c, pl_capture_info *info, pl__parts *b,
                                    pl_error *err)
{
    const char *dir = c->cfg->dir;
    char p[PL__PATH], chex[PL_SHA256_HEX];
    PL_CHECK(pl__write_canon(c, pl_bundle_path(dir, "pipeline.yaml", p, sizeof p), err));
    PL_CHECK(pl__bundle_file_entry(dir, "pipeline.yaml", b->files, err));
    PL_CHECK(pl_plan_digest(c->plan, info->plan_digest, err));
    pl_spec *cs = NULL;
    pl_plan *cp = NULL;
    pl_status st = pl_load_checked(p, &cs, err);
    if (st == PL_OK) st = pl__compile_as_run(c, cs, &cp, err);
    if (st == PL_OK) st = pl_plan_digest(cp, chex, err);
    pl_plan_free(cp);
    pl_spec_free(cs);
    if (st != PL_OK) {
        pl_error_prefix(err, "error: the canonical pipeline %s does not load (a pipectl bug)", p);
        return st;
    }
    if (strcmp(chex, info->plan_digest) != 0)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: the canonical pipeline %s gives another plan than %s (a "
                            "pipectl bug; please report it with both files)",
                            p, c->cfg->file);
    return pl_sha256_file(p, info->spec_digest, NULL, err);
}

/* The plan: text, DOT, JSON. */
static pl_status pl__write_plan(pl__capture *c, pl__parts *b, pl_error *err)
{
    const char *dir = c->cfg->dir;
    char p[PL__PATH];
    PL_CHECK(pl__bundle_write_text(pl_bundle_path(dir, "plan.txt", p, sizeof p), pl_plan_dump,
                                   c->plan, err));
    PL_CHECK(pl__bundle_write_text(pl_bundle_path(dir, "plan.dot", p, sizeof p), pl_plan_dump_dot,
                                   c->plan, err));
    json_t *pj = pl_plan_json(c->plan);
    if (!pj) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status st = pl_json_write_file(pl_bundle_path(dir, "plan.json", p, sizeof p), pj, err);
    json_decref(pj);
    if (st != PL_OK) return st;
    PL_CHECK(pl__bundle_file_entry(dir, "plan.txt", b->files, err));
    PL_CHECK(pl__bundle_file_entry(dir, "plan.dot", b->files, err));
    return pl__bundle_file_entry(dir, "plan.json", b->files, err);
}

/* The runs: the first writes the graphs' DOT files, the last records the timeline. */
static pl_status pl__run_reps(pl__capture *c, pl_capture_info *info, pl__parts *b, pl_error *err)
{
    const pl_capture_cfg *cfg = c->cfg;
    int reps = b->reps;
    b->res = calloc((size_t)reps, sizeof *b->res);
    b->rep_stats = calloc((size_t)reps, sizeof *b->rep_stats);
    if (!b->res || !b->rep_stats) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_run_cfg rc = cfg->run;
    rc.executor = pl_exec_pick(c->plan, cfg->run.executor, info->note, sizeof info->note);
    char gdir[PL__PATH];
    pl_bundle_path(cfg->dir, "graphs", gdir, sizeof gdir);
    for (int r = 0; r < reps; r++) {
        rc.dot_dir = r == 0 ? gdir : NULL;
        rc.trace_batches = r == reps - 1 ? pl_trace_batches_for(c->plan) : 0; /* trace.json */
        pl_status st = pl_run(c->plan, &rc, &b->res[r], err);
        if (st != PL_OK) {
            if (r > 0) pl_error_prefix(err, "capture run %d of %d", r + 1, reps);
            return st;
        }
        b->rep_stats[r] = pl__bundle_stats_json(c->plan, &b->res[r]);
        if (!b->rep_stats[r]) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
        json_array_append_new(b->rep_walls, json_real((double)b->res[r].wall_ns * 1e-9));
    }
    return PL_OK;
}

/* Whether every run gave the first run's outputs; else the first sink and batch that differ. */
static void pl__compare_reps(const pl__parts *b, pl_capture_info *info)
{
    const pl_run_result *r0 = &b->res[0];
    info->executor = r0->executor;
    info->batches_done = r0->batches_done;
    info->reps = b->reps;
    info->reps_identical = true;
    info->reps_batch = -1;
    for (int r = 1; r < b->reps && info->reps_identical; r++)
        for (int i = 0; i < r0->n_outputs && info->reps_identical; i++) {
            const pl_output *a = &r0->outputs[i], *o = &b->res[r].outputs[i];
            for (int64_t k = 0; k < a->n_batch_checksums && o->batch_checksums; k++)
                if (k >= o->n_batch_checksums || a->batch_checksums[k] != o->batch_checksums[k]) {
                    info->reps_identical = false;
                    snprintf(info->reps_sink, sizeof info->reps_sink, "%s", a->stage);
                    info->reps_batch = k;
                    break;
                }
            /* Past the per-batch record (PL_BATCH_CHECKSUMS_MAX): the whole output's checksum,
             * reported at the first batch not recorded. */
            if (info->reps_identical && a->checksummed &&
                (a->batches != o->batches || a->checksum != o->checksum)) {
                info->reps_identical = false;
                snprintf(info->reps_sink, sizeof info->reps_sink, "%s", a->stage);
                info->reps_batch = a->n_batch_checksums;
            }
        }
}

/* Outputs: the first run's checksums; the last run's files, copied with --copy-outputs. */
static pl_status pl__write_outputs(pl__capture *c, pl_capture_info *info, pl__parts *b,
                                   pl_error *err)
{
    const pl_capture_cfg *cfg = c->cfg;
    const pl_run_result *last = &b->res[b->reps - 1];
    char p[PL__PATH];
    b->outs = pl__bundle_outputs_json(c->plan, &b->res[0]);
    if (!b->outs) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int i = 0; i < last->n_outputs; i++) {
        const pl_output *o = &last->outputs[i];
        json_t *e = json_array_get(b->outs, (size_t)i);
        json_object_set_new(e, "identical_in_every_run", json_boolean(info->reps_identical));
        int s = pl_spec_find_stage(c->spec, o->stage);
        if (!o->path || s < 0 || !c->out_canon[s][0] || !cfg->copy_outputs || !o->finalized) {
            json_object_set_new(e, "bundled", json_null());
            continue;
        }
        PL_CHECK(pl__bundle_copy_file(o->path,
                                      pl_bundle_path(cfg->dir, c->out_canon[s], p, sizeof p), err));
        PL_CHECK(pl__bundle_file_entry(cfg->dir, c->out_canon[s], b->files, err));
        json_object_set_new(e, "bundled", json_string(c->out_canon[s]));
    }
    info->n_outputs = last->n_outputs;
    info->n_inputs = c->n_in;
    return PL_OK;
}

/* The timeline and the summary of the last run, and the graphs' files. */
static pl_status pl__write_timeline(pl__capture *c, pl_capture_info *info, pl__parts *b,
                                    pl_error *err)
{
    const char *dir = c->cfg->dir;
    const pl_run_result *last = &b->res[b->reps - 1];
    char p[PL__PATH];
    PL_CHECK(pl_trace_write(pl_bundle_path(dir, "trace.json", p, sizeof p), c->plan, last, err));
    PL_CHECK(pl__bundle_file_entry(dir, "trace.json", b->files, err));
    FILE *f = fopen(pl_bundle_path(dir, "summary.json", p, sizeof p), "w");
    if (!f) return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", p, strerror(errno));
    pl_report_json(f, c->plan, last, PL_OK, NULL);
    if (fclose(f) != 0) return pl_error_set(err, PL_EIO, "error: cannot write %s", p);
    PL_CHECK(pl__bundle_file_entry(dir, "summary.json", b->files, err));
    PL_CHECK(pl__bundle_graphs(dir, b->files, &b->graphs, &info->n_graphs, err));
    /* Folders with nothing in them (no graphs on the host, no copies) are not kept. */
    static const char *const maybe_empty[] = {"graphs", "inputs", "outputs"};
    for (int i = 0; i < 3; i++)
        rmdir(pl_bundle_path(dir, maybe_empty[i], p, sizeof p)); /* fails when not empty */
    return PL_OK;
}

/* The manifest's account of what ran: the command, the pipeline, the plan, the runs. */
static pl_status pl__manifest_what_ran(pl__capture *c, const pl_capture_info *info, pl__parts *b,
                                       pl_error *err)
{
    const pl_capture_cfg *cfg = c->cfg;
    const pl_run_result *r0 = &b->res[0];
    json_t *m = b->m;
    char created[32];
    pl__now_iso(created, sizeof created);
    PL_CHECK(pl_json_set(m, "schema", json_string(PL_BUNDLE_SCHEMA), err));
    PL_CHECK(pl_json_set(m, "schema_version", json_integer(PL_BUNDLE_SCHEMA_VERSION), err));
    PL_CHECK(pl_json_set(m, "created", json_string(created), err));
    PL_CHECK(pl_json_set(m, "command", pl_json_str(cfg->command), err));
    PL_CHECK(pl_json_set(m, "pipeline",
                         json_pack("{s:s, s:s, s:s, s:o, s:s}", "name", c->spec->name, "file",
                                   "pipeline.yaml", "digest", info->spec_digest, "original",
                                   pl_json_str(b->orig_rel), "original_path", cfg->file),
                         err));
    /* The --set options as given: pipeline.yaml has them applied already, the original not. */
    json_t *sets = json_array();
    for (int i = 0; sets && i < cfg->load.n_sets; i++)
        json_array_append_new(sets, pl_json_str(cfg->load.sets[i]));
    PL_CHECK(pl_json_set(json_object_get(m, "pipeline"), "set", sets, err));
    PL_CHECK(
        pl_json_set(m, "plan",
                    json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:i, s:i}", "text", "plan.txt",
                              "json", "plan.json", "dot", "plan.dot", "digest", info->plan_digest,
                              "depth", c->plan->depth, "batches", (json_int_t)c->plan->batches,
                              "stages", c->plan->n_stages, "streams", c->plan->n_streams),
                    err));
    PL_CHECK(pl_json_set(
        m, "run",
        json_pack("{s:s, s:b, s:s, s:i, s:i, s:I, s:I, s:i, s:o}", "executor", r0->executor,
                  "graphs", r0->graphs, "graph_mode", r0->graph_mode ? r0->graph_mode : "none",
                  "timing_period", cfg->run.timing_period, "workers", r0->workers, "seed",
                  (json_int_t)c->spec->run.seed, "batches_done", (json_int_t)r0->batches_done,
                  "reps", b->reps, "wall_s", json_incref(b->rep_walls)),
        err));
    if (r0->device_name[0])
        json_object_set_new(json_object_get(m, "run"), "device", pl_json_str(r0->device_name));
    const pl_shard *sh = &c->spec->run.shard;
    if (pl_shard_on(sh))
        PL_CHECK(
            pl_json_set(m, "shard",
                        json_pack("{s:i, s:i, s:s, s:I}", "index", sh->index, "count", sh->count,
                                  "mode", sh->mode == PL_SHARD_RANGE ? "range" : "stride",
                                  "pipeline_batches", (json_int_t)c->spec->run.batches),
                        err));
    const pl_capture_rank *rk = cfg->rank;
    if (rk)
        PL_CHECK(pl_json_set(m, "rank",
                             json_pack("{s:i, s:i, s:i, s:i, s:o, s:o}", "rank", rk->rank, "size",
                                       rk->size, "local_rank", rk->local_rank, "local_size",
                                       rk->local_size, "host", pl_json_str(rk->host), "device",
                                       strcmp(r0->executor, "gpu") == 0
                                           ? json_integer(c->spec->run.device)
                                           : json_null()),
                             err));
    return PL_OK;
}

/* The manifest's account of what came of it, the README, and the manifest itself, written last. */
static pl_status pl__write_manifest(pl__capture *c, const pl_capture_info *info, pl__parts *b,
                                    pl_error *err)
{
    const char *dir = c->cfg->dir;
    json_t *m = b->m;
    char p[PL__PATH];
    PL_CHECK(pl__manifest_what_ran(c, info, b, err));
    PL_CHECK(pl_json_set(m, "inputs", json_incref(b->inputs), err));
    PL_CHECK(pl_json_set(m, "outputs", json_incref(b->outs), err));
    b->stages = pl__bundle_stages_over_reps(b->rep_stats, b->reps);
    PL_CHECK(pl_json_set(m, "stages", json_incref(b->stages), err));
    PL_CHECK(pl_json_set(
        m, "noise",
        json_pack("{s:i, s:s}", "reps", b->reps, "method",
                  b->reps > 1 ? "per stage: (max - min) / median of the reps' p50 times; replay "
                                "calls a p50 ratio beyond noise outside 1 +- max(2 noise, 0.05)"
                              : "none recorded: one run (capture with --reps N, N >= 2)"),
        err));
    PL_CHECK(pl_json_set(m, "graphs", json_incref(b->graphs), err));
    PL_CHECK(pl_json_set(m, "timeline", json_string("trace.json"), err));
    PL_CHECK(pl_json_set(m, "summary", json_string("summary.json"), err));
    PL_CHECK(pl_json_set(m, "environment", json_incref(b->env), err));
    FILE *f = fopen(pl_bundle_path(dir, "README.txt", p, sizeof p), "w");
    if (!f || fputs(pl__readme, f) == EOF || fclose(f) != 0)
        return pl_error_set(err, PL_EIO, "error: cannot write %s", p);
    PL_CHECK(pl__bundle_file_entry(dir, "README.txt", b->files, err));
    PL_CHECK(pl_json_set(m, "files", json_incref(b->files), err));
    return pl_json_write_file(pl_bundle_path(dir, "manifest.json", p, sizeof p), m, err);
}

static pl_status pl__capture_write(pl__capture *c, pl_capture_info *info, pl_error *err)
{
    pl_status st = PL_OK;
    pl__parts b;
    memset(&b, 0, sizeof b);
    b.reps = c->cfg->reps > 0 ? c->cfg->reps : 1;
    b.m = json_object();
    b.files = json_array();
    b.inputs = json_array();
    b.rep_walls = json_array();
    if (!b.m || !b.files || !b.inputs || !b.rep_walls) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    PL_CHECK_GOTO(pl__write_sources(c, &b, err), st, done);
    PL_CHECK_GOTO(pl__write_pipeline(c, info, &b, err), st, done);
    PL_CHECK_GOTO(pl__write_plan(c, &b, err), st, done);
    PL_CHECK_GOTO(pl__run_reps(c, info, &b, err), st, done);
    pl__compare_reps(&b, info);
    PL_CHECK_GOTO(pl__write_outputs(c, info, &b, err), st, done);
    PL_CHECK_GOTO(pl__write_timeline(c, info, &b, err), st, done);
    PL_CHECK_GOTO(
        pl_env_json(strcmp(b.res[0].executor, "gpu") == 0, c->spec->run.device, &b.env, err), st,
        done);
    st = pl__write_manifest(c, info, &b, err);
done:
    if (b.res && b.res[b.reps - 1].executor) {
        info->last = b.res[b.reps - 1]; /* moved: the caller writes a shard's part manifests */
        memset(&b.res[b.reps - 1], 0, sizeof b.res[b.reps - 1]);
    }
    pl__parts_fini(&b);
    return st;
}

void pl_capture_info_fini(pl_capture_info *info)
{
    if (!info) return;
    pl_run_result_fini(&info->last);
    pl_spec_free(info->spec);
    info->spec = NULL;
}

pl_status pl_bundle_capture(const pl_capture_cfg *cfg, pl_capture_info *info, pl_error *err)
{
    memset(info, 0, sizeof *info);
    info->reps_batch = -1;
    pl__capture c;
    memset(&c, 0, sizeof c);
    c.cfg = cfg;
    pl_status st;
    PL_CHECK_GOTO(pl_load_checked_opts(cfg->file, &cfg->load, &c.spec, err), st, done);
    PL_CHECK_GOTO(pl_load_file_opts(cfg->file, &cfg->load, &c.raw, err), st, done);
    if (cfg->batches > 0) c.spec->run.batches_all = false;
    if (cfg->batches > 0) c.spec->run.batches = c.raw->run.batches = cfg->batches;
    if (cfg->batches == -1) c.spec->run.batches_all = true;
    PL_CHECK_GOTO(pl_spec_resolve_batches(c.spec, err), st, done);
    /* The bundled pipeline says the count this capture ran, so replay runs the same batches. */
    c.raw->run.batches = c.spec->run.batches;
    c.raw->run.batches_all = false;
    if (cfg->depth > 0) {
        c.spec->run.depth = c.raw->run.depth = cfg->depth;
        c.spec->run.depth_auto = c.raw->run.depth_auto = false;
    } else if (cfg->depth == PL_DEPTH_AUTO) {
        c.spec->run.depth_auto = c.raw->run.depth_auto = true;
    }
    if (cfg->adjust) PL_CHECK_GOTO(cfg->adjust(cfg->adjust_user, c.spec, err), st, done);
    PL_CHECK_GOTO(pl__compile_as_run(&c, c.spec, &c.plan, err), st, done);
    /* Refused before the folder is made: a run that cannot start leaves nothing behind. */
    if (cfg->run.executor == PL_EXEC_GPU && !pl_gpu_available()) {
        pl_run_result none;
        memset(&none, 0, sizeof none);
        st = pl_exec_gpu_run(c.plan, &cfg->run, &none, err);
        pl_run_result_fini(&none);
        if (st == PL_OK) st = pl_error_set(err, PL_ENODEV, "error: no usable GPU");
        goto done;
    }
    PL_CHECK_GOTO(pl__bundle_empty(cfg->dir, err), st, done);
    if (cfg->load.out_dir) PL_CHECK_GOTO(pl__bundle_mkdir_p(cfg->load.out_dir, err), st, done);
    st = pl__capture_write(&c, info, err);
done:
    free(c.in);
    free(c.out_canon);
    free(c.omit);
    pl_plan_free(c.plan);
    info->spec = c.spec; /* the caller's: a shard's part manifests need it */
    pl_spec_free(c.raw);
    return st;
}
