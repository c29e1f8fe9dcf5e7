/* pl_load: picks the front end by file extension, then checks the spec. */
#include "pl_parse.h"

#include <string.h>

#include "pl_diag.h"

pl_status pl_load_file(const char *path, pl_spec **out, pl_error *err)
{
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".lua") == 0) return pl_lua_load_file(path, out, err);
    return pl_yaml_load_file(path, out, err);
}

pl_status pl_load_file_all(const char *path, struct pl_diags *diags, pl_spec **out, pl_error *err)
{
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".lua") == 0) {
        pl_status st = pl_lua_load_file(path, out, err);
        if (st != PL_OK) pl_diags_add(diags, PL_SEV_ERROR, err);
        return st;
    }
    return pl_yaml_load_file_all(path, diags, out, err);
}

pl_status pl_load_checked(const char *path, pl_spec **out, pl_error *err)
{
    pl_spec *spec = NULL;
    PL_CHECK(pl_load_file(path, &spec, err));
    pl_status st = pl_spec_check(spec, err);
    if (st != PL_OK) {
        pl_spec_free(spec);
        return st;
    }
    *out = spec;
    return PL_OK;
}
