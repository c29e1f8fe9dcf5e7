/* pl_graph: the intra-batch dependency graph shared by the checks and the plan compiler. */
#include "pl_graph.h"

#include <stdlib.h>
#include <string.h>

/* ---- name table ---------------------------------------------------------------------------- */

static uint32_t pl__hash_str(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

pl_status pl_names_init(pl_names *t, int expected)
{
    uint32_t cap = 16;
    while (cap < (uint32_t)expected * 2u + 1u)
        cap <<= 1;
    t->keys = calloc(cap, sizeof *t->keys);
    t->vals = calloc(cap, sizeof *t->vals);
    t->cap = cap;
    if (!t->keys || !t->vals) {
        pl_names_fini(t);
        return PL_ENOMEM;
    }
    return PL_OK;
}

void pl_names_fini(pl_names *t)
{
    free(t->keys);
    free(t->vals);
    memset(t, 0, sizeof *t);
}

/* The table never fills: pl_names_init sized it for at least twice the expected entries. */
int pl_names_put(pl_names *t, const char *name, int val)
{
    uint32_t mask = t->cap - 1;
    for (uint32_t i = pl__hash_str(name) & mask;; i = (i + 1) & mask) {
        if (!t->keys[i]) {
            t->keys[i] = name;
            t->vals[i] = val;
            return -1;
        }
        if (strcmp(t->keys[i], name) == 0) return t->vals[i];
    }
}

int pl_names_get(const pl_names *t, const char *name)
{
    if (!t->cap) return -1;
    uint32_t mask = t->cap - 1;
    for (uint32_t i = pl__hash_str(name) & mask; t->keys[i]; i = (i + 1) & mask)
        if (strcmp(t->keys[i], name) == 0) return t->vals[i];
    return -1;
}

bool pl_name_valid(const char *s)
{
    if (!s || !*s) return false;
    size_t n = 0;
    for (const char *p = s; *p; p++, n++) {
        char c = *p;
        bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        bool digit = c >= '0' && c <= '9';
        if (!alpha && !(digit && p != s)) return false;
    }
    return n <= PL_MAX_NAME;
}

/* ---- reachability -------------------------------------------------------------------------- */

pl_status pl_walk_init(pl_walk *w, int n)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->seen = calloc((size_t)n + 1, sizeof *w->seen);
    w->tgt = calloc((size_t)n + 1, sizeof *w->tgt);
    w->stack = malloc(((size_t)n + 1) * sizeof *w->stack);
    if (!w->seen || !w->tgt || !w->stack) {
        pl_walk_fini(w);
        return PL_ENOMEM;
    }
    return PL_OK;
}

void pl_walk_fini(pl_walk *w)
{
    free(w->seen);
    free(w->tgt);
    free(w->stack);
    memset(w, 0, sizeof *w);
}

/* A fresh stamp; on wrap-around (after 2^32 searches) the arrays are cleared once. */
static unsigned pl__stamp(unsigned *cur, unsigned *arr, int n)
{
    if (++*cur == 0) {
        memset(arr, 0, (size_t)n * sizeof *arr);
        *cur = 1;
    }
    return *cur;
}

void pl_walk_targets(pl_walk *w)
{
    pl__stamp(&w->tgt_stamp, w->tgt, w->n);
}

bool pl_walk_any(pl_walk *w, const int *off, const int *adj, const int *pos, int u, bool fwd,
                 int bound)
{
    unsigned s = pl__stamp(&w->cur, w->seen, w->n);
    int top = 0;
    w->stack[top++] = u;
    w->seen[u] = s;
    while (top > 0) {
        int x = w->stack[--top];
        for (int e = off[x]; e < off[x + 1]; e++) {
            int y = adj[e];
            if (w->seen[y] == s) continue;
            if (fwd ? pos[y] > bound : pos[y] < bound) continue;
            if (w->tgt[y] == w->tgt_stamp) return true;
            w->seen[y] = s;
            w->stack[top++] = y;
        }
    }
    return false;
}

bool pl_walk_reaches(pl_walk *w, const int *off, const int *adj, const int *pos, int u, int v)
{
    if (pos[u] >= pos[v]) return false;
    pl_walk_targets(w);
    pl_walk_target(w, v);
    return pl_walk_any(w, off, adj, pos, u, true, pos[v]);
}

