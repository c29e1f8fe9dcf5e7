/* pl_load: picks the front end by file extension (or takes text), applies what the command line
 * changes (--set in the front end, --out-dir, --confine), then checks the spec. */
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

/* What the command line changes after the front end: --out-dir, then --confine and its check. */
static pl_status pl__load_finish(pl_spec *spec, const pl_load_opts *opts, pl_error *err)
{
    if (opts && opts->out_dir) {
        spec->out_dir = pl_spec_strdup(spec, opts->out_dir);
        if (!spec->out_dir) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    if (opts && opts->confine) spec->run.confine = true;
    return spec->run.confine ? pl_spec_check_confined(spec, err) : PL_OK;
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
    st = pl__load_finish(spec, opts, err);
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

pl_status pl_load_string_checked(const char *name, const char *text, size_t len, bool lua,
                                 const char *dir, const pl_load_opts *opts, pl_spec **out,
                                 pl_error *err)
{
    *out = NULL;
    pl_spec *spec = NULL;
    PL_CHECK(lua ? pl_lua_load_string_opts(name, text, len, opts, &spec, err)
                 : pl_yaml_load_string_opts(name, text, len, opts, &spec, err));
    pl_status st = PL_OK;
    if (dir && !(spec->dir = pl_spec_strdup(spec, dir)))
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
    if (st == PL_OK) st = pl__load_finish(spec, opts, err);
    if (st == PL_OK) st = pl_spec_check(spec, err);
    if (st != PL_OK) {
        pl_spec_free(spec);
        return st;
    }
    *out = spec;
    return PL_OK;
}
