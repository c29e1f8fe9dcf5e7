/* pl_cli: the `pipectl` subcommands, one file each (cmd_*.c), one table (pl_cli.c) that gives
 * name, usage, summary and function; `--help` and docs/cli.md come from the table. */
#ifndef PL_CLI_H
#define PL_CLI_H

#include <stdio.h>

#include "pl_status.h"

typedef struct pl_cmd {
    const char *name;
    const char *usage;                /* "pipectl plan [--dot] FILE" */
    const char *summary;              /* one line */
    const char *help;                 /* options, one per line, "  --dot   print Graphviz DOT" */
    int (*fn)(int argc, char **argv); /* argv[0] is the command name; returns the exit code */
} pl_cmd;

extern const pl_cmd pl_cmds[];
const pl_cmd *pl_cmd_find(const char *name, pl_error *err); /* unique prefix match */
void pl_cmd_usage(const pl_cmd *cmd, FILE *out);
/* True when argv has -h/--help (then the usage has been printed to stdout). */
int pl_cmd_wants_help(const pl_cmd *cmd, int argc, char **argv);
/* Prints err->msg to stderr and returns the exit code of err->status. */
int pl_cli_fail(const pl_error *err);

int pl_cmd_check(int argc, char **argv);
int pl_cmd_plan(int argc, char **argv);
int pl_cmd_run(int argc, char **argv);
int pl_cmd_doctor(int argc, char **argv);
int pl_cmd_bench(int argc, char **argv);
int pl_cmd_version(int argc, char **argv);
int pl_cmd_schema(int argc, char **argv);
int pl_cmd_help(int argc, char **argv);

#endif
