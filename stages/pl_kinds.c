/* pl_kinds: the table of stage kinds, the one place that names them all. A new kind is a file
 * under stages/ defining `const pl_kind pl_kind_<name>` and one line here; its position in the
 * table is its position in lists, help and the schema. */
#include "pl_stage.h"

extern const pl_kind pl_kind_source, pl_kind_search, pl_kind_h2d, pl_kind_kernel, pl_kind_d2h,
    pl_kind_lua, pl_kind_sink, pl_kind_gpt2, pl_kind_sample;
extern const pl_kind pl_kind_tokenize, pl_kind_detokenize;

const pl_kind *const pl_kind_table[] = {
    &pl_kind_source, &pl_kind_search,   &pl_kind_h2d,        &pl_kind_kernel,
    &pl_kind_d2h,    &pl_kind_lua,      &pl_kind_sink,       &pl_kind_gpt2,
    &pl_kind_sample, &pl_kind_tokenize, &pl_kind_detokenize, NULL,
};
