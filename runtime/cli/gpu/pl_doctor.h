/* pl_doctor: `pipectl doctor`: what the GPU is and what it measures (copy bandwidth, launch and
 * graph-node cost, the busy kernel's precision). Built only with PL_WITH_CUDA. */
#ifndef PL_DOCTOR_H
#define PL_DOCTOR_H

#include <stdio.h>

#include "pl_status.h"

/* Prints every device's properties, then measures device `device` and prints a table to `out`.
 * Fails with PL_ENODEV (and the CUDA message) when no device is usable, PL_ECUDA on a CUDA error
 * during the measurements. Takes about a second; allocates 1 GiB of pinned host memory and
 * 512 MiB of device memory while it runs. */
pl_status pl_doctor_run(int device, FILE *out, pl_error *err);

#endif
