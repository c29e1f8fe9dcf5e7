/* pl_plan_dump: the plan's listings, for people (`pipectl plan`) and Graphviz (`--dot`). */
#ifndef PL_PLAN_DUMP_H
#define PL_PLAN_DUMP_H

#include <stdio.h>

#include "pl_plan.h"

/* Human-readable listing (`pipectl plan`). Byte-identical for identical specs. */
void pl_plan_dump(const pl_plan *plan, FILE *out);
/* Graphviz DOT (`pipectl plan --dot`). */
void pl_plan_dump_dot(const pl_plan *plan, FILE *out);

#endif
