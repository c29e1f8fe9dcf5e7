/* cmd_check: `pipectl check [options] FILE...`: parses and checks pipelines without running them:
 * the spec (every error of a phase, up to PL__MAX_SHOWN per file), user kernels (compiled with
 * NVRTC, which needs no GPU), then the files a run would touch. */
#include <stdlib.h>
#include <string.h>

#include "pl_buffers.h"
#include "pl_cli.h"
#include "pl_plan.h"
#include "pl_diag.h"
#include "pl_json.h"
#include "pl_parse.h"
#include "pl_stage.h"
#include "pl_str.h"

#define PL__MAX_SHOWN 20

/* One file's entry of `check --json` (docs/json.md): d's entries, or err when d has none. */
static json_t *pl__file_json(const char *file, pl_status st, const pl_spec *spec, const pl_diags *d,
                             const pl_error *err)
{
    json_t *diags = json_array();
    for (int i = 0; d && diags && i < d->n; i++)
        json_array_append_new(
            diags, pl_json_diag(&d->items[i].err,
                                d->items[i].severity == PL_SEV_WARNING ? "warning" : "error"));
    if (diags && st != PL_OK && (!d || pl_diags_errors(d) == 0))
        json_array_append_new(diags, pl_json_diag(err, "error"));
    json_t *o = json_object();
    if (!o || !diags) {
        json_decref(o);
        json_decref(diags);
        return NULL;
    }
    json_object_set_new(o, "file", pl_json_str(file));
    json_object_set_new(o, "status", json_string(st == PL_OK ? "ok" : pl_status_name(st)));
    json_object_set_new(o, "exit_code", json_integer(pl_status_exit_code(st)));
    json_object_set_new(o, "pipeline", spec ? pl_json_str(spec->name) : json_null());
    json_object_set_new(o, "stages",
                        spec && st == PL_OK ? json_integer(spec->n_stages) : json_null());
    json_object_set_new(o, "buffers",
                        spec && st == PL_OK ? json_integer(spec->n_buffers) : json_null());
    json_object_set_new(o, "batches",
                        spec && st == PL_OK ? json_integer(spec->run.batches) : json_null());
    json_object_set_new(o, "diagnostics", diags);
    json_object_set_new(o, "not_shown", json_integer(d ? d->dropped : 0));
    return o;
}

/* Checks one file; prints its errors (or its notes and "ok"); returns the exit code. With
 * `files` (--json), its entry is appended there and "ok" is not printed (the errors still go to
 * stderr). */
static int pl__check_one(const char *file, const pl_load_opts *lo, bool verbose, json_t *files)
{
    pl_error err;
    pl_spec *spec = NULL;
    pl_error_clear(&err);
    pl_diags d;
    pl_diags_init(&d, PL__MAX_SHOWN);
    pl_status st = pl_load_file_all(file, lo, &d, &spec, &err);
    if (st == PL_OK) st = pl_spec_check_all(spec, &d, &err);
    if (st == PL_OK) pl_cli_check_memory(spec, &d); /* warnings */
    /* batches: all: counted from the source files; a file it cannot count is one check_files
     * reports (with every other file error), so those run for one batch then. */
    bool counted = st == PL_OK && pl_spec_resolve_batches(spec, &err) == PL_OK;
    if (st == PL_OK) st = pl_spec_check_files(spec, counted ? spec->run.batches : 1, &d, &err);
    if (st == PL_OK && !counted) st = err.status; /* a failure check_files did not repeat */
    if (st == PL_OK) {
        /* The plan: the file's depth against run.memory_budget, with the memory the stages
         * allocate themselves (a model's weights), as `pipectl run` will compile it. */
        pl_plan *plan = NULL;
        st = pl_plan_compile(spec, &plan, &err);
        pl_plan_free(plan);
    }
    int rc = 0;
    char name[PL_NAME_CAP];
    pl_name_str(file, 0, name, sizeof name);
    if (st != PL_OK) {
        /* The first error is err (the one every other command reports); the list adds the rest. */
        rc = pl_status_exit_code(st);
        for (int i = 0; i < d.n; i++)
            fprintf(stderr, "%s\n", d.items[i].err.msg);
        if (pl_diags_errors(&d) == 0) fprintf(stderr, "%s\n", err.msg);
        if (d.dropped)
            fprintf(stderr, "%s: %d more error%s not shown (the first %d are above)\n", name,
                    d.dropped, d.dropped == 1 ? "" : "s", d.n);
    } else {
        for (int i = 0; i < d.n; i++) /* warnings only, on success */
            fprintf(stderr, "%s\n", d.items[i].err.msg);
        pl_cli_print_notes(spec, verbose);
        char all[PL_MAX_NAME + 96] = "";
        if (spec->run.batches_all && spec->run.batches_from >= 0)
            snprintf(all, sizeof all, "; batches: all = %lld, what source '%s' holds",
                     (long long)spec->run.batches, spec->stages[spec->run.batches_from].name);
        if (!files)
            printf("%s: ok (%d stage%s, %d buffer%s%s)\n", name, spec->n_stages,
                   spec->n_stages == 1 ? "" : "s", spec->n_buffers, spec->n_buffers == 1 ? "" : "s",
                   all);
    }
    if (files) json_array_append_new(files, pl__file_json(file, st, spec, &d, &err));
    pl_diags_fini(&d);
    pl_spec_free(spec);
    return rc;
}

