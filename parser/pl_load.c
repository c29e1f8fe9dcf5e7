/* pl_load: picks the front end by file extension, applies what the command line changes (--set
 * in the front end, --out-dir, --confine), then checks the spec. */
#include "pl_parse.h"

#include <string.h>

#include "pl_diag.h"

pl_status pl_load_file(const char *path, pl_spec **out, pl_error *err)
{
    return pl_load_file_opts(path, NULL, out, err);
}

pl_status pl_load_checked(const char *path, pl_spec **out, pl_error *err)
{
    return pl_load_checked_opts(path, NULL, out, err);
}

pl_status pl_load_file_opts(const char *path, const pl_load_opts *opts, pl_spec **out,
                            pl_error *err)
{
    return pl_load_file_all(path, opts, NULL, out, err);
}

pl_status pl_load_file_all(const char *path, const pl_load_opts *opts, struct pl_diags *diags,
                           pl_spec **out, pl_error *err)
{
    size_t n = strlen(path);
    pl_spec *spec = NULL;
    pl_status st;
    if (n >= 4 && strcmp(path + n - 4, ".lua") == 0) {
        st = pl_lua_load_file_opts(path, opts, &spec, err);
        if (st != PL_OK) pl_diags_add(diags, PL_SEV_ERROR, err);
    } else {
        st = pl_yaml_load_file_all(path, opts, diags, &spec, err);
    }
    if (st != PL_OK) return st;
    if (opts && opts->out_dir) {
        spec->out_dir = pl_spec_strdup(spec, opts->out_dir);
        if (!spec->out_dir) st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    if (opts && opts->confine) spec->run.confine = true;
    if (st == PL_OK && spec->run.confine) st = pl_spec_check_confined(spec, err);
    if (st != PL_OK) {
        pl_diags_add(diags, PL_SEV_ERROR, err);
        pl_spec_free(spec);
        return st;
    }
    *out = spec;
    return PL_OK;
}

pl_status pl_load_checked_opts(const char *path, const pl_load_opts *opts, pl_spec **out,
                               pl_error *err)
{
    pl_spec *spec = NULL;
    PL_CHECK(pl_load_file_opts(path, opts, &spec, err));
    pl_status st = pl_spec_check(spec, err);
    if (st != PL_OK) {
        pl_spec_free(spec);
        return st;
    }
    *out = spec;
    return PL_OK;
}