/* ---- graph --------------------------------------------------------------------------------- */

static int pl__edge_cmp(const void *a, const void *b)
{
    const pl_edge *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    /* Data edges first, then by buffer: the reason kept for a pair is deterministic. */
    if (x->why != y->why) return x->why < y->why ? -1 : 1;
    return x->buffer < y->buffer ? -1 : x->buffer > y->buffer;
}

typedef struct pl__edges {
    pl_edge *a;
    int n, cap;
} pl__edges;

static int pl__edges_add(pl__edges *v, int from, int to, pl_edge_why why, int buffer)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 64;
        pl_edge *a = realloc(v->a, (size_t)cap * sizeof *a);
        if (!a) return -1;
        v->a = a;
        v->cap = cap;
    }
    v->a[v->n++] = (pl_edge){from, to, why, buffer};
    return 0;
}

/* Binary min-heap of stage indices: Kahn's algorithm picks the ready stage declared first. */
static void pl__heap_push(int *h, int *n, int v)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int pl__heap_pop(int *h, int *n)
{
    int top = h[0], last = h[--(*n)], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= last) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

/* True when `to` is reachable from `from` through after: edges alone (BFS; `seen` holds stamps,
 * `queue` has room for n). After: graphs are small next to data edges, so no table is kept. */
static bool pl__after_path(const int *aoff, const int *aadj, int from, int to, int *seen, int stamp,
                           int *queue)
{
    int head = 0, tail = 0;
    queue[tail++] = from;
    seen[from] = stamp;
    while (head < tail) {
        int u = queue[head++];
        for (int e = aoff[u]; e < aoff[u + 1]; e++) {
            int v = aadj[e];
            if (v == to) return true;
            if (seen[v] != stamp) {
                seen[v] = stamp;
                queue[tail++] = v;
            }
        }
    }
    return false;
}

/* pl_graph_build's scratch, freed at its end. */
typedef struct pl__gbuild {
    pl__edges ev;
    int *aoff, *aadj, n_after; /* after successors (CSR), for the WAR test */
    int *seen, *queue;         /* pl__after_path's */
    int *indeg;                /* [n]: in-degrees, for Kahn's algorithm */
    int *heap;
} pl__gbuild;

/* Compacts the accessor lists: merged duplicates left holes at their ends; fill[b] is the length
 * of list b. */
static void pl__acc_compact(pl_graph *g, const int *fill)
{
    int w = 0;
    for (int b = 0; b < g->n_buffers; b++) {
        int start = g->acc_off[b];
        g->acc_off[b] = w;
        for (int i = 0; i < fill[b]; i++, w++) {
            g->acc[w] = g->acc[start + i];
            g->acc_mode[w] = g->acc_mode[start + i];
        }
    }
    g->acc_off[g->n_buffers] = w;
}

/* Accessors per buffer: count, then fill (stage order keeps each list ascending). False: out of
 * memory. */
static bool pl__graph_accessors(const pl_spec *spec, pl_graph *g)
{
    int n = g->n, nb = g->n_buffers;
    g->acc_off = calloc((size_t)nb + 1, sizeof *g->acc_off);
    if (!g->acc_off) return false;
    for (int s = 0; s < n; s++) {
        if (!g->member[s]) continue;
        const pl_stage *stg = &spec->stages[s];
        for (int i = 0; i < stg->n_reads; i++)
            g->acc_off[stg->reads[i].index + 1]++;
        for (int i = 0; i < stg->n_writes; i++)
            g->acc_off[stg->writes[i].index + 1]++;
    }
    for (int b = 0; b < nb; b++)
        g->acc_off[b + 1] += g->acc_off[b];
    int total = g->acc_off[nb];
    g->acc = malloc(((size_t)total + 1) * sizeof *g->acc);
    g->acc_mode = calloc((size_t)total + 1, 1);
    int *fill = calloc((size_t)nb + 1, sizeof *fill);
    if (!g->acc || !g->acc_mode || !fill) {
        free(fill);
        return false;
    }
    for (int s = 0; s < n; s++) {
        if (!g->member[s]) continue;
        const pl_stage *stg = &spec->stages[s];
        for (int k = 0; k < 2; k++) {
            const pl_ref *refs = k ? stg->writes : stg->reads;
            int nr = k ? stg->n_writes : stg->n_reads;
            for (int i = 0; i < nr; i++) {
                int b = refs[i].index, base = g->acc_off[b];
                int *cnt = &fill[b];
                /* The same stage may name a buffer twice (reads and writes): merge the modes. */
                if (*cnt > 0 && g->acc[base + *cnt - 1] == s) {
                    g->acc_mode[base + *cnt - 1] |= k ? PL_ACC_WRITE : PL_ACC_READ;
                    continue;
                }
                g->acc[base + *cnt] = s;
                g->acc_mode[base + *cnt] = k ? PL_ACC_WRITE : PL_ACC_READ;
                (*cnt)++;
            }
        }
    }
    pl__acc_compact(g, fill);
    free(fill);
    return true;
}

