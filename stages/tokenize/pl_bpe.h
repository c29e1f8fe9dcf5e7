/* pl_bpe: GPT-2's byte-level BPE tokenizer (encode and decode), loaded from a Hugging Face
 * snapshot folder, with the ids of transformers' GPT2TokenizerFast (the Rust tokenizers crate).
 *
 * What it reproduces, exactly:
 * - The folder: tokenizer.json when present (model BPE, pre_tokenizer ByteLevel, no normalizer,
 *   its added_tokens), else vocab.json + merges.txt, whose special token is `<|endoftext|>` when
 *   the vocabulary has it (as GPT2TokenizerFast adds it). merges.txt: "#version" lines skipped,
 *   every other line two tokens separated by one space; rank = order.
 * - Input bytes are UTF-8. An invalid sequence becomes U+FFFD, one per maximal subpart (what
 *   Python's bytes.decode('utf-8', 'replace') and the WHATWG decoder do), and is encoded as the
 *   bytes EF BF BD: the ids transformers gives for the text Python decoded with errors='replace'.
 * - Added tokens (`<|endoftext|>`, id 50256) are found in the text first, leftmost and longest
 *   first, and are one id each; the text between them is pre-tokenized on its own.
 * - The pre-tokenizer is GPT-2's regex, `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
 *   ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, as a scanner: contractions are ASCII and case-sensitive;
 *   "? " is U+0020 only; a whitespace run followed by a non-space gives the run minus its last
 *   code point, which then starts the next piece. Categories come from utf8proc: L = Lu Ll Lt
 *   Lm Lo, N = Nd Nl No, \s = Unicode White_Space (Zs, Zl, Zp, U+0009..U+000D, U+0085).
 * - Each piece's bytes start as the byte tokens (the byte-to-unicode map of GPT-2's encoder.py)
 *   and are merged lowest rank first, leftmost first among equal ranks (the tokenizers crate's
 *   order), through a hash table of ranks; words seen before come from a per-thread cache.
 * - Decoding concatenates the tokens' bytes: a token whose characters are all in the byte map
 *   gives those bytes, any other its UTF-8 (the ByteLevel decoder's rule). The result may be
 *   invalid UTF-8 (ids cut inside a character); pl_bpe_utf8_replace makes text of it.
 *
 * A loaded pl_bpe is immutable and thread-safe: any number of threads may encode and decode at
 * once (each call borrows a word cache from the tokenizer's free list). */
#ifndef PL_BPE_H
#define PL_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_status.h"

struct pl_pool;
typedef struct pl_bpe pl_bpe;

/* A growable array of ids; zero-initialise it, free with pl_bpe_ids_free. Calls append. */
typedef struct pl_bpe_ids {
    int32_t *v;
    int64_t n, cap;
} pl_bpe_ids;
void pl_bpe_ids_free(pl_bpe_ids *ids);

/* A growable byte string; zero-initialise it, free with pl_bpe_text_free. Calls append. */
typedef struct pl_bpe_text {
    char *v;
    int64_t n, cap;
} pl_bpe_text;
void pl_bpe_text_free(pl_bpe_text *t);

/* Loads the tokenizer at `path`: a folder (its tokenizer.json, else its vocab.json and
 * merges.txt), a vocab.json file (merges.txt beside it) or another file, read as a tokenizer.json
 * (so a copy under any name works, as a bundle's inputs/ has it). *out is owned by the caller
 * (pl_bpe_free). Bad files are PL_EINPUT naming the file (and line:col for JSON, the line for
 * merges.txt); a folder with neither tokenizer.json nor vocab.json + merges.txt too. */
pl_status pl_bpe_load(const char *path, pl_bpe **out, pl_error *err);
void pl_bpe_free(pl_bpe *bpe);
/* What pl_bpe_load checks before reading anything: the files `path` names exist (check time:
 * nothing is parsed). */
pl_status pl_bpe_check_path(const char *path, pl_error *err);

/* The largest id + 1. */
int32_t pl_bpe_vocab_size(const pl_bpe *bpe);
/* The id of `<|endoftext|>` (GPT-2's bos, eos and pad), or -1 when the vocabulary lacks it. */
int32_t pl_bpe_eos(const pl_bpe *bpe);
/* What was loaded: "DIR/tokenizer.json" or "DIR/vocab.json + merges.txt". Borrowed. */
const char *pl_bpe_source(const pl_bpe *bpe);
/* Whether `id` is a token of the vocabulary (ids may have holes). */
bool pl_bpe_has_id(const pl_bpe *bpe, int32_t id);

/* Appends the ids of `len` bytes of text. PL_ENOMEM is the only failure. */
pl_status pl_bpe_encode(const pl_bpe *bpe, const char *text, size_t len, pl_bpe_ids *out,
                        pl_error *err);
/* Encodes n rows, texts[i] of lens[i] bytes, appending row i's ids to outs[i], on up to
 * `parallel` threads of `pool` (the caller's among them; NULL pool or parallel <= 1: all on the
 * caller). The ids are those of pl_bpe_encode, whatever the thread count. */
pl_status pl_bpe_encode_batch(const pl_bpe *bpe, struct pl_pool *pool, int parallel, int64_t n,
                              const char *const *texts, const size_t *lens, pl_bpe_ids *outs,
                              pl_error *err);

/* Appends the bytes of n ids; with `skip_special` the added tokens (`<|endoftext|>`) give
 * nothing. An id that is no token is PL_EINPUT: "error: id 70000 (position 3) is not in the
 * vocabulary (0..50256)". */
pl_status pl_bpe_decode(const pl_bpe *bpe, const int32_t *ids, int64_t n, bool skip_special,
                        pl_bpe_text *out, pl_error *err);

/* Rewrites err's message "error: WHAT" as "error: row N: WHAT" (status kept); returns the status.
 */
pl_status pl_bpe_error_row(pl_error *err, int64_t row);

/* Appends `len` bytes with each invalid UTF-8 sequence replaced by U+FFFD, one per maximal
 * subpart (Python's errors='replace', Rust's from_utf8_lossy). PL_ENOMEM only. */
pl_status pl_bpe_utf8_replace(const char *s, size_t len, pl_bpe_text *out, pl_error *err);
/* The length of the longest valid UTF-8 prefix of s (len when it is all valid). */
size_t pl_bpe_utf8_valid(const char *s, size_t len);

/* Tests: words longer than `n` bytes take the heap merge (O(n log n)), shorter ones the linear
 * scan; both give the same ids. The default is 48. Not thread-safe: set it before encoding. */
void pl_bpe_set_heap_min(pl_bpe *bpe, size_t n);

#endif
