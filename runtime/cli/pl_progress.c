/* pl_progress: the progress line of `pipectl run` (see pl_progress.h). */
#include "pl_progress.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static int64_t pl__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The terminal's width now; COLUMNS when it is not a terminal (or does not say); else 80. */
static int pl__columns(FILE *out)
{
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}

void pl_progress_init(pl_progress *p, pl_progress_mode mode, bool quiet, uint64_t bytes_per_batch,
                      FILE *out)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = isatty(fileno(out));
    p->on = mode == PL_PROGRESS_ALWAYS || (mode == PL_PROGRESS_AUTO && !quiet && p->tty);
    p->may_force = mode == PL_PROGRESS_AUTO && !quiet;
    p->bytes_per_batch = bytes_per_batch;
    p->t0_ns = pl__now_ns();
}

static void pl__rate_bytes(char *buf, size_t cap, double per_s)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (per_s >= 1024 && i < 4)
        per_s /= 1024, i++;
    snprintf(buf, cap, "%.1f %s/s", per_s, u[i]);
}

static void pl__eta(char *buf, size_t cap, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "ETA %ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "ETA %ld:%02ld", t / 60, t % 60);
}

size_t pl_progress_format(char *buf, size_t cap, int width, int64_t done, int64_t total,
                          double elapsed_s, uint64_t bytes_per_batch)
{
    return pl_progress_format_est(buf, cap, width, done, total, elapsed_s, bytes_per_batch, 0);
}

size_t pl_progress_format_est(char *buf, size_t cap, int width, int64_t done, int64_t total,
                              double elapsed_s, uint64_t bytes_per_batch, double est_s)
{
    char count[48], rate[32], bytes[32], eta[48];
    bool known = done > 0 && elapsed_s > 0;
    double per_s = known ? (double)done / elapsed_s : 0;
    snprintf(count, sizeof count, "%lld/%lld batches", (long long)done, (long long)total);
    snprintf(rate, sizeof rate, "%.1f batches/s", per_s);
    pl__rate_bytes(bytes, sizeof bytes, per_s * (double)bytes_per_batch);
    if (known) {
        pl__eta(eta, sizeof eta, (double)(total - done) / per_s);
    } else if (est_s > 0) {
        char e[32];
        pl__eta(e, sizeof e, est_s > elapsed_s ? est_s - elapsed_s : 0);
        snprintf(eta, sizeof eta, "%.4s~%s (estimate)", e, e + 4);
    } else {
        snprintf(eta, sizeof eta, "ETA -");
    }
    /* Parts in order of use; dropped from the least useful until the line fits. */
    enum { P_BAR, P_COUNT, P_RATE, P_BYTES, P_ETA, P_N };
    const char *part[P_N] = {NULL, count, known ? rate : NULL,
                             known && bytes_per_batch ? bytes : NULL, eta};
    const int drop[] = {P_BYTES, P_RATE, P_BAR, P_ETA};
    int max = width - 1 < (int)cap - 1 ? width - 1 : (int)cap - 1;
    bool bar = true;
    int bar_w = 0;
    for (int d = 0;; d++) {
        int len = 0;
        for (int i = P_COUNT; i < P_N; i++)
            if (part[i]) len += (len ? 2 : 0) + (int)strlen(part[i]);
        int room = max - len - 3; /* the bar: "[####....] " */
        if (bar && room >= 8) {
            bar_w = room > 40 ? 40 : room;
            break;
        }
        if (!bar && len <= max) break;
        if (d == 4) {
            bar = false;
            break;
        }
        if (drop[d] == P_BAR)
            bar = false;
        else
            part[drop[d]] = NULL;
    }
    size_t k = 0;
    if (bar) {
        int fill = total > 0 ? (int)(done * bar_w / total) : 0;
        buf[k++] = '[';
        for (int i = 0; i < bar_w; i++)
            buf[k++] = i < fill ? '#' : '.';
        buf[k++] = ']';
        buf[k++] = ' ';
    }
    bool first = true;
    for (int i = P_COUNT; i < P_N; i++) {
        if (!part[i]) continue;
        int n = snprintf(buf + k, cap - k, "%s%s", first ? "" : "  ", part[i]);
        if (n < 0 || (size_t)n >= cap - k) break;
        k += (size_t)n;
        first = false;
    }
    /* A terminal narrower than even the count: cut, never wrap. */
    if ((int)k > max) k = max > 0 ? (size_t)max : 0;
    buf[k] = '\0';
    return k;
}

void pl_progress_update(void *user, int64_t done, int64_t total)
{
    pl_progress *p = user;
    if (!p->on || total <= 0) return;
    int64_t now = pl__now_ns();
    int64_t every = p->tty ? 100000000 : 1000000000;
    if (p->last_ns && now - p->last_ns < every && done < total) return;
    p->last_ns = now;
    char line[512];
    int width = pl__columns(p->out);
    if (width > (int)sizeof line) width = (int)sizeof line;
    size_t n =
        pl_progress_format_est(line, sizeof line, width, done, total,
                               (double)(now - p->t0_ns) * 1e-9, p->bytes_per_batch, p->est_s);
    if (p->tty) {
        /* Pad over the longer line drawn before (the width may have grown or shrunk). */
        int pad = p->last_len > (int)n && p->last_len < width ? p->last_len - (int)n : 0;
        fprintf(p->out, "\r%s%*s", line, pad, "");
        p->last_len = (int)n;
    } else {
        fprintf(p->out, "%s\n", line);
    }
    fflush(p->out);
}

void pl_progress_estimate(pl_progress *p, double seconds, int64_t total)
{
    p->est_s = seconds;
    if (p->may_force) p->on = true;
    pl_progress_update(p, 0, total);
}

void pl_progress_clear(pl_progress *p)
{
    if (!p->on || !p->tty || !p->last_len) return;
    fprintf(p->out, "\r%*s\r", p->last_len, "");
    fflush(p->out);
    p->last_len = 0;
}
