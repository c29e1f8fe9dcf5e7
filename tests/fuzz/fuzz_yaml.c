/* fuzz_yaml: libFuzzer target for the YAML front end: load, then check and plan what parses
 * (tests/fuzz/pl_fuzz.h says what counts as a finding). */
#include "pl_fuzz.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    return pl_fuzz_one(pl_yaml_load_string, "fuzz.yaml", data, size);
}
