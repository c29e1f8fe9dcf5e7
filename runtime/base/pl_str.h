/* pl_str: user text made safe for one line of human output: file names escaped the one way
 * pipectl writes them, and long text shortened in the middle so what follows it survives. */
#ifndef PL_STR_H
#define PL_STR_H

#include <stdbool.h>
#include <stddef.h>

/* How pl_name_str writes a name. */
enum {
    PL_NAME_QUOTE = 1,  /* always in double quotes, even when every byte is safe */
    PL_NAME_SHORT = 2,  /* longer than PL_NAME_SHORT_OVER bytes: keep the first and the last
                         * PL_NAME_SHORT_KEEP bytes (whole characters) around "…" */
    PL_NAME_INSIDE = 4, /* the escapes only, never quotes: for a message that quotes the name
                         * itself ('%s') */
};
#define PL_NAME_SHORT_OVER 96
#define PL_NAME_SHORT_KEEP 40

/* Worst case of pl_name_str with PL_NAME_SHORT: two kept ends, each byte an escape, quotes. */
#define PL_NAME_SHORT_CAP (2 * 4 * (PL_NAME_SHORT_KEEP + 4) + 16)
/* Worst case of a whole path check let through (shorter than PATH_MAX, 4096 on Linux). */
#define PL_NAME_CAP (4 * 4096 + 8)

/* A file name (or any user text) for human output, one line whatever it holds: as it is when
 * every byte is safe (ASCII letters and digits, `_-.,/+:=@%^~`, and valid UTF-8 beyond ASCII
 * other than the C1 controls), else in double quotes with C escapes: \n \t \r \\ \" and \xHH for
 * the other control bytes, DEL, C1 controls and every byte that is not part of valid UTF-8
 * ("out\nx.npy", "caf\xe9.npy", "a b"). The empty name is "". A result that would not fit `cap`
 * is shortened in the middle (as PL_NAME_SHORT does, with shorter ends), never cut at its end;
 * cap >= 32 always fits something. Returns buf. */
const char *pl_name_str(const char *s, unsigned flags, char *buf, size_t cap);

/* Whether pl_name_str writes s without quotes (no escapes needed either). */
bool pl_name_safe(const char *s);

/* The first `head` and the last `tail` bytes of s[0, n) with "…" between them, into buf (both
 * ends moved to whole UTF-8 characters; s as it is when n <= head + tail + 3, the length of the
 * mark). Truncates only when cap is smaller than head + tail + 4. Returns the length written. */
size_t pl_str_cut_middle(const char *s, size_t n, size_t head, size_t tail, char *buf, size_t cap);

/* 4226 -> "4,226" (thousands separated by commas, as messages write byte counts). Returns buf. */
const char *pl_str_count(unsigned long long v, char *buf, size_t cap);

#endif
