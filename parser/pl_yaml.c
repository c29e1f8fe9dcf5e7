/* pl_yaml: the YAML front end (libyaml). STUB: being written. */
#include "pl_parse.h"

pl_status pl_yaml_load_file(const char *path, pl_spec **out, pl_error *err)
{
    *out = NULL;
    return pl_error_set(err, PL_ERUNTIME, "error: YAML front end not built yet (%s)", path);
}

pl_status pl_yaml_load_string(const char *name, const char *text, size_t len, pl_spec **out,
                              pl_error *err)
{
    (void)text;
    (void)len;
    *out = NULL;
    return pl_error_set(err, PL_ERUNTIME, "error: YAML front end not built yet (%s)", name);
}
