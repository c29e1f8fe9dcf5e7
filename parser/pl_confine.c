/* pl_confine: run.confine (`pipectl run --confine`): every file path a pipeline names must lead
 * inside its folder or --out-dir. Paths are resolved the way opening them resolves them, symlinks
 * of every existing component followed, so neither `..` nor a link out of the folder gets past
 * it; what does not exist yet (a sink's new file and folders) cannot be a link and is taken as
 * written. Kinds are not asked: a stage's path keys (PL_KEY_PATH) are its files, outputs when its
 * kind's role says so (resolved as spec->out_dir says), a loop's stream `to` is an output and its
 * `vocab` an input, and buffers' init files are inputs. */
#define _XOPEN_SOURCE 700 /* lstat, readlink, realpath */
#include "pl_buffers.h"
#include "pl_parse.h"
#include "pl_stage.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PL__MAX_LINKS 40 /* as Linux's own limit on links followed in one lookup */

/* cur/comp into cur (cur is absolute and normalised: no trailing '/' but "/" itself). */
static bool pl__append(char *cur, size_t cap, const char *comp, size_t n)
{
    size_t len = strlen(cur);
    if (len + 1 + n + 1 > cap) return false;
    if (len > 1) cur[len++] = '/';
    memcpy(cur + len, comp, n);
    cur[len + n] = '\0';
    return true;
}

/* Resolves `path` (relative to the working directory) into out as an absolute path with no `.`,
 * `..` or symlinks in the part that exists. false when it cannot be resolved (too long, a loop of
 * links, no working directory). */
static bool pl__resolve(const char *path, char out[PATH_MAX])
{
    char rest[2 * PATH_MAX], cur[PATH_MAX];
    int links = 0;
    bool missing = false; /* a component did not exist: the rest cannot be links */
    if (path[0] == '/') {
        snprintf(cur, sizeof cur, "/");
    } else if (!getcwd(cur, sizeof cur)) {
        return false;
    }
    if ((size_t)snprintf(rest, sizeof rest, "%s", path) >= sizeof rest) return false;
    char *p = rest;
    while (*p) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0) break;
        const char *comp = p;
        p += n;
        if (n == 1 && comp[0] == '.') continue;
        if (n == 2 && comp[0] == '.' && comp[1] == '.') {
            char *slash = strrchr(cur, '/');
            if (slash == cur)
                cur[1] = '\0';
            else if (slash)
                *slash = '\0';
            continue;
        }
        char cand[PATH_MAX];
        snprintf(cand, sizeof cand, "%s", cur);
        if (!pl__append(cand, sizeof cand, comp, n)) return false;
        struct stat sb;
        if (missing || lstat(cand, &sb) != 0) {
            missing = true;
            snprintf(cur, sizeof cur, "%s", cand);
            continue;
        }
        if (!S_ISLNK(sb.st_mode)) {
            snprintf(cur, sizeof cur, "%s", cand);
            continue;
        }
        if (++links > PL__MAX_LINKS) return false;
        char target[PATH_MAX];
        ssize_t tn = readlink(cand, target, sizeof target - 1);
        if (tn < 0) return false;
        target[tn] = '\0';
        /* The link's target, then what was left after the link, as the new rest. */
        char next[2 * PATH_MAX];
        if ((size_t)snprintf(next, sizeof next, "%s/%s", target, p) >= sizeof next) return false;
        snprintf(rest, sizeof rest, "%s", next);
        p = rest;
        if (target[0] == '/') snprintf(cur, sizeof cur, "/");
    }
    snprintf(out, PATH_MAX, "%s", cur);
    return true;
}