/* The node that stands for stage s in the graph of `part` (pl_graph_build_part), or -1: at the
 * top level a body stage's after: edges are its loop's. */
static int pl__node(const pl_spec *spec, int part, int s)
{
    int p = spec->stages[s].parent;
    if (part < 0) return p >= 0 ? p : s;
    return p == part ? s : -1;
}

/* After edges: a -> s for every a in s.after (between the nodes that stand for them); CSR of
 * after successors for the WAR test. False: out of memory. */
static bool pl__graph_after(const pl_spec *spec, int part, pl__gbuild *b)
{
    int n = spec->n_stages;
    b->aoff = calloc((size_t)n + 1, sizeof *b->aoff);
    if (!b->aoff) return false;
    for (int s = 0; s < n; s++) {
        const pl_stage *stg = &spec->stages[s];
        int v = pl__node(spec, part, s);
        for (int i = 0; i < stg->n_after && v >= 0; i++) {
            int u = pl__node(spec, part, stg->after[i].index);
            if (u < 0) continue;
            b->aoff[u + 1]++;
            b->n_after++;
        }
    }
    for (int s = 0; s < n; s++)
        b->aoff[s + 1] += b->aoff[s];
    b->aadj = malloc(((size_t)b->n_after + 1) * sizeof *b->aadj);
    int *afill = calloc((size_t)n + 1, sizeof *afill);
    bool ok = b->aadj && afill;
    for (int s = 0; s < n && ok; s++) {
        const pl_stage *stg = &spec->stages[s];
        int v = pl__node(spec, part, s);
        for (int i = 0; i < stg->n_after && ok && v >= 0; i++) {
            int a = pl__node(spec, part, stg->after[i].index);
            if (a < 0) continue;
            b->aadj[b->aoff[a] + afill[a]++] = v;
            if (a != v && pl__edges_add(&b->ev, a, v, PL_EDGE_AFTER, -1)) ok = false;
        }
    }
    free(afill);
    return ok;
}

/* Whether the reads and writes of stages r and w (r != w) of `part` are ordered as written
 * rather than by data alone: inside a loop's body, where a stage written before another runs
 * before it in every iteration, and at the top level between a loop and another stage, as the
 * loop's iterations come after what is written before it and before what is written after it. */
static bool pl__as_written(const pl_spec *spec, int part, int r, int w)
{
    return part >= 0 || spec->stages[r].loop || spec->stages[w].loop;
}

/* Data edges: writer -> reader, unless after: chains put the reader before the writer, or the
 * two are ordered as written (pl__as_written) with the reader first: then reader -> writer, the
 * write being of a later value (a body stage's write is the next iteration's value of what an
 * earlier body stage read; a loop's writes come after what a stage before it read). After:
 * chains the other way keep writer -> reader. False: out of memory. */