enum { PL__O_VERBOSE = 256, PL__O_ARCH, PL__O_JSON };

const pl_cli_opt pl_cli_check_opts[] = {
    {"verbose", 'v', NULL, NULL, "say what user kernels compiled, and what came from the cache",
     PL__O_VERBOSE},
    {"arch", 0, "SM", NULL,
     "compile user kernels for SM (sm_90 or 90; default: PIPECTL_ARCH, else sm_90); NVRTC needs "
     "no GPU, so CI checks kernels",
     PL__O_ARCH},
    {"json", 'j', NULL, NULL,
     "print every file's result and every diagnostic as one JSON object on stdout "
     "(docs/json.md); the messages still go to stderr",
     PL__O_JSON},
    {"set", 0, "KEY=VALUE", NULL, PL_CLI_SET_HELP, PL_CLI_O_SET},
    {"out-dir", 0, "DIR", NULL,
     "check sinks' relative paths as they resolve in DIR, as 'pipectl run --out-dir DIR' writes "
     "them (nothing is created)",
     PL_CLI_O_OUT_DIR},
    {"confine", 0, NULL, NULL,
     "refuse any path the pipeline names that leads outside its folder and --out-dir, as 'pipectl "
     "run --confine' does (run.confine: true)",
     PL_CLI_O_CONFINE},
    {0},
};

int pl_cmd_check(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("check", NULL);
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, rc = 0;
    bool verbose = false, json = false;
    pl_cli_load lo = {0};
    while ((id = pl_cli_next(&a, &v)) > 0) {
        int lr = pl_cli_load_arg(cmd, id, v, &lo);
        if (lr >= 0) {
            if (lr) return lr;
            continue;
        }
        if (id == PL__O_VERBOSE) verbose = true;
        if (id == PL__O_JSON) json = true;
        if (id == PL__O_ARCH && !pl_cli_set_arch(v))
            return pl_cli_usage_error(cmd, "--arch needs an SM version like sm_90 or 90, got '%s'",
                                      v);
    }
    if (id < 0) return a.rc;
    if (a.n_operands == 0)
        return pl_cli_usage_error(cmd, "'pipectl check' needs at least one pipeline file");
    /* Every file is checked, even after a failure, so one run reports them all; the exit code is
     * the first failure's. */
    json_t *files = json ? json_array() : NULL;
    for (int i = 0; i < a.n_operands; i++) {
        int code = pl__check_one(a.operands[i], &lo.opts, verbose, files);
        if (!rc) rc = code;
    }
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "schema_version", json_integer(PL_JSON_SCHEMA_VERSION));
        json_object_set_new(o, "command", json_string("check"));
        /* the first failure's status, as the exit code is the first failure's */
        const char *status = "ok";
        size_t i;
        json_t *f;
        json_array_foreach(files, i, f)
        {
            const char *fs = pl_json_str_or(f, "status", "ok");
            if (strcmp(status, "ok") == 0 && strcmp(fs, "ok") != 0) status = fs;
        }
        json_object_set_new(o, "status", json_string(status));
        json_object_set_new(o, "exit_code", json_integer(rc));
        json_object_set_new(o, "files", files);
        if (pl_json_print(stdout, o) != 0 && !rc) rc = 1;
        json_decref(o);
    }
    return rc;
}
