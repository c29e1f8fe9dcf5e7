/* pl_test_spec: builds specs through the builder API for the check and plan unit tests, the way a
 * front end would (options as text, positions on consecutive lines of a fake "t.yaml"). */
#ifndef PL_TEST_SPEC_H
#define PL_TEST_SPEC_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_spec.h"
#include "pl_stage.h"

static int pl_t_line;

static pl_pos pl_t_pos(void)
{
    return (pl_pos){"t.yaml", ++pl_t_line, 3};
}

static pl_spec *t_new(void)
{
    pl_spec *s = NULL;
    pl_error err;
    pl_t_line = 0;
    if (pl_spec_new("t.yaml", &s, &err) != PL_OK) {
        fprintf(stderr, "pl_spec_new: %s\n", err.msg);
        exit(1);
    }
    return s;
}

static void t_buf(pl_spec *s, const char *name, pl_where w, pl_dtype dt, int64_t n, bool persistent,
                  pl_init init)
{
    pl_buffer *b = pl_spec_add_buffer(s, name, pl_t_pos());
    b->where = w;
    b->dtype = dt;
    b->rank = 1;
    b->shape[0] = n;
    b->shape_pos = (pl_pos){"t.yaml", pl_t_line, 20};
    b->persistent = persistent;
    b->init = init;
    b->init_pos = (pl_pos){"t.yaml", pl_t_line, 40};
}

/* Shorthands: per-batch f32 buffers of n elements. */
static void t_host(pl_spec *s, const char *name, int64_t n)
{
    t_buf(s, name, PL_HOST, PL_F32, n, false, PL_INIT_NONE);
}
static void t_dev(pl_spec *s, const char *name, int64_t n)
{
    t_buf(s, name, PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
}

static int t_stage(pl_spec *s, const char *name, const pl_kind *kind)
{
    pl_stage *st = pl_spec_add_stage(s, name, pl_t_pos());
    st->kind = kind;
    st->kind_pos = (pl_pos){"t.yaml", pl_t_line, 10};
    return st->index;
}

static void t_opt(pl_spec *s, int si, const char *key, const char *val)
{
    pl_opt *o = pl_stage_add_opt(s, &s->stages[si], key, pl_t_pos());
    o->str = pl_spec_strdup(s, val);
    o->val_pos = (pl_pos){"t.yaml", pl_t_line, 10};
}

/* Adds each space-separated name of `names` with `add` (read, write or after). */
static void t_refs(pl_spec *s, int si, const char *names,
                   pl_ref *(*add)(pl_spec *, pl_stage *, const char *, pl_pos))
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", names);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " "))
        add(s, &s->stages[si], tok, pl_t_pos());
}

static void t_reads(pl_spec *s, int si, const char *names)
{
    t_refs(s, si, names, pl_stage_add_read);
}
static void t_writes(pl_spec *s, int si, const char *names)
{
    t_refs(s, si, names, pl_stage_add_write);
}
static void t_after(pl_spec *s, int si, const char *names)
{
    t_refs(s, si, names, pl_stage_add_after);
}

/* Kinds whose bind derives reads/writes from options get the options; until a kind has its bind
 * the test adds the refs itself (at the option's position), so the graph and the positions are
 * the same either way. */
static void t_ref_like_bind(pl_spec *s, int si, const char *key, bool write)
{
    const pl_opt *o = pl_stage_opt(&s->stages[si], key);
    if (write)
        pl_stage_add_write(s, &s->stages[si], o->str, o->val_pos);
    else
        pl_stage_add_read(s, &s->stages[si], o->str, o->val_pos);
}

static int t_source(pl_spec *s, const char *name, const char *to)
{
    int si = t_stage(s, name, pl_kind_find("source"));
    t_opt(s, si, "to", to);
    if (!(pl_kind_find("source"))->bind) t_ref_like_bind(s, si, "to", true);
    return si;
}

static int t_sink(pl_spec *s, const char *name, const char *from)
{
    int si = t_stage(s, name, pl_kind_find("sink"));
    t_opt(s, si, "from", from);
    if (!(pl_kind_find("sink"))->bind) t_ref_like_bind(s, si, "from", false);
    return si;
}

static int t_copy(pl_spec *s, const char *name, const pl_kind *kind, const char *from,
                  const char *to)
{
    int si = t_stage(s, name, kind);
    t_opt(s, si, "from", from);
    t_opt(s, si, "to", to);
    if (!(kind)->bind) {
        t_ref_like_bind(s, si, "from", false);
        t_ref_like_bind(s, si, "to", true);
    }
    return si;
}

/* A `busy` kernel: any device reads and writes, as written. */
static int t_busy(pl_spec *s, const char *name, const char *reads, const char *writes)
{
    int si = t_stage(s, name, pl_kind_find("kernel"));
    t_opt(s, si, "op", "busy");
    t_opt(s, si, "duration_us", "1");
    t_reads(s, si, reads);
    t_writes(s, si, writes);
    return si;
}

/* pl_spec_check's status; its message in *msg (static buffer). */
static pl_status t_check(pl_spec *s, const char **msg)
{
    static pl_error err;
    memset(&err, 0, sizeof err);
    pl_status st = pl_spec_check(s, &err);
    if (msg) *msg = err.msg;
    return st;
}

/* gen -> up -> k -> down -> save, n f32 per batch. It takes lines 1-19 of the fake file (one
 * line per builder call): whatever a test adds next starts at line 20. */
static pl_spec *t_chain_n(int64_t n)
{
    pl_spec *s = t_new();
    t_host(s, "x_host", n);
    t_dev(s, "x_dev", n);
    t_dev(s, "y_dev", n);
    t_host(s, "y_host", n);
    t_source(s, "gen", "x_host");
    t_copy(s, "up", pl_kind_find("h2d"), "x_host", "x_dev");
    t_busy(s, "k", "x_dev", "y_dev");
    t_copy(s, "down", pl_kind_find("d2h"), "y_dev", "y_host");
    t_sink(s, "save", "y_host");
    return s;
}

static pl_spec *t_chain(void)
{
    return t_chain_n(1024);
}

#endif
