/* pl_yaml: the YAML front end: a file or string read into a value tree (pl_yaml_tree.c), the
 * command line's --set applied to it (pl_override.c), then the schema walker (parser/pl_schema.c)
 * checks it and turns it into a pl_spec. */
#include "pl_override.h"
#include "pl_parse.h"
#include "pl_schema.h"
#include "pl_yaml_tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pipeline files are small; a cap keeps `pipectl check /dev/zero` from eating all memory. */
#define PL__MAX_FILE_BYTES ((size_t)64 << 20)

static pl_status pl__load_string(const char *name, const char *text, size_t len,
                                 const pl_load_opts *opts, struct pl_diags *diags, pl_spec **out,
                                 pl_error *err)
{
    *out = NULL;
    pl_spec *spec = NULL;
    pl_value *root = NULL;
    PL_CHECK(pl_spec_new(name, &spec, err));
    pl_status st = pl_yaml_read_tree(spec->file, text, len, &root, err);
    pl_schema_src src = {.lua = false, .script_base = NULL, .diags = diags};
    if (st == PL_OK && opts && opts->n_sets)
        st = pl_override_apply(spec, &root, &src, opts->sets, opts->n_sets, err);
    if (st == PL_OK) st = pl_schema_build(spec, root, &src, err);
    pl_value_free(root);
    if (st != PL_OK) {
        pl_spec_free(spec);
        return st;
    }
    *out = spec;
    return PL_OK;
}

pl_status pl_yaml_load_string(const char *name, const char *text, size_t len, pl_spec **out,
                              pl_error *err)
{
    return pl__load_string(name, text, len, NULL, NULL, out, err);
}

pl_status pl_yaml_load_string_opts(const char *name, const char *text, size_t len,
                                   const pl_load_opts *opts, pl_spec **out, pl_error *err)
{
    return pl__load_string(name, text, len, opts, NULL, out, err);
}

pl_status pl_yaml_load_file(const char *path, pl_spec **out, pl_error *err)
{
    return pl_yaml_load_file_opts(path, NULL, out, err);
}

pl_status pl_yaml_load_file_opts(const char *path, const pl_load_opts *opts, pl_spec **out,
                                 pl_error *err)
{
    return pl_yaml_load_file_all(path, opts, NULL, out, err);
}

pl_status pl_yaml_load_file_all(const char *path, const pl_load_opts *opts, struct pl_diags *diags,
                                pl_spec **out, pl_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_error_set(err, PL_EINPUT, "error: cannot read '%s': %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    pl_status st = PL_OK;
    if (!buf) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory reading '%s'", path);
        goto done;
    }
    for (;;) {
        if (len == cap) {
            if (cap > PL__MAX_FILE_BYTES) {
                st = pl_error_set(err, PL_EINPUT,
                                  "error: cannot read '%s': larger than %zu MiB; a pipeline file "
                                  "is a small YAML text file",
                                  path, PL__MAX_FILE_BYTES >> 20);
                goto done;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                st = pl_error_set(err, PL_ENOMEM, "error: out of memory reading '%s'", path);
                goto done;
            }
            buf = nb;
            cap *= 2;
        }
        errno = 0;
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) { /* e.g. a directory: EISDIR */
        st = pl_error_set(err, PL_EINPUT, "error: cannot read '%s': %s", path,
                          strerror(errno ? errno : EIO));
        goto done;
    }
    st = pl__load_string(path, buf, len, opts, diags, out, err);
done:
    free(buf);
    fclose(f);
    return st;
}
