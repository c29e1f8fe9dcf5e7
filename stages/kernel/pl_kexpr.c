/* pl_kexpr: a small recursive-descent evaluator for grid/block/shared/argument expressions.
 * Values are doubles holding integers or exact quotients (all sizes stay below 2^53), so
 * ceil(elements(x) / 256) means what it says instead of flooring first. */
#include "pl_kexpr.h"

#include <ctype.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define PL__EXACT 9007199254740992.0 /* 2^53: beyond it doubles skip integers */

typedef struct pl__ex {
    const pl_spec *spec;
    const char *stage, *what, *text, *p;
    pl_pos pos;
    pl_error *err;
    int depth;
} pl__ex;

static pl_status pl__fail(pl__ex *x, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static pl_status pl__fail(pl__ex *x, const char *at, const char *fmt, ...)
{
    pl_pos p = x->pos;
    if (p.line) p.col += (int)(at - x->text);
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pl_error_at(x->err, PL_EINPUT, p, "stage '%s': %s: %s (in '%s')", x->stage, x->what, msg,
                       x->text);
}

static void pl__skip(pl__ex *x)
{
    while (*x->p == ' ' || *x->p == '\t')
        x->p++;
}

static pl_status pl__expr(pl__ex *x, double *v);

/* name(args...) or a literal or ( expr ). */
static pl_status pl__primary(pl__ex *x, double *v)
{
    pl__skip(x);
    const char *start = x->p;
    if (++x->depth > 64) return pl__fail(x, start, "nested too deeply");
    if (*x->p == '(') {
        x->p++;
        PL_CHECK(pl__expr(x, v));
        pl__skip(x);
        if (*x->p != ')') return pl__fail(x, x->p, "expected ')'");
        x->p++;
        x->depth--;
        return PL_OK;
    }
    if (*x->p == '-') {
        x->p++;
        PL_CHECK(pl__primary(x, v));
        *v = -*v;
        x->depth--;
        return PL_OK;
    }
    if (isdigit((unsigned char)*x->p)) {
        double n = 0;
        while (isdigit((unsigned char)*x->p)) {
            n = n * 10 + (*x->p - '0');
            if (n >= PL__EXACT) return pl__fail(x, start, "the number is too large");
            x->p++;
        }
        if (isalpha((unsigned char)*x->p) || *x->p == '_' || *x->p == '.')
            return pl__fail(x, start, "only integer literals are allowed here");
        *v = n;
        x->depth--;
        return PL_OK;
    }
    if (!isalpha((unsigned char)*x->p) && *x->p != '_') {
        if (!*x->p) return pl__fail(x, x->p, "expression ends too early");
        char c[2] = {*x->p, 0};
        return pl__fail(x, x->p, "unexpected '%s'", c);
    }
    while (isalnum((unsigned char)*x->p) || *x->p == '_')
        x->p++;
    char name[PL_MAX_NAME + 1];
    size_t len = (size_t)(x->p - start);
    if (len > PL_MAX_NAME) len = PL_MAX_NAME;
    memcpy(name, start, len);
    name[len] = '\0';
    static const char *const fns[] = {"ceil", "floor", "min", "max", "elements", "bytes"};
    int f = -1;
    for (int i = 0; i < 6; i++)
        if (strcmp(name, fns[i]) == 0) f = i;
    if (f < 0) {
        if (pl_spec_find_buffer(x->spec, name) >= 0) {
            return pl__fail(x, start,
                            "'%s' is a buffer; write elements(%s) or bytes(%s) for its size", name,
                            name, name);
        }
        const char *best = pl_closest(name, fns, 6);
        if (best) {
            char m[160];
            snprintf(m, sizeof m, "unknown function '%s' (did you mean '%s'?)", name, best);
            return pl__fail(x, start, "%s", m);
        }
        return pl__fail(x, start,
                        "unknown name '%s'; expressions know ceil, floor, min, max, elements(buf), "
                        "bytes(buf) and integers",
                        name);
    }
    pl__skip(x);
    if (*x->p != '(') return pl__fail(x, x->p, "expected '(' after '%s'", name);
    x->p++;
    if (f >= 4) {
        pl__skip(x);
        const char *b0 = x->p;
        while (isalnum((unsigned char)*x->p) || *x->p == '_' || *x->p == '-' || *x->p == '.')
            x->p++;
        char buf[PL_MAX_NAME + 1];
        size_t bl = (size_t)(x->p - b0);
        if (bl == 0) return pl__fail(x, b0, "%s() takes a buffer name", name);
        if (bl > PL_MAX_NAME) bl = PL_MAX_NAME;
        memcpy(buf, b0, bl);
        buf[bl] = '\0';
        int bi = pl_spec_find_buffer(x->spec, buf);
        if (bi < 0) {
            const char *cands[256];
            int n = 0;
            for (int i = 0; i < x->spec->n_buffers && n < 256; i++)
                cands[n++] = x->spec->buffers[i].name;
            const char *best = pl_closest(buf, cands, n);
            char m[200];
            if (best)
                snprintf(m, sizeof m, "unknown buffer '%s' (did you mean '%s'?)", buf, best);
            else
                snprintf(m, sizeof m, "unknown buffer '%s'", buf);
            return pl__fail(x, b0, "%s", m);
        }
        const pl_buffer *b = &x->spec->buffers[bi];
        *v = f == 4 ? (double)b->count : (double)b->bytes;
        pl__skip(x);
    } else {
        double a = 0, b = 0;
        PL_CHECK(pl__expr(x, &a));
        pl__skip(x);
        if (f >= 2) {
            if (*x->p != ',')
                return pl__fail(x, x->p, "%s() takes two arguments: %s(a, b)", name, name);
            x->p++;
            PL_CHECK(pl__expr(x, &b));
            pl__skip(x);
        }
        *v = f == 0 ? ceil(a) : f == 1 ? floor(a) : f == 2 ? fmin(a, b) : fmax(a, b);
    }
    if (*x->p != ')') return pl__fail(x, x->p, "expected ')' to close %s(", name);
    x->p++;
    x->depth--;
    return PL_OK;
}

static pl_status pl__term(pl__ex *x, double *v)
{
    PL_CHECK(pl__primary(x, v));
    for (;;) {
        pl__skip(x);
        char op = *x->p;
        if (op != '*' && op != '/' && op != '%') return PL_OK;
        const char *at = x->p++;
        double r;
        PL_CHECK(pl__primary(x, &r));
        if (op == '*')
            *v *= r;
        else if (r == 0)
            return pl__fail(x, at, "division by zero");
        else if (op == '/')
            *v /= r;
        else if (*v != floor(*v) || r != floor(r))
            return pl__fail(x, at, "%% needs whole numbers on both sides");
        else
            *v = fmod(*v, r);
        if (fabs(*v) >= PL__EXACT) return pl__fail(x, at, "the value is too large");
    }
}

static pl_status pl__expr(pl__ex *x, double *v)
{
    PL_CHECK(pl__term(x, v));
    for (;;) {
        pl__skip(x);
        char op = *x->p;
        if (op != '+' && op != '-') return PL_OK;
        const char *at = x->p++;
        double r;
        PL_CHECK(pl__term(x, &r));
        *v = op == '+' ? *v + r : *v - r;
        if (fabs(*v) >= PL__EXACT) return pl__fail(x, at, "the value is too large");
    }
}

pl_status pl_kexpr_eval(const pl_spec *spec, const char *stage, const char *what, const char *text,
                        pl_pos pos, int64_t *out, pl_error *err)
{
    pl__ex x = {spec, stage, what, text, text, pos, err, 0};
    double v;
    PL_CHECK(pl__expr(&x, &v));
    pl__skip(&x);
    if (*x.p) {
        char c[2] = {*x.p, 0};
        return pl__fail(&x, x.p, "unexpected '%s' after the expression", c);
    }
    if (v != floor(v)) {
        char m[96];
        snprintf(m, sizeof m,
                 "evaluates to %g, not a whole number; round it with ceil() or floor()", v);
        return pl__fail(&x, text, "%s", m);
    }
    *out = (int64_t)v;
    return PL_OK;
}
