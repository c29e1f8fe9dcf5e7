/* pl_diag: the diagnostics list. */
#include "pl_diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pl_diags_init(pl_diags *d, int limit)
{
    memset(d, 0, sizeof *d);
    d->limit = limit < 1 ? 1 : limit;
}

void pl_diags_fini(pl_diags *d)
{
    if (!d) return;
    free(d->items);
    int limit = d->limit;
    memset(d, 0, sizeof *d);
    d->limit = limit;
}

void pl_diags_add(pl_diags *d, pl_severity sev, const pl_error *e)
{
    if (!d) return;
    if (d->n >= d->limit) {
        d->dropped++;
        return;
    }
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 4;
        if (cap > d->limit) cap = d->limit;
        pl_diag *a = realloc(d->items, (size_t)cap * sizeof *a);
        if (!a) {
            d->dropped++;
            return;
        }
        d->items = a;
        d->cap = cap;
    }
    d->items[d->n].severity = sev;
    d->items[d->n].err = *e;
    d->n++;
}

int pl_diags_errors(const pl_diags *d)
{
    int n = d->dropped;
    for (int i = 0; i < d->n; i++)
        n += d->items[i].severity == PL_SEV_ERROR;
    return n;
}

void pl_diags_warn(pl_diags *d, pl_status st, pl_pos pos, const char *fmt, ...)
{
    if (!d) return;
    pl_error e;
    char body[PL_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    /* pl_error_at's record and position prefix, with "warning: " where it writes "error: ". */
    pl_error_at(&e, st, pos, "%s", "");
    size_t n = strlen(e.msg);
    n = n >= 7 ? n - 7 : 0;
    snprintf(e.msg + n, sizeof e.msg - n, "warning: %s", body);
    pl_diags_add(d, PL_SEV_WARNING, &e);
}