static bool pl__inside(const char *p, const char *root)
{
    size_t n = strlen(root);
    if (strcmp(root, "/") == 0) return true;
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

typedef struct pl__roots {
    char dir[PATH_MAX], out[PATH_MAX];
    bool has_out;
} pl__roots;

/* One path as written (`written`, joined to its folder as `joined`): inside a root, or an error at
 * pos naming whose it is (`what`: "sink 'save'") and the key. */
static pl_status pl__check_path(const pl__roots *r, pl_pos pos, const char *what, const char *key,
                                const char *written, const char *joined, pl_error *err)
{
    char real[PATH_MAX], cb[72];
    if (!pl__resolve(joined, real))
        return pl_error_at(err, PL_EINPUT, pos,
                           "%s: '%s: %s' cannot be resolved (a loop of symlinks, or too long); "
                           "run.confine (--confine) allows only paths that resolve inside the "
                           "pipeline's folder and --out-dir",
                           what, key, pl_clip(written, cb));
    if (pl__inside(real, r->dir) || (r->has_out && pl__inside(real, r->out))) return PL_OK;
    if (r->has_out)
        return pl_error_at(err, PL_EINPUT, pos,
                           "%s: '%s: %s' leads to '%s', outside the pipeline's folder '%s' and "
                           "--out-dir '%s'; run.confine (--confine) allows only paths inside those "
                           "two ('..' and symlinks followed): write a path inside them, or run "
                           "without confine",
                           what, key, pl_clip(written, cb), real, r->dir, r->out);
    return pl_error_at(err, PL_EINPUT, pos,
                       "%s: '%s: %s' leads to '%s', outside the pipeline's folder '%s'; "
                       "run.confine (--confine) allows only paths inside it and --out-dir ('..' "
                       "and symlinks followed): write a path inside it, or run without confine",
                       what, key, pl_clip(written, cb), real, r->dir);
}

pl_status pl_spec_check_confined(const pl_spec *spec, pl_error *err)
{
    pl__roots r;
    char p[PATH_MAX], what[PL_MAX_NAME + 64];
    if (!pl__resolve(spec->dir, r.dir))
        return pl_error_set(err, PL_EINPUT, "error: run.confine: cannot resolve the folder of '%s'",
                            spec->file);
    r.has_out = spec->out_dir != NULL;
    if (r.has_out && !pl__resolve(spec->out_dir, r.out))
        return pl_error_set(err, PL_EINPUT, "error: run.confine: cannot resolve --out-dir '%s'",
                            spec->out_dir);
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *b = &spec->buffers[i];
        if (b->init != PL_INIT_FILE || !b->init_file) continue;
        snprintf(what, sizeof what, "buffer '%s'", b->name);
        pl_spec_path(spec, b->init_file, p, sizeof p);
        PL_CHECK(pl__check_path(&r, b->init_pos, what, "file", b->init_file, p, err));
    }
    for (int s = 0; s < spec->n_stages; s++) {
        const pl_stage *st = &spec->stages[s];
        if (!st->kind) continue;
        const pl_loop_stream *ls = st->loop ? st->loop->stream : NULL;
        if (ls) { /* a loop's stream: its file is an output, its tokenizer an input */
            snprintf(what, sizeof what, "loop '%s': stream", st->name);
            if (ls->to && strcmp(ls->to, "-") != 0) {
                pl_spec_out_path(spec, ls->to, p, sizeof p);
                PL_CHECK(pl__check_path(&r, ls->to_pos, what, "to", ls->to, p, err));
            }
            if (ls->vocab) {
                pl_spec_path(spec, ls->vocab, p, sizeof p);
                PL_CHECK(pl__check_path(&r, ls->vocab_pos, what, "vocab", ls->vocab, p, err));
            }
        }
        bool out = st->kind->role & PL_ROLE_OUTPUT;
        for (int o = 0; o < st->n_opts; o++) {
            const pl_opt *op = &st->opts[o];
            const pl_key *k = pl_kind_key(st->kind, op->key);
            if (!k || k->type != PL_KEY_PATH) continue;
            snprintf(what, sizeof what, "%s '%s'", st->kind->name, st->name);
            int n = op->is_list ? op->n_items : 1;
            for (int j = 0; j < n; j++) {
                const char *v = op->is_list ? op->items[j] : op->str;
                pl_pos pos = op->is_list ? op->item_pos[j] : op->val_pos;
                if (!v || strcmp(v, "-") == 0) continue; /* stdin, stdout: not a path */
                if (out)
                    pl_spec_out_path(spec, v, p, sizeof p);
                else
                    pl_spec_path(spec, v, p, sizeof p);
                PL_CHECK(pl__check_path(&r, pos, what, op->key, v, p, err));
            }
        }
    }
    return PL_OK;
}
