/* pl_gpu_dot: a captured graph as files a bundle keeps (pl_run_cfg.dot_dir). */
#ifndef PL_GPU_DOT_H
#define PL_GPU_DOT_H

#include <cuda_runtime_api.h>

#include "pl_status.h"

/* Writes dir/<stem>.dot (cudaGraphDebugDotPrint, verbose) and dir/<stem>.topo: "nodes N" and one
 * line per node ("node I TYPE", in cudaGraphGetNodes order), "edges E" and one line per edge ("edge
 * I J", sorted), with no addresses, so two captures of the same plan give the same text. PL_ECUDA /
 * PL_EIO on failure. */
pl_status pl_gx_dot_write(cudaGraph_t graph, const char *dir, const char *stem, pl_error *err);

#endif
