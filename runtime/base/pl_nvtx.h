/* pl_nvtx: NVTX ranges in one domain, "pipectl". Compiled out without PL_WITH_NVTX; switched off
 * at run time with PIPECTL_NVTX=0. Names are "<stage> #<batch>" or any text. */
#ifndef PL_NVTX_H
#define PL_NVTX_H

#include <stdint.h>

void pl_nvtx_push(const char *name, int64_t batch); /* batch < 0: name alone */
void pl_nvtx_pop(void);

#endif
