/* pl_parse: the front ends. Each turns a pipeline file into a pl_spec (unchecked: call
 * pl_spec_check next). Errors are "file:line:col: error: ..." with status PL_EINPUT. */
/* Layer parser: owns the front ends (YAML through libyaml, Lua through the lua layer), the generic
 * value tree both build and the schema that validates it, and pl_load (front end by extension,
 * then the check). May include runtime/base, lua, runtime/device, runtime/core and stages. */
#ifndef PL_PARSE_H
#define PL_PARSE_H

#include "pl_spec.h"

/* What the command line changes in a pipeline as it loads (`pipectl check|plan|run|capture`).
 * A zeroed record (or NULL) changes nothing. */
typedef struct pl_load_opts {
    /* --set KEY=VALUE, in the order given (a later one for the same key wins): each sets one key
     * of the loaded document, YAML or Lua, before the schema checks it, so a --set is checked
     * exactly as the file's keys are and its errors read "--set KEY=VALUE: error: ..."
     * (parser/pl_override.c; docs/pipeline-yaml.md, "Setting keys from the command line").
     * Borrowed. */
    const char *const *sets;
    int n_sets;
    /* --out-dir: the folder sinks' relative paths resolve against (spec->out_dir) instead of the
     * pipeline's; relative to the working directory. NULL: the pipeline's folder. Copied. */
    const char *out_dir;
    bool confine; /* --confine: as run.confine: true */
} pl_load_opts;

/* YAML front end (parser/pl_yaml.c, libyaml). `name` is used as the file name in positions. The
 * _opts forms apply opts->sets (only: out_dir and confine are pl_load_file_opts's). */
pl_status pl_yaml_load_file(const char *path, pl_spec **out, pl_error *err);
struct pl_diags;
/* pl_yaml_load_file_opts that lists the errors of every bad buffer and stage in `diags`
 * (pl_diag.h; may be NULL), not only the first; *err is the first. opts may be NULL. */
pl_status pl_yaml_load_file_all(const char *path, const pl_load_opts *opts, struct pl_diags *diags,
                                pl_spec **out, pl_error *err);
pl_status pl_yaml_load_string(const char *name, const char *text, size_t len, pl_spec **out,
                              pl_error *err);
pl_status pl_yaml_load_file_opts(const char *path, const pl_load_opts *opts, pl_spec **out,
                                 pl_error *err);
pl_status pl_yaml_load_string_opts(const char *name, const char *text, size_t len,
                                   const pl_load_opts *opts, pl_spec **out, pl_error *err);

/* Lua front end (parser/pl_lua_front.c): runs the script sandboxed; it returns the pipeline. */
pl_status pl_lua_load_file(const char *path, pl_spec **out, pl_error *err);
pl_status pl_lua_load_string(const char *name, const char *text, size_t len, pl_spec **out,
                             pl_error *err);
pl_status pl_lua_load_file_opts(const char *path, const pl_load_opts *opts, pl_spec **out,
                                pl_error *err);
pl_status pl_lua_load_string_opts(const char *name, const char *text, size_t len,
                                  const pl_load_opts *opts, pl_spec **out, pl_error *err);

/* By extension: .lua goes to the Lua front end, anything else to YAML. */
pl_status pl_load_file(const char *path, pl_spec **out, pl_error *err);
/* pl_load_file_opts listing every bad buffer and stage in `diags` (YAML; the Lua front end stops
 * at its first error, which it lists). opts and diags may be NULL. */
pl_status pl_load_file_all(const char *path, const pl_load_opts *opts, struct pl_diags *diags,
                           pl_spec **out, pl_error *err);
/* pl_load_file, then pl_spec_check: what every command that takes a pipeline does. */
pl_status pl_load_checked(const char *path, pl_spec **out, pl_error *err);
/* The same with the command line's changes: opts->sets in the front end, then spec->out_dir and
 * run.confine, then (run.confine) pl_spec_check_confined. opts may be NULL. */
pl_status pl_load_file_opts(const char *path, const pl_load_opts *opts, pl_spec **out,
                            pl_error *err);
pl_status pl_load_checked_opts(const char *path, const pl_load_opts *opts, pl_spec **out,
                               pl_error *err);

/* A pipeline given as text: `name` stands for the file in positions, `lua` picks the Lua front
 * end (else YAML), `dir` is the folder its relative paths resolve against (NULL: the working
 * directory); then as pl_load_checked_opts. A pipeline.lua whose stages are Lua functions needs
 * its file (its lua stages load the script again): load it with pl_load_checked_opts. */
pl_status pl_load_string_checked(const char *name, const char *text, size_t len, bool lua,
                                 const char *dir, const pl_load_opts *opts, pl_spec **out,
                                 pl_error *err);

/* run.confine (parser/pl_confine.c): every file path the pipeline names (each stage's path keys,
 * sinks' against spec->out_dir, and buffers' init files), resolved as the run will open it
 * (`..` and the symlinks of every existing component followed, as realpath does, the part that
 * does not exist yet taken as written), must lie inside the pipeline's folder or spec->out_dir.
 * PL_EINPUT at the first path that does not, naming the path, where it leads and the rule. */
pl_status pl_spec_check_confined(const pl_spec *spec, pl_error *err);

#endif
