/* pl_canon: writes a spec back as canonical YAML (every key, defaults written out) through
 * libyaml's emitter: text as double-quoted scalars (safe for any text; the option parser types
 * text against the key table, so numbers stay numbers), numbers, booleans and enum words plain,
 * run options and buffers as flow mappings, each stage a block mapping with one key a line. */
#include "pl_canon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "pl_stage.h"

/* The emitter and whether every event so far went out: the first failure sticks, later events
 * are skipped, and pl_canon_write reports it once. */
typedef struct pl__em {
    yaml_emitter_t e;
    bool ok;
} pl__em;

static void pl__emit(pl__em *m, yaml_event_t *ev, int made)
{
    if (!m->ok) {
        if (made) yaml_event_delete(ev);
        return;
    }
    /* yaml_emitter_emit takes the event, also when it fails. */
    if (!made || !yaml_emitter_emit(&m->e, ev)) m->ok = false;
}

static void pl__str(pl__em *m, const char *s, bool quoted)
{
    yaml_event_t ev;
    int made = yaml_scalar_event_initialize(
        &ev, NULL, NULL, (yaml_char_t *)(uintptr_t)s, (int)strlen(s), 1, 1,
        quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE);
    pl__emit(m, &ev, made);
}

static void pl__fmt(pl__em *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pl__fmt(pl__em *m, const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pl__str(m, buf, false);
}

static void pl__map(pl__em *m, bool flow)
{
    yaml_event_t ev;
    int made = yaml_mapping_start_event_initialize(
        &ev, NULL, NULL, 1, flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
    pl__emit(m, &ev, made);
}

static void pl__map_end(pl__em *m)
{
    yaml_event_t ev;
    pl__emit(m, &ev, yaml_mapping_end_event_initialize(&ev));
}

static void pl__seq(pl__em *m, bool flow)
{
    yaml_event_t ev;
    int made = yaml_sequence_start_event_initialize(
        &ev, NULL, NULL, 1, flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
    pl__emit(m, &ev, made);
}

static void pl__seq_end(pl__em *m)
{
    yaml_event_t ev;
    pl__emit(m, &ev, yaml_sequence_end_event_initialize(&ev));
}

/* A comment line after the last value emitted. libyaml has no comment events: what the emitter
 * holds is flushed, and the comment written at the end of that value's line; the emitter starts
 * its next key or item on a new line, as it would have. */
static void pl__comment(pl__em *m, FILE *out, const char *key, const char *def)
{
    if (!m->ok || !yaml_emitter_flush(&m->e)) {
        m->ok = false;
        return;
    }
    fprintf(out, "\n  # %s: %s (the default; not written: refused next to the keys given)", key,
            def);
}

static void pl__refs(pl__em *m, const char *key, const pl_ref *r, int n)
{
    if (n == 0) return;
    pl__str(m, key, false);
    pl__seq(m, true);
    for (int i = 0; i < n; i++)
        pl__str(m, r[i].name, true);
    pl__seq_end(m);
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

static void pl__opt(pl__em *m, const pl_stage *st, const pl_opt *o, const pl_key *k,
                    pl_canon_path_fn map, void *user)
{
    pl__str(m, o->key, false);
    if (o->is_list) {
        pl__seq(m, true);
        for (int i = 0; i < o->n_items; i++) {
            /* Tagged items ({f32: 1.5} in args:) keep their tag: it is their type. */
            const char *tag = o->item_tags ? o->item_tags[i] : NULL;
            if (tag) {
                pl__map(m, true);
                pl__str(m, tag, false);
            }
            pl__str(m, o->items[i], true);
            if (tag) pl__map_end(m);
        }
        pl__seq_end(m);
        return;
    }
    const char *v = o->str ? o->str : "";
    if (k && k->type == PL_KEY_PATH && map) {
        const char *mp = map(user, st, o->key, v);
        if (mp) v = mp;
    }
    pl__str(m, v, true);
}

static void pl__run(pl__em *m, const pl_spec *spec)
{
    const pl_run_opts *r = &spec->run;
    pl__str(m, "run", false);
    pl__map(m, true);
    pl__str(m, "batches", false);
    pl__fmt(m, "%" PRId64, r->batches);
    pl__str(m, "depth", false);
    if (r->depth_auto)
        pl__str(m, "auto", false);
    else
        pl__fmt(m, "%d", r->depth);
    pl__str(m, "device", false);
    pl__fmt(m, "%d", r->device);
    pl__str(m, "seed", false);
    pl__fmt(m, "%" PRIu64, r->seed);
    const pl_budget *bg = &r->budget;
    if (bg->set) { /* in bytes: the exact sizes, whatever unit the file used */
        pl__str(m, "memory_budget", false);
        pl__map(m, true);
        if (bg->device) {
            pl__str(m, "device", false);
            pl__fmt(m, "%" PRIu64, bg->device);
        }
        if (bg->host_pinned) {
            pl__str(m, "host_pinned", false);
            pl__fmt(m, "%" PRIu64, bg->host_pinned);
        }
        pl__map_end(m);
    }
    if (r->loop_mode == PL_LOOP_HOST) { /* written only when set: it changes the plan */
        pl__str(m, "loop", false);
        pl__str(m, "host", false);
    }
    pl__map_end(m);
}

static void pl__buffers(pl__em *m, const pl_spec *spec, pl_canon_path_fn map, void *user)
{
    static const char *const inits[] = {NULL, "zeros", "random", "file"};
    pl__str(m, "buffers", false);
    pl__map(m, false);
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *b = &spec->buffers[i];
        pl__str(m, b->name, true);
        pl__map(m, true);
        pl__str(m, "where", false);
        pl__str(m, pl_where_name(b->where), false);
        pl__str(m, "dtype", false);
        pl__str(m, pl_dtype_name(b->dtype), false);
        pl__str(m, "shape", false);
        pl__seq(m, true);
        for (int d = 0; d < b->rank; d++)
            pl__fmt(m, "%" PRId64, b->shape[d]);
        pl__seq_end(m);
        pl__str(m, "persistent", false);
        pl__str(m, b->persistent ? "true" : "false", false);
        if (b->init != PL_INIT_NONE) {
            pl__str(m, "init", false);
            pl__str(m, inits[b->init], false);
        }
        if (b->init == PL_INIT_FILE && b->init_file) {
            const char *f = map ? map(user, NULL, "file", b->init_file) : NULL;
            pl__str(m, "file", false);
            pl__str(m, f ? f : b->init_file, true);
        }
        pl__map_end(m);
    }
    pl__map_end(m);
}

static void pl__stage(pl__em *m, FILE *out, const pl_spec *spec, const pl_stage *st,
                      pl_canon_path_fn map, pl_canon_omit_fn omit, void *user);

/* A loop: its name, `loop:` with every key given, after:, then its body's stages. */
static void pl__loop(pl__em *m, FILE *out, const pl_spec *spec, const pl_stage *st,
                     pl_canon_path_fn map, pl_canon_omit_fn omit, void *user)
{
    const pl_loop *l = st->loop;
    pl__map(m, false);
    pl__str(m, "name", false);
    pl__str(m, st->name, true);
    pl__str(m, "loop", false);
    pl__map(m, true);
    pl__str(m, "max", false);
    pl__fmt(m, "%" PRId64, l->max);
    if (l->count) {
        pl__str(m, "count", false);
        pl__fmt(m, "%" PRId64, l->count);
    }
    if (l->cond.name) {
        pl__str(m, "while", false);
        pl__str(m, l->cond.name, true);
    }
    if (l->index.name) {
        pl__str(m, "index", false);
        pl__str(m, l->index.name, true);
    }
    const pl_loop_stream *sm = l->stream;
    if (sm) {
        static const char *const formats[] = {"auto", "jsonl", "raw"};
        const char *to = map ? map(user, st, "stream.to", sm->to) : NULL;
        pl__str(m, "stream", false);
        pl__map(m, true);
        pl__str(m, "every", false);
        pl__fmt(m, "%" PRId64, sm->every);
        pl__str(m, "from", false);
        pl__str(m, sm->from.name, true);
        pl__str(m, "to", false);
        pl__str(m, to ? to : sm->to, true);
        pl__str(m, "format", false);
        pl__str(m, formats[sm->format], false);
        pl__str(m, "start", false);
        pl__fmt(m, "%" PRId64, sm->start);
        if (sm->finished.name) {
            pl__str(m, "finished", false);
            pl__str(m, sm->finished.name, true);
        }
        if (sm->vocab) {
            const char *v = map ? map(user, st, "stream.vocab", sm->vocab) : NULL;
            pl__str(m, "vocab", false);
            pl__str(m, v ? v : sm->vocab, true);
            pl__str(m, "skip_special", false);
            pl__str(m, sm->skip_special ? "true" : "false", false);
        }
        pl__map_end(m);
    }
    pl__map_end(m);
    pl__refs(m, "after", st->after, st->n_after);
    pl__str(m, "stages", false);
    pl__seq(m, false);
    for (int i = 0; i < l->n_body && l->first + i < spec->n_stages; i++)
        pl__stage(m, out, spec, &spec->stages[l->first + i], map, omit, user);
    pl__seq_end(m);
    pl__map_end(m);
}

static void pl__stage(pl__em *m, FILE *out, const pl_spec *spec, const pl_stage *st,
                      pl_canon_path_fn map, pl_canon_omit_fn omit, void *user)
{
    if (st->loop) {
        pl__loop(m, out, spec, st, map, omit, user);
        return;
    }
    pl__map(m, false);
    pl__str(m, "name", false);
    pl__str(m, st->name, true);
    pl__str(m, "kind", false);
    pl__str(m, st->kind->name, false);
    pl__refs(m, "reads", st->reads, st->n_reads);
    pl__refs(m, "writes", st->writes, st->n_writes);
    pl__refs(m, "after", st->after, st->n_after);
    /* Kind keys in table order, given or defaulted, then anything else as written (the check
     * rejects unknown keys, so there is none in a spec that checks). */
    for (const pl_key *k = st->kind->keys; k->name; k++) {
        const pl_opt *o = pl_stage_opt(st, k->name);
        if (o) {
            pl__opt(m, st, o, k, map, user);
        } else if (pl__literal_default(k) && omit && omit(user, st, k->name)) {
            pl__comment(m, out, k->name, k->def);
        } else if (pl__literal_default(k)) {
            pl__str(m, k->name, false);
            pl__str(m, k->def, false);
        }
    }
    for (int i = 0; i < st->n_opts; i++) {
        const pl_opt *o = &st->opts[i];
        bool known = false;
        for (const pl_key *k = st->kind->keys; k->name && !known; k++)
            known = strcmp(k->name, o->key) == 0;
        if (!known) pl__opt(m, st, o, NULL, map, user);
    }
    pl__map_end(m);
}

pl_status pl_canon_write(const pl_spec *spec, FILE *out, pl_canon_path_fn map,
                         pl_canon_omit_fn omit, void *user, pl_error *err)
{
    for (int s = 0; s < spec->n_stages; s++)
        if (!spec->stages[s].kind)
            return pl_error_at(err, PL_EINPUT, spec->stages[s].pos, "stage '%s' has no kind",
                               spec->stages[s].name);
    fprintf(out,
            "# The canonical form of the pipeline written by pipectl %s from\n#   %s\n# (every "
            "buffer key, every stage key with its default, the run options).\n",
            PL_VERSION, spec->file ? spec->file : spec->name);
    pl__em m = {.ok = true};
    if (!yaml_emitter_initialize(&m.e))
        return pl_error_set(err, PL_ENOMEM, "error: out of memory writing the canonical pipeline");
    yaml_emitter_set_output_file(&m.e, out);
    yaml_emitter_set_unicode(&m.e, 1); /* UTF-8 text as it is, not \u escapes */
    yaml_emitter_set_width(&m.e, -1);  /* no folding of long text */
    yaml_emitter_set_indent(&m.e, 2);
    yaml_event_t ev;
    pl__emit(&m, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    pl__emit(&m, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    pl__map(&m, false);
    pl__str(&m, "pipeline", false);
    pl__str(&m, spec->name, true);
    pl__run(&m, spec);
    pl__buffers(&m, spec, map, user);
    pl__str(&m, "stages", false);
    pl__seq(&m, false);
    for (int s = 0; s < spec->n_stages; s++)
        if (spec->stages[s].parent < 0) /* body stages are written inside their loop */
            pl__stage(&m, out, spec, &spec->stages[s], map, omit, user);
    pl__seq_end(&m);
    pl__map_end(&m);
    pl__emit(&m, &ev, yaml_document_end_event_initialize(&ev, 1));
    pl__emit(&m, &ev, yaml_stream_end_event_initialize(&ev));
    if (m.ok && !yaml_emitter_flush(&m.e)) m.ok = false;
    pl_status st = PL_OK;
    if (!m.ok)
        st = pl_error_set(err, m.e.error == YAML_MEMORY_ERROR ? PL_ENOMEM : PL_EIO,
                          "error: writing the canonical pipeline failed: %s",
                          m.e.problem ? m.e.problem
                                      : "an event could not be made (out of memory, or text "
                                        "that is not UTF-8)");
    yaml_emitter_delete(&m.e);
    if (st == PL_OK && ferror(out))
        st = pl_error_set(err, PL_EIO, "error: writing the canonical pipeline failed");
    return st;
}
