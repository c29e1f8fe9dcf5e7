/* pl_fuzz_file: the file-format fuzz targets' scratch folder (one per process, under $TMPDIR or
 * /tmp, removed at exit) and their checks on an error record (the contract of every reader here:
 * bad bytes are PL_EINPUT with an "error: ..." message that names the file; nothing else fails but
 * memory). */
#ifndef PL_FUZZ_FILE_H
#define PL_FUZZ_FILE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_status.h"

static char pl_fuzz_dir[256];

static void pl_fuzz_dir_rm(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", pl_fuzz_dir);
    if (pl_fuzz_dir[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", pl_fuzz_dir);
}

/* The folder (with a subfolder pair/), made on first use. */
static const char *pl_fuzz_scratch(void)
{
    if (pl_fuzz_dir[0]) return pl_fuzz_dir;
    const char *t = getenv("TMPDIR");
    snprintf(pl_fuzz_dir, sizeof pl_fuzz_dir, "%s/pl_fuzz_XXXXXX", t && *t ? t : "/tmp");
    char sub[300];
    if (!mkdtemp(pl_fuzz_dir)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(sub, sizeof sub, "%s/pair", pl_fuzz_dir);
    if (mkdir(sub, 0700) != 0) {
        perror(sub);
        abort();
    }
    atexit(pl_fuzz_dir_rm);
    return pl_fuzz_dir;
}

/* Writes n bytes to DIR/name and returns the path (static buffer per slot 0..3). */
static const char *pl_fuzz_write(int slot, const char *name, const void *data, size_t n)
{
    static char paths[4][512];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", pl_fuzz_scratch(), name);
    FILE *f = fopen(paths[slot], "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(paths[slot]);
        abort();
    }
    return paths[slot];
}

/* Aborts (a finding) when a failure breaks the contract: anything but PL_EINPUT (or PL_ENOMEM),
 * a record whose status differs, or a message without "error: ". */
static void pl_fuzz_want_input_error(const pl_error *err, pl_status st, const char *what)
{
    if (st == PL_OK || st == PL_ENOMEM) return;
    if (st != PL_EINPUT || err->status != st || !strstr(err->msg, "error: ")) {
        fprintf(stderr, "%s broke the error contract: status %s, message '%s'\n", what,
                pl_status_name(st), err->msg);
        abort();
    }
}

#endif
