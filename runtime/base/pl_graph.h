/* pl_graph: the intra-batch dependency graph of a spec and its helpers (name tables, topological
 * order, cycles, bounded reachability searches), shared by the checks (pl_check.c) and the plan
 * compiler (pl_plan.c) so both see exactly the same edges. Internal: not part of the public API. */
#ifndef PL_GRAPH_H
#define PL_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "pl_spec.h"

/* A name -> index table (open addressing). Names are borrowed: they must outlive the table. */
typedef struct pl_names {
    const char **keys;
    int *vals;
    uint32_t cap; /* power of two, 0 when empty */
} pl_names;

pl_status pl_names_init(pl_names *t, int expected);
void pl_names_fini(pl_names *t); /* zeroed or initialised; idempotent */
/* Inserts name -> val unless present; returns the index already stored, or -1 after inserting. */
int pl_names_put(pl_names *t, const char *name, int val);
int pl_names_get(const pl_names *t, const char *name); /* -1 when absent */

/* Why an edge exists (for messages): a buffer written by `from` and read by `to`; a buffer read
 * by `from` before `to` writes it (a loop's body, and a loop and the stages around it, are
 * ordered as written: pl_graph_build_part); or an after:. */
typedef enum pl_edge_why { PL_EDGE_DATA, PL_EDGE_WAR, PL_EDGE_AFTER } pl_edge_why;

typedef struct pl_edge {
    int from, to;
    pl_edge_why why;
    int buffer; /* PL_EDGE_DATA, PL_EDGE_WAR: the buffer; else -1 */
} pl_edge;

/* Access of one stage to one buffer. */
enum { PL_ACC_READ = 1, PL_ACC_WRITE = 2 };

/* Reachability without an n x n table: depth-first searches that visit only the nodes whose
 * topological position can lie on a path to the target, with a visit stamp per node (so a search
 * costs what it visits, not n). Scratch for one search at a time; memory 3n ints. */
typedef struct pl_walk {
    int n;
    unsigned cur;   /* stamp of the current search */
    unsigned *seen; /* [n]: == cur when visited by the current search */
    unsigned *tgt;  /* [n]: == tgt_stamp when a node is a target (pl_walk_targets) */
    unsigned tgt_stamp;
    int *stack; /* [n] */
} pl_walk;

pl_status pl_walk_init(pl_walk *w, int n);
void pl_walk_fini(pl_walk *w); /* zeroed or initialised; idempotent */
/* True when a path u -> ... -> v of length >= 1 exists in the DAG whose successors of x are
 * adj[off[x] .. off[x+1]) and whose topological positions are pos[] (pos[x] < pos[y] for every
 * edge x -> y). */
bool pl_walk_reaches(pl_walk *w, const int *off, const int *adj, const int *pos, int u, int v);
/* Starts a new target set (empty); pl_walk_target adds one node to it. */
void pl_walk_targets(pl_walk *w);
static inline void pl_walk_target(pl_walk *w, int v)
{
    w->tgt[v] = w->tgt_stamp;
}
static inline bool pl_walk_is_target(const pl_walk *w, int v)
{
    return w->tgt[v] == w->tgt_stamp;
}
/* True when a path of length >= 1 leads from u to a node of the target set. Forward (`fwd`, adj =
 * successors): only nodes with pos <= bound are visited; backward (adj = predecessors): only
 * nodes with pos >= bound. `bound` must not exclude any target. */
bool pl_walk_any(pl_walk *w, const int *off, const int *adj, const int *pos, int u, bool fwd,
                 int bound);

typedef struct pl_graph {
    int n; /* stages */
    int n_edges;
    pl_edge *edges; /* sorted by (from, to), unique pairs */
    int *succ_off;  /* n+1: successors of u are edges[succ_off[u] .. succ_off[u+1]) */
    int *succ;      /* n_edges: edges[i].to, same order */
    int *pred_off;  /* n+1 */
    int *pred;      /* n_edges: predecessors, ascending */
    int *order;     /* topological (Kahn, ties by declaration order); n_order entries */
    int n_order;    /* == n unless the members have a cycle */
    /* Per buffer: the stages that touch it (ascending, unique) and how (PL_ACC_* bits). */
    int n_buffers;
    int *acc_off; /* n_buffers+1 */
    int *acc;
    unsigned char *acc_mode;
    int *pos; /* [n]: position in `order` (when acyclic; else -1 for stages left over) */
    /* The stages the graph is about (pl_graph_build_part): the others have no accessors and no
     * edges, and come after the members in `order` (only when the members are acyclic). */
    unsigned char *member; /* [n] */
    int n_members;
} pl_graph;

/* Builds the dependency graph of a spec whose refs are resolved (every pl_ref.index >= 0):
 * edges writer -> reader of each buffer unless `after:` chains already order the reader before
 * the writer (write-after-read: the after chain is the path), plus after edges; then the
 * topological order and positions. Two stages ordered as written (inside a loop's body; at the
 * top level, a loop and another stage) whose reader comes first, and that no after: chain orders
 * writer first, get reader -> writer instead (PL_EDGE_WAR): in a body the write is of the next
 * iteration's value (decode reads `next`, the sample after it writes the next one), and a stage
 * written before a loop reads the value from before the loop (the first sample reads prefill's
 * logits, which the loop's decode steps rewrite). A cycle is not an error here: check
 * g->n_order < g->n and call pl_graph_cycle. Errors: PL_ENOMEM only. */
pl_status pl_graph_build(const pl_spec *spec, pl_graph *g, pl_error *err);
/* The same for one part of a pipeline with loops (pl_stage.parent): part -1 is the top level, the
 * stages outside every loop body, where a loop stage stands for its body (its reads and writes
 * are its body's, pl_spec_check gives them; after: entries of body stages are the loop's); part
 * L is the body of loop stage L. Node indices stay stage indices; stages outside the part are
 * isolated nodes ordered last. pl_graph_build is part -1. */
pl_status pl_graph_build_part(const pl_spec *spec, int part, pl_graph *g, pl_error *err);
void pl_graph_fini(pl_graph *g); /* zeroed or built; idempotent */

/* When g has a cycle: writes its stages, in edge order, starting at the lowest stage index of the
 * cycle, into cyc (capacity n) and returns its length. */
int pl_graph_cycle(const pl_graph *g, int *cyc);
/* The edge u -> v, or NULL. */
const pl_edge *pl_graph_edge(const pl_graph *g, int u, int v);

/* Valid buffer/stage name: [A-Za-z_][A-Za-z0-9_]*, 1..PL_MAX_NAME bytes. */
bool pl_name_valid(const char *s);

#endif
