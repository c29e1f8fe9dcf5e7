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

pl_status pl_error_vset(pl_error *err, pl_status st, const char *fmt, va_list ap)
{
    if (err) {
        err->status = st;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
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
    else
        n = snprintf(err->msg, sizeof err->msg, "error: ");
    if (n < 0 || (size_t)n >= sizeof err->msg) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    va_end(ap);
    err->status = st;
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

void pl_error_clear(pl_error *err)
{
    if (err) {
        err->status = PL_OK;
        err->msg[0] = '\0';
    }
}