static bool pl__graph_data_edges(const pl_spec *spec, int part, const pl_graph *g, pl__gbuild *b)
{
    int n = g->n;
    b->seen = calloc((size_t)n + 1, sizeof *b->seen);
    b->queue = malloc(((size_t)n + 1) * sizeof *b->queue);
    if (!b->seen || !b->queue) return false;
    int stamp = 0;
    for (int buf = 0; buf < g->n_buffers; buf++) {
        for (int i = g->acc_off[buf]; i < g->acc_off[buf + 1]; i++) {
            if (!(g->acc_mode[i] & PL_ACC_WRITE)) continue;
            int w = g->acc[i];
            for (int j = g->acc_off[buf]; j < g->acc_off[buf + 1]; j++) {
                int r = g->acc[j];
                if (r == w || !(g->acc_mode[j] & PL_ACC_READ)) continue;
                if (b->n_after && b->aoff[r + 1] > b->aoff[r] &&
                    pl__after_path(b->aoff, b->aadj, r, w, b->seen, ++stamp, b->queue))
                    continue;
                bool war = r < w && pl__as_written(spec, part, r, w) &&
                           !(b->n_after && b->aoff[w + 1] > b->aoff[w] &&
                             pl__after_path(b->aoff, b->aadj, w, r, b->seen, ++stamp, b->queue));
                if (war ? pl__edges_add(&b->ev, r, w, PL_EDGE_WAR, buf)
                        : pl__edges_add(&b->ev, w, r, PL_EDGE_DATA, buf))
                    return false;
            }
        }
    }
    return true;
}

/* Sort, keep one edge per pair (g takes the edges), build CSR both ways; b->indeg comes back
 * with each stage's in-degree. False: out of memory. */
static bool pl__graph_csr(pl_graph *g, pl__gbuild *b)
{
    int n = g->n;
    pl__edges *ev = &b->ev;
    if (ev->n) qsort(ev->a, (size_t)ev->n, sizeof *ev->a, pl__edge_cmp);
    int m = 0;
    for (int i = 0; i < ev->n; i++)
        if (m == 0 || ev->a[m - 1].from != ev->a[i].from || ev->a[m - 1].to != ev->a[i].to)
            ev->a[m++] = ev->a[i];
    g->edges = ev->a;
    ev->a = NULL;
    g->n_edges = m;
    g->succ_off = calloc((size_t)n + 1, sizeof *g->succ_off);
    g->pred_off = calloc((size_t)n + 1, sizeof *g->pred_off);
    g->succ = malloc(((size_t)m + 1) * sizeof *g->succ);
    g->pred = malloc(((size_t)m + 1) * sizeof *g->pred);
    b->indeg = calloc((size_t)n + 1, sizeof *b->indeg);
    if (!g->succ_off || !g->pred_off || !g->succ || !g->pred || !b->indeg) return false;
    for (int i = 0; i < m; i++) {
        g->succ_off[g->edges[i].from + 1]++;
        g->pred_off[g->edges[i].to + 1]++;
        g->succ[i] = g->edges[i].to;
    }
    for (int s = 0; s < n; s++) {
        g->succ_off[s + 1] += g->succ_off[s];
        g->pred_off[s + 1] += g->pred_off[s];
    }
    /* Edges are sorted by `from`, so each pred list comes out ascending. */
    for (int i = 0; i < m; i++) {
        int v = g->edges[i].to;
        g->pred[g->pred_off[v] + b->indeg[v]++] = g->edges[i].from;
    }
    return true;
}

/* Kahn's algorithm, ties broken by declaration order; then each stage's position. False: out of
 * memory. */
static bool pl__graph_order(pl_graph *g, pl__gbuild *b)
{
    int n = g->n, *indeg = b->indeg;
    g->order = malloc(((size_t)n + 1) * sizeof *g->order);
    b->heap = malloc(((size_t)n + 1) * sizeof *b->heap);
    if (!g->order || !b->heap) return false;
    int hn = 0;
    for (int s = 0; s < n; s++)
        if (indeg[s] == 0 && g->member[s]) pl__heap_push(b->heap, &hn, s);
    while (hn > 0) {
        int u = pl__heap_pop(b->heap, &hn);
        g->order[g->n_order++] = u;
        for (int e = g->succ_off[u]; e < g->succ_off[u + 1]; e++)
            if (--indeg[g->succ[e]] == 0) pl__heap_push(b->heap, &hn, g->succ[e]);
    }
    /* The other stages (a loop's body, or what lies outside it) have no edges here: after the
     * members, so that an acyclic graph orders every stage. */
    if (g->n_order == g->n_members)
        for (int s = 0; s < n; s++)
            if (!g->member[s]) g->order[g->n_order++] = s;
    g->pos = malloc(((size_t)n + 1) * sizeof *g->pos);
    if (!g->pos) return false;
    for (int s = 0; s < n; s++)
        g->pos[s] = -1;
    for (int k = 0; k < g->n_order; k++)
        g->pos[g->order[k]] = k;
    return true;
}

