/* pl_status: the status table's name/text/exit-code functions and error formatting. */
#include "pl_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_str.h"

static const struct {
    const char *name, *text;
    int code;
} pl__status_table[] = {
#define PL__STATUS_ROW(name, code, text) {#name, text, code},
    PL_STATUS_MAP(PL__STATUS_ROW)
#undef PL__STATUS_ROW
};

const char *pl_status_name(pl_status st)
{
    return (unsigned)st < PL_STATUS_COUNT ? pl__status_table[st].name : "EUNKNOWN";
}

const char *pl_status_text(pl_status st)
{
    return (unsigned)st < PL_STATUS_COUNT ? pl__status_table[st].text : "unknown status";
}

int pl_status_exit_code(pl_status st)
{
    return (unsigned)st < PL_STATUS_COUNT ? pl__status_table[st].code : 1;
}

static void pl__where_clear(pl_error *err)
{
    err->file[0] = '\0';
    err->line = err->col = 0;
    err->stage[0] = '\0';
    err->batch = -1;
}

static void pl__copy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

/* A message longer than the record holds loses its middle, not its end: the end says why and how
 * to fix it, the middle is usually a long path or a list. */
static void pl__fit(char *msg, const char *full, size_t n)
{
    size_t head = PL_ERROR_MSG_MAX / 2;
    pl_str_cut_middle(full, n, head, PL_ERROR_MSG_MAX - head - 8, msg, PL_ERROR_MSG_MAX);
}

/* msg[0, off) is written already; formats the rest after it. */
static void pl__vformat(char *msg, size_t off, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(msg + off, PL_ERROR_MSG_MAX - off, fmt, ap);
    if (n >= 0 && off + (size_t)n >= PL_ERROR_MSG_MAX) {
        char *full = malloc(off + (size_t)n + 1);
        if (full) { /* without memory the end is cut, as snprintf cut it */
            memcpy(full, msg, off);
            vsnprintf(full + off, (size_t)n + 1, fmt, again);
            pl__fit(msg, full, off + (size_t)n);
            free(full);
        }
    }
    va_end(again);
}

/* msg = a + b, cut in the middle when it does not fit. */
static void pl__join(char *msg, const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na + nb < PL_ERROR_MSG_MAX) {
        memmove(msg + na, b, nb + 1); /* b may be msg itself */
        memcpy(msg, a, na);
        return;
    }
    char *full = malloc(na + nb + 1);
    if (!full) {
        snprintf(msg, PL_ERROR_MSG_MAX, "%.*s", (int)(PL_ERROR_MSG_MAX - 1), a);
        return;
    }
    memcpy(full, a, na);
    memcpy(full + na, b, nb + 1);
    pl__fit(msg, full, na + nb);
    free(full);
}

pl_status pl_error_vset(pl_error *err, pl_status st, const char *fmt, va_list ap)
{
    if (err) {
        err->status = st;
        pl__vformat(err->msg, 0, fmt, ap);
        pl__where_clear(err);
    }
    return st;
}

pl_status pl_error_set(pl_error *err, pl_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pl_error_vset(err, st, fmt, ap);
    va_end(ap);
    return st;
}

pl_status pl_error_at(pl_error *err, pl_status st, pl_pos pos, const char *fmt, ...)
{
    if (!err) return st;
    int n = 0;
    if (pos.line > 0)
        n = snprintf(err->msg, sizeof err->msg,
                     "%s:%d:%d: error: ", pos.file ? pos.file : "<input>", pos.line, pos.col);
    else if (pos.line == PL_POS_ARG && pos.file)
        n = snprintf(err->msg, sizeof err->msg, "%s: error: ", pos.file);
    else
        n = snprintf(err->msg, sizeof err->msg, "error: ");
    if (n < 0 || (size_t)n >= sizeof err->msg) n = 0;
    va_list ap;
    va_start(ap, fmt);
    pl__vformat(err->msg, (size_t)n, fmt, ap);
    va_end(ap);
    err->status = st;
    pl__where_clear(err);
    if (pos.line > 0) {
        pl__copy(err->file, sizeof err->file, pos.file ? pos.file : "<input>");
        err->line = pos.line;
        err->col = pos.col;
    } else if (pos.line == PL_POS_ARG && pos.file) {
        pl__copy(err->file, sizeof err->file, pos.file);
    }
    return st;
}

pl_status pl_error_prefix(pl_error *err, const char *fmt, ...)
{
    if (!err) return PL_ERUNTIME;
    char old[PL_ERROR_MSG_MAX], pre[512];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre - 2, fmt, ap);
    va_end(ap);
    strcat(pre, ": ");
    pl__join(err->msg, pre, old);
    return err->status;
}

pl_status pl_error_tag(pl_error *err, const char *stage, int64_t batch)
{
    if (!err) return PL_ERUNTIME;
    pl__copy(err->stage, sizeof err->stage, stage);
    err->batch = batch < 0 ? -1 : batch;
    return err->status;
}

pl_status pl_error_stage(pl_error *err, const char *stage, int64_t batch)
{
    if (!err) return PL_ERUNTIME;
    if (err->stage[0]) {
        /* Named already: the hook's own words stay; the record learns the batch if it lacked it. */
        if (err->batch < 0 && batch >= 0 && strcmp(err->stage, stage ? stage : "") == 0)
            err->batch = batch;
        return err->status;
    }
    char old[PL_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    const char *rest = strncmp(old, "error: ", 7) == 0 ? old + 7 : old;
    char pre[PL_ERROR_STAGE_MAX + 64];
    if (batch >= 0)
        snprintf(pre, sizeof pre, "error: stage '%s', batch %lld: ", stage ? stage : "",
                 (long long)batch);
    else
        snprintf(pre, sizeof pre, "error: stage '%s': ", stage ? stage : "");
    pl__join(err->msg, pre, rest);
    return pl_error_tag(err, stage, batch);
}

void pl_error_clear(pl_error *err)
{
    if (err) {
        err->status = PL_OK;
        err->msg[0] = '\0';
        pl__where_clear(err);
    }
}
