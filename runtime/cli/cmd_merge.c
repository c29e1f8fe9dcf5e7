/* cmd_merge: `pipectl merge PARTS... [-o OUT]`: joins the parts a sink's shards wrote (`pipectl
 * run --shard K/N`) into the file one process would have written, byte for byte (pl_parts.h). */
#include <stdio.h>
#include <string.h>

#include "pl_cli.h"
#include "pl_parts.h"

enum { PL__O_OUT = 256, PL__O_QUIET };

const pl_cli_opt pl_cli_merge_opts[] = {
    {"output", 'o', "FILE", NULL,
     "the merged file (default: the file the parts' manifests name, the sink's own)", PL__O_OUT},
    {"quiet", 'q', NULL, NULL, "say nothing when it worked", PL__O_QUIET},
    {0},
};

int pl_cmd_merge(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("merge", NULL);
    pl_cli_args a;
    pl_cli_args_init(&a, cmd, argc, argv);
    const char *v, *out = NULL;
    bool quiet = false;
    int id;
    while ((id = pl_cli_next(&a, &v)) > 0) {
        if (id == PL__O_OUT) out = v;
        if (id == PL__O_QUIET) quiet = true;
    }
    if (id < 0) return a.rc;
    if (a.n_operands == 0)
        return pl_cli_usage_error(cmd, "'pipectl merge' needs the parts to join");
    pl_error err;
    pl_error_clear(&err);
    int64_t batches = 0;
    if (pl_parts_merge(a.operands, a.n_operands, out, &batches, &err) != PL_OK)
        return pl_cli_fail(&err);
    if (!quiet)
        printf("merged %d parts, %lld batches, into %s\n", a.n_operands, (long long)batches,
               out ? out : "the sink's file");
    return 0;
}