pl_status pl_graph_build(const pl_spec *spec, pl_graph *g, pl_error *err)
{
    return pl_graph_build_part(spec, -1, g, err);
}

pl_status pl_graph_build_part(const pl_spec *spec, int part, pl_graph *g, pl_error *err)
{
    pl_status st = PL_OK;
    pl__gbuild b;
    memset(&b, 0, sizeof b);
    memset(g, 0, sizeof *g);
    g->n = spec->n_stages;
    g->n_buffers = spec->n_buffers;
    g->member = malloc((size_t)g->n + 1);
    if (g->member)
        for (int s = 0; s < g->n; s++) {
            g->member[s] = spec->stages[s].parent == part;
            g->n_members += g->member[s];
        }
    if (!g->member || !pl__graph_accessors(spec, g) || !pl__graph_after(spec, part, &b) ||
        !pl__graph_data_edges(spec, part, g, &b) || !pl__graph_csr(g, &b) ||
        !pl__graph_order(g, &b))
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory building the dependency graph");
    free(b.ev.a);
    free(b.aoff);
    free(b.aadj);
    free(b.seen);
    free(b.queue);
    free(b.indeg);
    free(b.heap);
    if (st != PL_OK) pl_graph_fini(g);
    return st;
}

void pl_graph_fini(pl_graph *g)
{
    if (!g) return;
    free(g->edges);
    free(g->succ_off);
    free(g->succ);
    free(g->pred_off);
    free(g->pred);
    free(g->order);
    free(g->acc_off);
    free(g->acc);
    free(g->acc_mode);
    free(g->pos);
    free(g->member);
    memset(g, 0, sizeof *g);
}

const pl_edge *pl_graph_edge(const pl_graph *g, int u, int v)
{
    int lo = g->succ_off[u], hi = g->succ_off[u + 1];
    while (lo < hi) { /* successors of u are sorted by `to` */
        int mid = (lo + hi) / 2;
        if (g->edges[mid].to == v) return &g->edges[mid];
        if (g->edges[mid].to < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int pl_graph_cycle(const pl_graph *g, int *cyc)
{
    int n = g->n;
    /* Stages left over by Kahn each have a leftover predecessor: walking predecessors from one
     * of them must revisit a stage, and the walk from that stage on is a cycle (reversed). */
    char *left = calloc((size_t)n + 1, 1);
    int *pos = malloc(((size_t)n + 1) * sizeof *pos);
    if (!left || !pos) {
        free(left);
        free(pos);
        return 0;
    }
    for (int s = 0; s < n; s++)
        left[s] = g->member[s];
    for (int k = 0; k < g->n_order; k++)
        left[g->order[k]] = 0;
    /* Stages downstream of a cycle are left over too; only those with a leftover predecessor
     * matter, and every leftover stage has one. */
    int start = -1;
    for (int s = 0; s < n && start < 0; s++)
        if (left[s]) start = s;
    for (int s = 0; s < n; s++)
        pos[s] = -1;
    int len = 0, u = start;
    while (u >= 0 && pos[u] < 0) {
        pos[u] = len;
        cyc[len++] = u;
        int next = -1;
        for (int e = g->pred_off[u]; e < g->pred_off[u + 1]; e++)
            if (left[g->pred[e]]) {
                next = g->pred[e];
                break;
            }
        u = next;
    }
    int clen = 0;
    if (u >= 0) {
        /* cyc[pos[u] .. len) walks predecessors: reverse it to follow edges. */
        int first = pos[u];
        clen = len - first;
        for (int i = 0; i < clen / 2; i++) {
            int t = cyc[first + i];
            cyc[first + i] = cyc[len - 1 - i];
            cyc[len - 1 - i] = t;
        }
        memmove(cyc, cyc + first, (size_t)clen * sizeof *cyc);
        /* Rotate so the cycle starts at its lowest stage index (declared first). */
        int lo = 0;
        for (int i = 1; i < clen; i++)
            if (cyc[i] < cyc[lo]) lo = i;
        int *tmp = pos; /* reuse as scratch */
        for (int i = 0; i < clen; i++)
            tmp[i] = cyc[(lo + i) % clen];
        memcpy(cyc, tmp, (size_t)clen * sizeof *cyc);
    }
    free(left);
    free(pos);
    return clen;
}
