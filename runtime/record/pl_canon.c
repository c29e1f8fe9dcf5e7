/* pl_canon: writes a spec back as canonical YAML (every key, defaults written out). */
#include "pl_canon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pl_stage.h"

/* Double-quoted YAML scalar: safe for any text (numbers stay numbers to the option parser, which
 * types text against the key table). */
static void pl__q(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p == '\t')
            fputs("\\t", out);
        else if (*p == '\r')
            fputs("\\r", out);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void pl__refs(FILE *out, const char *key, const pl_ref *r, int n)
{
    if (n == 0) return;
    fprintf(out, "    %s: [", key);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", out);
        pl__q(out, r[i].name);
    }
    fputs("]\n", out);
}

/* True when `def` is a literal of the key's type (so writing it changes nothing). */
static bool pl__literal_default(const pl_key *k)
{
    if (!k->def || !*k->def) return false;
    char *end;
    errno = 0;
    switch (k->type) {
    case PL_KEY_INT:
    case PL_KEY_INT_OR_INTS: /* chunks: 1 */
        (void)strtoll(k->def, &end, 10);
        return !*end && errno == 0;
    case PL_KEY_NUM:
        (void)strtod(k->def, &end);
        return !*end && errno == 0;
    case PL_KEY_BOOL:
        return strcmp(k->def, "true") == 0 || strcmp(k->def, "false") == 0;
    case PL_KEY_ENUM: {
        size_t n = strlen(k->def);
        for (const char *v = k->values; v && *v;) {
            const char *bar = strchr(v, '|');
            size_t l = bar ? (size_t)(bar - v) : strlen(v);
            if (l == n && strncmp(v, k->def, n) == 0) return true;
            v = bar ? bar + 1 : v + l;
        }
        return false;
    }
    default:
        return false;
    }
}

static void pl__opt(FILE *out, const pl_stage *st, const pl_opt *o, const pl_key *k,
                    pl_canon_path_fn map, void *user)
{
    fprintf(out, "    %s: ", o->key);
    if (o->is_list) {
        fputc('[', out);
        for (int i = 0; i < o->n_items; i++) {
            if (i) fputs(", ", out);
            /* Tagged items ({f32: 1.5} in args:) keep their tag: it is their type. */
            const char *tag = o->item_tags ? o->item_tags[i] : NULL;
            if (tag) fprintf(out, "{%s: ", tag);
            pl__q(out, o->items[i]);
            if (tag) fputc('}', out);
        }
        fputs("]\n", out);
        return;
    }
    const char *v = o->str ? o->str : "";
    if (k && k->type == PL_KEY_PATH && map) {
        const char *m = map(user, st, o->key, v);
        if (m) v = m;
    }
    pl__q(out, v);
    fputc('\n', out);
}

pl_status pl_canon_write(const pl_spec *spec, FILE *out, pl_canon_path_fn map,
                         pl_canon_omit_fn omit, void *user, pl_error *err)
{
    fprintf(out,
            "# The canonical form of the pipeline written by pipectl %s from\n#   %s\n# (every "
            "buffer key, every stage key with its default, the run options).\n",
            PL_VERSION, spec->file ? spec->file : spec->name);
    fputs("pipeline: ", out);
    pl__q(out, spec->name);
    fprintf(out, "\nrun: {batches: %" PRId64 ", ", spec->run.batches);
    if (spec->run.depth_auto)
        fputs("depth: auto, ", out);
    else
        fprintf(out, "depth: %d, ", spec->run.depth);
    fprintf(out, "device: %d, seed: %" PRIu64, spec->run.device, spec->run.seed);
    const pl_budget *bg = &spec->run.budget;
    if (bg->set) { /* in bytes: the exact sizes, whatever unit the file used */
        fputs(", memory_budget: {", out);
        if (bg->device)
            fprintf(out, "device: %" PRIu64 "%s", bg->device, bg->host_pinned ? ", " : "");
        if (bg->host_pinned) fprintf(out, "host_pinned: %" PRIu64, bg->host_pinned);
        fputc('}', out);
    }
    fputs("}\n", out);
    fputs("buffers:\n", out);
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *b = &spec->buffers[i];
        fputs("  ", out);
        pl__q(out, b->name);
        fprintf(out, ": {where: %s, dtype: %s, shape: [", pl_where_name(b->where),
                pl_dtype_name(b->dtype));
        for (int d = 0; d < b->rank; d++)
            fprintf(out, "%s%" PRId64, d ? ", " : "", b->shape[d]);
        fprintf(out, "], persistent: %s", b->persistent ? "true" : "false");
        static const char *const inits[] = {NULL, "zeros", "random", "file"};
        if (b->init != PL_INIT_NONE) fprintf(out, ", init: %s", inits[b->init]);
        if (b->init == PL_INIT_FILE && b->init_file) {
            const char *f = map ? map(user, NULL, "file", b->init_file) : NULL;
            fputs(", file: ", out);
            pl__q(out, f ? f : b->init_file);
        }
        fputs("}\n", out);
    }
    fputs("stages:\n", out);
    for (int s = 0; s < spec->n_stages; s++) {
        const pl_stage *st = &spec->stages[s];
        if (!st->kind)
            return pl_error_at(err, PL_EINPUT, st->pos, "stage '%s' has no kind", st->name);
        fputs("  - name: ", out);
        pl__q(out, st->name);
        fprintf(out, "\n    kind: %s\n", st->kind->name);
        pl__refs(out, "reads", st->reads, st->n_reads);
        pl__refs(out, "writes", st->writes, st->n_writes);
        pl__refs(out, "after", st->after, st->n_after);
        /* Kind keys in table order, given or defaulted, then anything else as written (the
         * check rejects unknown keys, so there is none in a spec that checks). */
        for (const pl_key *k = st->kind->keys; k->name; k++) {
            const pl_opt *o = pl_stage_opt(st, k->name);
            if (o)
                pl__opt(out, st, o, k, map, user);
            else if (pl__literal_default(k) && omit && omit(user, st, k->name))
                fprintf(out,
                        "    # %s: %s (the default; not written: refused next to the keys given)\n",
                        k->name, k->def);
            else if (pl__literal_default(k))
                fprintf(out, "    %s: %s\n", k->name, k->def);
        }
        for (int i = 0; i < st->n_opts; i++) {
            const pl_opt *o = &st->opts[i];
            bool known = false;
            for (const pl_key *k = st->kind->keys; k->name && !known; k++)
                known = strcmp(k->name, o->key) == 0;
            if (!known) pl__opt(out, st, o, NULL, map, user);
        }
    }
    if (ferror(out))
        return pl_error_set(err, PL_EIO, "error: writing the canonical pipeline failed");
    return PL_OK;
}
