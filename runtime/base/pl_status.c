/* pl_status: the status table's name/text/exit-code functions and error formatting. */
#include "pl_status.h"

#include <stdio.h>
#include <string.h>

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

pl_status pl_error_vset(pl_error *err, pl_status st, const char *fmt, va_list ap)
{
    if (err) {
        err->status = st;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
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
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
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
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(err->msg, sizeof err->msg, "%s: %s", pre, old);
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
    int n = batch >= 0
                ? snprintf(err->msg, sizeof err->msg,
                           "error: stage '%s', batch %lld: ", stage ? stage : "", (long long)batch)
                : snprintf(err->msg, sizeof err->msg, "error: stage '%s': ", stage ? stage : "");
    if (n > 0 && (size_t)n < sizeof err->msg) {
        size_t len = strnlen(rest, sizeof err->msg - (size_t)n - 1);
        memcpy(err->msg + n, rest, len);
        err->msg[(size_t)n + len] = '\0';
    }
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
