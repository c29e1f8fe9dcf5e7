/* pl_parse: the front ends. Each turns a pipeline file into a pl_spec (unchecked: call
 * pl_spec_check next). Errors are "file:line:col: error: ..." with status PL_EINPUT. */
/* Layer parser: owns the front ends (YAML through libyaml, Lua through the lua layer), the generic
 * value tree both build and the schema that validates it, and pl_load (front end by extension,
 * then the check). May include runtime/base, lua, runtime/device, runtime/core and stages. */
#ifndef PL_PARSE_H
#define PL_PARSE_H

#include "pl_spec.h"

/* YAML front end (parser/pl_yaml.c, libyaml). `name` is used as the file name in positions. */
pl_status pl_yaml_load_file(const char *path, pl_spec **out, pl_error *err);
struct pl_diags;
/* pl_yaml_load_file that lists the errors of every bad buffer and stage in `diags` (pl_diag.h),
 * not only the first; *err is the first. */
pl_status pl_yaml_load_file_all(const char *path, struct pl_diags *diags, pl_spec **out,
                                pl_error *err);
pl_status pl_yaml_load_string(const char *name, const char *text, size_t len, pl_spec **out,
                              pl_error *err);

/* Lua front end (parser/pl_lua_front.c): runs the script sandboxed; it returns the pipeline. */
pl_status pl_lua_load_file(const char *path, pl_spec **out, pl_error *err);
pl_status pl_lua_load_string(const char *name, const char *text, size_t len, pl_spec **out,
                             pl_error *err);

/* By extension: .lua goes to the Lua front end, anything else to YAML. */
pl_status pl_load_file(const char *path, pl_spec **out, pl_error *err);
/* pl_load_file listing every bad buffer and stage in `diags` (YAML; the Lua front end stops at
 * its first error, which it lists). */
pl_status pl_load_file_all(const char *path, struct pl_diags *diags, pl_spec **out, pl_error *err);
/* pl_load_file, then pl_spec_check: what every command that takes a pipeline does. */
pl_status pl_load_checked(const char *path, pl_spec **out, pl_error *err);

#endif
