/* pl_parts: the parts a shard's sinks write and their joining. A run of shard K of N (`pipectl run
 * --shard K/N`, a rank of `--mpi`) writes each sink's file as a part, "out.part-K-of-N.npy", with
 * a manifest next to it, "out.part-K-of-N.npy.manifest.json": the pipeline's digest (SHA-256 of
 * its canonical YAML, run.batches included), the shard, the batches it completed, their
 * checksums, and what one batch is (format, dtype, shape, rows). `pipectl merge` joins the N
 * parts into the file one process would have written, byte for byte, and refuses parts that are
 * missing, repeated, incomplete or of another run (docs/scale.md). */
#ifndef PL_PARTS_H
#define PL_PARTS_H

#include <stdint.h>

#include "pl_run.h"

/* The manifest's format: "schema": "pipectl-part", "schema_version": 1. */
#define PL_PARTS_SCHEMA "pipectl-part"
#define PL_PARTS_SCHEMA_VERSION 1
#define PL_PARTS_MANIFEST_EXT ".manifest.json"

/* The pipeline's digest: SHA-256 of its canonical YAML (pl_canon_write), as hex. Every shard of
 * one run has the same; another pipeline, another run.batches or another seed has another. */
pl_status pl_parts_digest(const pl_spec *spec, char hex[65], pl_error *err);

/* After a shard's run (spec->run.shard on): writes the manifest of every part its sinks wrote
 * (res->outputs with a file), also after a failure or a stop (then "complete" is false), with
 * `digest` (pl_parts_digest of the spec before anything of one rank, as its device, was set). */
pl_status pl_parts_write_manifests(const pl_spec *spec, const char *digest,
                                   const pl_run_result *res, pl_error *err);

/* The file one process writes for shard `index` of `count`'s part `part` (the part name less its
 * ".part-K-of-N"), into out; false when `part` is not such a name. */
bool pl_parts_target(const char *part, int index, int count, char *out, size_t cap);

/* Joins parts[0..n) into `out` (NULL: the target their manifests name) through "out.partial",
 * renamed when complete; each batch's bytes are checked against its part's manifest. Refusals
 * are PL_EINPUT naming the part: no manifest, another pipeline (digest), another shard count or
 * mode, a repeated or missing shard, an incomplete part, bytes that disagree with the manifest.
 * *batches gets the batches written (may be NULL). */
pl_status pl_parts_merge(char *const *parts, int n, const char *out, int64_t *batches,
                         pl_error *err);

/* The part's manifest lists `n` batches with these checksums (what its rank reported, MPI):
 * else PL_EINPUT saying the part on this host is not the one its rank wrote (a filesystem the
 * ranks do not share, or a stale part). */
pl_status pl_parts_check(const char *part, const uint64_t *sums, int64_t n, pl_error *err);

#endif
