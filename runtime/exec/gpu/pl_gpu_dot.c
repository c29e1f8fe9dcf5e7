/* pl_gpu_dot: writes a captured graph's DOT and its topology text for bundles. */
#include "pl_gpu_dot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_gpu.h"

static const char *pl__node_type(enum cudaGraphNodeType t)
{
    switch (t) {
    case cudaGraphNodeTypeKernel:
        return "kernel";
    case cudaGraphNodeTypeMemcpy:
        return "memcpy";
    case cudaGraphNodeTypeMemset:
        return "memset";
    case cudaGraphNodeTypeHost:
        return "host";
    case cudaGraphNodeTypeGraph:
        return "graph";
    case cudaGraphNodeTypeEmpty:
        return "empty";
    case cudaGraphNodeTypeWaitEvent:
        return "wait_event";
    case cudaGraphNodeTypeEventRecord:
        return "event_record";
    case cudaGraphNodeTypeExtSemaphoreSignal:
        return "ext_semaphore_signal";
    case cudaGraphNodeTypeExtSemaphoreWait:
        return "ext_semaphore_wait";
    case cudaGraphNodeTypeMemAlloc:
        return "mem_alloc";
    case cudaGraphNodeTypeMemFree:
        return "mem_free";
#if CUDART_VERSION >= 12030
    case cudaGraphNodeTypeConditional:
        return "conditional";
#endif
    default:
        return "other";
    }
}

static int pl__cmp_edge(const void *a, const void *b)
{
    const size_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

pl_status pl_gx_dot_write(cudaGraph_t graph, const char *dir, const char *stem, pl_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.dot", dir, stem);
    PL_CHECK(
        PL_CUDA(cudaGraphDebugDotPrint(graph, path, cudaGraphDebugDotFlagsVerbose), NULL, -1, err));
    size_t n = 0, ne = 0;
    PL_CHECK(PL_CUDA(cudaGraphGetNodes(graph, NULL, &n), NULL, -1, err));
    PL_CHECK(PL_CUDA(cudaGraphGetEdges(graph, NULL, NULL, NULL, &ne), NULL, -1, err));
    cudaGraphNode_t *nodes = calloc(n ? n : 1, sizeof *nodes);
    cudaGraphNode_t *from = calloc(ne ? ne : 1, sizeof *from);
    cudaGraphNode_t *to = calloc(ne ? ne : 1, sizeof *to);
    size_t *edges = calloc(2 * (ne ? ne : 1), sizeof *edges);
    pl_status st = PL_OK;
    FILE *f = NULL;
    if (!nodes || !from || !to || !edges) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    PL_CHECK_GOTO(PL_CUDA(cudaGraphGetNodes(graph, nodes, &n), NULL, -1, err), st, done);
    if (ne > 0) /* a one-node graph has none, and the call refuses empty arrays */
        PL_CHECK_GOTO(PL_CUDA(cudaGraphGetEdges(graph, from, to, NULL, &ne), NULL, -1, err), st,
                      done);
    for (size_t e = 0; e < ne; e++)
        for (size_t i = 0; i < n; i++) {
            if (nodes[i] == from[e]) edges[2 * e] = i;
            if (nodes[i] == to[e]) edges[2 * e + 1] = i;
        }
    qsort(edges, ne, 2 * sizeof *edges, pl__cmp_edge);
    snprintf(path, sizeof path, "%s/%s.topo", dir, stem);
    f = fopen(path, "w");
    if (!f) {
        st = pl_error_set(err, PL_EIO, "error: cannot write %s: %s", path, strerror(errno));
        goto done;
    }
    fprintf(f, "nodes %zu\n", n);
    for (size_t i = 0; i < n; i++) {
        enum cudaGraphNodeType t;
        PL_CHECK_GOTO(PL_CUDA(cudaGraphNodeGetType(nodes[i], &t), NULL, -1, err), st, done);
        fprintf(f, "node %zu %s\n", i, pl__node_type(t));
    }
    fprintf(f, "edges %zu\n", ne);
    for (size_t e = 0; e < ne; e++)
        fprintf(f, "edge %zu %zu\n", edges[2 * e], edges[2 * e + 1]);
    if (fclose(f) != 0) st = pl_error_set(err, PL_EIO, "error: cannot write %s", path);
    f = NULL;
done:
    if (f) fclose(f);
    free(nodes);
    free(from);
    free(to);
    free(edges);
    return st;
}
